// Building blocks of a durable structure: how its nodes refer to each other, what it needs
// of the memory they live in, and creating and finding nodes there. The structures of
// structures/ are built of these; so is a structure written outside the tree
// (docs/toolkit.md, examples/durable_queue/).
//
// Nodes live in one region (a persistent pool, or the pv model's region in tests) and refer
// to each other by node_ref: the node's offset from the region's base, so that a durable
// image stays valid wherever the region is mapped next time (never store a raw pointer in a
// persistent field). Node offsets are multiples of 8, which leaves three low bits of a
// node_ref for the algorithms and the toolkit:
//   bit 0  mark: e.g. Harris's "logically deleted" in a next pointer; the BST's flag;
//   bit 1  tag: e.g. the BST's (an edge that may no longer change);
//   bit 2  kept free for flit::link_and_persist, which keeps its flush flag there.
//
// Memory (the node_memory concept; alloc::pool_memory models it):
//  (1) base() is the region's first byte; offset 0 is never a node (it is the null ref).
//  (2) allocate(n) returns the offset of n fresh bytes aligned to min(64, bit_ceil(n)) and
//      at least 8, so a node of up to 64 bytes never straddles a cache line; it returns 0
//      when the region is full.
//  (3) deallocate(o, n) frees a node that was never published.
//  (4) retire(o, n) frees a node that was unlinked, once no operation that may still hold
//      a reference to it is running.
//  (5) pin() returns a guard that an operation holds for its whole duration: nodes retired
//      while the guard lives are not freed before it is destroyed.
//  (6) contains(o, n) says whether [o, o + n) may hold a node: o nonzero, a multiple of 8,
//      and the bytes inside the memory's node area. Recovery checks every offset it reads
//      from a crash image with it (checked_node_at) before following it.
//
// Thread safety: node_ref is a value. A node_memory's members may be called concurrently.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "flit/placement.hpp"

namespace alloc {

struct node_ref {
  static constexpr std::uint64_t mark_bit = 1;
  static constexpr std::uint64_t tag_bit = 2;
  static constexpr std::uint64_t reserved_bit = 4;  // flit::link_and_persist's flag
  static constexpr std::uint64_t low_bits = 7;

  std::uint64_t bits = 0;

  static constexpr node_ref at(std::uint64_t offset) noexcept { return node_ref{offset}; }

  constexpr std::uint64_t offset() const noexcept { return bits & ~low_bits; }
  constexpr bool null() const noexcept { return offset() == 0; }
  constexpr bool marked() const noexcept { return (bits & mark_bit) != 0; }
  constexpr bool tagged() const noexcept { return (bits & tag_bit) != 0; }
  constexpr node_ref with_mark() const noexcept { return node_ref{bits | mark_bit}; }
  constexpr node_ref with_tag() const noexcept { return node_ref{bits | tag_bit}; }
  constexpr node_ref without_tag() const noexcept { return node_ref{bits & ~tag_bit}; }
  // The reference alone, without mark or tag.
  constexpr node_ref clean() const noexcept { return node_ref{offset()}; }

  friend constexpr bool operator==(node_ref, node_ref) = default;
};
static_assert(sizeof(node_ref) == 8 && std::is_trivially_copyable_v<node_ref>);

template <class M>
concept node_memory = requires(M& m, const M& cm, std::size_t bytes, std::uint64_t offset) {
  { cm.base() } noexcept -> std::same_as<std::byte*>;
  { m.allocate(bytes) } -> std::same_as<std::uint64_t>;
  m.deallocate(offset, bytes);
  m.retire(offset, bytes);
  m.pin();
  { cm.contains(offset, bytes) } noexcept -> std::same_as<bool>;
};

// Thrown by an operation that found the region full; the structure is unchanged.
struct out_of_space : std::bad_alloc {
  const char* what() const noexcept override { return "alloc: the node region is full"; }
};

// Thrown by checked_node_at: a reference read from the region does not lead to a node (a
// corrupt or misread image).
class bad_node_ref : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The node a reference leads to (mark and tag ignored). REQUIRES: ref leads to a live Node.
template <class Node, node_memory Memory>
inline Node* node_at(const Memory& memory, node_ref ref) noexcept {
  return std::launder(reinterpret_cast<Node*>(memory.base() + ref.offset()));
}

// The same for a reference read from a crash image, during recovery: throws bad_node_ref,
// naming `what` and the offset, unless the Node's bytes lie in the memory's node area.
template <class Node, node_memory Memory>
inline Node* checked_node_at(const Memory& memory, node_ref ref, std::string_view what) {
  if (!memory.contains(ref.offset(), sizeof(Node)) || ref.offset() % alignof(Node) != 0) {
    throw bad_node_ref(std::string(what) + " leads to offset " + std::to_string(ref.offset()) +
                       ", which cannot hold a node of " + std::to_string(sizeof(Node)) +
                       " bytes");
  }
  return node_at<Node>(memory, ref);
}

// The reference to a node in the memory.
template <node_memory Memory>
inline node_ref ref_of(const Memory& memory, const void* node) noexcept {
  return node_ref::at(
      static_cast<std::uint64_t>(static_cast<const std::byte*>(node) - memory.base()));
}

// Allocates `bytes` (at least sizeof(Node)) in the region and constructs a Node there, to
// be initialized privately and then published (see finish_init in allocators/modes.hpp).
// Throws out_of_space when the region is full.
template <class Node, node_memory Memory>
inline std::pair<node_ref, Node*> create_node(Memory& memory, std::size_t bytes = sizeof(Node)) {
  std::uint64_t offset = memory.allocate(bytes);
  if (offset == 0) throw out_of_space{};
  Node* node = new (memory.base() + offset) Node();
  return {node_ref::at(offset), node};
}

}  // namespace alloc

// node_ref leaves bit 2 to flit::link_and_persist.
template <>
struct flit::spare_bit<alloc::node_ref> {
  static constexpr std::uint64_t mask = alloc::node_ref::reserved_bit;
};
