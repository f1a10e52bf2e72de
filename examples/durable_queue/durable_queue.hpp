// durable_queue: Michael and Scott's lock-free FIFO queue (PODC 1996), made durable with
// persist<T> over the toolkit's building blocks (allocators/node_memory.hpp,
// allocators/modes.hpp, allocators/pool_memory.hpp). Written as a project outside flint
// would write it: it uses only the public headers of flit and allocators.
//
//   auto mem = alloc::pool_memory<P>::create(region, "durable_queue");  // or a pool file
//   durable_queue<alloc::manual, P, alloc::pool_memory<P>> q(*mem);
//   mem->set_root(q.root());
//   q.enqueue(7); q.dequeue();
//   ...crash...
//   auto mem = alloc::pool_memory<P>::open(region, "durable_queue");
//   auto q = durable_queue<...>::recover(*mem, mem->root(), mem->live_marker());
//   mem->finish_recovery();
//
// Layout: a root block {head, tail} and nodes {next, value}, in the memory's region, linked
// by node_ref (offsets, never raw pointers). head points to a sentinel; the values are in
// the nodes after it. tail is the last node or lags behind it by one.
//
// Thread safety: enqueue and dequeue from any threads concurrently, each inside a pin() of
// the memory (they take it). recover() and for_each() require that nothing else runs.
// Invariants:
//  (1) The nodes from head along next form a list that ends with a null next; tail is in it.
//  (2) A node's value is written before the node is linked, and never changes after.
//  (3) head never passes tail (a dequeue that finds them equal with a next helps tail on).
// Persistence (roles of allocators/modes.hpp):
//  (1) A node's contents are written back (finish_init) before the p-CAS that links it,
//      which fences them first: a durable link leads to a durable node.
//  (2) The link into the node tail points to is durable before tail points to it: the
//      enqueuer's CAS of tail fences its link's write-back first (every shared store or
//      CAS fences), and a helper p-loads that link (`dependency`) before its own CAS of
//      tail. So an enqueue links after a node that is durably in the list.
//  (3) An enqueue's link and a dequeue's move of head are p-CASes (`publish`): durable
//      when the operation completes. A dequeue p-loads head and the next link (`dependency`)
//      so that what it returns (a value, or empty) rests on durable state.
//  (4) tail is a hint: written with v-instructions in manual mode; recovery sets it to the
//      last node. A dequeued sentinel is retired after head moved past it durably (the
//      operation fences before it unpins).
//  (5) Recovery clears flit metadata, checks every offset before following it
//      (checked_node_at throws alloc::bad_node_ref), reports each reachable node live, and
//      persists the tail it rebuilt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>

#include "allocators/modes.hpp"
#include "allocators/node_memory.hpp"
#include "flit/persist.hpp"

template <alloc::durability_mode Mode, class Policy, alloc::node_memory Memory>
class durable_queue {
 public:
  using policy = typename Mode::template policy_for<Policy>;
  using link = flit::persist<alloc::node_ref, policy>;

  struct node {
    link next;
    // Immutable once linked: a plain word, written through the policy before the node is
    // published (a persist<std::uint64_t> would do too, except under link_and_persist,
    // which needs a spare bit in every persistent word).
    std::uint64_t value;
  };
  struct root_block {
    link head;
    link tail;
  };

  // An empty queue (its root block and a sentinel) in memory's region. Throws
  // alloc::out_of_space if the region is full.
  explicit durable_queue(Memory& memory) : memory_(memory) {
    auto [root_ref, root] = alloc::create_node<root_block>(memory_);
    auto [sentinel_ref, sentinel] = alloc::create_node<node>(memory_);
    sentinel->next.store(alloc::node_ref{}, flit::volatile_, flit::private_);
    write_value(sentinel, 0);
    alloc::finish_init<Mode, policy>(sentinel, sizeof(node));
    root->head.store(sentinel_ref, flit::volatile_, flit::private_);
    root->tail.store(sentinel_ref, flit::volatile_, flit::private_);
    alloc::finish_init<Mode, policy>(root, sizeof(root_block));
    policy::operation_completion();
    root_ = root;
    root_ref_ = root_ref;
  }

  // The queue whose root block is at `root`, after a crash (the region holds the durable
  // image): see Persistence (5). live(offset, bytes) is called for the root block and every
  // node kept. REQUIRES: nothing else uses the region.
  template <class Live>
  static durable_queue recover(Memory& memory, std::uint64_t root, Live&& live) {
    durable_queue q(memory, alloc::node_ref::at(root));
    q.rebuild(live);
    return q;
  }

