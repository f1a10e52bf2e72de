// The engine's persistent layout: the root kept in the pool's root area and the nodes of
// the sorted persistent list. Byte-level reference: docs/engine-layout.md.
//
// Every field is a persist<T> word or bulk bytes written through Policy::write_range, so the
// flush policy sees every write (there is no raw store to the pool in engine/).
// Words that the engine stores use 63 bits: the top bit is spare, so the link_and_persist
// placement can keep its flag there. Every word checks itself and every node carries a
// checksum of its immutable content (below), so damage is detected, never read as data.
//
// Invariants (of the durable list, between any two persistence events):
//  (1) The list from the root's head sentinel is sorted by key ascending, then version
//      descending.
//  (2) Every link (a node's successor word) is written with its companions in the same cache
//      line, in this order: `prior` (the successor it replaces), `link_version` (the version
//      of the node it will name), then the successor. A line reaches memory as a prefix of
//      its stores, so a durable successor comes with its durable prior and link_version.
//  (3) A node named by a link whose link_version is at most the root's `fenced` version is
//      whole in the durable image. A node named by a newer link may be torn (a sync put's
//      node and link are made durable by one fence): recovery takes it only if it is whole
//      and carries that version, and otherwise follows `prior`, which names a node that was
//      durably linked before (durable::relink in recovery.hpp).
//  (4) No version is assigned above the root's durable `lease`, so a version is never
//      assigned twice, even across crashes: a stale node left in a free block never carries
//      the version a new link expects.
//  (5) A node's version is the uncommitted marker until the combiner assigns it; a linked node
//      whose version is still the marker belongs to a write that did not complete.
//  (6) While batch_mode is kBatchActive, nodes with a version above commit_version belong to
//      a batch that did not complete.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <type_traits>

#include "flintkv/internal/checksum.hpp"
#include "flit/flit.hpp"

namespace flintkv::internal {

// A 64-bit word whose top bit is never used by the engine's values.
struct word63 {
  std::uint64_t bits;
  friend bool operator==(word63, word63) = default;
};

// An offset from the pool base; 0 is null. What the engine works with in DRAM; the pool
// holds it as a stored_offset (below).
struct node_offset {
  std::uint64_t value;
  friend bool operator==(node_offset, node_offset) = default;
};

// A node offset as the pool holds it (see offset_word below).
struct stored_offset {
  std::uint64_t bits;
  friend bool operator==(stored_offset, stored_offset) = default;
};

}  // namespace flintkv::internal

template <>
struct flit::spare_bit<flintkv::internal::word63> {
  static constexpr std::uint64_t mask = std::uint64_t{1} << 63;
};
template <>
struct flit::spare_bit<flintkv::internal::stored_offset> {
  static constexpr std::uint64_t mask = 1;  // offsets are multiples of 16
};

