// Harris's lock-free sorted linked list (DISC 2001) over a chain that starts at a head link:
// the algorithm behind harris_list (one chain) and hash_table (one chain per bucket).
//
// Node: next (a persist<node_ref>, bit 0 = "this node is logically deleted"), then the
// immutable key and value. A node is deleted by marking its next pointer (the
// linearization point), then unlinked by a CAS on its predecessor's next; searches unlink
// the marked nodes they pass.
//
// Thread safety: insert, remove and find may run concurrently from any threads, each
// inside a pin() of the memory (the callers take it). recover() and for_each() require
// that nothing else runs.
// Invariants:
//  (1) Keys of the unmarked nodes reachable from the head strictly increase.
//  (2) A marked node's next never changes again.
//  (3) A node is retired only by the thread whose CAS unlinked it.
// Persistence (roles of allocators/modes.hpp):
//  (1) Whoever writes a node's next (insert, mark, unlink) first p-loads (`dependency`) the
//      link through which it reached that node, so every node whose next is written is
//      durably reachable: durable links lead from the head to it, possibly through marked
//      nodes, which recovery removes.
//  (2) An insert p-loads the link it replaces before its CAS, so that no link ever carries
//      two unpersisted values: the node the older one reached (an insert still in flight)
//      stays durably reachable through the newer one (whose node points to it) or itself.
//  (3) A completed find depends on the link into the node it stopped at (`dependency`), and
//      on that node's mark when the mark made the key absent.
//  (4) The unlink is a p-CAS in every persistent mode: the node is retired afterwards, and
//      the durable image must not lead into memory that is reused.
//  (5) Recovery removes marked nodes, clears flit metadata, and reports every live node.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "flit/persist.hpp"
#include "structures/internal/nodes.hpp"
#include "allocators/node_memory.hpp"
#include "allocators/modes.hpp"

namespace structures::detail {

template <durability_mode Mode, class Policy, node_memory Memory>
class harris_chain {
 public:
  using link = flit::persist<node_ref, Policy>;

  struct node {
    link next;
    payload kv;  // immutable after publication
  };
  static constexpr std::size_t node_bytes = sizeof(node);

  explicit harris_chain(Memory& memory) : memory_(memory) {}

  // Inserts key -> value unless key is present. REQUIRES: the caller holds a pin().
  bool insert(link& head, std::uint64_t key, std::uint64_t value) {
    node_ref fresh{};
    node* fresh_node = nullptr;
    for (;;) {
      window w = search(head, key);
      if (!w.right.null() && at(w.right)->kv.key == key) {
        persist_read<Mode, role::dependency>(*w.left_next);  // the link into the present node
        if (fresh_node != nullptr) memory_.deallocate(fresh.offset(), node_bytes);
        return false;
      }
      if (fresh_node == nullptr) {
        std::tie(fresh, fresh_node) = alloc::create_node<node>(memory_, node_bytes);
        write_payload<Policy>(fresh_node->kv, key, value);
        fresh_node->next.store(w.right, flit::volatile_, flit::private_);
        alloc::finish_init<Mode, Policy>(fresh_node, node_bytes);
      } else {
        fresh_node->next.store(w.right, with<role::init>, flit::private_);
      }
      if (w.into_left != nullptr) persist_read<Mode, role::dependency>(*w.into_left);
      // The link we replace may hold another insert's unpersisted value: persist it first,
      // or a node that only that value reaches could be lost with ours still in flight.
      persist_read<Mode, role::dependency>(*w.left_next);
      node_ref expected = w.right;
      if (w.left_next->compare_exchange(expected, fresh, with<role::publish>)) return true;
    }
  }

  // Removes key if present. REQUIRES: the caller holds a pin().
  bool remove(link& head, std::uint64_t key) {
    for (;;) {
      window w = search(head, key);
      // The link into right: the proof of absence, or the link into the node we mark.
      persist_read<Mode, role::dependency>(*w.left_next);
      if (w.right.null() || at(w.right)->kv.key != key) return false;
      node* victim = at(w.right);
      node_ref succ = victim->next.load(with<role::critical>);
      if (succ.marked()) continue;  // deleted by another thread: search again
      if (!victim->next.compare_exchange(succ, succ.with_mark(), with<role::publish>)) continue;
      // Logically deleted. Unlink it, or leave it to a search that will.
      if (w.into_left != nullptr) persist_read<Mode, role::dependency>(*w.into_left);
      node_ref expected = w.right;
      if (w.left_next->compare_exchange(expected, succ, with<role::unlink>)) {
        memory_.retire(w.right.offset(), node_bytes);
      } else {
        (void)search(head, key);
      }
      return true;
    }
  }

  // The value of key, if present. Wait-free; unlinks nothing. REQUIRES: a pin().
  std::optional<std::uint64_t> find(const link& head, std::uint64_t key) const {
    const link* into_from = nullptr;
    const link* from = &head;
    node_ref t = head.load(with<role::traverse>);
    node* n = nullptr;
    while (!t.null()) {
      n = at(t);
      if (n->kv.key >= key) break;
      into_from = from;
      from = &n->next;
      t = n->next.load(with<role::traverse>).clean();
    }
    if (into_from != nullptr) persist_read<Mode, role::transition>(*into_from);
    persist_read<Mode, role::dependency>(*from);  // the link into t: presence or absence
    if (t.null() || n->kv.key != key) return std::nullopt;
    if (n->next.load(with<role::traverse>).marked()) {
      persist_read<Mode, role::dependency>(n->next);  // the deletion that made key absent
      return std::nullopt;
    }
    persist_read<Mode, role::transition>(n->next);
    return n->kv.value;
  }

