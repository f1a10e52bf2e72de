// The machinery behind node_allocator: per-thread free lists per size class, a shared stack
// of whole lists per class, and 2 MiB arenas that new blocks are carved from (each aligned
// to its size and advised for a transparent huge page).
//
// The kernel maps and zeroes an arena's huge page when it is first touched, which takes
// milliseconds on a virtual machine (1 to 5 ms on the one of docs/engine-performance.md),
// and the thread that carves the first blocks of a new arena would wait for it. So once
// an allocator has taken kHelperAfter arenas, a helper thread of its own keeps one arena
// mapped and touched ahead, and carving takes that arena when it needs a new one (mapping
// one itself only if the helper has none ready).
//
// Thread safety: the shared stacks and the arenas are guarded by one mutex, taken only when
// a thread's list runs empty or full. The helper touches only the arena it makes, and hands
// it over through an atomic.
// Invariants:
//  (1) A free block is in exactly one list (a thread's or a shared one); its first 8 bytes
//      link to the next block of the list. Under ASan a free block is poisoned.
//  (2) Arenas are returned to the system only when the allocator is destroyed.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "allocators/helper_thread.hpp"
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

  // For tests: arenas carving took from the helper, and mapped itself.
  std::size_t TEST_arenas_from_helper() const;
  std::size_t TEST_arenas_mapped_on_demand() const;
  // For tests: waits until the helper has answered every request for an arena.
  void TEST_await_helper() const noexcept;

  void* create_thread_state() override;
  void release_thread_state(void* state) noexcept override;

 private:
  struct list {
    void* head;
    std::uint32_t count;
  };
  // Arenas taken before the helper starts: an allocator that stays small starts no thread.
  static constexpr std::size_t kHelperAfter = 2;
  bool carve(node_cache::bin& bin, unsigned c) noexcept;  // REQUIRES: mutex_
  // A new arena: the helper's, else one mapped now; nullptr without memory. Asks the
  // helper for the next. REQUIRES: mutex_
  void* next_arena() noexcept;
  // The helper's job: an arena mapped and touched in ready_, unless one is there.
  void make_ready_arena() noexcept;

  mutable std::mutex mutex_;
  std::array<std::vector<list>, dram_classes::count> lists_;
  std::vector<void*> arenas_;
  std::vector<node_cache*> caches_;
  std::byte* bump_ = nullptr;
  std::byte* bump_end_ = nullptr;

  std::atomic<void*> ready_{nullptr};  // the helper's arena, taken by carving
  std::size_t from_helper_ = 0, on_demand_ = 0;  // under mutex_
  helper_thread helper_{[this] { make_ready_arena(); }};
};

}  // namespace alloc::detail
