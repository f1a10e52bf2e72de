// pool_backend: the flush backend for pools mapped from files, whatever granularity the
// mapping offers. Use it as flit::policy<Placement, alloc::pool_backend>.
//
// When every open pool is cache-line granular (DAX, or PMEM2_FORCE_GRANULARITY), pwb is the
// build's hardware flush (flit::default_backend) and pfence its sfence. While a page-granular
// pool is open (a file system without DAX), pwb also notes the page, and pfence hands the
// noted pages to that pool's libpmem2 flush function (msync) and then its drain: the cost of
// persistence on such a mapping. Which path runs is a value fixed when a pool opens or
// closes, so the test is a predictable branch.
//
// Contract (pv::flush_backend):
//  (1) pwb(p) starts the write-back of p's cache line (and, in page mode, notes its page).
//  (2) pfence() returns when every line this thread pwb'd is durable: hardware fence, then
//      msync of the noted pages that lie in an open page-granular pool.
// Thread safety: pwb and pfence may run on any thread; the noted pages are per thread.
// REQUIRES: a pool is closed only when no thread is writing to it (its pages are synced by
// the close itself, so pages noted for it and not yet fenced are dropped).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flit/flit.hpp"
#include "pv_interface/interface.hpp"

namespace alloc {

namespace detail {

// Number of open page-granular pools.
inline std::atomic<int> page_pools_open{0};

struct page_log {
  static constexpr std::uint32_t capacity = 32;
  std::uintptr_t pages[capacity];
  std::uint32_t count;
};
inline thread_local constinit page_log noted_pages{};

void note_page(const void* p) noexcept;
// Syncs the pages this thread noted, then drains.
void sync_noted_pages() noexcept;

}  // namespace detail

struct pool_backend {
  static void pwb(const void* p) noexcept {
    flit::default_backend::pwb(p);
    if (detail::page_pools_open.load(std::memory_order_relaxed) != 0) [[unlikely]] {
      detail::note_page(p);
    }
  }
  static void pfence() noexcept {
    flit::default_backend::pfence();
    if (detail::noted_pages.count != 0) [[unlikely]] detail::sync_noted_pages();
  }
  static pv::no_guard observe(pv::access, const void*, std::size_t) noexcept { return {}; }
  static void operation_completed() noexcept {}
  static std::string_view name() noexcept {
    return detail::page_pools_open.load(std::memory_order_relaxed) != 0
               ? std::string_view("pmem2-msync")
               : flit::default_backend::name();
  }
  static bool supported() noexcept { return flit::default_backend::supported(); }
};

static_assert(pv::flush_backend<pool_backend>);

}  // namespace alloc
