// bst: Natarajan and Mittal's lock-free external binary search tree (PPoPP 2014) of 64-bit
// keys and values, durable in any mode of allocators/modes.hpp.
//
//   structures::bst<structures::manual, Policy, Memory> t(memory);
//   t.insert(7, 70); t.find(7);   // -> 70
//   auto r = decltype(t)::recover(memory, t.root(), live);
//
// Keys live in leaves; internal nodes route (left: keys below the node's key, right: keys
// at or above it). The algorithm marks edges, not nodes: a delete *flags* the edge to its
// leaf (bit 0 of the node_ref), then *tags* the sibling's edge (bit 1, the edge may no
// longer change) and swings the edge of the deepest ancestor with an untagged edge on the
// path past the whole chain, to the sibling. Other operations that meet a flagged or tagged
// edge help. Keys must be at most max_key: the three largest values are the sentinels.
//
// Thread safety: insert, remove, find, contains from any threads concurrently. recover,
// for_each and TEST_Validate require that no operation runs.
// Invariants:
//  (1) An internal node has two children; a leaf none. Keys left of an internal node are
//      below its key, keys right of it at or above.
//  (2) Flagged edges lead to leaves; a tagged edge's sibling edge is flagged; a flagged or
//      tagged edge never changes until its node is removed.
//  (3) The root R and its left child S never change: R.left = S, R.right = leaf inf2,
//      S.right = leaf inf1. Sentinel leaves are never flagged.
//  (4) The nodes a splice removes are retired by the thread whose splice succeeded.
// Persistence:
//  (1) Whoever writes an edge of a node (insert, flag, splice) first p-loads the edge
//      through which it reached that node (`dependency`), so every node whose edges are
//      written is durably reachable.
//  (2) A completed find depends on the edge to the leaf it ended at and on the edge to that
//      leaf's parent (a new internal node's edges were written before its own link).
//  (3) A key whose leaf edge is durably flagged is deleted: recovery completes every
//      pending deletion (splices the flagged leaves out) and clears every tag, then
//      reports the nodes it keeps. (NM's search still finds a flagged leaf until it is
//      spliced; a flagged key in a crash image belongs to a delete that had not completed,
//      which may take effect.)
//  (4) The `manual` mode tags with a v-CAS; it first p-loads the edge it tags, so that a
//      p-store pending on that edge is persisted before the v-CAS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "flit/persist.hpp"
#include "structures/internal/nodes.hpp"
#include "allocators/node_memory.hpp"
#include "allocators/modes.hpp"

namespace structures {

template <durability_mode Mode, class Policy, node_memory Memory>
class bst {
 public:
  using mode = Mode;
  using policy = typename Mode::template policy_for<Policy>;
  static constexpr std::string_view name = "bst";
  static constexpr std::uint64_t max_key = std::numeric_limits<std::uint64_t>::max() - 3;

  // An empty tree (root R, S and three sentinel leaves) in memory's region.
  // Throws out_of_space if the region is full.
  explicit bst(Memory& memory) : memory_(memory) {
    auto make = [&](std::uint64_t key, node_ref left, node_ref right) {
      auto [ref, n] = alloc::create_node<node>(memory_, sizeof(node));
      init_node(n, key, 0, left, right);
      policy::flush_range(n, sizeof(node));
      return ref;
    };
    const node_ref leaf0 = make(inf0, {}, {});
    const node_ref leaf1 = make(inf1, {}, {});
    const node_ref leaf2 = make(inf2, {}, {});
    const node_ref s = make(inf1, leaf0, leaf1);
    const node_ref r = make(inf2, s, leaf2);
    policy::operation_completion();
    attach(r.offset());
  }

  // The tree whose root node is at `root`, after a crash. Calls live(offset, bytes) for
  // every node kept. REQUIRES: nothing else uses the region.
  template <class Live>
  static bst recover(Memory& memory, std::uint64_t root, Live&& live) {
    bst t(memory, root);
    t.repair(live);
    return t;
  }

