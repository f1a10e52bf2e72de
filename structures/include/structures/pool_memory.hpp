// pool_memory<Policy>: the node memory of the structures (structures/memory.hpp) over an
// alloc::pool: nodes come from the pool's persistent allocator, unlinked nodes go back to it
// through an epoch domain, and the pool's root area names the structure, so that recovery
// finds it.
//
//   auto mem = structures::pool_memory<P>::create(region);      // or a pool file: see below
//   structures::skiplist<structures::manual, P, structures::pool_memory<P>> s(*mem);
//   mem->set_root(s.root());
//   ...crash...
//   auto mem = structures::pool_memory<P>::open(region);
//   auto s = skiplist<...>::recover(*mem, mem->root(), mem->live_marker());
//   mem->finish_recovery();                                     // then operations may run
//
// Policy: the policy the structure runs on (its Mode::policy_for<P>), so that the pool's own
// writes (header, chunk table, root word) are seen by the same backend, e.g. the pv model.
//
// Thread safety: allocate, deallocate, retire and pin from any thread. open-time recovery
// (live_marker, finish_recovery) while nothing else runs.
// Invariants:
//  (1) Blocks of up to 64 bytes are requested as the next power of two, so the allocator's
//      size classes hand out blocks aligned to their size: a node of up to a cache line never
//      straddles two (the alignment node_memory promises).
// Persistence:
//  (1) Nothing on the allocation path is persisted; after a crash, the blocks the structure's
//      recovery reports are live and everything else is free (alloc::persistent_allocator).
//  (2) A retired block is freed only after every operation pinned when it was retired has
//      ended, and operations fence before they unpin, so its unlink is durable by then.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "allocators/epoch.hpp"
#include "allocators/persistent_allocator.hpp"
#include "allocators/pool.hpp"
#include "allocators/pptr.hpp"
#include "flit/persist.hpp"
#include "structures/memory.hpp"

namespace structures {

template <class Policy>
class pool_memory {
 public:
  // The pool layout name of pools made for the structures.
  static constexpr std::string_view layout_name = "structures";

  // A new pool over `region` (64-byte aligned), ready for a structure.
  static alloc::result<pool_memory> create(std::span<std::byte> region) {
    auto p = alloc::pool::create_in<Policy>(region, layout());
    if (!p) return std::move(p).error();
    pool_memory m(std::move(*p));
    if (auto s = m.heap_.finish_recovery(); !s) return std::move(s).error();
    return m;
  }
  // A new pool file (see alloc::pool::create).
  static alloc::result<pool_memory> create(const std::filesystem::path& file, std::uint64_t size) {
    auto p = alloc::pool::create<Policy>(file, size, layout());
    if (!p) return std::move(p).error();
    pool_memory m(std::move(*p));
    if (auto s = m.heap_.finish_recovery(); !s) return std::move(s).error();
    return m;
  }
  // The pool in `region`, for recovery: report the structure's live nodes through
  // live_marker(), then call finish_recovery() before any operation.
  static alloc::result<pool_memory> open(std::span<std::byte> region) {
    auto p = alloc::pool::open_in(region, layout());
    if (!p) return std::move(p).error();
    return pool_memory(std::move(*p));
  }
  static alloc::result<pool_memory> open(const std::filesystem::path& file) {
    auto p = alloc::pool::open(file, layout());
    if (!p) return std::move(p).error();
    return pool_memory(std::move(*p));
  }

  // ---- node_memory ----
  std::byte* base() const noexcept { return pool_.base(); }
  std::uint64_t allocate(std::size_t bytes) {
    auto block = heap_.allocate(block_size(bytes));
    return block ? block->offset() : 0;
  }
  void deallocate(std::uint64_t offset, std::size_t) noexcept { heap_.free(alloc::pptr<>(offset)); }
  void retire(std::uint64_t offset, std::size_t) { domain_.retire(heap_, alloc::pptr<>(offset)); }
  alloc::epoch_domain::guard pin() { return domain_.pin(); }

  // ---- the structure's root ----
  // Records (durably) where the structure's root is. REQUIRES: no operation runs.
  void set_root(std::uint64_t offset) {
    root_word().store(node_ref::at(offset), flit::persisted, flit::private_);
    Policy::operation_completion();
  }
  std::uint64_t root() const noexcept { return root_word().load(flit::volatile_, flit::private_).offset(); }

  // ---- recovery ----
  // A callable live(offset, bytes) for a structure's recover(): marks each block live.
  // Throws std::runtime_error if an offset is not a block of the pool (a corrupt image).
  auto live_marker() {
    return [this](std::uint64_t offset, std::size_t bytes) {
      if (auto s = heap_.mark_live(alloc::pptr<>(offset), block_size(bytes)); !s) {
        throw std::runtime_error(s.error().to_string());
      }
    };
  }
  // Rebuilds the free space from the marks. REQUIRES: once, after recovery, before use.
  void finish_recovery() {
    if (auto s = heap_.finish_recovery(); !s) throw std::runtime_error(s.error().to_string());
  }

  const alloc::pool& pool() const noexcept { return pool_; }
  alloc::persistent_allocator<Policy>& heap() noexcept { return heap_; }
  alloc::epoch_domain& domain() noexcept { return domain_; }

 private:
  // What a node of `bytes` bytes asks the allocator for: small nodes a power of two, so that
  // blocks of 48 bytes and less are aligned to their size.
  static std::size_t block_size(std::size_t bytes) noexcept {
    return bytes <= 64 ? std::bit_ceil(bytes) : bytes;
  }

  using root_link = flit::persist<node_ref, Policy>;

  static alloc::pool_layout layout() {
    return {std::string(layout_name), alloc::layout_fingerprint<Policy>()};
  }

  explicit pool_memory(alloc::pool p) : pool_(std::move(p)), heap_(pool_) {}

  root_link& root_word() const noexcept { return *pool_.template root_as<root_link>(); }

  alloc::pool pool_;
  alloc::persistent_allocator<Policy> heap_;
  // Declared last: destroyed first, it frees what is still retired into heap_.
  alloc::epoch_domain domain_;
};

}  // namespace structures
