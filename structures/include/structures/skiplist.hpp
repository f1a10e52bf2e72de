// skiplist: a lock-free skiplist of 64-bit keys and values (Herlihy and Shavit's lock-free
// skiplist, after Fraser), durable in any mode of allocators/modes.hpp. Nodes are sized to
// their height: a node of height h holds exactly h links, so the usual node of height 1 or
// 2 fits one cache line however tall the tallest node is.
//
//   structures::skiplist<structures::manual, Policy, Memory> s(memory);
//   s.insert(7, 70); s.find(7);   // -> 70
//   auto r = decltype(s)::recover(memory, s.root(), live);
//
// Level 0 is a Harris list and is the structure's durable content; levels above it are an
// index that only makes searches shorter. Recovery rebuilds the index from level 0, so the
// `manual` mode writes it with v-instructions (role `index`); `automatic` and `traversal`
// persist it as they persist everything in the critical part.
//
// Thread safety: insert, remove, find, contains from any threads concurrently. recover,
// for_each and TEST_Validate require that no operation runs.
// Invariants:
//  (1) Each level is sorted by key; a node linked at level l > 0 was linked at level 0
//      first, and its height is greater than l.
//  (2) A node is deleted by marking its links top-down, level 0 last; the thread whose
//      level-0 mark succeeds owns the deletion, and a marked link never changes again.
//  (3) A node is retired only by its deleting thread, after a search for its key that
//      unlinked it at every level; an inserter that linked its node at some level after the
//      node's deletion began searches again before it returns (so a late link is removed
//      before the retired node can be freed).
//  (4) levels_ (DRAM) is at least the height of every node linked above level 0.
// Persistence:
//  (1) Level 0 follows detail::harris_chain's rules: whoever writes a node's level-0 link
//      first p-loads the link through which it reached that node at level 0, unless it
//      reached the node from above: a node becomes visible at level 1 only through a shared
//      store that fences its own level-0 link. An insert also p-loads the level-0 link it
//      replaces, so that no link carries two unpersisted values (harris_chain (2)).
//  (2) A node's key, value, height and level-0 link are durable before it is published; its
//      higher links too when the mode persists `index`.
//  (3) recover() drops deleted nodes, rebuilds every level above 0, clears flit metadata,
//      and reports every node kept.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "flit/persist.hpp"
#include "structures/internal/nodes.hpp"
#include "allocators/node_memory.hpp"
#include "allocators/modes.hpp"

namespace structures {

template <durability_mode Mode, class Policy, node_memory Memory>
class skiplist {
 public:
  using mode = Mode;
  using policy = typename Mode::template policy_for<Policy>;
  static constexpr std::string_view name = "skiplist";
  static constexpr int max_height = 32;

  // An empty skiplist (its head node) in memory's region. Throws out_of_space if full.
  explicit skiplist(Memory& memory) : memory_(memory) {
    auto [ref, head] = alloc::create_node<node>(memory_, node_bytes(max_height));
    init_node(head, 0, 0, max_height);
    for (int l = 0; l < max_height; ++l) head->next()[l].store(node_ref{}, flit::volatile_, flit::private_);
    policy::flush_range(head, node_bytes(max_height));
    policy::operation_completion();
    root_ = ref.offset();
    head_ = head;
  }

  // The skiplist whose head is at `root`, after a crash. Calls live(offset, bytes) for the
  // head and every node kept. REQUIRES: nothing else uses the region.
  template <class Live>
  static skiplist recover(Memory& memory, std::uint64_t root, Live&& live) {
    return skiplist(memory, root, live);
  }

  bool insert(std::uint64_t key, std::uint64_t value) {
    [[maybe_unused]] auto pin = memory_.pin();
    flit::completion_scope<policy> done;
    const int height = random_height();
    raise_levels(height);
    search_result r;
    node_ref fresh{};
    node* x = nullptr;
    for (;;) {
      if (search(key, r)) {
        persist_read<Mode, role::dependency>(r.preds[0]->next()[0]);  // the link into it
        if (x != nullptr) memory_.deallocate(fresh.offset(), node_bytes(height));
        return false;
      }
      if (x == nullptr) {
        std::tie(fresh, x) = alloc::create_node<node>(memory_, node_bytes(height));
        init_node(x, key, value, height);
        for (int l = 0; l < height; ++l) x->next()[l].store(r.succs[l], flit::volatile_, flit::private_);
        alloc::finish_init<Mode, policy>(x, persisted_bytes(height));
      } else {
        x->next()[0].store(r.succs[0], with<role::init>, flit::private_);
        for (int l = 1; l < height; ++l) x->next()[l].store(r.succs[l], with<role::index>, flit::private_);
      }
      if (r.into_pred0 != nullptr) persist_read<Mode, role::dependency>(*r.into_pred0);
      persist_read<Mode, role::dependency>(r.preds[0]->next()[0]);  // the link we replace
      node_ref expected = r.succs[0];
      if (r.preds[0]->next()[0].compare_exchange(expected, fresh, with<role::publish>)) break;
    }
    // Linked at level 0: the key is present. Now the index levels, bottom-up.
    for (int l = 1; l < height; ++l) {
      if (!link_level(x, fresh, key, l, r)) break;
    }
    // If the node's deletion began while we linked it, a level may have been linked after
    // the deleter's search: search again so that no link to it survives our return.
    if (x->next()[0].load(with<role::critical>).marked()) (void)search(key, r, x);
    return true;
  }