  // REQUIRES: key <= max_key (throws std::out_of_range otherwise, changing nothing).
  bool insert(std::uint64_t key, std::uint64_t value) {
    if (key > max_key) {
      throw std::out_of_range("bst: key " + std::to_string(key) + " above max_key " + std::to_string(max_key));
    }
    [[maybe_unused]] auto pin = memory_.pin();
    flit::completion_scope<policy> done;
    seek_record s;
    node_ref leaf_ref{}, internal_ref{};
    node* leaf = nullptr;
    node* internal = nullptr;
    for (;;) {
      seek(key, s);
      if (s.leaf->kv.key == key) {
        depend_on_leaf(s);
        if (leaf != nullptr) {
          memory_.deallocate(leaf_ref.offset(), sizeof(node));
          memory_.deallocate(internal_ref.offset(), sizeof(node));
        }
        return false;
      }
      if (leaf == nullptr) {
        std::tie(leaf_ref, leaf) = alloc::create_node<node>(memory_, sizeof(node));
        try {
          std::tie(internal_ref, internal) = alloc::create_node<node>(memory_, sizeof(node));
        } catch (const out_of_space&) {
          memory_.deallocate(leaf_ref.offset(), sizeof(node));
          throw;
        }
        init_node(leaf, key, value, {}, {});
        alloc::finish_init<Mode, policy>(leaf, sizeof(node));
      }
      // The new internal node routes between the new leaf and the one it replaces.
      const bool new_left = key < s.leaf->kv.key;
      init_node(internal, new_left ? s.leaf->kv.key : key, 0, new_left ? leaf_ref : s.leaf_ref,
                new_left ? s.leaf_ref : leaf_ref);
      alloc::finish_init<Mode, policy>(internal, sizeof(node));
      if (s.into_parent != nullptr) persist_read<Mode, role::dependency>(*s.into_parent);
      node_ref expected = s.leaf_ref;
      if (s.parent_field->compare_exchange(expected, internal_ref, with<role::publish>)) return true;
      if (expected.clean() == s.leaf_ref && (expected.marked() || expected.tagged())) (void)cleanup(key, s);
    }
  }

  bool remove(std::uint64_t key) {
    if (key > max_key) return false;
    [[maybe_unused]] auto pin = memory_.pin();
    flit::completion_scope<policy> done;
    seek_record s;
    node_ref victim{};
    for (;;) {
      seek(key, s);
      if (victim.null()) {  // injection: flag the edge to the leaf
        if (s.leaf->kv.key != key) {
          depend_on_leaf(s);
          return false;
        }
        if (s.into_parent != nullptr) persist_read<Mode, role::dependency>(*s.into_parent);
        node_ref expected = s.leaf_ref;
        if (s.parent_field->compare_exchange(expected, s.leaf_ref.with_mark(), with<role::publish>)) {
          victim = s.leaf_ref;
          if (cleanup(key, s)) return true;
        } else if (expected.clean() == s.leaf_ref && (expected.marked() || expected.tagged())) {
          (void)cleanup(key, s);
        }
      } else {  // cleanup: until the flagged leaf is gone from the tree
        if (s.leaf_ref != victim) return true;
        if (cleanup(key, s)) return true;
      }
    }
  }

  // The value of key, if present.
  std::optional<std::uint64_t> find(std::uint64_t key) const {
    if (key > max_key) return std::nullopt;
    [[maybe_unused]] auto pin = memory_.pin();
    flit::completion_scope<policy> done;
    seek_record s;
    seek(key, s);
    depend_on_leaf(s);
    if (s.leaf->kv.key != key) return std::nullopt;
    return s.leaf->kv.value;
  }

  bool contains(std::uint64_t key) const { return find(key).has_value(); }

  // f(key, value) for every key in increasing order. REQUIRES: no operation runs.
  template <class F>
  void for_each(F&& f) const {
    std::vector<const node*> stack{at(root_node_->child[0].load(flit::volatile_, flit::private_))};
    while (!stack.empty()) {
      const node* n = stack.back();
      stack.pop_back();
      node_ref left = n->child[0].load(flit::volatile_, flit::private_);
      if (left.null()) {
        if (n->kv.key <= max_key) f(n->kv.key, n->kv.value);
        continue;
      }
      stack.push_back(at(n->child[1].load(flit::volatile_, flit::private_)));
      stack.push_back(at(left));
    }
  }

  std::uint64_t root() const noexcept { return root_; }

  // The first broken invariant (routing order, duplicate keys, a flagged or tagged edge, a
  // lost sentinel), if any. REQUIRES: no operation runs.
  std::optional<std::string> TEST_Validate() const {
    if (root_node_->kv.key != inf2 || s_node_->kv.key != inf1) return std::string("R or S lost its key");
    struct frame {
      node_ref edge;
      std::uint64_t low, high;  // the subtree's keys lie in [low, high)
    };
    std::vector<frame> stack{{root_node_->child[0].load(flit::volatile_, flit::private_), 0, inf2}};
    bool first = true;
    std::uint64_t last = 0;
    while (!stack.empty()) {
      const frame f = stack.back();
      stack.pop_back();
      const node* n = at(f.edge);
      const std::uint64_t key = n->kv.key;
      if (f.edge.marked() || f.edge.tagged()) return "the edge to key " + std::to_string(key) + " is flagged or tagged";
      if (key < f.low || key >= f.high) {
        return "key " + std::to_string(key) + " outside [" + std::to_string(f.low) + ", " + std::to_string(f.high) + ")";
      }
      const node_ref left = n->child[0].load(flit::volatile_, flit::private_);
      const node_ref right = n->child[1].load(flit::volatile_, flit::private_);
      if (left.null() != right.null()) return "node " + std::to_string(key) + " has one child";
      if (left.null()) {
        if (!first && key <= last) return "leaf " + std::to_string(key) + " follows " + std::to_string(last);
        first = false;
        last = key;
        continue;
      }
      stack.push_back({right, key, f.high});
      stack.push_back({left, f.low, key});
    }
    return std::nullopt;
  }

