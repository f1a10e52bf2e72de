// Keys as the index orders and hashes them: bytewise, a proper prefix before every longer key.
// Shared by the skiplist and point table (index.hpp), the B+tree (btree.hpp) and packed nodes.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "flintkv/internal/checksum.hpp"

namespace flintkv::internal {

// Three-way bytewise comparison, eight bytes at a time (searches compare a key at every node
// they pass, and the library memcmp call costs more than the comparison of a short key).
inline int compare_keys(std::string_view a, std::string_view b) {
  const std::size_t n = a.size() < b.size() ? a.size() : b.size();
  const char* x = a.data();
  const char* y = b.data();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t u, v;
    std::memcpy(&u, x + i, 8);
    std::memcpy(&v, y + i, 8);
    if (u != v) {
      if constexpr (std::endian::native == std::endian::little) {
        u = __builtin_bswap64(u);
        v = __builtin_bswap64(v);
      }
      return u < v ? -1 : 1;
    }
  }
  for (; i < n; ++i) {
    const auto c = static_cast<unsigned char>(x[i]);
    const auto d = static_cast<unsigned char>(y[i]);
    if (c != d) return c < d ? -1 : 1;
  }
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

inline bool same_key(std::string_view a, std::string_view b) {
  return a.size() == b.size() && compare_keys(a, b) == 0;
}

// The hash of a key: its CRC-32C (checksum.hpp), seeded with its size. The point table
// (index.hpp) picks a key's slot with it, and a packed node (packed.hpp) keeps a byte of it
// per key. Whole words go through the inline crc32c_word (every put and Get hashes its key,
// and a 16-byte key is then two instructions); the rest of the bytes through crc32c.
inline std::uint32_t key_hash(std::string_view key) {
  std::uint32_t crc = ~static_cast<std::uint32_t>(key.size());
  std::size_t i = 0;
  for (; i + 8 <= key.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, key.data() + i, 8);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
    crc = crc32c_word(crc, w);
  }
  return i == key.size() ? crc : crc32c(crc, key.data() + i, key.size() - i);
}

}  // namespace flintkv::internal