  bool remove(std::uint64_t key) {
    [[maybe_unused]] auto pin = memory_.pin();
    flit::completion_scope<policy> done;
    search_result r;
    // The link into succs[0]: the proof of absence, or the link into the node we mark.
    const bool found = search(key, r);
    persist_read<Mode, role::dependency>(r.preds[0]->next()[0]);
    if (!found) return false;
    const node_ref victim_ref = r.succs[0];
    node* victim = at(victim_ref);
    const int height = static_cast<int>(victim->height);
    for (int l = height - 1; l >= 1; --l) {
      node_ref succ = victim->next()[l].load(with<role::index>);
      while (!succ.marked()) {
        if (victim->next()[l].compare_exchange(succ, succ.with_mark(), with<role::index>)) break;
      }
    }
    node_ref succ = victim->next()[0].load(with<role::critical>);
    for (;;) {
      if (succ.marked()) {  // another thread deleted it first
        persist_read<Mode, role::dependency>(victim->next()[0]);
        return false;
      }
      if (victim->next()[0].compare_exchange(succ, succ.with_mark(), with<role::publish>)) break;
    }
    (void)search(key, r, victim);  // unlinks it at every level
    memory_.retire(victim_ref.offset(), node_bytes(height));
    return true;
  }

  // The value of key, if present. Wait-free; unlinks nothing.
  std::optional<std::uint64_t> find(std::uint64_t key) const {
    [[maybe_unused]] auto pin = memory_.pin();
    flit::completion_scope<policy> done;
    node* pred = head_;
    for (int l = top_level(); l >= 1; --l) {
      // Advance only to nodes unmarked at this level, so that the level below is entered
      // from a node still linked there.
      node_ref curr = pred->next()[l].load(with<role::traverse>).clean();
      while (!curr.null()) {
        node* c = at(curr);
        node_ref succ = c->next()[l].load(with<role::traverse>);
        if (succ.marked()) {
          curr = succ.clean();
        } else if (c->kv.key < key) {
          pred = c;
          curr = succ;
        } else {
          break;
        }
      }
    }
    // Level 0 as in a Harris list: walk through marked nodes, stop at the first key >= key.
    const link* into_from = nullptr;
    const link* from = &pred->next()[0];
    node_ref t = from->load(with<role::traverse>).clean();
    node* n = nullptr;
    while (!t.null()) {
      n = at(t);
      if (n->kv.key >= key) break;
      into_from = from;
      from = &n->next()[0];
      t = from->load(with<role::traverse>).clean();
    }
    if (into_from != nullptr) persist_read<Mode, role::transition>(*into_from);
    persist_read<Mode, role::dependency>(*from);
    if (t.null() || n->kv.key != key) return std::nullopt;
    if (n->next()[0].load(with<role::traverse>).marked()) {
      persist_read<Mode, role::dependency>(n->next()[0]);
      return std::nullopt;
    }
    persist_read<Mode, role::transition>(n->next()[0]);
    return n->kv.value;
  }

  bool contains(std::uint64_t key) const { return find(key).has_value(); }

  // f(key, value) for every key in increasing order. REQUIRES: no operation runs.
  template <class F>
  void for_each(F&& f) const {
    for (node_ref t = head_->next()[0].load(flit::volatile_, flit::private_); !t.null();) {
      const node* n = at(t);
      node_ref next = n->next()[0].load(flit::volatile_, flit::private_);
      if (!next.marked()) f(n->kv.key, n->kv.value);
      t = next.clean();
    }
  }

  std::uint64_t root() const noexcept { return root_; }

  // Bytes of a node of height h: what makes nodes sized to their height.
  static constexpr std::size_t node_bytes(int height) noexcept {
    return links_offset + static_cast<std::size_t>(height) * sizeof(link);
  }

