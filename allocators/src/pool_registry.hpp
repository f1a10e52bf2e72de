// The page-granular pools pool_backend syncs: registered by pool when it maps one.
#pragma once

#include <libpmem2.h>

#include <cstddef>

#include "allocators/internal/pool_format.hpp"

namespace alloc::detail {

inline constexpr std::uintptr_t format_page_size = format::page_size;

void register_page_pool(const void* base, std::size_t size, pmem2_flush_fn flush,
                        pmem2_drain_fn drain);
void unregister_page_pool(const void* base);

}  // namespace alloc::detail
