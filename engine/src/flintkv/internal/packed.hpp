// Packed nodes: many keys with their values, sorted, in one persistent node. They are the
// format of the packed tier that docs/engine-design.md plans ("The packed tier"): keys that
// stop changing leave their per-key nodes for packed nodes, written whole by a merge and
// never changed in place but for their successor word, so that a key costs its bytes plus a few, not a 40-byte header in
// a 128-byte block. This file is the format only: building a node's image, writing it, and
// reading it back (point lookups, ordered positions, records), every read checked.
//
// A record holds a key's value or the key's erasure: a key with no value, which a newer run
// of the packed tier keeps so that it hides the key's records in older runs (packed_tier.hpp).
//
// Layout of a packed node at offset `at` (its block 64-byte aligned, at most kPackedMaxBlock;
// every record starts in the first kPackedRecordsWithin bytes, so a node of more than one
// record takes at most 64 KiB and a larger one holds one record):
//
//   next    persist<stored_offset>: offset_word(the next node of its run, or null), at
//           in_node(at, packed_next). Written by whoever chains the node (store_packed).
//   shape   persist<word63>: checked_word(count | prefix size << 10 | end << 23), at
//           in_node(at, packed_shape). `end` is the offset, from the node's start, just past
//           its last record.
//   body    header check (4 bytes, little-endian): CRC-32C, seeded with the place, of the
//             shape's payload (as a word), then of the bytes from the prefix through the
//             fingerprints;
//           prefix (prefix size bytes): what every key of the node begins with;
//           offsets (count x 2 bytes, little-endian): each record's offset from the node's
//             start, in key order;
//           fingerprints (count bytes): the top byte of key_hash (keys.hpp) of each whole key;
//           records, in key order: the tag (the suffix's size << 1 | the record's kind, 1
//             for an erasure) and the value's size (LEB128, at most 3 bytes each; an
//             erasure's value size is 0), the suffix (the key after the prefix), the value,
//             and the record's check (4 bytes, little-endian): CRC-32C, seeded with the place
//             and the record's index, of the record from its tag through its value.
//
// The kind rides in the tag because suffixes are short: a 16-byte key's tag takes one byte
// either way, where a flag beside the value's size would make a 64-byte value's varint two.
// (Only a suffix of 64 to 127 bytes pays: its tag takes two bytes where its size took one.)
// An erasure is laid out as a record of an empty value, its kind one bit of the tag, so the
// record's check covers that bit as it covers the sizes: a put and an erasure differ in one
// bit under the check, never unreported.
//
// What the checks give: the shape word checks itself (layout.hpp); the header check covers
// everything a lookup uses to choose a record, so a damaged prefix, offset or fingerprint is
// reported, never taken for a missing key; each record's check covers what it returns, its
// kind with it. A
// node copied to another offset, or a record to another index, fails its checks. A single
// flipped bit anywhere in a node is reported or changes no answer
// (PackedTest.EverySingleBitFlipIsReportedOrHarmless).
// Reads never leave the node's block, whatever its bytes.
//
// Thread safety: a builder belongs to one thread. A node is immutable once written; views of
// it may be used from any thread.
// Persistence: store_packed writes the node and, in manual mode, writes back its lines; the
// caller fences before publishing the node.
#pragma once

#include <emmintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flintkv/internal/checksum.hpp"
#include "flintkv/internal/keys.hpp"
#include "flintkv/internal/layout.hpp"
#include "flintkv/internal/mode.hpp"
#include "flintkv/options.hpp"

