#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>

#include "allocators/internal/node_core.hpp"
#include "allocators/internal/poison.hpp"

namespace alloc::detail {

namespace {

// An arena of node_core::arena_size bytes aligned to its size, so that the kernel can back
// it with one transparent huge page: index searches touch nodes all over the arenas, and a
// 4 KiB page per node visit costs a TLB miss each. nullptr if the system has no memory.
void* map_arena() noexcept {
  constexpr std::size_t size = node_core::arena_size;
  void* raw = ::mmap(nullptr, 2 * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto begin = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (begin + size - 1) & ~(size - 1);
  if (aligned > begin) ::munmap(raw, aligned - begin);
  if (const std::uintptr_t tail = begin + 2 * size - (aligned + size); tail > 0) {
    ::munmap(reinterpret_cast<void*>(aligned + size), tail);
  }
  void* arena = reinterpret_cast<void*>(aligned);
  ::madvise(arena, size, MADV_HUGEPAGE);  // a hint: without huge pages the arena still works
  unpoison(arena, size);
  return arena;
}

// AddressSanitizer keeps the marks of poisoned blocks after munmap: cleared first, so that
// whatever is mapped at these addresses next (another arena, a pool) starts addressable.
void unmap_arena(void* arena) noexcept {
  unpoison(arena, node_core::arena_size);
  ::munmap(arena, node_core::arena_size);
}

// Blocks per thread list: about 16 KiB per class, between 8 and 128 blocks.
std::uint32_t list_capacity(unsigned c) {
  return std::clamp<std::uint32_t>(16384 / dram_classes::sizes[c], 8, 128);
}

}  // namespace

node_core::~node_core() {
  helper_.stop();  // before the arenas go: its job may be mapping one
  if (void* arena = ready_.load(std::memory_order_relaxed); arena != nullptr) unmap_arena(arena);
  for (node_cache* cache : caches_) delete cache;
  for (void* arena : arenas_) unmap_arena(arena);
}

void* node_core::next_arena() noexcept {
  void* arena = ready_.exchange(nullptr, std::memory_order_acquire);
  if (arena != nullptr) {
    ++from_helper_;
  } else {
    arena = map_arena();
    if (arena == nullptr) return nullptr;
    ++on_demand_;
  }
  if (arenas_.size() + 1 >= kHelperAfter) (void)helper_.ask();  // no helper: on demand
  return arena;
}

void node_core::make_ready_arena() noexcept {
  if (ready_.load(std::memory_order_acquire) != nullptr) return;
  void* arena = map_arena();
  if (arena == nullptr) return;
  touch_pages(arena, arena_size);
  void* none = nullptr;
  if (!ready_.compare_exchange_strong(none, arena, std::memory_order_release)) {
    unmap_arena(arena);
  }
}

std::size_t node_core::TEST_arenas_from_helper() const {
  std::lock_guard lock(mutex_);
  return from_helper_;
}
std::size_t node_core::TEST_arenas_mapped_on_demand() const {
  std::lock_guard lock(mutex_);
  return on_demand_;
}
void node_core::TEST_await_helper() const noexcept { helper_.await(); }

bool node_core::refill(node_cache::bin& bin, unsigned c) noexcept {
  std::lock_guard lock(mutex_);
  if (!lists_[c].empty()) {
    const list l = lists_[c].back();
    lists_[c].pop_back();
    bin.head = l.head;
    bin.count = l.count;
    return true;
  }
  return carve(bin, c);
}

bool node_core::top_up(node_cache::bin& bin, unsigned c, std::uint32_t n) noexcept {
  const std::size_t size = dram_classes::sizes[c];
  n = std::min(n, bin.capacity / 2);
  std::lock_guard lock(mutex_);
  while (bin.count < n) {
    // Below half the capacity: a shared list that fits, or a carved half, keeps the count
    // within the capacity (deallocate hands the list over when it reaches it).
    node_cache::bin more{nullptr, 0, bin.capacity};
    if (!lists_[c].empty() && lists_[c].back().count + bin.count <= bin.capacity) {
      more.head = lists_[c].back().head;
      more.count = lists_[c].back().count;
      lists_[c].pop_back();
    } else if (!carve(more, c)) {
      return false;
    }
    // The bin's few blocks go in front of the new list: its last one links to it.
    if (bin.head == nullptr) {
      bin.head = more.head;
    } else {
      void* last = bin.head;
      while (true) {
        unpoison(last, size);
        void* next = *static_cast<void**>(last);
        if (next == nullptr) break;
        poison(last, size);
        last = next;
      }
      *static_cast<void**>(last) = more.head;
      poison(last, size);
    }
    bin.count += more.count;
  }
  return true;
}

bool node_core::carve(node_cache::bin& bin, unsigned c) noexcept {
  const std::size_t size = dram_classes::sizes[c];
  const std::size_t align = std::min<std::size_t>(std::size_t{1} << std::countr_zero(size), 64);
  const std::uint32_t n = std::max<std::uint32_t>(1, bin.capacity / 2);
  auto aligned = [&] {
    return reinterpret_cast<std::byte*>(
        (reinterpret_cast<std::uintptr_t>(bump_) + align - 1) & ~(align - 1));
  };
  if (bump_ == nullptr || aligned() + n * size > bump_end_) {
    void* arena = next_arena();
    if (arena == nullptr) return false;
    try {
      arenas_.push_back(arena);
    } catch (...) {
      unmap_arena(arena);
      return false;
    }
    bump_ = static_cast<std::byte*>(arena);
    bump_end_ = bump_ + arena_size;
  }
  std::byte* first = aligned();
  for (std::uint32_t i = 0; i < n; ++i) {
    std::byte* block = first + i * size;
    *reinterpret_cast<void**>(block) = i + 1 < n ? block + size : nullptr;
    poison(block, size);
  }
  bump_ = first + n * size;
  bin.head = first;
  bin.count = n;
  return true;
}

void node_core::take_list(node_cache::bin& bin, unsigned c) noexcept {
  if (bin.head != nullptr) {
    std::lock_guard lock(mutex_);
    try {
      lists_[c].push_back({bin.head, bin.count});
    } catch (...) {
      return;  // out of memory: the thread keeps its list
    }
  }
  bin.head = nullptr;
  bin.count = 0;
}

std::size_t node_core::reserved_bytes() const {
  std::lock_guard lock(mutex_);
  return arenas_.size() * arena_size;
}

void* node_core::create_thread_state() {
  auto cache = std::make_unique<node_cache>();
  for (unsigned c = 0; c < dram_classes::count; ++c) cache->bins[c].capacity = list_capacity(c);
  std::lock_guard lock(mutex_);
  caches_.push_back(cache.get());
  return cache.release();
}

void node_core::release_thread_state(void* state) noexcept {
  auto* cache = static_cast<node_cache*>(state);
  for (unsigned c = 0; c < dram_classes::count; ++c) take_list(cache->bins[c], c);
  std::lock_guard lock(mutex_);
  std::erase(caches_, cache);
  delete cache;
}

}  // namespace alloc::detail