 private:
  using link = flit::persist<node_ref, policy>;

  template <role R>
  static constexpr auto with = access_for<Mode, R>;

  static constexpr std::uint64_t inf0 = max_key + 1;
  static constexpr std::uint64_t inf1 = max_key + 2;
  static constexpr std::uint64_t inf2 = max_key + 3;

  // An internal node or a leaf (no children). Payload immutable after publication.
  struct node {
    detail::payload kv;
    link child[2];
  };

  // Where a seek for a key ended.
  struct seek_record {
    node* ancestor;   // the deepest node whose edge on the path is untagged
    node* successor;  // its child on the path
    node* parent;
    node* leaf;
    node_ref leaf_ref;         // clean
    link* parent_field;        // parent's edge to the leaf
    link* into_ancestor;       // the edge read to reach the ancestor (null for R)
    link* into_parent;         // the edge read to reach the parent
  };

  bst(Memory& memory, std::uint64_t root) : memory_(memory) { attach(root); }

  void attach(std::uint64_t root) {
    root_ = root;
    root_node_ = at(node_ref::at(root));
    s_node_ = at(root_node_->child[0].load(flit::volatile_, flit::private_));
  }

  node* at(node_ref r) const noexcept { return alloc::node_at<node>(memory_, r); }
  static int dir(std::uint64_t key, const node* n) noexcept { return key < n->kv.key ? 0 : 1; }

  void init_node(node* n, std::uint64_t key, std::uint64_t value, node_ref left, node_ref right) {
    detail::write_payload<policy>(n->kv, key, value);
    for (int i = 0; i < 2; ++i) {
      new (&n->child[i]) link();
      n->child[i].store(i == 0 ? left : right, flit::volatile_, flit::private_);
    }
  }

  void seek(std::uint64_t key, seek_record& s) const {
    s.ancestor = root_node_;
    s.successor = s_node_;
    s.parent = s_node_;
    s.into_ancestor = nullptr;
    s.into_parent = &root_node_->child[0];
    link* parent_field = &s_node_->child[0];
    node_ref parent_edge = parent_field->load(with<role::traverse>);
    node* leaf = at(parent_edge);
    link* current_field = &leaf->child[dir(key, leaf)];
    node_ref current = current_field->load(with<role::traverse>);
    while (!current.null()) {
      if (!parent_edge.tagged()) {
        s.ancestor = s.parent;
        s.successor = leaf;
        s.into_ancestor = s.into_parent;
      }
      s.into_parent = parent_field;
      s.parent = leaf;
      parent_field = current_field;
      parent_edge = current;
      leaf = at(current);
      current_field = &leaf->child[dir(key, leaf)];
      current = current_field->load(with<role::traverse>);
    }
    s.leaf = leaf;
    s.leaf_ref = parent_edge.clean();
    s.parent_field = parent_field;

    // Transition (NVTraverse): the edge into the ancestor, the path from it to the leaf
    // (below the successor the edges are tagged, so the path is as the seek read it), and
    // the parent's other edge.
    if constexpr (Mode::persisted(role::transition)) {
      if (s.into_ancestor != nullptr) persist_read<Mode, role::transition>(*s.into_ancestor);
      persist_read<Mode, role::transition>(s.ancestor->child[dir(key, s.ancestor)]);
      for (node* n = s.successor; n != s.parent;) {
        link& edge = n->child[dir(key, n)];
        persist_read<Mode, role::transition>(edge);
        node_ref next = edge.load(flit::volatile_);
        if (next.null()) break;
        n = at(next);
      }
      persist_read<Mode, role::transition>(s.parent->child[0]);
      persist_read<Mode, role::transition>(s.parent->child[1]);
    }
  }

  // The outcome of a search (the key's leaf, or the leaf that proves it absent) depends on
  // the two edges that lead to that leaf: the parent may be a new internal node whose edges
  // were written when it was initialized, before the edge to it was durable.
  static void depend_on_leaf(const seek_record& s) {
    persist_read<Mode, role::dependency>(*s.into_parent);
    persist_read<Mode, role::dependency>(*s.parent_field);
  }

