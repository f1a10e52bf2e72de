// Building blocks shared by the structures: turning refs into nodes, creating a node in the
// region, and writing its immutable fields through the toolkit.
//
// A node is created privately: placement-new of its object, fields written with private
// v-stores (payload bytes through Policy::write_range, links through persist<T>::store),
// then one write-back per cache line when the mode persists `init`. The write-backs are
// fenced by the shared p-store that publishes the node, so its contents are durable before
// any durable link reaches it.
//
// Thread safety: free functions on nodes the calling thread owns, or on immutable fields.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#include "structures/memory.hpp"
#include "structures/modes.hpp"

namespace structures::detail {

// The key and value of a node: written once before publication, immutable after.
struct payload {
  std::uint64_t key;
  std::uint64_t value;
};
static_assert(sizeof(payload) == 16);

template <class Node, node_memory Memory>
inline Node* node_at(const Memory& memory, node_ref ref) noexcept {
  return std::launder(reinterpret_cast<Node*>(memory.base() + ref.offset()));
}

template <node_memory Memory>
inline node_ref ref_of(const Memory& memory, const void* node) noexcept {
  return node_ref::at(static_cast<std::uint64_t>(static_cast<const std::byte*>(node) - memory.base()));
}

// Allocates `bytes` in the region and constructs a Node there.
// Throws out_of_space when the region is full.
template <class Node, node_memory Memory>
inline std::pair<node_ref, Node*> create_node(Memory& memory, std::size_t bytes) {
  std::uint64_t offset = memory.allocate(bytes);
  if (offset == 0) throw out_of_space{};
  Node* node = new (memory.base() + offset) Node();
  return {node_ref::at(offset), node};
}

// Writes a node's payload as a private v-store (flushed with the rest of the node).
template <class Policy>
inline void write_payload(payload& field, std::uint64_t key, std::uint64_t value) {
  const payload p{key, value};
  Policy::write_range(&field, &p, sizeof p, flit::volatile_);
}

// Ends the private initialization of [node, node + bytes): one pwb per line when the mode
// persists `init`. The next shared store of this thread fences them.
template <durability_mode Mode, class Policy>
inline void finish_init(const void* node, std::size_t bytes) {
  if constexpr (Mode::persisted(role::init)) Policy::flush_range(node, bytes);
}

}  // namespace structures::detail
