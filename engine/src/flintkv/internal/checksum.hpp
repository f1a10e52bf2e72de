// CRC-32C (Castagnoli), the checksum of the engine's persistent data: the polynomial that
// iSCSI, ext4 and RocksDB use, with the SSE4.2 crc32 instruction where the CPU has it.
//
// Two entry points:
//  - crc32c(crc, data, n): bulk bytes (a node's key and value). Dispatches once, at the first
//    call, to the hardware instruction or to a table.
//  - crc32c_word(crc, w): one 64-bit word, little-endian: the instruction at run time where
//    the CPU has it (every word the engine writes is checked, so this is on the put path),
//    the table otherwise and at compile time, where the properties of the self-checking word
//    encodings (layout.hpp) are proved.
// Both compute the same function: crc32c_word(c, w) == crc32c(c, &w, 8).
//
// Thread safety: pure functions.
#pragma once

#include <nmmintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace flintkv::internal {

// The reflected CRC-32C polynomial.
inline constexpr std::uint32_t kCrc32cPolynomial = 0x82F63B78u;

inline constexpr std::array<std::uint32_t, 256> kCrc32cTable = [] {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? kCrc32cPolynomial : 0);
    t[i] = c;
  }
  return t;
}();

namespace detail {
// Whether this CPU has the SSE4.2 crc32 instruction. Until this is initialised (during static
// initialisation) it reads false and the table is used: the same results.
inline const bool crc32c_instruction = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2") != 0;
}();
__attribute__((target("sse4.2"))) inline std::uint32_t crc32c_word_instruction(
    std::uint32_t crc, std::uint64_t w) noexcept {
  return static_cast<std::uint32_t>(_mm_crc32_u64(crc, w));
}
}  // namespace detail

// The CRC register after `crc` took in the 8 bytes of `w`, least significant first. No
// initial or final inversion: callers choose their seeds (see crc32c below).
constexpr std::uint32_t crc32c_word(std::uint32_t crc, std::uint64_t w) {
  if (!std::is_constant_evaluated() && detail::crc32c_instruction) {
    return detail::crc32c_word_instruction(crc, w);
  }
  for (int i = 0; i < 8; ++i) {
    crc = (crc >> 8) ^ kCrc32cTable[(crc ^ static_cast<std::uint32_t>(w >> (8 * i))) & 0xff];
  }
  return crc;
}

// The CRC register after `crc` took in n bytes at `data` (no inversion, as crc32c_word).
std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t n) noexcept;

// Which implementation crc32c runs on this CPU: "sse4.2" or "table".
const char* crc32c_implementation() noexcept;

}  // namespace flintkv::internal