namespace flintkv::internal {

// Records start within this many bytes of their node's start (record offsets are 16-bit).
inline constexpr std::size_t kPackedRecordsWithin = std::size_t{1} << 16;
// A packed node's block is at most this large: room for one record of the largest key and
// value (options.hpp).
inline constexpr std::size_t kPackedMaxBlock = std::size_t{1} << 25;
// A packed node holds at most this many keys (the shape's count field).
inline constexpr std::size_t kPackedMaxKeys = 1023;

// What a record holds: a value, or the key's erasure (no value). Stored in the pool, as the
// low bit of a record's tag: do not renumber.
enum class packed_kind : std::uint8_t { value = 0, erasure = 1 };

namespace packed_format {
inline constexpr unsigned kPrefixShift = 10;
inline constexpr unsigned kEndShift = 23;
inline constexpr std::uint64_t kCountMask = (std::uint64_t{1} << kPrefixShift) - 1;
inline constexpr std::uint64_t kPrefixMask = (std::uint64_t{1} << (kEndShift - kPrefixShift)) - 1;
inline constexpr std::uint64_t kEndMask = (std::uint64_t{1} << 25) - 1;
inline constexpr std::size_t kHeaderCheckBytes = 4;
inline constexpr std::size_t kRecordCheckBytes = 4;
inline constexpr std::size_t kPerKeyIndexBytes = 3;  // an offset and a fingerprint
// Seeds of the two checks: a header's check never passes as a record's, nor the reverse.
inline constexpr std::uint32_t kHeaderSeed = 0x504b4844u;  // "DHKP"
inline constexpr std::uint32_t kRecordSeed = 0x504b5243u;  // "CRKP"
static_assert(kPackedMaxKeys <= kCountMask && kMaxKeySize <= kPrefixMask &&
              kPackedMaxBlock - 1 <= kEndMask && kEndShift + 25 <= 48);
static_assert(kMaxKeySize + kMaxValueSize + 64 < kPackedMaxBlock);

constexpr std::size_t varint_size(std::uint32_t v) { return v < 128 ? 1 : (v < 16384 ? 2 : 3); }
// A record's tag: its suffix's size and its kind. The varint's size does not depend on the
// kind.
constexpr std::uint32_t tag_of(std::size_t suffix_size, packed_kind kind) {
  return static_cast<std::uint32_t>(suffix_size << 1 | static_cast<std::size_t>(kind));
}
constexpr std::size_t tag_size(std::size_t suffix_size) {
  return varint_size(tag_of(suffix_size, packed_kind::value));
}
static_assert(tag_of(kMaxKeySize, packed_kind::erasure) < (std::uint32_t{1} << 21));
static_assert(tag_size(16) == 1, "a 16-byte key's tag takes one byte, as its size did");
inline unsigned char* put_varint(unsigned char* p, std::uint32_t v) {
  while (v >= 128) {
    *p++ = static_cast<unsigned char>(v | 128);
    v >>= 7;
  }
  *p++ = static_cast<unsigned char>(v);
  return p;
}
// Reads a varint of at most 3 bytes from [*p, end); false if it runs past `end` or is longer.
inline bool get_varint(const unsigned char** p, const unsigned char* end, std::uint32_t* v) {
  std::uint32_t x = 0;
  for (unsigned shift = 0; shift < 21; shift += 7) {
    if (*p == end) return false;
    const unsigned char b = *(*p)++;
    x |= static_cast<std::uint32_t>(b & 127) << shift;
    if (b < 128) {
      *v = x;
      return true;
    }
  }
  return false;
}
inline std::uint32_t get_u32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
inline void put_u32(unsigned char* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
// The header's check: of `n` bytes at `p`, seeded with the node's offset and its shape word.
inline std::uint32_t header_check(node_offset at, std::uint64_t shape, const void* p,
                                  std::size_t n) {
  return crc32c_seeded(kHeaderSeed, at.value, shape, p, n);
}
// Record `index`'s check: of its `n` bytes at `p`, seeded with the node's offset and the index.
inline std::uint32_t record_check(node_offset at, std::size_t index, const void* p,
                                  std::size_t n) {
  return crc32c_seeded(kRecordSeed, at.value, index, p, n);
}
inline std::size_t common_prefix(std::string_view a, std::string_view b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}
inline unsigned char fingerprint(std::string_view key) {
  return static_cast<unsigned char>(key_hash(key) >> 24);
}
}  // namespace packed_format

template <class Policy>
struct packed_node {
  flit::persist<stored_offset, Policy> next;  // offset_word(the next node of its run, or null)
  flit::persist<word63, Policy> shape;        // checked_word(count, prefix size, end)
  // Followed by the body (above).

