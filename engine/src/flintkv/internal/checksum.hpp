// CRC-32C (Castagnoli), the checksum of the engine's persistent data: the polynomial that
// iSCSI, ext4 and RocksDB use, with the SSE4.2 crc32 instruction where the CPU has it.
//
// Three entry points:
//  - crc32c(crc, data, n): bulk bytes (a node's key and value): the hardware instruction
//    where the CPU has it, a table otherwise.
//  - crc32c_seeded(crc, w0, w1, data, n): the same after two words, in one call: a packed
//    record's or header's check (packed.hpp), whose seed is a constant, the node's offset
//    and the record's index or the node's shape. Two word calls and a bulk one cost a
//    Seek + 10 Next about 5% of its instructions in calls and dispatch alone.
//  - crc32c_word(crc, w): one 64-bit word, little-endian: the instruction at run time where
//    the CPU has it (every word the engine writes is checked, so this is on the put path),
//    the table otherwise and at compile time, where the properties of the self-checking word
//    encodings (layout.hpp) are proved.
// They compute the same function: crc32c_word(c, w) == crc32c(c, &w, 8), and
// crc32c_seeded(c, w0, w1, d, n) == crc32c(crc32c_word(crc32c_word(c, w0), w1), d, n).
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
// crc32c's two implementations (checksum.cpp), and crc32c_seeded's with the instruction.
std::uint32_t crc32c_table(std::uint32_t crc, const unsigned char* p, std::size_t n) noexcept;
std::uint32_t crc32c_sse42(std::uint32_t crc, const unsigned char* p, std::size_t n) noexcept;
std::uint32_t crc32c_seeded_sse42(std::uint32_t crc, std::uint64_t w0, std::uint64_t w1,
                                  const unsigned char* p, std::size_t n) noexcept;
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
inline std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t n) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  return detail::crc32c_instruction ? detail::crc32c_sse42(crc, p, n)
                                    : detail::crc32c_table(crc, p, n);
}

// The CRC register after `crc` took in w0, w1 (as crc32c_word) and then n bytes at `data`.
inline std::uint32_t crc32c_seeded(std::uint32_t crc, std::uint64_t w0, std::uint64_t w1,
                                   const void* data, std::size_t n) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  if (detail::crc32c_instruction) return detail::crc32c_seeded_sse42(crc, w0, w1, p, n);
  return detail::crc32c_table(crc32c_word(crc32c_word(crc, w0), w1), p, n);
}

// Which implementation crc32c runs on this CPU: "sse4.2" or "table".
const char* crc32c_implementation() noexcept;

}  // namespace flintkv::internal
