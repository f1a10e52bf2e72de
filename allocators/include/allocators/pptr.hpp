// pptr<T>: a persistent pointer, the 64-bit offset of an object from the base of its pool.
//
// The mapping address of a pool changes from run to run, so pointers stored in the pool are
// offsets; 0 is null (offset 0 is the pool header, never an object). A pptr is trivially
// copyable and 8 bytes, so it fits in persist<pptr<T>>; every offset the allocator hands out
// is a multiple of 16, so bit 0 is spare and pptr also works under link_and_persist.
//
// Thread safety: a plain value.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flit/placement.hpp"

namespace alloc {

template <class T = void>
class pptr {
 public:
  using element_type = T;

  constexpr pptr() noexcept = default;
  constexpr explicit pptr(std::uint64_t offset) noexcept : offset_(offset) {}
  // Between pointer types, explicitly, as a static_cast would.
  template <class U>
    requires(!std::is_same_v<U, T>)
  constexpr explicit pptr(pptr<U> other) noexcept : offset_(other.offset()) {}

  constexpr std::uint64_t offset() const noexcept { return offset_; }
  constexpr bool is_null() const noexcept { return offset_ == 0; }
  constexpr explicit operator bool() const noexcept { return offset_ != 0; }

  // The object in the pool mapped at `base` (nullptr for null).
  T* get(std::byte* base) const noexcept {
    return offset_ == 0 ? nullptr : reinterpret_cast<T*>(base + offset_);
  }

  friend constexpr bool operator==(pptr, pptr) noexcept = default;
  friend constexpr auto operator<=>(pptr, pptr) noexcept = default;

 private:
  std::uint64_t offset_ = 0;
};

static_assert(sizeof(pptr<>) == 8 && std::is_trivially_copyable_v<pptr<>>);

}  // namespace alloc

// Offsets of objects aligned to 2 bytes or more never have bit 0 set.
template <class T>
struct flit::spare_bit<alloc::pptr<T>> {
  static constexpr std::uint64_t mask = 1;
};
