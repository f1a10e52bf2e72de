// What the test-only subjects share: root words on cache lines of their own, and nodes
// addressed by offsets from the region's base, checked before they are followed.
//
// Thread safety: immutable after construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "crashtest/harness.hpp"
#include "flit/flit.hpp"

namespace crashtest::subjects {

// One persistent word alone on its cache line, so that a crash image can hold it or not
// independently of its neighbours.
template <class Policy>
struct alignas(pv::cache_line) line_word {
  flit::persist<std::uint64_t, Policy> w;
};

// Nodes of type Node between `first` and the end of the region; offset 0 is null.
template <class Node>
class node_area {
 public:
  node_area(std::byte* base, std::size_t size, std::size_t first, std::string_view owner)
      : base_(base), size_(size), first_(first), owner_(owner) {}

  Node* at(std::uint64_t off) const { return reinterpret_cast<Node*>(base_ + off); }

  // Throws invariant_violation unless `off` is a node's place.
  void check(std::uint64_t off) const {
    if (off < first_ || off > size_ - sizeof(Node) || off % alignof(Node) != 0) {
      throw invariant_violation(std::string(owner_) + ": a link points to offset " +
                                std::to_string(off) + ", outside the node area");
    }
  }

  // More steps than this along a list means a cycle.
  std::size_t capacity() const { return size_ / sizeof(Node); }
  std::size_t size() const { return size_; }
  std::byte* base() const { return base_; }

 private:
  std::byte* base_;
  std::size_t size_;
  std::size_t first_;
  std::string_view owner_;
};

}  // namespace crashtest::subjects
