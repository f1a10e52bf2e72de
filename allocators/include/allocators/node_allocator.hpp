// node_allocator: DRAM blocks for volatile index nodes of varying size (a skiplist node's
// size depends on its height), with sized deallocation and no header per block.
//
// Sizes up to 4096 bytes come from size classes (multiples of 16 up to 512, then four per
// doubling), carved from 2 MiB arenas; each thread keeps a free list per class, and hands a
// whole list to a shared stack when it grows too long. Larger sizes go to operator new.
// Under AddressSanitizer free blocks are poisoned, so a reader that touches a freed node is
// reported even though the memory stays in the allocator.
//
//   alloc::node_allocator nodes;
//   void* n = nodes.allocate(node_size(height));     // nullptr if out of memory
//   nodes.deallocate(n, node_size(height));           // or domain.retire(nodes, n, size)
//
// Thread safety: allocate and deallocate may be called from any thread; a block may be freed
// by another thread than the one that allocated it.
// Invariants: a block is 16-byte aligned, and 64-byte aligned when its class size is a
// multiple of 64.
// REQUIRES: the allocator outlives every block (destruction releases the arenas).
#pragma once

#include <cstddef>
#include <memory>
#include <new>

#include "allocators/internal/node_core.hpp"
#include "allocators/internal/poison.hpp"

namespace alloc {

class node_allocator {
 public:
  static constexpr std::size_t max_class_size = detail::dram_classes::max;

  node_allocator() : core_(std::make_shared<detail::node_core>()) {}

  // `bytes` bytes, 16-byte aligned, uninitialised; nullptr if the system is out of memory.
  void* allocate(std::size_t bytes) noexcept {
    if (bytes > max_class_size) [[unlikely]] return ::operator new(bytes, std::nothrow);
    const unsigned c = detail::dram_classes::of(bytes);
    auto& bin = detail::thread_state<detail::node_cache>(*core_)->bins[c];
    if (bin.head == nullptr) [[unlikely]] {
      if (!core_->refill(bin, c)) return nullptr;
    }
    void* block = bin.head;
    detail::unpoison(block, detail::dram_classes::sizes[c]);
    bin.head = *static_cast<void**>(block);
    --bin.count;
    // The next allocation reads the next block's link and its caller writes the block.
    if (bin.head != nullptr) __builtin_prefetch(bin.head, 1);
    return block;
  }

  // Makes sure the calling thread holds at least n free blocks of `bytes`' class (at most
  // half a thread list's capacity; more is clamped), taking or carving them now: its next n
  // allocations of that size then take neither the shared mutex nor a page of a new arena.
  // For a caller that allocates inside a critical section of its own, to pay those costs
  // before it. False if the system is out of memory (the blocks it found are kept).
  bool reserve(std::size_t bytes, std::uint32_t n) noexcept {
    if (bytes > max_class_size) [[unlikely]] return true;
    const unsigned c = detail::dram_classes::of(bytes);
    auto& bin = detail::thread_state<detail::node_cache>(*core_)->bins[c];
    return bin.count >= n || core_->top_up(bin, c, n);
  }

  // REQUIRES: block came from allocate(bytes) with the same bytes, and is not free.
  void deallocate(void* block, std::size_t bytes) noexcept {
    if (bytes > max_class_size) [[unlikely]] {
      ::operator delete(block);
      return;
    }
    const unsigned c = detail::dram_classes::of(bytes);
    auto& bin = detail::thread_state<detail::node_cache>(*core_)->bins[c];
    if (bin.count == bin.capacity) [[unlikely]] core_->take_list(bin, c);
    *static_cast<void**>(block) = bin.head;
    bin.head = block;
    ++bin.count;
    detail::poison(block, detail::dram_classes::sizes[c]);
  }

  // Bytes of arenas taken from the system.
  std::size_t reserved_bytes() const { return core_->reserved_bytes(); }

  // For tests: arenas taken from the helper that maps them ahead, and mapped on demand;
  // and a wait until the helper has answered every request (node_core.hpp).
  std::size_t TEST_arenas_from_helper() const { return core_->TEST_arenas_from_helper(); }
  std::size_t TEST_arenas_mapped_on_demand() const {
    return core_->TEST_arenas_mapped_on_demand();
  }
  void TEST_await_helper() const noexcept { core_->TEST_await_helper(); }

 private:
  std::shared_ptr<detail::node_core> core_;
};

}  // namespace alloc