  static constexpr std::size_t words_size() { return sizeof(packed_node); }
  unsigned char* body() { return reinterpret_cast<unsigned char*>(this) + sizeof(packed_node); }
  const unsigned char* body() const {
    return reinterpret_cast<const unsigned char*>(this) + sizeof(packed_node);
  }
};

// Builds the image of one packed node from keys added in ascending order. Usage:
//
//   packed_builder<Policy> b(block_bytes);
//   for each (key, value) ascending:
//     if (!b.fits(key, value)) { store_packed<Policy, Mode>(node, at, b, next); b.clear(); }
//     b.add(key, value);  // a record that does not fit an empty node never fits: see fits
//
// An erasure is added as a record of an empty value: b.add(key, {}, packed_kind::erasure).
//
// The builder keeps the views it is given: what they name must outlive encode (or the
// store_packed that calls it).
template <class Policy>
class packed_builder {
 public:
  // REQUIRES: block_bytes < kPackedMaxBlock.
  explicit packed_builder(std::size_t block_bytes) : capacity_(block_bytes) {}
  // The bytes one record of `key` and `value` takes in a node of its own: the block a record
  // that fits no node of the usual size needs.
  static std::size_t single_record_bytes(std::string_view key, std::string_view value) {
    return total(key.size(), packed_format::tag_size(0), 1, key.size(), value.size(),
                 packed_format::varint_size(static_cast<std::uint32_t>(value.size())));
  }
  // Empties the builder and gives it another block size.
  void reset(std::size_t block_bytes) {
    clear();
    capacity_ = block_bytes;
  }

  std::size_t count() const { return records_.size(); }
  std::size_t capacity() const { return capacity_; }
  // The bytes the node takes from its start through its last record.
  std::size_t bytes() const { return size_with(prefix_, suffix_varints_); }
  std::size_t prefix_size() const { return prefix_; }

  // Whether `key` and `value` fit in the node after what was added. A record that does not
  // fit an empty node (a value of about the block's size) belongs in a node of its own.
  // REQUIRES: key > every key added.
  bool fits(std::string_view key, std::string_view value) const {
    if (count() == kPackedMaxKeys || key.size() > kMaxKeySize || value.size() > kMaxValueSize) {
      return false;
    }
    const std::size_t p = next_prefix(key);
    const std::size_t varints = (p == prefix_ ? suffix_varints_ : suffix_varints_for(p)) +
                                packed_format::tag_size(key.size() - p);
    const std::size_t after = added(p, varints, key.size(), value.size());
    const std::size_t own = packed_format::tag_size(key.size() - p) +
                            packed_format::varint_size(static_cast<std::uint32_t>(value.size())) +
                            key.size() - p + value.size() + packed_format::kRecordCheckBytes;
    return after <= capacity_ && after - own < kPackedRecordsWithin;
  }
  // REQUIRES: fits(key, value); value.empty() for an erasure.
  void add(std::string_view key, std::string_view value, packed_kind kind = packed_kind::value) {
    const std::size_t p = next_prefix(key);
    if (p != prefix_ || records_.empty()) suffix_varints_ = suffix_varints_for(p);
    prefix_ = p;
    records_.push_back({key, value, kind});
    key_bytes_ += key.size();
    value_bytes_ += value.size();
    value_varints_ += packed_format::varint_size(static_cast<std::uint32_t>(value.size()));
    suffix_varints_ += packed_format::tag_size(key.size() - p);
  }
  std::string_view key(std::size_t i) const { return records_[i].key; }
  std::string_view value(std::size_t i) const { return records_[i].value; }
  packed_kind kind(std::size_t i) const { return records_[i].kind; }
  void clear() {
    records_.clear();
    prefix_ = key_bytes_ = value_bytes_ = value_varints_ = suffix_varints_ = 0;
  }