  // Calls f(key, value) for every present key in order. REQUIRES: quiescence.
  template <class F>
  void for_each(const link& head, F&& f) const {
    for (node_ref t = head.load(flit::volatile_, flit::private_); !t.null();) {
      const node* n = at(t);
      node_ref next = n->next.load(flit::volatile_, flit::private_);
      if (!next.marked()) f(n->kv.key, n->kv.value);
      t = next.clean();
    }
  }

  // After a crash: clears flit metadata, unlinks marked nodes (persisted), and calls
  // live(offset, bytes) for every node kept. Throws alloc::bad_node_ref on a link that
  // leads outside the memory's node area. REQUIRES: nothing else runs. The caller ends
  // the recovery with an operation completion.
  template <class Live>
  void recover(link& head, Live&& live) {
    head.reset_metadata();
    link* into = &head;
    node_ref t = head.load(flit::volatile_, flit::private_);
    while (!t.null()) {
      node* n = alloc::checked_node_at<node>(memory_, t, "a link of the list");
      n->next.reset_metadata();
      node_ref next = n->next.load(flit::volatile_, flit::private_);
      if (next.marked()) {  // deleted, its unlink lost: drop it
        t = next.clean();
        continue;
      }
      if (into->load(flit::volatile_, flit::private_) != t) into->store(t, flit::persisted, flit::private_);
      live(t.offset(), node_bytes);
      into = &n->next;
      t = next;
    }
    if (!into->load(flit::volatile_, flit::private_).null()) {
      into->store(node_ref{}, flit::persisted, flit::private_);
    }
  }

  // A description of the first broken invariant, or nothing. REQUIRES: quiescence.
  std::optional<std::string> validate(const link& head) const {
    bool first = true;
    std::uint64_t last = 0;
    for (node_ref t = head.load(flit::volatile_, flit::private_); !t.null();) {
      if (t.marked() || t.tagged()) return "a link carries a mark or tag bit of its own";
      const node* n = at(t);
      node_ref next = n->next.load(flit::volatile_, flit::private_);
      if (next.marked()) {
        return "key " + std::to_string(n->kv.key) + ": deleted node still linked";
      }
      if (!first && n->kv.key <= last) {
        return "key " + std::to_string(n->kv.key) + " follows " + std::to_string(last);
      }
      first = false;
      last = n->kv.key;
      t = next;
    }
    return std::nullopt;
  }

  node* at(node_ref r) const noexcept { return alloc::node_at<node>(memory_, r); }

 private:
  template <role R>
  static constexpr auto with = access_for<Mode, R>;

  // The result of a search: left is the last unmarked node with a key below the search key
  // (or the head), right the first unmarked node at or above it (or null); they are adjacent.
  struct window {
    const link* into_left;  // the link the search read to reach left; null for the head
    link* left_next;        // left's next (the head link when left is the head)
    node_ref right;
  };

  window search(link& head, std::uint64_t key) {
    for (;;) {
      const link* into_left = nullptr;
      link* left_next = &head;
      node_ref left_next_value = head.load(with<role::traverse>);
      link* from = &head;
      node_ref t = left_next_value;
      while (!t.null()) {
        node* n = at(t);
        node_ref next = n->next.load(with<role::traverse>);
        if (!next.marked()) {
          if (n->kv.key >= key) break;
          into_left = from;
          left_next = &n->next;
          left_next_value = next;
        }
        from = &n->next;
        t = next.clean();
      }
      const node_ref right = t;

      // Transition: the window's links, the marked nodes between left and right, right.
      // (Only where the mode persists it: elsewhere the walk would load for nothing.)
      if constexpr (Mode::persisted(role::transition)) {
        if (into_left != nullptr) persist_read<Mode, role::transition>(*into_left);
        persist_read<Mode, role::transition>(*left_next);
        for (node_ref c = left_next_value; c != right;) {
          persist_read<Mode, role::transition>(at(c)->next);
          c = at(c)->next.load(flit::volatile_).clean();
        }
        if (!right.null()) persist_read<Mode, role::transition>(at(right)->next);
      }

      if (left_next_value != right) {
        // Unlink the marked nodes between left and right.
        if (into_left != nullptr) persist_read<Mode, role::dependency>(*into_left);
        node_ref expected = left_next_value;
        if (!left_next->compare_exchange(expected, right, with<role::unlink>)) continue;
        for (node_ref c = left_next_value; c != right;) {
          node_ref next = at(c)->next.load(flit::volatile_).clean();
          memory_.retire(c.offset(), node_bytes);
          c = next;
        }
      }
      if (!right.null() && at(right)->next.load(with<role::critical>).marked()) continue;
      return {into_left, left_next, right};
    }
  }

  Memory& memory_;
};

}  // namespace structures::detail
