#include "allocators/pool_backend.hpp"

#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "pool_registry.hpp"

namespace alloc::detail {

namespace {

struct page_pool {
  std::uintptr_t begin;
  std::uintptr_t end;
  pmem2_flush_fn flush;
  pmem2_drain_fn drain;
};

struct registry {
  std::shared_mutex mutex;
  std::vector<page_pool> pools;
};

registry& the_registry() {
  static registry* r = new registry;  // never destroyed: threads may fence after main
  return *r;
}

constexpr std::uintptr_t page_mask = ~std::uintptr_t{format_page_size - 1};

}  // namespace

void register_page_pool(const void* base, std::size_t size, pmem2_flush_fn flush,
                        pmem2_drain_fn drain) {
  registry& r = the_registry();
  std::unique_lock lock(r.mutex);
  auto begin = reinterpret_cast<std::uintptr_t>(base);
  r.pools.push_back({begin, begin + size, flush, drain});
  page_pools_open.fetch_add(1, std::memory_order_relaxed);
}

void unregister_page_pool(const void* base) {
  registry& r = the_registry();
  std::unique_lock lock(r.mutex);
  auto begin = reinterpret_cast<std::uintptr_t>(base);
  auto removed = std::erase_if(r.pools, [&](const page_pool& p) { return p.begin == begin; });
  page_pools_open.fetch_sub(static_cast<int>(removed), std::memory_order_relaxed);
}

void note_page(const void* p) noexcept {
  page_log& log = noted_pages;
  const std::uintptr_t page = reinterpret_cast<std::uintptr_t>(p) & page_mask;
  for (std::uint32_t i = log.count; i > 0; --i) {
    if (log.pages[i - 1] == page) return;
  }
  if (log.count == page_log::capacity) sync_noted_pages();
  log.pages[log.count++] = page;
}

void sync_noted_pages() noexcept {
  page_log& log = noted_pages;
  std::sort(log.pages, log.pages + log.count);
  registry& r = the_registry();
  std::shared_lock lock(r.mutex);
  const page_pool* drained[page_log::capacity];
  std::size_t drains = 0;
  std::uint32_t i = 0;
  while (i < log.count) {
    const std::uintptr_t first = log.pages[i];
    auto pool = std::find_if(r.pools.begin(), r.pools.end(), [&](const page_pool& p) {
      return first >= p.begin && first < p.end;
    });
    // Contiguous pages of the same pool go to one msync.
    std::uintptr_t end = first + format_page_size;
    ++i;
    while (i < log.count && log.pages[i] == end && pool != r.pools.end() && end < pool->end) {
      end += format_page_size;
      ++i;
    }
    // A page outside every page-granular pool needed only the hardware write-back.
    if (pool == r.pools.end()) continue;
    pool->flush(reinterpret_cast<const void*>(first), end - first);
    if (std::find(drained, drained + drains, &*pool) == drained + drains) {
      drained[drains++] = &*pool;
    }
  }
  for (std::size_t d = 0; d < drains; ++d) drained[d]->drain();
  log.count = 0;
}

}  // namespace alloc::detail