  // The shape word's payload, and the body's bytes (bytes() - the words) into `body`, for a
  // node at `at`. REQUIRES: count() > 0.
  std::uint64_t encode(node_offset at, std::vector<unsigned char>* body) const {
    namespace f = packed_format;
    const std::size_t words = packed_node<Policy>::words_size();
    const std::size_t n = count();
    const std::size_t end = bytes();
    const std::uint64_t shape = n | std::uint64_t{prefix_} << f::kPrefixShift |
                                std::uint64_t{end} << f::kEndShift;
    body->assign(end - words, 0);
    // The byte at offset `off` from the node's start (the body starts after the words).
    const auto at_offset = [&](std::size_t off) { return body->data() + (off - words); };
    const std::size_t prefix_at = words + f::kHeaderCheckBytes;
    const std::size_t offsets_at = prefix_at + prefix_;
    const std::size_t prints_at = offsets_at + 2 * n;
    std::memcpy(at_offset(prefix_at), key(0).data(), prefix_);
    std::size_t record_at = prints_at + n;
    for (std::size_t i = 0; i < n; ++i) {
      const std::string_view k = key(i), v = value(i);
      at_offset(offsets_at)[2 * i] = static_cast<unsigned char>(record_at);
      at_offset(offsets_at)[2 * i + 1] = static_cast<unsigned char>(record_at >> 8);
      at_offset(prints_at)[i] = f::fingerprint(k);
      unsigned char* const start = at_offset(record_at);
      unsigned char* r = f::put_varint(start, f::tag_of(k.size() - prefix_, kind(i)));
      r = f::put_varint(r, static_cast<std::uint32_t>(v.size()));
      std::memcpy(r, k.data() + prefix_, k.size() - prefix_);
      r += k.size() - prefix_;
      if (!v.empty()) std::memcpy(r, v.data(), v.size());
      r += v.size();
      f::put_u32(r, f::record_check(at, i, start, static_cast<std::size_t>(r - start)));
      r += f::kRecordCheckBytes;
      record_at += static_cast<std::size_t>(r - start);
    }
    f::put_u32(at_offset(words), f::header_check(at, shape, at_offset(prefix_at),
                                        prints_at + n - prefix_at));
    return shape;
  }

 private:
  struct record {
    std::string_view key, value;
    packed_kind kind;
  };
  std::size_t next_prefix(std::string_view key) const {
    return records_.empty() ? key.size() : std::min(prefix_, packed_format::common_prefix(this->key(0), key));
  }
  std::size_t suffix_varints_for(std::size_t p) const {
    std::size_t s = 0;
    for (const record& r : records_) s += packed_format::tag_size(r.key.size() - p);
    return s;
  }
  // The node's bytes with prefix size p and suffix varints `varints`, for what was added.
  std::size_t size_with(std::size_t p, std::size_t varints) const {
    if (records_.empty()) return packed_node<Policy>::words_size() + packed_format::kHeaderCheckBytes;
    return total(p, varints, count(), key_bytes_, value_bytes_, value_varints_);
  }
  // The same with one more record of a key of `key_size` and a value of `value_size`.
  std::size_t added(std::size_t p, std::size_t varints, std::size_t key_size,
                    std::size_t value_size) const {
    return total(p, varints, count() + 1, key_bytes_ + key_size, value_bytes_ + value_size,
                 value_varints_ + packed_format::varint_size(
                                      static_cast<std::uint32_t>(value_size)));
  }
  static std::size_t total(std::size_t p, std::size_t suffix_varints, std::size_t n,
                           std::size_t keys, std::size_t values, std::size_t value_varints) {
    namespace f = packed_format;
    return packed_node<Policy>::words_size() + f::kHeaderCheckBytes + p +
           n * (f::kPerKeyIndexBytes + f::kRecordCheckBytes) + suffix_varints + value_varints +
           (keys - n * p) + values;
  }

