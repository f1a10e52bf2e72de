// What the structures share beyond the toolkit's building blocks (allocators/node_memory.hpp,
// allocators/modes.hpp, which they use as any structure would): the toolkit's names in
// namespace structures, and the key-value payload of their nodes.
//
// A node is created privately (alloc::create_node): placement-new of its object, fields
// written with private v-stores (payload bytes through Policy::write_range, links through
// persist<T>::store), then alloc::finish_init: one write-back per cache line when the mode
// persists `init`. The write-backs are fenced by the shared p-store that publishes the
// node, so its contents are durable before any durable link reaches it.
//
// Thread safety: free functions on nodes the calling thread owns, or on immutable fields.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#include "allocators/node_memory.hpp"
#include "allocators/modes.hpp"

namespace structures {

// The toolkit's building blocks under the names the structures (and their users) know.
using alloc::access_for;
using alloc::automatic;
using alloc::durability_mode;
using alloc::manual;
using alloc::node_memory;
using alloc::node_ref;
using alloc::original;
using alloc::out_of_space;
using alloc::persist_read;
using alloc::role;
using alloc::traversal;

}  // namespace structures

namespace structures::detail {

// The key and value of a node: written once before publication, immutable after.
struct payload {
  std::uint64_t key;
  std::uint64_t value;
};
static_assert(sizeof(payload) == 16);

// Writes a node's payload as a private v-store (flushed with the rest of the node).
template <class Policy>
inline void write_payload(payload& field, std::uint64_t key, std::uint64_t value) {
  const payload p{key, value};
  Policy::write_range(&field, &p, sizeof p, flit::volatile_);
}

}  // namespace structures::detail
