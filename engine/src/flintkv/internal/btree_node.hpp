// The nodes of the B+tree (btree.hpp): their layout, a key's inline prefix and how it
// orders keys, and the reader's side of the version protocol.
//
// Thread safety: every field a reader touches is atomic, read relaxed between an acquire
// load of the node's version and the check of it (validate), and written by the one writer
// (btree.hpp's contract). `level` is written before the node is published and never again.
// Persistence: none.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "flintkv/internal/keys.hpp"

namespace flintkv::internal::btree_layout {

inline constexpr std::size_t kInlineKey = 16;    // key bytes held in a slot
inline constexpr std::size_t kLeafSlots = 31;    // a leaf is 1 KiB: 16 lines
inline constexpr std::size_t kInnerSlots = 24;   // an inner node is 992 bytes

// A key's first kInlineKey bytes, zero-padded, as two big-endian words: comparing (hi, lo)
// compares the padded bytes, which orders two keys wherever they differ (btree.hpp).
struct prefix {
  std::uint64_t hi = 0, lo = 0;
  bool operator==(const prefix&) const = default;
};

// A slot: a key's (or separator's) prefix and size, and an entry (a leaf) or a child. A
// leaf's slot also keeps its entry's tag (btree.hpp's TagOf) in what would be padding; an
// inner node's tags are 0.
template <class P>
struct slot {
  std::atomic<std::uint64_t> hi{0};
  std::atomic<std::uint64_t> lo{0};
  std::atomic<std::uint32_t> size{0};
  std::atomic<std::uint32_t> tag{0};
  std::atomic<P> ptr{nullptr};
};

struct node {
  // Odd while the writer changes the node, or for good once it is removed (invariant 3).
  std::atomic<std::uint64_t> version{0};
  std::atomic<std::uint32_t> count{0};
  std::uint32_t level = 0;  // 0 for a leaf; immutable
};

template <class Entry>
struct leaf : node {
  std::atomic<leaf*> prev{nullptr};  // the leaves in key order (invariant 2)
  std::atomic<leaf*> next{nullptr};
  slot<Entry*> slots[kLeafSlots];
};

struct inner : node {
  std::uint64_t unused[2] = {};  // slots start on a half line
  slot<node*> slots[kInnerSlots];
  // copies[i]: separator i's bytes when it is longer than kInlineKey, owned by the node
  // (i >= 1; slot 0 never owns one); else nullptr. Immutable once published.
  std::atomic<const char*> copies[kInnerSlots];
};

static_assert(sizeof(slot<void*>) == 32);
static_assert(sizeof(node) == 16);
static_assert(sizeof(leaf<char>) == 1024, "a leaf is sixteen cache lines, whatever its Entry");
static_assert(sizeof(inner) == 992, "an inner node fits the 1 KiB size class");
static_assert(std::is_trivially_destructible_v<leaf<char>> &&
              std::is_trivially_destructible_v<inner>);

// A slot's contents as the writer moves them (copy: an inner slot's separator bytes).
template <class P>
struct flat {
  prefix pre;
  std::uint32_t size = 0;
  P ptr = nullptr;
  const char* copy = nullptr;
  std::uint32_t tag = 0;
};

// A key to search for, with its prefix.
struct probe {
  std::string_view key;
  prefix pre;
  std::uint32_t size;
};

// ---- Keys in slots ----

inline prefix prefix_of(std::string_view key) {
  unsigned char b[kInlineKey] = {};
  if (!key.empty()) std::memcpy(b, key.data(), std::min(key.size(), kInlineKey));
  prefix p;
  std::memcpy(&p.hi, b, 8);
  std::memcpy(&p.lo, b + 8, 8);
  if constexpr (std::endian::native == std::endian::little) {
    p.hi = __builtin_bswap64(p.hi);
    p.lo = __builtin_bswap64(p.lo);
  }
  return p;
}
inline probe probe_of(std::string_view key) {
  return {key, prefix_of(key), static_cast<std::uint32_t>(key.size())};
}

// Sign of (a - b) from prefixes and sizes, or kTie when both are longer than kInlineKey
// with the same prefix, and the bytes after it decide.
inline constexpr int kTie = 2;
inline int compare_prefixed(prefix a, std::uint32_t a_size, prefix b, std::uint32_t b_size) {
  if (a.hi != b.hi) return a.hi < b.hi ? -1 : 1;
  if (a.lo != b.lo) return a.lo < b.lo ? -1 : 1;
  if (a_size <= kInlineKey || b_size <= kInlineKey) {
    return a_size < b_size ? -1 : (a_size > b_size ? 1 : 0);
  }
  return kTie;
}
inline int compare_rest(std::string_view a, std::string_view b) {
  return compare_keys(a.substr(kInlineKey), b.substr(kInlineKey));
}

// ---- Versions: the readers' side (invariant 3 of btree.hpp) ----

inline bool read_version(const node* n, std::uint64_t* v) {
  *v = n->version.load(std::memory_order_acquire);
  return (*v & 1) == 0;
}
// Whether `n` is still at version `v`: the reads of its fields since were consistent.
inline bool validate(const node* n, std::uint64_t v) {
  std::atomic_thread_fence(std::memory_order_acquire);
  return n->version.load(std::memory_order_relaxed) == v;
}
inline std::uint64_t version_of(const node* n) {
  return n->version.load(std::memory_order_relaxed);
}
inline std::size_t count_of(const node* n) {
  return std::min<std::size_t>(n->count.load(std::memory_order_relaxed),
                               n->level == 0 ? kLeafSlots : kInnerSlots);
}

template <class P>
prefix prefix_in(const slot<P>& s) {
  return {s.hi.load(std::memory_order_relaxed), s.lo.load(std::memory_order_relaxed)};
}
template <class P>
flat<P> load(const slot<P>& s) {
  return {prefix_in(s), s.size.load(std::memory_order_relaxed),
          s.ptr.load(std::memory_order_relaxed), nullptr, s.tag.load(std::memory_order_relaxed)};
}
template <class P>
void store(slot<P>& s, const flat<P>& f) {
  s.hi.store(f.pre.hi, std::memory_order_relaxed);
  s.lo.store(f.pre.lo, std::memory_order_relaxed);
  s.size.store(f.size, std::memory_order_relaxed);
  s.tag.store(f.tag, std::memory_order_relaxed);
  s.ptr.store(f.ptr, std::memory_order_relaxed);
}

}  // namespace flintkv::internal::btree_layout
