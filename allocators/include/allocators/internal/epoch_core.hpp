// The machinery behind epoch_domain: a global epoch, one record per thread announcing the
// epoch it pinned (or 0), and per-thread bags of retired objects stamped with the epoch at
// which they were retired.
//
// Thread safety: records are linked into the domain's list once and never unlinked while the
// domain lives (a record whose thread exited is reused by a later thread); the list is read
// without locks. Bags are touched only by their thread; bags of exited threads move to the
// orphan list under orphans_mutex.
// Invariants:
//  (1) The global epoch advances from e to e + 1 only when every pinned record announced e.
//  (2) An object retired with stamp s (the global epoch read after a full fence that follows
//      its unlinking) is reclaimed only when the global epoch is at least s + 2: every thread
//      that pinned before the unlink has unpinned by then.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "allocators/internal/thread_state.hpp"

namespace alloc::detail {

struct retired {
  void (*reclaim)(const retired&) noexcept;
  void (*deleter)(void*);  // for retire(object, deleter)
  void* context;           // the allocator, for allocator retirements
  std::uintptr_t object;   // a pointer or a pool offset
  std::size_t size;        // node size, for node_allocator
};

struct alignas(64) epoch_record {
  std::atomic<std::uint64_t> announced{0};  // the epoch pinned, 0 when not pinned
  std::uint32_t nesting = 0;
  std::uint32_t since_collect = 0;
  std::atomic<bool> in_use{false};
  epoch_record* next = nullptr;  // immutable once linked
  std::array<std::vector<retired>, 3> bags;
  std::array<std::uint64_t, 3> bag_epoch{};
};

class epoch_core final : public per_thread_owner {
 public:
  // Retirements by one thread between two attempts to advance and reclaim.
  static constexpr std::uint32_t collect_every = 32;

  ~epoch_core() override;

  std::uint64_t epoch() const noexcept { return global_.load(std::memory_order_relaxed); }

  void pin(epoch_record& r) noexcept {
    if (r.nesting++ == 0) {
      r.announced.store(global_.load(std::memory_order_relaxed), std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
  }
  void unpin(epoch_record& r) noexcept {
    if (--r.nesting == 0) r.announced.store(0, std::memory_order_release);
  }

  void retire(epoch_record& r, const retired& item) {
    bag_for_retiring(r).push_back(item);
    count_retired(r, 1);
  }
  // Retirements of many objects behind one fence: the bag that takes what this thread
  // retires now (after the fence that orders the caller's unlinks before the epoch read),
  // then count_retired(r, n) once n items are in it. REQUIRES: nothing else runs on r's
  // bags between the two.
  std::vector<retired>& bag_for_retiring(epoch_record& r);
  void count_retired(epoch_record& r, std::size_t n);
  // Advances the epoch if it can, and reclaims what this thread (and exited threads)
  // retired long enough ago. Returns the number of objects reclaimed.
  std::size_t collect(epoch_record& r);
  std::uint64_t pending() const noexcept { return pending_.load(std::memory_order_relaxed); }

  void* create_thread_state() override;
  void release_thread_state(void* state) noexcept override;

 private:
  struct orphan {
    std::uint64_t epoch;
    retired item;
  };

  bool try_advance() noexcept;
  std::size_t reclaim(std::vector<retired>& bag) noexcept;
  std::size_t reclaim_orphans();

  // Every pin reads global_: its line holds nothing the retiring threads write.
  alignas(64) std::atomic<std::uint64_t> global_{1};
  std::atomic<epoch_record*> records_{nullptr};
  alignas(64) std::atomic<std::uint64_t> pending_{0};
  std::mutex orphans_mutex_;
  std::vector<orphan> orphans_;
  std::atomic<bool> has_orphans_{false};
};

}  // namespace alloc::detail