  // The first broken invariant (order at a level, a deleted node still linked, a node
  // missing from a level of its height), if any. REQUIRES: no operation runs.
  std::optional<std::string> TEST_Validate() const {
    std::vector<std::size_t> expected(max_height, 0);
    for (int l = 0; l < max_height; ++l) {
      bool first = true;
      std::uint64_t last = 0;
      std::size_t count = 0;
      for (node_ref t = head_->next()[l].load(flit::volatile_, flit::private_); !t.null();) {
        if (t.marked() || t.tagged()) return "level " + std::to_string(l) + ": a link carries a mark";
        const node* n = at(t);
        if (static_cast<int>(n->height) <= l || n->height > max_height) {
          return "level " + std::to_string(l) + ": key " + std::to_string(n->kv.key) +
                 " of height " + std::to_string(n->height);
        }
        node_ref next = n->next()[l].load(flit::volatile_, flit::private_);
        if (next.marked()) {
          return "level " + std::to_string(l) + ": deleted key " + std::to_string(n->kv.key) + " still linked";
        }
        if (!first && n->kv.key <= last) {
          return "level " + std::to_string(l) + ": key " + std::to_string(n->kv.key) + " follows " +
                 std::to_string(last);
        }
        if (l == 0) {
          for (std::uint64_t h = 1; h < n->height; ++h) ++expected[h];
        }
        first = false;
        last = n->kv.key;
        ++count;
        t = next;
      }
      if (l > 0 && count != expected[l]) {
        return "level " + std::to_string(l) + " links " + std::to_string(count) + " nodes, level 0 has " +
               std::to_string(expected[l]) + " that tall";
      }
    }
    return std::nullopt;
  }

 private:
  using link = flit::persist<node_ref, policy>;

  template <role R>
  static constexpr auto with = access_for<Mode, R>;

  // A node: payload and height (immutable after publication), then `height` links.
  struct node {
    detail::payload kv;
    std::uint64_t height;
    link* next() noexcept {
      return std::launder(reinterpret_cast<link*>(reinterpret_cast<std::byte*>(this) + links_offset));
    }
    const link* next() const noexcept {
      return std::launder(
          reinterpret_cast<const link*>(reinterpret_cast<const std::byte*>(this) + links_offset));
    }
  };
  static constexpr std::size_t links_offset =
      (sizeof(node) + alignof(link) - 1) / alignof(link) * alignof(link);

  // Bytes written back at initialization: everything, or only up to level 0 when the
  // index is not persisted.
  static constexpr std::size_t persisted_bytes(int height) noexcept {
    return Mode::persisted(role::index) ? node_bytes(height) : node_bytes(1);
  }

  struct search_result {
    std::array<node*, max_height> preds;
    std::array<node_ref, max_height> succs;
    // The level-0 link the search read to reach preds[0]; null when preds[0] was reached
    // from a higher level (or is the head).
    const link* into_pred0;
  };

  skiplist(Memory& memory, std::uint64_t root, auto& live)
      : memory_(memory), root_(root), head_(alloc::node_at<node>(memory, node_ref::at(root))) {
    rebuild(live);
  }

  node* at(node_ref r) const noexcept { return alloc::node_at<node>(memory_, r); }
  node_ref node_ref_of(const node* n) const noexcept { return alloc::ref_of(memory_, n); }

  void init_node(node* n, std::uint64_t key, std::uint64_t value, int height) {
    detail::write_payload<policy>(n->kv, key, value);
    const std::uint64_t h = static_cast<std::uint64_t>(height);
    policy::write_range(&n->height, &h, sizeof h, flit::volatile_);
    for (int l = 0; l < height; ++l) new (&n->next()[l]) link();
  }

  int top_level() const noexcept { return levels_.load(std::memory_order_acquire) - 1; }

  void raise_levels(int height) noexcept {
    int seen = levels_.load(std::memory_order_relaxed);
    while (seen < height && !levels_.compare_exchange_weak(seen, height, std::memory_order_acq_rel)) {
    }
  }

  // Geometric with p = 1/2, from 1 to max_height.
  static int random_height() noexcept {
    thread_local std::uint64_t state =
        0x9e3779b97f4a7c15ULL ^ reinterpret_cast<std::uintptr_t>(&state);
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return 1 + std::countr_zero(state | (std::uint64_t{1} << (max_height - 1)));
  }

