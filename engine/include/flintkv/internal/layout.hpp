// The engine's persistent layout: the root kept in the pool's root area and the nodes of
// the sorted persistent list. Byte-level reference: docs/engine-layout.md.
//
// Every field is a persist<T> word or bulk bytes written through Policy::write_range, so the
// flush policy sees every write (there is no raw store to the pool in engine/).
// Words that the engine stores use 63 bits: the top bit is spare, so the link_and_persist
// placement can keep its flag there.
//
// Invariants (of the durable list, between any two persistence events):
//  (1) The list from the root's head sentinel is sorted by key ascending, then version
//      descending; every node's successor offset is durable before any link to the node.
//  (2) A node's key, value, size word and successor are durable before the node is linked.
//  (3) A node's version is kMaxVersion until the combiner assigns it; a linked node whose
//      version is still kMaxVersion belongs to a write that did not complete.
//  (4) While batch_mode is 1, nodes with a version above commit_version belong to a batch
//      that did not complete.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "flit/flit.hpp"

namespace flintkv::internal {

// A 64-bit word whose top bit is never used by the engine's values.
struct word63 {
  std::uint64_t bits;
  friend bool operator==(word63, word63) = default;
};

inline constexpr std::uint64_t kMaxVersion = (std::uint64_t{1} << 63) - 1;

// A persistent offset from the pool base; 0 is null. Nodes are 8-aligned, so its low bit is
// free for link_and_persist.
struct node_offset {
  std::uint64_t value;
  friend bool operator==(node_offset, node_offset) = default;
};

}  // namespace flintkv::internal

template <>
struct flit::spare_bit<flintkv::internal::word63> {
  static constexpr std::uint64_t mask = std::uint64_t{1} << 63;
};
template <>
struct flit::spare_bit<flintkv::internal::node_offset> {
  static constexpr std::uint64_t mask = 1;
};

namespace flintkv::internal {

// The node's size word: key size (16 bits), value size (32 bits), flags (8 bits).
// Stored in the pool: do not renumber.
enum node_flags : std::uint64_t { kTombstone = 1 };

constexpr word63 pack_sizes(std::size_t key_size, std::size_t value_size, std::uint64_t flags) {
  return {static_cast<std::uint64_t>(key_size) | (static_cast<std::uint64_t>(value_size) << 16) |
          (flags << 48)};
}
constexpr std::size_t key_size_of(word63 w) { return w.bits & 0xffff; }
constexpr std::size_t value_size_of(word63 w) { return (w.bits >> 16) & 0xffffffff; }
constexpr std::uint64_t flags_of(word63 w) { return (w.bits >> 48) & 0xff; }

template <class Policy>
struct pnode {
  flit::persist<node_offset, Policy> next;  // successor in the list
  flit::persist<word63, Policy> version;    // kMaxVersion until attached
  flit::persist<word63, Policy> sizes;      // pack_sizes(key, value, flags)
  // Followed by the key bytes, then the value bytes.

  static constexpr std::size_t header_size() { return sizeof(pnode); }
  static constexpr std::size_t size_for(std::size_t key_size, std::size_t value_size) {
    return sizeof(pnode) + key_size + value_size;
  }
  char* body() { return reinterpret_cast<char*>(this) + sizeof(pnode); }
  const char* body() const { return reinterpret_cast<const char*>(this) + sizeof(pnode); }
};

// The engine's root, in the pool's root area.
template <class Policy>
struct root {
  flit::persist<word63, Policy> format;          // kFormat once initialised
  flit::persist<node_offset, Policy> head;       // the sentinel node (no key)
  flit::persist<word63, Policy> commit_version;  // newest version before the current batch
  flit::persist<word63, Policy> batch_mode;      // 1 while a batch is being attached
};

// Version of this layout; stored in the pool: bump when the layout changes.
inline constexpr std::uint64_t kFormat = 1;

// The layout depends only on the size of a persistent word under the placement.
template <class Policy>
constexpr bool layout_pinned() {
  constexpr std::size_t w = sizeof(flit::persist<word63, Policy>);
  static_assert(w == 8 || w == 16);
  static_assert(sizeof(pnode<Policy>) == 3 * w);
  static_assert(sizeof(root<Policy>) == 4 * w);
  static_assert(std::is_standard_layout_v<pnode<Policy>>);
  static_assert(offsetof(pnode<Policy>, next) == 0);
  static_assert(offsetof(pnode<Policy>, version) == w);
  static_assert(offsetof(pnode<Policy>, sizes) == 2 * w);
  return true;
}

}  // namespace flintkv::internal
