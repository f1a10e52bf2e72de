// The byte layout of a pool, as stored (docs/allocators.md describes it for readers of
// files). Everything here is stored in the pool: do not renumber, reorder or resize.
//
//   [0, 4096)                      header (pool_header, then zeros)
//   [4096, 8192)                   root area, owned by the pool's user
//   [8192, heap_offset)            chunk table: one 8-byte chunk_tag per chunk, then zeros
//   [heap_offset, + count * 64Ki)  the chunks the allocator carves blocks from
//   [..., pool_size)               unused tail (less than one chunk)
//
// All integers are little-endian (the layer runs on x86-64 only).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace alloc::format {

inline constexpr std::array<char, 8> magic = {'F', 'L', 'N', 'T', 'P', 'O', 'O', 'L'};
inline constexpr std::uint32_t layout_version = 1;
// The state word once creation has finished: the ASCII bytes "COMPLETE".
inline constexpr std::uint64_t state_complete = 0x4554454c504d4f43ULL;

inline constexpr std::uint64_t header_size = 4096;
inline constexpr std::uint64_t root_offset = 4096;
inline constexpr std::uint64_t root_size = 4096;
inline constexpr std::uint64_t chunk_table_offset = 8192;
inline constexpr std::uint64_t chunk_size = 64 * 1024;
inline constexpr unsigned chunk_shift = 16;
inline constexpr std::uint64_t page_size = 4096;
inline constexpr std::size_t layout_name_size = 32;  // NUL-padded, at most 31 characters
inline constexpr std::size_t build_layout_size = 64;  // NUL-padded, at most 63 characters

static_assert(std::uint64_t{1} << chunk_shift == chunk_size);

struct pool_header {
  std::array<char, 8> magic;                    // 0
  std::uint32_t layout_version;                 // 8
  std::uint32_t reserved;                       // 12: zero
  std::uint64_t pool_size;                      // 16: bytes, the whole file or region
  std::array<std::uint8_t, 16> uuid;            // 24: random, fixed at creation
  std::array<char, layout_name_size> layout_name;    // 40: the user's layout, e.g. "flintkv"
  std::array<char, build_layout_size> build_layout;  // 72: layout-relevant build choices
  std::uint64_t root_offset;                    // 136
  std::uint64_t root_size;                      // 144
  std::uint64_t chunk_table_offset;             // 152
  std::uint64_t chunk_size;                     // 160
  std::uint64_t chunk_count;                    // 168
  std::uint64_t heap_offset;                    // 176: first chunk
  std::uint64_t checksum;                       // 184: of the header page but bytes [184, 200)
  std::uint64_t state;                          // 192: state_complete, written last
};

static_assert(std::is_trivially_copyable_v<pool_header>);
static_assert(std::is_standard_layout_v<pool_header>);
static_assert(sizeof(pool_header) == 200);
static_assert(offsetof(pool_header, layout_version) == 8);
static_assert(offsetof(pool_header, pool_size) == 16);
static_assert(offsetof(pool_header, uuid) == 24);
static_assert(offsetof(pool_header, layout_name) == 40);
static_assert(offsetof(pool_header, build_layout) == 72);
static_assert(offsetof(pool_header, root_offset) == 136);
static_assert(offsetof(pool_header, chunk_table_offset) == 152);
static_assert(offsetof(pool_header, heap_offset) == 176);
static_assert(offsetof(pool_header, checksum) == 184);
static_assert(offsetof(pool_header, state) == 192);
// The state word sits alone in the header's fourth cache line, so writing it last cannot
// carry any other header byte with it.
static_assert(offsetof(pool_header, state) % 64 == 0);

// FNV-1a, 64 bits, over the header page except the checksum and state words: any single
// changed byte changes the result.
constexpr std::uint64_t checksum(std::span<const std::byte> header_page) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < header_page.size(); ++i) {
    if (i >= offsetof(pool_header, checksum) && i < sizeof(pool_header)) continue;
    h ^= static_cast<std::uint64_t>(header_page[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// The chunk table: what a chunk holds, written durably when a chunk is given to a size class
// or to a large block (never on the allocation path). The low 8 bits are the kind, the rest
// its argument. A tag is a hint about layout only: whether blocks are live is decided by the
// pool user's walk after open (see persistent_allocator.hpp).
enum class chunk_kind : std::uint8_t {
  unassigned = 0,  // never given out since creation
  small = 1,       // argument: the block size; blocks of that size tile the chunk from its start
  large_head = 2,  // argument: the number of chunks of the large block starting here
  large_tail = 3,  // argument: the index of the chunk holding the large block's head
};

struct chunk_tag {
  std::uint64_t bits;

  static constexpr chunk_tag make(chunk_kind k, std::uint64_t argument) noexcept {
    return {static_cast<std::uint64_t>(k) | (argument << 8)};
  }
  constexpr chunk_kind kind() const noexcept { return static_cast<chunk_kind>(bits & 0xff); }
  constexpr std::uint64_t argument() const noexcept { return bits >> 8; }
  friend constexpr bool operator==(chunk_tag, chunk_tag) = default;
};

static_assert(sizeof(chunk_tag) == 8 && std::is_trivially_copyable_v<chunk_tag>);

// The geometry of a pool of `pool_size` bytes: as many chunks as fit after the table.
struct geometry {
  std::uint64_t chunk_count = 0;
  std::uint64_t heap_offset = 0;
};

constexpr std::uint64_t align_up(std::uint64_t v, std::uint64_t a) noexcept {
  return (v + a - 1) / a * a;
}

constexpr std::uint64_t table_bytes(std::uint64_t chunk_count) noexcept {
  return align_up(chunk_count * sizeof(chunk_tag), page_size);
}

constexpr geometry geometry_for(std::uint64_t pool_size) noexcept {
  if (pool_size < chunk_table_offset + page_size + chunk_size) return {};
  std::uint64_t count = (pool_size - chunk_table_offset) / chunk_size;
  while (count > 0 && chunk_table_offset + table_bytes(count) + count * chunk_size > pool_size) {
    --count;
  }
  return {count, chunk_table_offset + table_bytes(count)};
}

// The smallest pool: header, root, one page of table, one chunk.
inline constexpr std::uint64_t min_pool_size = chunk_table_offset + page_size + chunk_size;
static_assert(geometry_for(min_pool_size).chunk_count == 1);

}  // namespace alloc::format