namespace flintkv::internal {

// ---- self-checking words -----------------------------------------------------------------
//
// Every word the engine keeps in the pool checks itself, so that damage is reported instead
// of read as another value. A word holds a 48-bit payload (bits 0-47) and a 15-bit check of
// it (bits 48-62; bit 63 stays the link_and_persist flag). The check is the low 15 bits of
// a CRC-32C of the word's place (which node or the root, and which of its words) and of the
// payload, offset by a constant so that an all-zero word is not valid. Any single flipped
// bit is detected (proved below, at compile time); a word written to, or copied into, the
// wrong place is detected like garbage: it passes with probability 2^-15 (and must then
// pass the walk's other checks).

inline constexpr unsigned kCheckShift = 48;
inline constexpr std::uint64_t kPayloadMask = (std::uint64_t{1} << kCheckShift) - 1;
inline constexpr std::uint64_t kCheckMask = (std::uint64_t{1} << 15) - 1;

// Which word of its holder a word is. Stored in the pool (in checks): do not renumber.
enum class word_field : std::uint64_t { next = 1, version = 2, head = 3, commit_version = 4,
                                        batch_mode = 5, prior = 6, link_version = 7, fenced = 8,
                                        lease = 9, packed_next = 10, packed_shape = 11,
                                        tier = 12 };
// Where a word lives: the offset of the node that holds it, or kRootHolder for the root's.
struct word_place {
  std::uint64_t holder;
  word_field field;
};
inline constexpr std::uint64_t kRootHolder = 4096;  // the pool's root area (pool_format.hpp)
constexpr word_place in_node(node_offset n, word_field f) { return {n.value, f}; }
constexpr word_place in_root(word_field f) { return {kRootHolder, f}; }

constexpr std::uint64_t word_check(std::uint64_t payload, word_place at) {
  const std::uint32_t seed =
      crc32c_word(0x464c4e54u, at.holder ^ (static_cast<std::uint64_t>(at.field) << 56));
  return (crc32c_word(seed, payload) & kCheckMask) ^ 0x2a5b;
}
constexpr std::uint64_t checked_word(std::uint64_t payload, word_place at) {
  return payload | (word_check(payload, at) << kCheckShift);
}
// The payload of a self-checking word found at `at`, or nullopt if the word is damaged.
constexpr std::optional<std::uint64_t> checked_payload(std::uint64_t bits, word_place at) {
  const std::uint64_t payload = bits & kPayloadMask;
  if ((bits >> kCheckShift) != word_check(payload, at)) return std::nullopt;
  return payload;
}

// ---- versions ----------------------------------------------------------------------------

// Committed versions are 0 .. kMaxVersion; a node's version word holds a checked version,
// or the uncommitted marker until the combiner assigns its version. The marker has the
// payload 2^48 - 1, which no committed version has, and the check of its place XOR 0x5a5a:
// no fill pattern (all ones, all zeros) and no other node's marker is one.
inline constexpr std::uint64_t kMaxVersion = kPayloadMask - 1;

enum class version_kind : std::uint8_t { committed, uncommitted, damaged };
struct stored_version {
  version_kind kind;
  std::uint64_t version;  // committed only
};
constexpr word63 version_word(std::uint64_t version, word_place at) {
  return {checked_word(version, at)};
}
constexpr word63 uncommitted_word(word_place at) {
  return {kPayloadMask | ((word_check(kPayloadMask, at) ^ 0x5a5a) << kCheckShift)};
}
constexpr stored_version read_version_word(word63 w, word_place at) {
  if (w == uncommitted_word(at)) return {version_kind::uncommitted, 0};
  const auto v = checked_payload(w.bits, at);
  if (!v || *v > kMaxVersion) return {version_kind::damaged, 0};
  return {version_kind::committed, *v};
}

// ---- offsets -----------------------------------------------------------------------------

// A node offset as stored: the checked word of (offset | 2). Offsets are multiples of 16
// (the heap's block alignment) below 2^48; 0 is null.
inline constexpr std::uint64_t kNodeAlignment = 16;
// Bit 1 of the payload is always set, so that no zeroed word is an offset (not even null).
inline constexpr std::uint64_t kOffsetPresent = 2;
constexpr stored_offset offset_word(node_offset off, word_place at) {
  return {checked_word(off.value | kOffsetPresent, at)};
}
constexpr std::optional<node_offset> read_offset_word(stored_offset w, word_place at) {
  const auto v = checked_payload(w.bits, at);
  if (!v || *v % kNodeAlignment != kOffsetPresent) return std::nullopt;
  return node_offset{*v - kOffsetPresent};
}

// ---- the node's size word ----------------------------------------------------------------
//
// bits 0-12 key size (1 .. 4096), bits 13-33 value size (0 .. 2^20), bit 34 tombstone,
// bit 35 zero, bits 36-62 the node's checksum: the low 27 bits of a CRC-32C over the size
// word's bits 0-35 (as 8 bytes), the key, the value and the version (below). Every single flipped bit of a node
// of any size is detected (test: ChecksumTest.EverySingleBitErrorChangesTheNodeChecksum);
// other damage passes with probability 2^-27.
// Stored in the pool: do not renumber.
enum node_flags : std::uint64_t { kTombstone = 1 };

inline constexpr unsigned kValueSizeShift = 13;
inline constexpr unsigned kFlagsShift = 34;
inline constexpr unsigned kNodeCheckShift = 36;
inline constexpr std::uint64_t kNodeCheckMask = (std::uint64_t{1} << 27) - 1;
inline constexpr std::uint64_t kSizesMask = (std::uint64_t{1} << kNodeCheckShift) - 1;

constexpr std::uint64_t pack_sizes(std::size_t key_size, std::size_t value_size,
                                   std::uint64_t flags) {
  return static_cast<std::uint64_t>(key_size) |
         (static_cast<std::uint64_t>(value_size) << kValueSizeShift) | (flags << kFlagsShift);
}
constexpr std::size_t key_size_of(word63 w) { return w.bits & 0x1fff; }
constexpr std::size_t value_size_of(word63 w) { return (w.bits >> kValueSizeShift) & 0x1fffff; }
constexpr std::uint64_t flags_of(word63 w) { return (w.bits >> kFlagsShift) & 0x3; }
constexpr std::uint64_t node_check_of(word63 w) { return w.bits >> kNodeCheckShift; }

// The checksum of a node: its place (the node's offset), its sizes (bits 0-35 of the size
// word), its key and value bytes (which follow each other in the node), then its version.
// A node copied to another place does not pass, and neither does a node whose lines come
// from two writes to the same block: versions are never assigned twice (layout invariant
// (4)), so the lines of an earlier node there, even of the same key and value, do not
// match the version of a later one. Until the combiner assigns the version, the checksum
// covers kUnassigned in its place; the combiner rewrites it with the version.
inline constexpr std::uint64_t kUnassigned = kPayloadMask;
// The checksum's state after the content, before the version (prepare keeps it for attach).
inline std::uint32_t node_content_crc(node_offset at, std::uint64_t sizes, std::string_view key,
                                      std::string_view value) {
  std::uint32_t c = crc32c_word(crc32c_word(0xffffffffu, at.value), sizes & kSizesMask);
  if (value.data() == key.data() + key.size()) {  // in the node: one pass over both
    return crc32c(c, key.data(), key.size() + value.size());
  }
  c = crc32c(c, key.data(), key.size());
  return crc32c(c, value.data(), value.size());
}
inline std::uint64_t node_check(std::uint32_t content_crc, std::uint64_t version) {
  return crc32c_word(content_crc, version) & kNodeCheckMask;
}
inline std::uint64_t node_checksum(node_offset at, std::uint64_t sizes, std::string_view key,
                                   std::string_view value, std::uint64_t version) {
  return node_check(node_content_crc(at, sizes, key, value), version);
}
// The size word of sizes (bits 0-35) with the checksum of content `content_crc` at `version`.
inline word63 checked_sizes(std::uint64_t sizes, std::uint32_t content_crc,
                            std::uint64_t version) {
  return {(sizes & kSizesMask) | (node_check(content_crc, version) << kNodeCheckShift)};
}
// The size word of the node at `at` holding `key` and `value`, at `version`.
inline word63 sizes_word(node_offset at, std::string_view key, std::string_view value,
                         std::uint64_t flags, std::uint64_t version) {
  const std::uint64_t sizes = pack_sizes(key.size(), value.size(), flags);
  return checked_sizes(sizes, node_content_crc(at, sizes, key, value), version);
}

// A node's first three words (successor, prior, link_version) always share one cache line:
// a node takes at least kMinNodeBytes, so its block is 64-byte aligned (the heap aligns every
// block larger than 48 bytes to 64) and its header starts a line.
inline constexpr std::size_t kMinNodeBytes = 64;

template <class Policy>
struct pnode {
  flit::persist<stored_offset, Policy> next;  // offset_word(successor in the list)
  flit::persist<stored_offset, Policy> prior;  // offset_word(the successor `next` replaced)
  flit::persist<word63, Policy> link_version;  // version_word(version of the node `next` names)
  flit::persist<word63, Policy> version;       // uncommitted_word until attached
  flit::persist<word63, Policy> sizes;         // sizes_word(key, value, flags, body)
  // Followed by the key bytes, then the value bytes.

