// persistent_allocator<Policy>: blocks of a pool's heap, from many threads, with no durable
// write on the allocation path.
//
// Blocks up to 32 KiB come from size classes (16, 32, 48, 64, then multiples of 64 up to
// 512, then four classes per doubling), carved from 64 KiB chunks; larger blocks take whole
// contiguous chunks. Each thread keeps a cache of free blocks per class, so allocate() and
// free() usually touch only that cache.
//
// Recovery contract (the only way to start an allocator, after create as after a crash):
//   alloc::persistent_allocator<P> heap(pool);
//   for (every block the user can reach from its root) heap.mark_live(block, bytes);  // O(1)
//   heap.finish_recovery();           // rebuilds every free list; unreached blocks are free
//   ... heap.allocate(n) / heap.free(b) ...
// What the user must do:
//  (U1) Link a block into its persistent structure only after allocate() returned it, and
//       make the block's contents durable before (or with) the link, as usual.
//  (U2) Call free() only once the block is unreachable in the durable state (its unlink is
//       persisted) and no reader can still hold it (see epoch.hpp).
//  (U3) After open, mark every reachable block live (the offset allocate() returned, and the
//       size it was asked for, or any size that allocate() serves from the same class or
//       the same number of chunks), then call finish_recovery() once, before any allocate()
//       or free(). Marking a block twice is harmless. A fresh pool needs no marks.
// What the allocator guarantees:
//  (A1) A block reached by the walk is never handed out again while it is live.
//  (A2) A block allocated but not linked when the pool was closed or crashed is free after
//       recovery: nothing leaks.
//  (A3) mark_live() and finish_recovery() reject, with a corruption error naming the offset,
//       an offset that is not the start of a block of the chunk it falls in, a block whose
//       chunk tag does not describe a block of its size (a damaged tag), and blocks that
//       overlap. Neither writes to the pool.
//  (A4) No space: allocate() returns no_space and changes nothing; the pool stays usable.
//       Blocks held in other threads' caches are not counted as free.
//
// Memory: the allocator asks its pool to back the chunks it hands out (and, at
// finish_recovery, those in use) with huge pages (pool::huge_page_hint), so that
// nodes scattered over them share TLB entries.
//
// Thread safety: allocate, free, usable_size and stats may be called from any thread.
// mark_live may be called from several threads, but not with finish_recovery or
// allocations. The pool must outlive the allocator.
// Persistence: the only persistent metadata is the pool's chunk table, written (through
// Policy::write_range and a fence) when a chunk is given to a class or a large block and its
// tag changes; see heap_core.hpp for the invariants.
#pragma once

#include <cstddef>
#include <memory>

#include "allocators/error.hpp"
#include "allocators/internal/heap_core.hpp"
#include "allocators/pool.hpp"
#include "allocators/pptr.hpp"

namespace alloc {

template <class Policy>
class persistent_allocator {
 public:
  // Blocks up to this size come from size classes.
  static constexpr std::size_t max_small_size = detail::pmem_classes::max;

  // An allocator in recovery: mark live blocks, then finish_recovery().
  explicit persistent_allocator(const pool& p)
      : core_(std::make_shared<detail::heap_core>(p, persist_ops_for<Policy>)) {}

  // Records that `block`, allocated for `bytes` bytes, is reachable. O(1), no durable write.
  status mark_live(pptr<> block, std::size_t bytes) {
    return core_->mark_live(block.offset(), bytes);
  }
  // Builds the free space from the marks. REQUIRES: called once, after every mark_live.
  status finish_recovery() { return core_->finish_recovery(); }
  // True if no chunk was ever given out since the pool was created (its chunk table is as
  // creation left it): a user whose root says "empty" can check that the heap agrees.
  bool untouched() const noexcept { return core_->untouched(); }

  // A block of at least `bytes` bytes (uninitialised), 16-byte aligned, 64-byte aligned if
  // bytes > 48. Errors: no_space; invalid_argument before finish_recovery().
  result<pptr<>> allocate(std::size_t bytes) {
    if (bytes > max_small_size) [[unlikely]] return core_->allocate_large(bytes);
    const unsigned c = detail::pmem_classes::of(bytes);
    auto* cache = detail::thread_state<detail::heap_cache>(*core_);
    auto& bin = cache->bins[c];
    if (bin.count == 0) [[unlikely]] {
      if (status s = core_->refill(*cache, c); !s) return std::move(s).error();
    }
    cache->add_in_use(detail::pmem_classes::sizes[c]);
    const std::uint64_t block = bin.slots[--bin.count];
    if (bin.count != 0) {
      // The block the next allocation of this class returns: its caller writes it, so its
      // first two lines are requested for writing now, while this one is being filled.
      const std::byte* next = core_->base() + bin.slots[bin.count - 1];
      __builtin_prefetch(next, 1);
      if (detail::pmem_classes::sizes[c] > 64) __builtin_prefetch(next + 64, 1);
    }
    return pptr<>(block);
  }

  // REQUIRES: block came from allocate() (or was marked live) and is not free; see (U2).
  void free(pptr<> block) noexcept {
    const std::uint64_t offset = block.offset();
    const std::uint8_t c = core_->chunk_class(offset);
    if (c >= detail::pmem_classes::count) [[unlikely]] {
      core_->free_large(offset);
      return;
    }
    auto* cache = detail::thread_state<detail::heap_cache>(*core_);
    auto& bin = cache->bins[c];
    if (bin.count == bin.capacity) [[unlikely]] core_->drain(*cache, c, bin.capacity / 2);
    bin.slots[bin.count++] = offset;
    cache->add_in_use(-static_cast<std::int64_t>(detail::pmem_classes::sizes[c]));
  }

  // The bytes the block can hold (its class size, or its whole chunks). REQUIRES:
  // finish_recovery() has run (before it, every chunk reads as free and this returns 0).
  std::size_t usable_size(pptr<> block) const noexcept {
    return core_->usable_size(block.offset());
  }

  heap_stats stats() const { return core_->stats(); }

 private:
  std::shared_ptr<detail::heap_core> core_;
};

}  // namespace alloc
