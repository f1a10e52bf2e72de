// A small persistent set (a sorted singly linked list), built only to test the crash
// harness's set checker: correct by default, or with a node linked before its contents are
// written back.
//
// Layout: root (offset 0): magic and head, each on its own cache line; then 64-byte nodes
// (next, key), bump allocated, never freed. Offset 0 is null.
//
// Thread safety: every operation takes one mutex (the harness's subject, not a lock-free
// structure); state() and recovery run alone.
// Invariants:
//  (1) Keys strictly ascend along the list.
// Persistence:
//  (1) A node's contents are durable before the link that reaches it (set_bug::none).
//  (2) insert and remove each persist one link; recovery has nothing to repair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "crashtest/harness.hpp"
#include "flit/flit.hpp"
#include "subjects/node_area.hpp"

namespace crashtest::subjects {

enum class set_bug { none, link_before_flush };

template <class Policy, set_bug Bug = set_bug::none>
class test_set {
 public:
  static constexpr bool ordered = true;
  static constexpr std::uint64_t magic = 0x7465737473657431ULL;  // "testset1"

  test_set(pv::model& m, start how) : nodes_(m.base(), m.size(), sizeof(root), "test_set") {
    cursor_ = sizeof(root);
    if (how == start::fresh) {
      root_ = new (m.base()) root();
      root_->magic.w.store(magic);
      Policy::operation_completion();
      return;
    }
    root_ = reinterpret_cast<root*>(m.base());
    root_->magic.w.reset_metadata();
    root_->head.w.reset_metadata();
    if (root_->magic.w.load() != magic) throw std::runtime_error("test_set: bad magic");
    std::size_t steps = 0;
    for (std::uint64_t off = root_->head.w.load(); off != 0; off = at(off)->next.load()) {
      nodes_.check(off);
      if (++steps > nodes_.capacity()) throw invariant_violation("test_set: the list has a cycle");
      at(off)->next.reset_metadata();
      at(off)->key.reset_metadata();
      cursor_ = std::max<std::size_t>(cursor_, off + sizeof(node));
    }
    Policy::operation_completion();
  }

  bool insert(std::uint64_t key) {
    std::lock_guard lock(mutex_);
    auto [link, off] = locate(key);
    bool fresh = off == 0 || at(off)->key.load(flit::volatile_) != key;
    if (fresh) {
      if (cursor_ + sizeof(node) > nodes_.size()) throw std::length_error("test_set: region full");
      std::uint64_t n = cursor_;
      cursor_ += sizeof(node);
      at(n)->key.store(key, flit::volatile_, flit::private_);
      at(n)->next.store(off, flit::volatile_, flit::private_);
      if constexpr (Bug == set_bug::none) Policy::flush_range(at(n), sizeof(node));
      link->store(n);
      if constexpr (Bug == set_bug::link_before_flush) Policy::flush_range(at(n), sizeof(node));
    }
    Policy::operation_completion();
    return fresh;
  }

  bool remove(std::uint64_t key) {
    std::lock_guard lock(mutex_);
    auto [link, off] = locate(key);
    bool found = off != 0 && at(off)->key.load(flit::volatile_) == key;
    if (found) link->store(at(off)->next.load(flit::volatile_));
    Policy::operation_completion();
    return found;
  }

  bool contains(std::uint64_t key) {
    std::lock_guard lock(mutex_);
    auto [link, off] = locate(key);
    Policy::operation_completion();
    return off != 0 && at(off)->key.load(flit::volatile_) == key;
  }

  // Keys in list order. Throws invariant_violation on a cycle or a link outside the region.
  std::vector<std::uint64_t> state() const {
    std::vector<std::uint64_t> keys;
    for (std::uint64_t off = root_->head.w.load(); off != 0; off = at(off)->next.load()) {
      nodes_.check(off);
      if (keys.size() > nodes_.capacity()) {
        throw invariant_violation("test_set: the list has a cycle");
      }
      keys.push_back(at(off)->key.load());
    }
    return keys;
  }

 private:
  using word = flit::persist<std::uint64_t, Policy>;
  struct root {
    line_word<Policy> magic, head;
  };
  struct alignas(pv::cache_line) node {
    word next, key;
  };

  node* at(std::uint64_t off) const { return nodes_.at(off); }

  // The link to the first node with key >= `key`, and that node's offset.
  std::pair<word*, std::uint64_t> locate(std::uint64_t key) {
    word* link = &root_->head.w;
    std::uint64_t off = link->load(flit::volatile_);
    while (off != 0 && at(off)->key.load(flit::volatile_) < key) {
      link = &at(off)->next;
      off = link->load(flit::volatile_);
    }
    return {link, off};
  }

  node_area<node> nodes_;
  root* root_ = nullptr;
  std::size_t cursor_;  // written under mutex_
  std::mutex mutex_;
};

}  // namespace crashtest::subjects