  // Completes the deletion that flagged an edge of s.parent: tags the sibling edge and
  // swings the ancestor's edge from the successor to the sibling. True if this call's
  // splice succeeded (it then retires what it removed).
  bool cleanup(std::uint64_t key, const seek_record& s) {
    node* ancestor = s.ancestor;
    node* parent = s.parent;
    link* successor_field = &ancestor->child[dir(key, ancestor)];
    const int d = dir(key, parent);
    link* child_field = &parent->child[d];
    link* sibling_field = &parent->child[1 - d];
    if (!child_field->load(with<role::critical>).marked()) {
      sibling_field = child_field;  // the flagged edge is the other one: keep this side
    }
    node_ref sibling;
    for (;;) {
      persist_read<Mode, role::dependency>(*sibling_field);
      sibling = sibling_field->load(with<role::critical>);
      if (sibling.tagged()) break;
      if (sibling_field->compare_exchange(sibling, sibling.with_tag(), with<role::freeze>)) break;
    }
    if (s.into_ancestor != nullptr) persist_read<Mode, role::dependency>(*s.into_ancestor);
    node_ref expected = alloc::ref_of(memory_, s.successor);
    if (!successor_field->compare_exchange(expected, sibling.without_tag(), with<role::unlink>)) return false;
    retire_removed(key, s, sibling_field);
    return true;
  }

  // Retires what a splice removed: each node from the successor down to the parent, and at
  // each the child that is not on the path (a flagged leaf), except the sibling kept.
  void retire_removed(std::uint64_t key, const seek_record& s, const link* kept) {
    for (node* n = s.successor;;) {
      const int d = dir(key, n);
      memory_.retire(alloc::ref_of(memory_, n).offset(), sizeof(node));
      if (n == s.parent) {
        const link* removed = kept == &n->child[d] ? &n->child[1 - d] : &n->child[d];
        memory_.retire(removed->load(flit::volatile_).offset(), sizeof(node));
        return;
      }
      memory_.retire(n->child[1 - d].load(flit::volatile_).offset(), sizeof(node));
      n = at(n->child[d].load(flit::volatile_));
    }
  }

  // Recovery: complete every pending deletion (an internal node with a flagged edge is
  // replaced by its other child), clear tags and flit metadata, report the nodes kept.
  void repair(auto& live) {
    for (node* n : {root_node_, s_node_}) {
      n->child[0].reset_metadata();
      n->child[1].reset_metadata();
    }
    // Post-order over the edges below S.left, with an explicit stack (the tree may be deep):
    // when a node's children are repaired, each is clean or leads to a flagged leaf.
    struct frame {
      link* edge;
      bool expanded;
    };
    std::vector<frame> stack{{&s_node_->child[0], false}};
    while (!stack.empty()) {
      link* edge = stack.back().edge;
      node* n = at(edge->load(flit::volatile_, flit::private_));
      if (!stack.back().expanded) {
        n->child[0].reset_metadata();
        n->child[1].reset_metadata();
        if (n->child[0].load(flit::volatile_, flit::private_).null()) {
          stack.pop_back();  // a leaf: its own flag is for the level above
          continue;
        }
        stack.back().expanded = true;
        stack.push_back({&n->child[1], false});
        stack.push_back({&n->child[0], false});
        continue;
      }
      stack.pop_back();
      const node_ref c0 = n->child[0].load(flit::volatile_, flit::private_);
      const node_ref c1 = n->child[1].load(flit::volatile_, flit::private_);
      if (c0.marked()) {
        edge->store(c1.without_tag(), flit::persisted, flit::private_);  // splice n out
      } else if (c1.marked()) {
        edge->store(c0.without_tag(), flit::persisted, flit::private_);
      } else {
        store_if_changed(n->child[0], c0.without_tag());
        store_if_changed(n->child[1], c1.without_tag());
      }
    }
    store_if_changed(s_node_->child[0], s_node_->child[0].load(flit::volatile_, flit::private_).without_tag());
    policy::operation_completion();
    // Every node still in the tree is live.
    std::vector<const node*> nodes{root_node_};
    while (!nodes.empty()) {
      const node* n = nodes.back();
      nodes.pop_back();
      live(alloc::ref_of(memory_, n).offset(), sizeof(node));
      for (const link& child : n->child) {
        node_ref c = child.load(flit::volatile_, flit::private_);
        if (!c.null()) nodes.push_back(at(c));
      }
    }
  }

  static void store_if_changed(link& word, node_ref value) {
    if (word.load(flit::volatile_, flit::private_) != value) word.store(value, flit::persisted, flit::private_);
  }

  Memory& memory_;
  std::uint64_t root_ = 0;
  node* root_node_ = nullptr;
  node* s_node_ = nullptr;
};

}  // namespace structures
