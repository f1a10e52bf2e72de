// A small persistent key-value store, built only to test the crash harness: correct by
// default, and with each of four crash-consistency bugs as a policy parameter, so that the
// harness can prove it catches them.
//
// Layout in the region (offsets from the region's base; 0 is null):
//   root   (offset 0): magic, head, commit_version, batch_mode, each on its own cache line.
//   nodes  (after the root): next, version, key, value, flags; 64-byte aligned, bump
//          allocated, never freed. The list is sorted by key ascending, then version
//          descending. A delete is a node with the tombstone flag.
//
// Thread safety: writers (put, del, write_batch) serialize on a mutex; get is lock-free
// (v-loads, bounded by visible_version, as in FlintKV); state() and recovery run alone.
// Invariants:
//  (1) Keys ascend along the list; versions strictly descend within a key.
//  (2) A node whose version is <= visible_version is reachable through durable links and
//      its contents are durable.
// Persistence (the correct protocol, kv_bug::none):
//  (1) A node's contents are written back and fenced before the link that reaches it (the
//      shared p-store of the link fences the thread's earlier write-backs first).
//  (2) A put links its node with version MAX, then makes its version durable, then
//      publishes it in visible_version. Recovery drops nodes whose version is MAX.
//  (3) A batch persists commit_version and sets batch_mode, links every node with the
//      batch's version, then clears batch_mode. Recovery with batch_mode set drops nodes
//      newer than commit_version.
// Recovery repairs the list with p-stores, clears batch_mode, and restores visible_version.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "crashtest/harness.hpp"
#include "flit/flit.hpp"
#include "subjects/node_area.hpp"

namespace crashtest::subjects {

// The bugs a test_kv can be built with.
enum class kv_bug {
  none,
  link_before_flush,          // a node is linked before its contents are written back
  missing_fence_before_link,  // contents written back but not fenced before the link
  version_before_link,        // visible_version published before the link is durable
  batch_flag_cleared_early,   // batch_mode cleared before the batch's links are durable
};

template <class Policy, kv_bug Bug = kv_bug::none>
class test_kv {
 public:
  static constexpr std::uint64_t magic = 0x746573746b763031ULL;  // "testkv01"
  static constexpr std::uint64_t max_version = std::numeric_limits<std::uint64_t>::max();
  static constexpr std::uint64_t tombstone = 1;

  test_kv(pv::model& m, start how) : nodes_(m.base(), m.size(), sizeof(root), "test_kv") {
    if (m.size() < sizeof(root) + sizeof(node)) {
      throw std::invalid_argument("test_kv: region of " + std::to_string(m.size()) +
                                  " bytes is too small");
    }
    cursor_ = sizeof(root);
    if (how == start::fresh) {
      root_ = new (m.base()) root();
      root_->magic.w.store(magic);
      Policy::operation_completion();
    } else {
      root_ = reinterpret_cast<root*>(m.base());
      recover();
    }
  }

  std::uint64_t put(std::uint64_t key, std::uint64_t value) { return write(key, value, 0); }
  std::uint64_t del(std::uint64_t key) { return write(key, 0, tombstone); }

  std::uint64_t write_batch(std::span<const kv_write> entries) {
    std::lock_guard lock(writers_);
    const std::uint64_t v = next_version_;
    root_->commit_version.w.store(v - 1);
    root_->batch_mode.w.store(1);
    bool first = true;
    for (const kv_write& e : entries) {
      auto [link, succ] = locate(e.key);
      std::uint64_t off = allocate();
      prepare(at(off), e.key, e.value, e.del ? tombstone : 0, v, succ);
      publish(*link, off);
      if (Bug == kv_bug::batch_flag_cleared_early && first) root_->batch_mode.w.store(0);
      first = false;
    }
    if constexpr (Bug != kv_bug::batch_flag_cleared_early) root_->batch_mode.w.store(0);
    next_version_ = v + 1;
    visible_.store(v, std::memory_order_release);
    Policy::operation_completion();
    return v;
  }

  kv_read get(std::uint64_t key) const {
    const std::uint64_t visible = visible_.load(std::memory_order_acquire);
    std::uint64_t off = root_->head.w.load(flit::volatile_);
    while (off != 0) {
      const node* n = at(off);
      std::uint64_t k = n->key.load(flit::volatile_);
      if (k > key) break;
      if (k == key) {
        std::uint64_t v = n->version.load(flit::volatile_);
        if (v <= visible) {
          Policy::operation_completion();
          if (n->flags.load(flit::volatile_) & tombstone) return {};
          return {true, n->value.load(flit::volatile_), v};
        }
      }
      off = n->next.load(flit::volatile_);
    }
    Policy::operation_completion();
    return {};
  }

