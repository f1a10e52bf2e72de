// The machinery behind node_allocator: per-thread free lists per size class, a shared stack
// of whole lists per class, and 2 MiB arenas that new blocks are carved from (each aligned
// to its size and advised for a transparent huge page).
//
// Thread safety: the shared stacks and the arenas are guarded by one mutex, taken only when
// a thread's list runs empty or full.
// Invariants:
//  (1) A free block is in exactly one list (a thread's or a shared one); its first 8 bytes
//      link to the next block of the list. Under ASan a free block is poisoned.
//  (2) Arenas are returned to the system only when the allocator is destroyed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "allocators/internal/size_classes.hpp"
#include "allocators/internal/thread_state.hpp"

namespace alloc::detail {

using dram_classes = size_classes<16, 512, 4096>;

struct node_cache {
  struct bin {
    void* head = nullptr;
    std::uint32_t count = 0;
    std::uint32_t capacity = 0;
  };
  std::array<bin, dram_classes::count> bins;
};

class node_core final : public per_thread_owner {
 public:
  static constexpr std::size_t arena_size = std::size_t{2} << 20;

  ~node_core() override;

  // Gives an empty bin a list of blocks; false if the system is out of memory.
  bool refill(node_cache::bin& bin, unsigned c) noexcept;
  // Adds lists to the bin until it holds at least min(n, capacity / 2) blocks, its count
  // staying within its capacity; false if the system is out of memory.
  bool top_up(node_cache::bin& bin, unsigned c, std::uint32_t n) noexcept;
  // Takes the bin's whole list.
  void take_list(node_cache::bin& bin, unsigned c) noexcept;
  std::size_t reserved_bytes() const;

  void* create_thread_state() override;
  void release_thread_state(void* state) noexcept override;

 private:
  struct list {
    void* head;
    std::uint32_t count;
  };
  bool carve(node_cache::bin& bin, unsigned c) noexcept;  // REQUIRES: mutex_

  mutable std::mutex mutex_;
  std::array<std::vector<list>, dram_classes::count> lists_;
  std::vector<void*> arenas_;
  std::vector<node_cache*> caches_;
  std::byte* bump_ = nullptr;
  std::byte* bump_end_ = nullptr;
};

}  // namespace alloc::detail