  std::size_t capacity_;
  std::vector<record> records_;
  std::size_t prefix_ = 0, key_bytes_ = 0, value_bytes_ = 0, value_varints_ = 0,
              suffix_varints_ = 0;
};

// Writes the node that `b` built into the block at `at` (`node` is its address), with `next`
// as its successor (node_offset{0}: none). In manual mode its lines are written back; the
// caller fences before any store that lets a reader or recovery reach the node.
// REQUIRES: b.count() > 0; the block holds b.capacity() bytes.
template <class Policy, class Mode>
void store_packed(packed_node<Policy>* node, node_offset at, const packed_builder<Policy>& b,
                  node_offset next, std::vector<unsigned char>* scratch) {
  using d = durable<Policy, Mode>;
  const std::uint64_t shape = b.encode(at, scratch);
  d::put(node->next, offset_word(next, in_node(at, word_field::packed_next)));
  d::put(node->shape, word63{checked_word(shape, in_node(at, word_field::packed_shape))});
  d::put_bytes(node->body(), scratch->data(), scratch->size());
  d::flush(node, b.bytes());
}

// The successor of the node at `at`, or nullopt if its word is damaged.
template <class Policy, class Mode>
std::optional<node_offset> packed_next(const packed_node<Policy>* node, node_offset at) {
  return read_offset_word(durable<Policy, Mode>::get(node->next),
                          in_node(at, word_field::packed_next));
}

// A record of a packed node: the key after the node's prefix, the value (empty for an
// erasure) and the kind. Both views point into the node.
struct packed_record {
  std::string_view suffix;
  std::string_view value;
  packed_kind kind;
};

// A written packed node, read. Every function that reads a record checks it when `verify`
// is set (ReadOptions::verify_checksums) and reports damage rather than answer from it.
template <class Policy, class Mode>
class packed_view {
 public:
  // The node in the block at `at` of `block_bytes` (`node` its address), or nullopt if its
  // shape is damaged, names bytes past the block, or (with `verify`) fails its header check.
  static std::optional<packed_view> open(const packed_node<Policy>* node, node_offset at,
                                         std::size_t block_bytes, bool verify) {
    namespace f = packed_format;
    const auto shape = checked_payload(durable<Policy, Mode>::get(node->shape).bits,
                                       in_node(at, word_field::packed_shape));
    if (!shape) return std::nullopt;
    packed_view v;
    v.base_ = reinterpret_cast<const unsigned char*>(node);
    v.at_ = at;
    v.count_ = *shape & f::kCountMask;
    v.prefix_ = (*shape >> f::kPrefixShift) & f::kPrefixMask;
    v.end_ = (*shape >> f::kEndShift) & f::kEndMask;
    const std::size_t prefix_at = packed_node<Policy>::words_size() + f::kHeaderCheckBytes;
    v.offsets_at_ = prefix_at + v.prefix_;
    v.prints_at_ = v.offsets_at_ + 2 * v.count_;
    const std::size_t records_at = v.prints_at_ + v.count_;
    if (v.count_ == 0 || v.end_ > block_bytes || records_at > v.end_) return std::nullopt;
    if (verify &&
        f::header_check(at, *shape, v.base_ + prefix_at, records_at - prefix_at) !=
            f::get_u32(v.base_ + packed_node<Policy>::words_size())) {
      return std::nullopt;
    }
    return v;
  }

  std::size_t size() const { return count_; }
  // The bytes the node uses, from its start through its last record.
  std::size_t bytes() const { return end_; }
  // Where the records begin: the header (prefix, offsets, fingerprints) is the bytes before.
  std::size_t records_at() const { return prints_at_ + count_; }
  // Where record i begins, as the header says. REQUIRES: i < size().
  std::size_t offset(std::size_t i) const { return offset_of(i); }
  std::string_view prefix() const {
    return {reinterpret_cast<const char*>(base_) + offsets_at_ - prefix_, prefix_};
  }

  // Record i, or nullopt if it is damaged (it runs past the node, fails its check, or is an
  // erasure with a value). REQUIRES: i < size().
  std::optional<packed_record> record(std::size_t i, bool verify) const {
    namespace f = packed_format;
    const std::size_t at = offset_of(i);
    const unsigned char* const end = base_ + end_;
    if (at < prints_at_ + count_ || at >= end_) return std::nullopt;
    const unsigned char* p = base_ + at;
    std::uint32_t tag, value_size;
    if (end - p >= 2 && (p[0] | p[1]) < 128) {
      // Both varints of one byte: a suffix below 64 bytes and a value below 128, the usual.
      tag = p[0];
      value_size = p[1];
      p += 2;
    } else if (!f::get_varint(&p, end, &tag) || !f::get_varint(&p, end, &value_size)) {
      return std::nullopt;
    }
    const std::uint32_t suffix_size = tag >> 1;
    const auto kind = static_cast<packed_kind>(tag & 1);
    if (kind == packed_kind::erasure && value_size != 0) return std::nullopt;
    const auto left = static_cast<std::size_t>(end - p);
    if (suffix_size > left || value_size > left - suffix_size ||
        f::kRecordCheckBytes > left - suffix_size - value_size) {
      return std::nullopt;
    }
    const char* const s = reinterpret_cast<const char*>(p);
    const unsigned char* const check = p + suffix_size + value_size;
    if (verify &&
        f::record_check(at_, i, base_ + at, static_cast<std::size_t>(check - (base_ + at))) !=
            f::get_u32(check)) {
      return std::nullopt;
    }
    return packed_record{{s, suffix_size}, {s + suffix_size, value_size}, kind};
  }

