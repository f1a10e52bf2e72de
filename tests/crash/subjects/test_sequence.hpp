// A small persistent queue or stack (a singly linked list), built only to test the crash
// harness's queue and stack checkers: correct by default, or with one of two bugs.
//
// Layout: root (offset 0): magic, first, last, each on its own cache line; then 64-byte nodes
// (next, value), bump allocated, never freed. Offset 0 is null.
//   queue: a sentinel list (Michael-Scott shape, one mutex): first is the sentinel, values
//          follow it; enqueue links after the last node, dequeue moves first on.
//   stack: first is the top; push links a node in front of it, pop moves first on.
// `last` is a hint (the queue's last node), rebuilt by recovery.
//
// Thread safety: every operation takes one mutex; state() and recovery run alone.
// Invariants:
//  (1) The list from first is acyclic and inside the node area.
// Persistence (seq_bug::none):
//  (1) A node's contents are durable before the link that reaches it.
//  (2) Each add persists one link, each take one move of first: the operation is durable
//      when it returns.
#pragma once

#include <algorithm>
#include <cstddef>
#include <new>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crashtest/harness.hpp"
#include "flit/flit.hpp"
#include "subjects/node_area.hpp"

namespace crashtest::subjects {

enum class seq_bug {
  none,
  add_not_persisted,   // the link of an added node is a v-store: a completed add is lost
  take_not_persisted,  // first moves with a v-store: a taken value comes back
};

enum class seq_kind { queue, stack };

template <class Policy, seq_kind Kind, seq_bug Bug = seq_bug::none>
class test_sequence {
 public:
  static constexpr std::uint64_t magic = 0x7465737473657131ULL;  // "testseq1"

  // The names its history prints (the harness's defaults would do: this shows the hook).
  static std::string_view op_name(op_kind k) {
    if (k == op_kind::enqueue) return "offer";
    if (k == op_kind::dequeue) return "poll";
    return "";
  }

  test_sequence(pv::model& m, start how) : nodes_(m.base(), m.size(), sizeof(root), "test_sequence") {
    cursor_ = sizeof(root);
    if (how == start::fresh) {
      root_ = new (m.base()) root();
      root_->magic.w.store(magic);
      if constexpr (Kind == seq_kind::queue) {
        std::uint64_t sentinel = allocate();
        at(sentinel)->next.store(0, flit::volatile_, flit::private_);
        at(sentinel)->value.store(0, flit::volatile_, flit::private_);
        Policy::flush_range(at(sentinel), sizeof(node));
        root_->first.w.store(sentinel);
        last_ = sentinel;
      }
      Policy::operation_completion();
      return;
    }
    root_ = reinterpret_cast<root*>(m.base());
    root_->magic.w.reset_metadata();
    root_->first.w.reset_metadata();
    if (root_->magic.w.load() != magic) throw std::runtime_error("test_sequence: bad magic");
    std::size_t steps = 0;
    for (std::uint64_t off = root_->first.w.load(); off != 0; off = at(off)->next.load()) {
      nodes_.check(off);
      if (++steps > nodes_.capacity()) throw invariant_violation("test_sequence: a cycle");
      at(off)->next.reset_metadata();
      at(off)->value.reset_metadata();
      last_ = off;
      cursor_ = std::max<std::size_t>(cursor_, off + sizeof(node));
    }
    // Allocate after every node that may be reachable: the reachable ones, and every node
    // a value was written to (a node is linked only once its value is durable).
    scan_cursor();
    Policy::operation_completion();
  }

  // queue_subject
  void enqueue(std::uint64_t value) requires(Kind == seq_kind::queue) { add(value); }
  std::optional<std::uint64_t> dequeue() requires(Kind == seq_kind::queue) { return take(); }
  // stack_subject
  void push(std::uint64_t value) requires(Kind == seq_kind::stack) { add(value); }
  std::optional<std::uint64_t> pop() requires(Kind == seq_kind::stack) { return take(); }

  // The values, the next to be taken first.
  std::vector<std::uint64_t> state() const {
    std::vector<std::uint64_t> out;
    std::uint64_t off = root_->first.w.load();
    if constexpr (Kind == seq_kind::queue) off = off == 0 ? 0 : at(off)->next.load();
    for (; off != 0; off = at(off)->next.load()) {
      nodes_.check(off);
      if (out.size() > nodes_.capacity()) throw invariant_violation("test_sequence: a cycle");
      out.push_back(at(off)->value.load());
    }
    return out;
  }

 private:
  using word = flit::persist<std::uint64_t, Policy>;
  struct root {
    line_word<Policy> magic, first;
  };
  struct alignas(pv::cache_line) node {
    word next, value;
  };

  node* at(std::uint64_t off) const { return nodes_.at(off); }

  std::uint64_t allocate() {
    if (cursor_ + sizeof(node) > nodes_.size()) throw std::bad_alloc();  // the region is full
    std::uint64_t off = cursor_;
    cursor_ += sizeof(node);
    return off;
  }

  // After recovery: the first node place past every written node (a nonzero value marks one).
  void scan_cursor() {
    std::size_t end = cursor_;
    for (std::size_t off = sizeof(root); off + sizeof(node) <= nodes_.size(); off += sizeof(node)) {
      at(off)->value.reset_metadata();
      if (at(off)->value.load(flit::volatile_, flit::private_) != 0) {
        end = std::max<std::size_t>(end, off + sizeof(node));
      }
    }
    cursor_ = end;
  }

  // flit::persisted, or flit::volatile_ for the store the bug leaves unpersisted.
  template <seq_bug Broken>
  static constexpr auto store_unless = [] {
    if constexpr (Bug == Broken) {
      return flit::volatile_;
    } else {
      return flit::persisted;
    }
  }();
  static constexpr auto add_store = store_unless<seq_bug::add_not_persisted>;
  static constexpr auto take_store = store_unless<seq_bug::take_not_persisted>;

  void add(std::uint64_t value) {
    std::lock_guard lock(mutex_);
    std::uint64_t n = allocate();
    at(n)->value.store(value, flit::volatile_, flit::private_);
    if constexpr (Kind == seq_kind::queue) {
      at(n)->next.store(0, flit::volatile_, flit::private_);
      Policy::flush_range(at(n), sizeof(node));
      at(last_)->next.store(n, add_store);
      last_ = n;
    } else {
      at(n)->next.store(root_->first.w.load(flit::volatile_), flit::volatile_, flit::private_);
      Policy::flush_range(at(n), sizeof(node));
      root_->first.w.store(n, add_store);
    }
    Policy::operation_completion();
  }

  std::optional<std::uint64_t> take() {
    std::lock_guard lock(mutex_);
    std::uint64_t first = root_->first.w.load(flit::volatile_);
    std::uint64_t node_off = first;  // the node whose value is taken
    if constexpr (Kind == seq_kind::queue) node_off = at(first)->next.load(flit::volatile_);
    if (node_off == 0) {
      Policy::operation_completion();
      return std::nullopt;
    }
    std::uint64_t v = at(node_off)->value.load(flit::volatile_);
    // Queue: the taken node becomes the sentinel. Stack: first moves past it.
    std::uint64_t next = Kind == seq_kind::queue ? node_off : at(node_off)->next.load(flit::volatile_);
    root_->first.w.store(next, take_store);
    Policy::operation_completion();
    return v;
  }

  node_area<node> nodes_;
  root* root_ = nullptr;
  std::size_t cursor_;      // written under mutex_
  std::uint64_t last_ = 0;  // queue: the last node; written under mutex_
  std::mutex mutex_;
};

}  // namespace crashtest::subjects
