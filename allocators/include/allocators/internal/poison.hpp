// Marks free DRAM blocks unaddressable for AddressSanitizer, so that a use after free of a
// block the allocators keep for reuse is reported. Without ASan these do nothing.
//
// Thread safety: as the memory they mark.
#pragma once

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace alloc::detail {

#if defined(__SANITIZE_ADDRESS__)
inline void poison(const void* p, std::size_t n) noexcept { ASAN_POISON_MEMORY_REGION(p, n); }
inline void unpoison(const void* p, std::size_t n) noexcept {
  ASAN_UNPOISON_MEMORY_REGION(p, n);
}
#else
inline void poison(const void*, std::size_t) noexcept {}
inline void unpoison(const void*, std::size_t) noexcept {}
#endif

}  // namespace alloc::detail