  // Fills preds/succs at every level up to top_level() (higher levels: head and null),
  // unlinking the marked nodes it meets. True if succs[0] holds key. With a target (a
  // deleted node), walks past other nodes of the same key, so that the target is unlinked
  // at every level wherever it sits among them.
  bool search(std::uint64_t key, search_result& r, const node* target = nullptr) {
  retry:
    const int top = top_level();
    for (int l = max_height - 1; l > top; --l) {
      r.preds[l] = head_;
      r.succs[l] = node_ref{};
    }
    node* pred = head_;
    const link* into_pred0 = nullptr;
    for (int l = top; l >= 0; --l) {
      node_ref curr = pred->next()[l].load(with<role::traverse>).clean();
      while (!curr.null()) {
        node* c = at(curr);
        node_ref succ = c->next()[l].load(with<role::traverse>);
        while (succ.marked()) {  // unlink c at this level
          if (l == 0 && into_pred0 != nullptr) persist_read<Mode, role::dependency>(*into_pred0);
          node_ref expected = curr;
          const bool unlinked =
              l == 0 ? pred->next()[0].compare_exchange(expected, succ.clean(), with<role::unlink>)
                     : pred->next()[l].compare_exchange(expected, succ.clean(), with<role::index>);
          if (!unlinked) goto retry;
          curr = succ.clean();
          if (curr.null()) break;
          c = at(curr);
          succ = c->next()[l].load(with<role::traverse>);
        }
        if (curr.null() || c->kv.key > key || (c->kv.key == key && (target == nullptr || c == target))) {
          break;
        }
        if (l == 0) into_pred0 = &pred->next()[0];
        pred = c;
        curr = succ;
      }
      r.preds[l] = pred;
      r.succs[l] = curr;
    }
    r.into_pred0 = into_pred0;
    // Transition (NVTraverse): the level-0 window.
    if (into_pred0 != nullptr) persist_read<Mode, role::transition>(*into_pred0);
    persist_read<Mode, role::transition>(r.preds[0]->next()[0]);
    if (!r.succs[0].null()) persist_read<Mode, role::transition>(at(r.succs[0])->next()[0]);
    return !r.succs[0].null() && at(r.succs[0])->kv.key == key;
  }

  // Links x (already at level 0) at level l. False when x's deletion has begun or x is gone.
  bool link_level(node* x, node_ref ref, std::uint64_t key, int l, search_result& r) {
    for (;;) {
      node_ref mine = x->next()[l].load(with<role::index>);
      if (mine.marked()) return false;
      if (mine != r.succs[l] && !x->next()[l].compare_exchange(mine, r.succs[l], with<role::index>)) {
        return false;  // only a deleter changes it: it marked it
      }
      node_ref expected = r.succs[l];
      if (r.preds[l]->next()[l].compare_exchange(expected, ref, with<role::index>)) return true;
      if (!search(key, r) || r.succs[0] != ref) return false;
    }
  }

  // Recovery: level 0 without deleted nodes, then every higher level from it.
  void rebuild(auto& live) {
    live(root_, node_bytes(max_height));
    for (int l = 0; l < max_height; ++l) head_->next()[l].reset_metadata();
    std::vector<node*> kept;
    link* into = &head_->next()[0];
    for (node_ref t = into->load(flit::volatile_, flit::private_); !t.null();) {
      node* n = at(t);
      for (std::uint64_t l = 0; l < n->height; ++l) n->next()[l].reset_metadata();
      node_ref next = n->next()[0].load(flit::volatile_, flit::private_);
      if (!next.marked()) {
        store_if_changed(*into, t, flit::persisted);
        into = &n->next()[0];
        kept.push_back(n);
        live(t.offset(), node_bytes(static_cast<int>(n->height)));
      }
      t = next.clean();
    }
    store_if_changed(*into, node_ref{}, flit::persisted);
    std::array<node*, max_height> last;
    last.fill(head_);
    int levels = 1;
    for (node* n : kept) {
      const int height = static_cast<int>(n->height);
      levels = std::max(levels, height);
      for (int l = 1; l < height; ++l) {
        store_if_changed(last[l]->next()[l], node_ref_of(n), with<role::index>);
        last[l] = n;
      }
    }
    for (int l = 1; l < max_height; ++l) store_if_changed(last[l]->next()[l], node_ref{}, with<role::index>);
    levels_.store(levels, std::memory_order_release);
    policy::operation_completion();
  }

  template <class M>
  static void store_if_changed(link& word, node_ref value, M mode) {
    if (word.load(flit::volatile_, flit::private_) != value) word.store(value, mode, flit::private_);
  }

  Memory& memory_;
  std::uint64_t root_ = 0;
  node* head_ = nullptr;
  std::atomic<int> levels_{1};
};

}  // namespace structures
