// Size classes shared by the persistent and the DRAM allocator: multiples of 16 up to 64,
// multiples of Align up to LinearLimit, then four classes per doubling up to Max (each a
// multiple of Align). A class's blocks are aligned to 16, and to Align once they are at
// least Align bytes (chunks and arenas start on page boundaries).
//
// Thread safety: constants.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace alloc::detail {

template <std::uint32_t Align, std::uint32_t LinearLimit, std::uint32_t Max>
struct size_classes {
  static_assert(std::has_single_bit(Align) && Align >= 16 && Align <= 64);
  static_assert(std::has_single_bit(LinearLimit) && LinearLimit >= 64 && LinearLimit >= Align);
  static_assert(std::has_single_bit(Max) && Max >= LinearLimit);

  static constexpr unsigned linear_count = (64 / 16) + (LinearLimit - 64) / Align;
  static constexpr unsigned geometric_count =
      4 * static_cast<unsigned>(std::countr_zero(Max) - std::countr_zero(LinearLimit));
  static constexpr unsigned count = linear_count + geometric_count;
  static constexpr std::uint32_t max = Max;

  static constexpr std::array<std::uint32_t, count> sizes = [] {
    std::array<std::uint32_t, count> s{};
    unsigned i = 0;
    for (std::uint32_t v = 16; v <= 64; v += 16) s[i++] = v;
    for (std::uint32_t v = 64 + Align; v <= LinearLimit; v += Align) s[i++] = v;
    for (std::uint32_t base = LinearLimit; base < Max; base *= 2) {
      for (std::uint32_t q = 1; q <= 4; ++q) s[i++] = base + q * (base / 4);
    }
    return s;
  }();

  // Class of each multiple of 16 up to LinearLimit, indexed by (bytes + 15) / 16.
  static constexpr std::array<std::uint8_t, LinearLimit / 16 + 1> linear_lookup = [] {
    std::array<std::uint8_t, LinearLimit / 16 + 1> t{};
    unsigned c = 0;
    for (unsigned k = 0; k < t.size(); ++k) {
      while (sizes[c] < k * 16) ++c;
      t[k] = static_cast<std::uint8_t>(c);
    }
    return t;
  }();

  // The smallest class holding `bytes`. REQUIRES: bytes <= Max.
  static constexpr unsigned of(std::size_t bytes) noexcept {
    if (bytes <= LinearLimit) return linear_lookup[(bytes + 15) / 16];
    const unsigned e = static_cast<unsigned>(std::bit_width(bytes - 1)) - 1;  // 2^e < bytes
    const std::size_t quarter = std::size_t{1} << (e - 2);
    const std::size_t q = (bytes - (std::size_t{1} << e) + quarter - 1) / quarter;  // 1..4
    return linear_count + 4 * (e - static_cast<unsigned>(std::countr_zero(LinearLimit))) +
           static_cast<unsigned>(q) - 1;
  }

  // The class whose size is exactly `size`, or count if there is none.
  static constexpr unsigned exact(std::uint64_t size) noexcept {
    if (size == 0 || size > Max) return count;
    const unsigned c = of(size);
    return sizes[c] == size ? c : count;
  }
};

}  // namespace alloc::detail