  // Offset of the root block in the region: what recover() needs.
  std::uint64_t root() const noexcept { return root_ref_.offset(); }

  void enqueue(std::uint64_t value) {
    auto pin = memory_.pin();
    auto [fresh, n] = alloc::create_node<node>(memory_);
    write_value(n, value);
    n->next.store(alloc::node_ref{}, flit::volatile_, flit::private_);
    alloc::finish_init<Mode, policy>(n, sizeof(node));
    for (;;) {
      alloc::node_ref t = root_->tail.load(with<alloc::role::traverse>);
      alloc::node_ref next = at(t)->next.load(with<alloc::role::dependency>);
      if (t != root_->tail.load(with<alloc::role::traverse>)) continue;
      if (next.null()) {
        alloc::node_ref expected{};
        if (at(t)->next.compare_exchange(expected, fresh, with<alloc::role::publish>)) {
          alloc::node_ref seen = t;  // swing tail; a failure means someone helped
          (void)root_->tail.compare_exchange(seen, fresh, with<alloc::role::index>);
          break;
        }
      } else {
        alloc::node_ref seen = t;  // tail lags: help it on
        (void)root_->tail.compare_exchange(seen, next, with<alloc::role::index>);
      }
    }
    policy::operation_completion();
  }

  // The value at the front, removed; nothing if the queue is empty.
  std::optional<std::uint64_t> dequeue() {
    auto pin = memory_.pin();
    for (;;) {
      alloc::node_ref h = root_->head.load(with<alloc::role::dependency>);
      alloc::node_ref t = root_->tail.load(with<alloc::role::traverse>);
      alloc::node_ref next = at(h)->next.load(with<alloc::role::dependency>);
      if (h != root_->head.load(with<alloc::role::critical>)) continue;
      if (h == t) {
        if (next.null()) {
          policy::operation_completion();
          return std::nullopt;
        }
        alloc::node_ref seen = t;
        (void)root_->tail.compare_exchange(seen, next, with<alloc::role::index>);
        continue;
      }
      std::uint64_t v = at(next)->value;  // immutable, durable
      alloc::node_ref expected = h;
      if (root_->head.compare_exchange(expected, next, with<alloc::role::publish>)) {
        policy::operation_completion();  // head's move is durable before h can be reused
        memory_.retire(h.offset(), sizeof(node));
        return v;
      }
    }
  }

  // Calls f(value) front to back. REQUIRES: quiescence.
  template <class F>
  void for_each(F&& f) const {
    alloc::node_ref n = at(root_->head.load(flit::volatile_, flit::private_))
                            ->next.load(flit::volatile_, flit::private_);
    for (; !n.null(); n = at(n)->next.load(flit::volatile_, flit::private_)) {
      f(at(n)->value);
    }
  }

 private:
  template <alloc::role R>
  static constexpr auto with = alloc::access_for<Mode, R>;

  durable_queue(Memory& memory, alloc::node_ref root)
      : memory_(memory),
        root_(alloc::checked_node_at<root_block>(memory, root, "the queue's root")),
        root_ref_(root) {}

  node* at(alloc::node_ref r) const noexcept { return alloc::node_at<node>(memory_, r); }

  // A private v-store of a node's value, seen by the policy's backend like any store (and
  // written back with the node by finish_init).
  static void write_value(node* n, std::uint64_t value) {
    policy::write_range(&n->value, &value, sizeof value, flit::volatile_);
  }

  template <class Live>
  void rebuild(Live& live) {
    root_->head.reset_metadata();
    root_->tail.reset_metadata();
    live(root_ref_.offset(), sizeof(root_block));
    // A list longer than the region holds nodes has a cycle.
    const std::uint64_t most = memory_.size() / sizeof(node) + 1;
    std::uint64_t steps = 0;
    alloc::node_ref last = root_->head.load(flit::volatile_, flit::private_);
    for (alloc::node_ref r = last; !r.null();) {
      node* n = alloc::checked_node_at<node>(memory_, r, "a link of the queue");
      if (++steps > most) throw std::runtime_error("durable_queue: the list has a cycle");
      n->next.reset_metadata();
      live(r.offset(), sizeof(node));
      last = r;
      r = n->next.load(flit::volatile_, flit::private_);
    }
    if (root_->tail.load(flit::volatile_, flit::private_) != last) {
      root_->tail.store(last, flit::persisted, flit::private_);
    }
    policy::operation_completion();
  }

  Memory& memory_;
  root_block* root_ = nullptr;
  alloc::node_ref root_ref_{};
};