  static constexpr std::size_t header_size() { return sizeof(pnode); }
  // The bytes a node takes in the heap (at least kMinNodeBytes; see above).
  static constexpr std::size_t size_for(std::size_t key_size, std::size_t value_size) {
    const std::size_t bytes = sizeof(pnode) + key_size + value_size;
    return bytes < kMinNodeBytes ? kMinNodeBytes : bytes;
  }
  char* body() { return reinterpret_cast<char*>(this) + sizeof(pnode); }
  const char* body() const { return reinterpret_cast<const char*>(this) + sizeof(pnode); }
};

// The engine's root, in the pool's root area.
template <class Policy>
struct root {
  flit::persist<word63, Policy> format;          // kFormatBlank, kFormatInitialising, kFormat
  flit::persist<stored_offset, Policy> head;     // offset_word(the sentinel node)
  flit::persist<word63, Policy> commit_version;  // version_word(newest before the batch)
  flit::persist<word63, Policy> batch_mode;      // kBatchIdle, or kBatchActive while a batch
                                                 // is being attached
  flit::persist<word63, Policy> fenced;  // version_word(v): every link to a version <= v is
                                         // durable with its node (layout invariant (3))
  flit::persist<word63, Policy> lease;   // version_word(v): no version above v is assigned
  flit::persist<stored_offset, Policy> tier;  // offset_word(the packed tier's root block);
                                              // format 4 (a format-3 root has no such word)
};

// The root's format word. Stored in the pool: bump kFormat when the layout changes. The
// values are far apart (no single flipped bit turns one into another, or into 0), so a
// damaged format word is reported, never taken for a new store.
inline constexpr std::uint64_t kFormatBlank = 0;  // created, never initialised
inline constexpr std::uint64_t kFormatInitialising = 0x494e4954464b56;  // "VKFTINI": started
inline constexpr std::uint64_t kFormat = 0x3456544e494c46;  // "FLINTV4": this layout
inline constexpr std::uint64_t kFormatVersion = 4;          // what messages call it
// Format 3: this layout without the root's tier word (and so without a packed tier). This
// build reads it as a store whose tier is empty, and upgrades it at its first read-write
// open (engine.hpp, recover).
inline constexpr std::uint64_t kFormatV3 = 0x3356544e494c46;  // "FLINTV3"
// The formats before that, which this build refuses with a message that names them
// (format 2: nodes of three words, no prior or link_version, no fenced or lease words).
inline constexpr std::uint64_t kFormatV2 = 0x3256544e494c46;  // "FLINTV2"
// The batch_mode word.
inline constexpr word63 kBatchIdle = version_word(0, in_root(word_field::batch_mode));
inline constexpr word63 kBatchActive = version_word(1, in_root(word_field::batch_mode));

// ---- what the encodings promise, proved here -----------------------------------------------

namespace layout_proofs {
// The check is affine in the payload for a fixed place: check(p ^ e) = check(p) ^ L(e). So
// what holds for one place and one payload holds for all of them.
inline constexpr word_place kSomePlace{4096 + 64, word_field::version};
// Every single-bit error in a 48-bit payload changes its check.
constexpr bool checks_catch_single_bits() {
  for (int b = 0; b < 48; ++b) {
    if (word_check(0, kSomePlace) == word_check(std::uint64_t{1} << b, kSomePlace)) return false;
  }
  return true;
}
// No valid version word is one bit away from the uncommitted marker.
constexpr bool marker_is_isolated() {
  const word63 marker = uncommitted_word(kSomePlace);
  for (int b = 0; b < 63; ++b) {
    if (read_version_word({marker.bits ^ (std::uint64_t{1} << b)}, kSomePlace).kind !=
        version_kind::damaged) {
      return false;
    }
  }
  return read_version_word(marker, kSomePlace).kind == version_kind::uncommitted &&
         read_version_word({(std::uint64_t{1} << 63) - 1}, kSomePlace).kind ==
             version_kind::damaged;
}
constexpr int distance(std::uint64_t a, std::uint64_t b) { return std::popcount(a ^ b); }
static_assert(checks_catch_single_bits());
static_assert(marker_is_isolated());
static_assert(!read_offset_word({0}, kSomePlace).has_value(), "a zeroed offset is damage");
// The root's words are at fixed places: none of them is valid when zeroed.
static_assert(!checked_payload(0, in_root(word_field::head)).has_value());
static_assert(!checked_payload(0, in_root(word_field::commit_version)).has_value());
static_assert(!checked_payload(0, in_root(word_field::batch_mode)).has_value());
static_assert(!checked_payload(0, in_root(word_field::fenced)).has_value());
static_assert(!checked_payload(0, in_root(word_field::lease)).has_value());
static_assert(!checked_payload(0, in_root(word_field::tier)).has_value());
static_assert(distance(kFormat, kFormatBlank) > 1 && distance(kFormat, kFormatInitialising) > 1 &&
              distance(kFormatInitialising, kFormatBlank) > 1 && distance(kFormat, 1) > 1);
static_assert(distance(kBatchIdle.bits, kBatchActive.bits) > 1);
static_assert(kFormat >> 63 == 0 && kFormatInitialising >> 63 == 0);
static_assert(distance(kFormat, kFormatV3) > 1 && distance(kFormatV3, kFormatBlank) > 1 &&
              distance(kFormatV3, kFormatInitialising) > 1);
}  // namespace layout_proofs

// The layout depends only on the size of a persistent word under the placement.
template <class Policy>
constexpr bool layout_pinned() {
  constexpr std::size_t w = sizeof(flit::persist<word63, Policy>);
  static_assert(w == 8 || w == 16);
  static_assert(sizeof(pnode<Policy>) == 5 * w);
  static_assert(sizeof(root<Policy>) == 7 * w);
  static_assert(std::is_standard_layout_v<pnode<Policy>>);
  static_assert(offsetof(pnode<Policy>, next) == 0);
  static_assert(offsetof(pnode<Policy>, prior) == w);
  static_assert(offsetof(pnode<Policy>, link_version) == 2 * w);
  static_assert(offsetof(pnode<Policy>, version) == 3 * w);
  static_assert(offsetof(pnode<Policy>, sizes) == 4 * w);
  // The link's three words share the first line of a 64-byte-aligned node (invariant (2)).
  static_assert(offsetof(pnode<Policy>, link_version) + w <= 64);
  static_assert(kMinNodeBytes > 48);
  return true;
}

}  // namespace flintkv::internal