  // Live keys with their newest values. Throws invariant_violation on a broken list.
  std::vector<kv_entry> state() const {
    std::vector<kv_entry> out;
    std::uint64_t prev_key = 0, prev_version = 0;
    std::size_t steps = 0;
    for (std::uint64_t off = root_->head.w.load(); off != 0; off = at(off)->next.load()) {
      nodes_.check(off);
      if (++steps > nodes_.capacity()) throw invariant_violation("test_kv: the list has a cycle");
      const node* n = at(off);
      std::uint64_t k = n->key.load(), v = n->version.load();
      if (steps > 1 && (k < prev_key || (k == prev_key && v >= prev_version))) {
        throw invariant_violation("test_kv: node at " + std::to_string(off) + " (key " +
                                  std::to_string(k) + ", version " + std::to_string(v) +
                                  ") follows key " + std::to_string(prev_key) + ", version " +
                                  std::to_string(prev_version));
      }
      if (v == max_version || v > visible_.load()) {
        throw invariant_violation("test_kv: node at " + std::to_string(off) +
                                  " has version " + std::to_string(v) +
                                  " above visible_version after recovery");
      }
      bool newest = steps == 1 || k != prev_key;
      if (newest && !(n->flags.load() & tombstone)) out.push_back({k, n->value.load(), v});
      prev_key = k;
      prev_version = v;
    }
    return out;
  }

 private:
  using word = flit::persist<std::uint64_t, Policy>;
  using line = line_word<Policy>;
  struct root {
    line magic, head, commit_version, batch_mode;
  };
  struct alignas(pv::cache_line) node {
    word next, version, key, value, flags;
  };

  node* at(std::uint64_t off) const { return nodes_.at(off); }

  std::uint64_t allocate() {
    std::uint64_t off = cursor_;
    if (off + sizeof(node) > nodes_.size()) throw std::length_error("test_kv: region full");
    cursor_ += sizeof(node);
    return off;
  }

  // The link to the first node with key >= `key`, and that node.
  std::pair<word*, std::uint64_t> locate(std::uint64_t key) {
    word* link = &root_->head.w;
    std::uint64_t off = link->load(flit::volatile_);
    while (off != 0 && at(off)->key.load(flit::volatile_) < key) {
      link = &at(off)->next;
      off = link->load(flit::volatile_);
    }
    return {link, off};
  }

  // Fills a node not yet reachable (private stores) and writes it back.
  void prepare(node* n, std::uint64_t key, std::uint64_t value, std::uint64_t flags,
               std::uint64_t version, std::uint64_t next) {
    n->key.store(key, flit::volatile_, flit::private_);
    n->value.store(value, flit::volatile_, flit::private_);
    n->flags.store(flags, flit::volatile_, flit::private_);
    n->version.store(version, flit::volatile_, flit::private_);
    n->next.store(next, flit::volatile_, flit::private_);
    if constexpr (Bug != kv_bug::link_before_flush) Policy::flush_range(n, sizeof(node));
  }

  // Makes `link` reach the node at `off`.
  void publish(word& link, std::uint64_t off) {
    if constexpr (Bug == kv_bug::missing_fence_before_link) {
      link.store(off, flit::persisted, flit::private_);  // write-back, but no fence first
    } else {
      link.store(off);  // fences the node's write-backs, then stores and persists the link
    }
    if constexpr (Bug == kv_bug::link_before_flush) {
      Policy::flush_range(at(off), sizeof(node));
      Policy::fence_pending();
    }
  }

  std::uint64_t write(std::uint64_t key, std::uint64_t value, std::uint64_t flags) {
    std::lock_guard lock(writers_);
    const std::uint64_t v = next_version_;
    auto [link, succ] = locate(key);
    std::uint64_t off = allocate();
    node* n = at(off);
    if constexpr (Bug == kv_bug::version_before_link) {
      prepare(n, key, value, flags, v, succ);
      visible_.store(v, std::memory_order_release);  // readers may return it: not durable
      publish(*link, off);
    } else {
      prepare(n, key, value, flags, max_version, succ);
      publish(*link, off);
      n->version.store(v);
      visible_.store(v, std::memory_order_release);
    }
    next_version_ = v + 1;
    Policy::operation_completion();
    return v;
  }

  void recover() {
    root_->magic.w.reset_metadata();
    if (root_->magic.w.load() != magic) {
      throw std::runtime_error("test_kv: no store in the region (bad magic)");
    }
    for (line* l : {&root_->head, &root_->commit_version, &root_->batch_mode}) {
      l->w.reset_metadata();
    }
    const bool in_batch = root_->batch_mode.w.load() != 0;
    const std::uint64_t committed = root_->commit_version.w.load();
    std::uint64_t newest = 0;
    std::size_t steps = 0;
    word* link = &root_->head.w;
    for (std::uint64_t off = link->load(); off != 0; off = link->load()) {
      nodes_.check(off);
      if (++steps > nodes_.capacity()) throw invariant_violation("test_kv: the list has a cycle");
      node* n = at(off);
      for (word* w : {&n->next, &n->version, &n->key, &n->value, &n->flags}) w->reset_metadata();
      std::uint64_t v = n->version.load();
      if (v == max_version || (in_batch && v > committed)) {
        link->store(n->next.load());  // unlink an unfinished write
        continue;
      }
      newest = std::max(newest, v);
      cursor_ = std::max<std::size_t>(cursor_, off + sizeof(node));
      link = &n->next;
    }
    if (in_batch) root_->batch_mode.w.store(0);
    Policy::operation_completion();
    visible_.store(newest);
    next_version_ = newest + 1;
  }

  node_area<node> nodes_;
  root* root_ = nullptr;
  std::size_t cursor_;                 // bump allocation; written under writers_
  std::mutex writers_;
  std::uint64_t next_version_ = 1;     // written under writers_
  std::atomic<std::uint64_t> visible_{0};
};

}  // namespace crashtest::subjects
