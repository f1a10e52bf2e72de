// What the structures need of the memory their nodes live in, and how they refer to nodes.
//
// Nodes live in one region (a persistent pool, or the pv model's region in tests) and refer
// to each other by node_ref: the node's offset from the region's base, so that a durable
// image stays valid wherever the region is mapped next time. Node offsets are multiples of
// 8, which leaves three low bits of a node_ref for the algorithms and the toolkit:
//   bit 0  mark: Harris's "logically deleted" in a next pointer; the BST's flag;
//   bit 1  the BST's tag (an edge that may no longer change);
//   bit 2  kept free for flit::link_and_persist, which keeps its flush flag there.
//
// Memory (the node_memory concept):
//  (1) base() is the region's first byte; offset 0 is never a node (it is the null ref).
//  (2) allocate(n) returns the offset of n fresh bytes aligned to min(64, bit_ceil(n)) and
//      at least 8, so a node of up to 64 bytes never straddles a cache line; it returns 0
//      when the region is full.
//  (3) deallocate(o, n) frees a node that was never published.
//  (4) retire(o, n) frees a node that was unlinked, once no operation that may still hold
//      a reference to it is running.
//  (5) pin() returns a guard that an operation holds for its whole duration: nodes retired
//      while the guard lives are not freed before it is destroyed.
//
// Thread safety: node_ref is a value. A node_memory's members may be called concurrently.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

#include "flit/placement.hpp"

namespace structures {

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
};

// Thrown by an insert that found the region full; the structure is unchanged.
struct out_of_space : std::bad_alloc {
  const char* what() const noexcept override { return "structures: the node region is full"; }
};

}  // namespace structures

// node_ref leaves bit 2 to flit::link_and_persist.
template <>
struct flit::spare_bit<structures::node_ref> {
  static constexpr std::uint64_t mask = structures::node_ref::reserved_bit;
};
