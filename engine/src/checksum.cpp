#include "flintkv/internal/checksum.hpp"

#include <nmmintrin.h>

#include <cstring>

namespace flintkv::internal {

namespace detail {

std::uint32_t crc32c_table(std::uint32_t crc, const unsigned char* p, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) crc = (crc >> 8) ^ kCrc32cTable[(crc ^ p[i]) & 0xff];
  return crc;
}

__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(std::uint32_t crc,
                                                             const unsigned char* p,
                                                             std::size_t n) noexcept {
  std::uint64_t c = crc;
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    n -= 8;
  }
  // The last 0 to 7 bytes in at most three steps, not one per byte: a record's check
  // (packed.hpp) covers a few bytes past whole words, and each step waits on the last.
  auto c32 = static_cast<std::uint32_t>(c);
  if (n >= 4) {
    std::uint32_t w;
    std::memcpy(&w, p, 4);
    c32 = _mm_crc32_u32(c32, w);
    p += 4;
    n -= 4;
  }
  if (n >= 2) {
    std::uint16_t w;
    std::memcpy(&w, p, 2);
    c32 = _mm_crc32_u16(c32, w);
    p += 2;
    n -= 2;
  }
  if (n > 0) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

__attribute__((target("sse4.2"))) std::uint32_t crc32c_seeded_sse42(
    std::uint32_t crc, std::uint64_t w0, std::uint64_t w1, const unsigned char* p,
    std::size_t n) noexcept {
  const auto c = static_cast<std::uint32_t>(_mm_crc32_u64(_mm_crc32_u64(crc, w0), w1));
  return crc32c_sse42(c, p, n);
}

}  // namespace detail

const char* crc32c_implementation() noexcept {
  return detail::crc32c_instruction ? "sse4.2" : "table";
}

}  // namespace flintkv::internal
