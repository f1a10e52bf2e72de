// The machinery behind persistent_allocator<Policy>: DRAM bookkeeping of the pool's chunks,
// per-class lists of chunks with free blocks, per-thread caches, the large-block path and
// recovery. Nothing here depends on the Policy except the two durable writes it is given
// (persist_ops): chunk tags, when a chunk changes hands.
//
// Thread safety: allocate/free paths may run on any thread. A size class's chunk lists are
// guarded by that class's mutex; the free-chunk map by chunk_mutex_; lock order: class
// mutex, then chunk_mutex_. mark_live() may run on several threads at once, but not with
// finish_recovery() or any allocation.
// Invariants:
//  (1) A chunk is free (in free_chunks_) or holds blocks of one class, or belongs to one
//      large block; chunk_class_ says which, and changes only while no block of the chunk is
//      held by a user or a cache.
//  (2) Before any block of a chunk is handed out, the chunk's tag in the pool's chunk table
//      describes the chunk as it is now and is durable.
//  (3) A block is in exactly one place: held by the user, in one thread cache, or a set bit
//      of its chunk's free map.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "allocators/error.hpp"
#include "allocators/internal/pool_format.hpp"
#include "allocators/internal/size_classes.hpp"
#include "allocators/internal/thread_state.hpp"
#include "allocators/pool.hpp"
#include "allocators/pptr.hpp"

namespace alloc {

// What persistent_allocator::stats() reports.
struct heap_stats {
  std::uint64_t capacity_bytes = 0;  // chunks * chunk size
  std::uint64_t in_use_bytes = 0;    // usable sizes of blocks held by users (not caches)
  std::uint64_t chunks = 0;
  std::uint64_t free_chunks = 0;
};

namespace detail {

using pmem_classes = size_classes<64, 512, 32768>;

// A thread's cache: per class, a stack of free block offsets.
struct heap_cache {
  struct bin {
    std::uint32_t count = 0;
    std::uint32_t capacity = 0;
    std::uint64_t* slots = nullptr;
  };
  std::array<bin, pmem_classes::count> bins;
  // Bytes of blocks this thread handed to users minus those users gave back through it.
  std::atomic<std::int64_t> in_use{0};
  std::unique_ptr<std::uint64_t[]> storage;

  void add_in_use(std::int64_t d) noexcept {
    in_use.store(in_use.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
  }
};

// chunk_class_ values besides small classes (0 .. count - 1).
inline constexpr std::uint8_t chunk_free = 0xff;
inline constexpr std::uint8_t chunk_large_head = 0xfe;
inline constexpr std::uint8_t chunk_large_tail = 0xfd;
static_assert(pmem_classes::count < chunk_large_tail);

class heap_core final : public per_thread_owner {
 public:
  heap_core(const pool& p, const persist_ops& ops);
  ~heap_core() override;

  // ---- recovery ----
  status mark_live(std::uint64_t offset, std::size_t bytes);
  status finish_recovery();
  bool untouched() const noexcept;

  // ---- slow paths of persistent_allocator ----
  // Fills the cache's bin of class c with at least one block.
  status refill(heap_cache& cache, unsigned c);
  // Returns the oldest n blocks of the cache's bin of class c.
  void drain(heap_cache& cache, unsigned c, std::uint32_t n) noexcept;
  result<pptr<>> allocate_large(std::size_t bytes);
  void free_large(std::uint64_t offset) noexcept;
  std::size_t usable_size(std::uint64_t offset) const noexcept;
  heap_stats stats() const;

  // ---- the fast path reads these ----
  std::byte* base() const noexcept { return base_; }
  std::uint8_t chunk_class(std::uint64_t offset) const noexcept {
    return chunk_class_[(offset - heap_offset_) >> format::chunk_shift].load(
        std::memory_order_relaxed);
  }

  void* create_thread_state() override;
  void release_thread_state(void* state) noexcept override;

 private:
  struct chunk_state {
    std::vector<std::uint64_t> bits;  // small: a bit per block; live marks during recovery,
                                      // free blocks afterwards
    std::uint32_t free_count = 0;
    std::uint32_t scan = 0;           // no set bit below this word
    std::uint32_t large_chunks = 0;   // large head: its extent
    std::int64_t prev = -1;           // in its class's list of chunks with free blocks
    std::int64_t next = -1;
    std::atomic<bool> live_large{false};  // recovery: a walk reached this large head
  };
  struct class_state {
    std::mutex mutex;
    std::int64_t head = -1;  // chunks of this class with free blocks
  };

  std::uint64_t chunk_base(std::uint64_t index) const noexcept {
    return heap_offset_ + (index << format::chunk_shift);
  }
  format::chunk_tag stored_tag(std::uint64_t index) const noexcept;
  void write_tags(std::uint64_t first, const format::chunk_tag* tags, std::uint64_t n);
  void fill_free_map(chunk_state& ch, unsigned c);
  void link(unsigned c, std::int64_t index) noexcept;    // REQUIRES: class mutex
  void unlink(unsigned c, std::int64_t index) noexcept;  // REQUIRES: class mutex
  // A free chunk, or -1. REQUIRES: chunk_mutex_.
  std::int64_t find_free_run(std::uint64_t n) const noexcept;
  void set_free(std::uint64_t first, std::uint64_t n, bool free) noexcept;
  result<std::int64_t> take_chunk(unsigned c);  // REQUIRES: class mutex of c
  void release_chunk(std::uint64_t index) noexcept;
  error exhausted(std::size_t bytes) const;

  pool::huge_page_hint huge_pages_;  // asked to back the chunks in use with huge pages
  std::byte* base_;
  std::uint64_t heap_offset_;
  std::uint64_t chunk_count_;
  persist_ops ops_;
  std::string pool_name_;
  bool ready_ = false;  // finish_recovery() done

  std::unique_ptr<std::atomic<std::uint8_t>[]> chunk_class_;
  std::unique_ptr<chunk_state[]> chunks_;
  std::array<class_state, pmem_classes::count> classes_;

  mutable std::mutex chunk_mutex_;
  std::vector<std::uint64_t> free_chunks_;  // a bit per chunk, 1 = free
  std::uint64_t free_chunk_count_ = 0;
  std::uint64_t first_free_hint_ = 0;

  std::atomic<std::int64_t> large_in_use_{0};
  mutable std::mutex caches_mutex_;
  std::vector<heap_cache*> caches_;
  std::int64_t retired_in_use_ = 0;  // of caches whose thread exited, and of recovery
};

// Blocks per chunk for class c.
inline constexpr std::uint32_t blocks_per_chunk(unsigned c) noexcept {
  return static_cast<std::uint32_t>(format::chunk_size / pmem_classes::sizes[c]);
}

}  // namespace detail
}  // namespace alloc