  // Where `key` is, by its fingerprint: a record of its value (yes), a record of its
  // erasure, none, or a damaged record on the way.
  enum class found : std::uint8_t { yes, erasure, no, damaged };
  struct lookup {
    found kind;
    std::size_t index = 0;  // yes and erasure only
    std::string_view value;  // yes only
  };
  lookup find(std::string_view key, bool verify) const {
    if (key.size() < prefix_ || key.compare(0, prefix_, prefix()) != 0) return {found::no, 0, {}};
    const std::string_view suffix = key.substr(prefix_);
    const unsigned char want = packed_format::fingerprint(key);
    const unsigned char* const prints = base_ + prints_at_;
    const __m128i w = _mm_set1_epi8(static_cast<char>(want));
    for (std::size_t i = 0; i < count_; i += 16) {
      unsigned char chunk[16] = {};
      const std::size_t n = std::min<std::size_t>(16, count_ - i);
      std::memcpy(chunk, prints + i, n);
      unsigned hits = static_cast<unsigned>(_mm_movemask_epi8(
                          _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk)), w))) &
                      ((1u << n) - 1);
      for (; hits != 0; hits &= hits - 1) {
        const std::size_t j = i + static_cast<std::size_t>(__builtin_ctz(hits));
        const auto r = record(j, verify);
        if (!r) return {found::damaged, 0, {}};
        if (r->suffix == suffix) {
          return r->kind == packed_kind::erasure ? lookup{found::erasure, j, {}}
                                                 : lookup{found::yes, j, r->value};
        }
      }
    }
    return {found::no, 0, {}};
  }

  // The index of the first record whose key is at least `key` (size() if none), or nullopt if
  // a record the search compared is damaged.
  // The search compares records without their checks, and with `verify` checks only the two
  // it ends between, lo - 1 and lo: a search that ends at lo compared record lo - 1 and found
  // it below `key`, and record lo and found it at least `key` (each unless it is past an
  // end). The offsets are the header's, which open() checked, and a record that passes its
  // check holds the key the node was written with, so if both pass, lo is the answer in the
  // node as written, whatever the other records compared held: the writer's keys ascend.
  // Checking each record the search compares instead (six or so in a node of 4 KiB) cost a
  // Seek a check and a line of value bytes each.
  //
  // [lo, hi] bounds the answer when the caller knows more (packed_run's samples): then
  // record lo - 1 (if lo > 0) is below `key` and record hi (if hi < size()) at least `key`
  // in the node as written, and the search compares only the records between. The argument
  // above holds as it is: the bounds stand for the comparisons of lo - 1 and hi, and the
  // checks of the two records the search ends between are made the same way.
  // REQUIRES: lo <= hi <= size().
  std::optional<std::size_t> lower_bound(std::string_view key, bool verify) const {
    return lower_bound(key, verify, 0, count_);
  }
  std::optional<std::size_t> lower_bound(std::string_view key, bool verify, std::size_t lo,
                                         std::size_t hi) const {
    const std::string_view head = key.substr(0, std::min(key.size(), prefix_));
    // A key that does not begin with the prefix is below every key of the node (a proper
    // prefix of the prefix is too) or above every key.
    if (const int c = compare_keys(head, prefix()); c != 0) return c > 0 ? count_ : 0;
    const std::string_view suffix = key.substr(prefix_);
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      const auto r = record(mid, false);
      if (!r) return std::nullopt;
      if (compare_keys(r->suffix, suffix) < 0) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (verify) {
      if (lo > 0 && !record(lo - 1, true)) return std::nullopt;
      if (lo < count_ && !record(lo, true)) return std::nullopt;
    }
    return lo;
  }

 private:
  std::size_t offset_of(std::size_t i) const {
    const unsigned char* o = base_ + offsets_at_ + 2 * i;
    return static_cast<std::size_t>(o[0]) | static_cast<std::size_t>(o[1]) << 8;
  }

  const unsigned char* base_ = nullptr;
  node_offset at_{0};
  std::size_t count_ = 0, prefix_ = 0, end_ = 0, offsets_at_ = 0, prints_at_ = 0;
};

}  // namespace flintkv::internal
