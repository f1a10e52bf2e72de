// pool_memory<Policy>: node memory (allocators/node_memory.hpp) over an alloc::pool, the
// memory of a durable structure: nodes come from the pool's persistent allocator, unlinked
// nodes go back to it through an epoch domain, and the pool's root area names the
// structure, so that recovery finds it. The pool's layout name is a label its user chooses
// (the pool refuses to open under another label).
//
//   auto mem = alloc::pool_memory<P>::create(region, "my_queue");  // or a pool file
//   if (!mem) ...mem.error()...
//   my_queue<P> q(*mem);                          // allocates its first nodes
//   mem->set_root(q.root());
//   ...crash...
//   auto mem = alloc::pool_memory<P>::open(region, "my_queue");
//   auto q = my_queue<P>::recover(*mem, mem->root(), mem->live_marker());
//   mem->finish_recovery();                       // then operations may run
//
// Recovery checks each offset it reads before following it: mem->contains(offset, bytes),
// or checked_node_at (allocators/node_memory.hpp), which throws bad_node_ref; the live
// marker refuses (throws) an offset that is not a block of the pool.
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
#include "allocators/node_memory.hpp"
#include "flit/persist.hpp"

namespace alloc {

template <class Policy>
class pool_memory {
 public:
  // A new pool over `region` (64-byte aligned, at least pool::min_size bytes) for a
  // structure, under the layout name `label` (1 to 31 characters).
  // Errors: those of pool::create_in (invalid_argument names a region too small).
  static result<pool_memory> create(std::span<std::byte> region, std::string_view label) {
    auto p = alloc::pool::create_in<Policy>(region, layout(label));
    if (!p) return std::move(p).error();
    return created(std::move(*p));
  }
  // A new pool file (see alloc::pool::create).
  static result<pool_memory> create(const std::filesystem::path& file, std::uint64_t size,
                                    std::string_view label) {
    auto p = alloc::pool::create<Policy>(file, size, layout(label));
    if (!p) return std::move(p).error();
    return created(std::move(*p));
  }
  // The pool in `region`, for recovery: report the structure's live nodes through
  // live_marker(), then call finish_recovery() before any operation. Refuses a pool made
  // under another label or by a build whose persistent words are laid out otherwise.
  static result<pool_memory> open(std::span<std::byte> region, std::string_view label) {
    auto p = alloc::pool::open_in(region, layout(label));
    if (!p) return std::move(p).error();
    return pool_memory(std::move(*p));
  }
  static result<pool_memory> open(const std::filesystem::path& file, std::string_view label) {
    auto p = alloc::pool::open(file, layout(label));
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
  // Whether [offset, offset + bytes) lies in the pool's heap, offset nonzero and a multiple
  // of 8: a place a node may be. (Not whether a block is allocated there.)
  bool contains(std::uint64_t offset, std::size_t bytes) const noexcept {
    return offset != 0 && offset % 8 == 0 && offset >= pool_.heap_begin() &&
           offset <= pool_.heap_end() && bytes <= pool_.heap_end() - offset;
  }
  // The pool's size in bytes.
  std::uint64_t size() const noexcept { return pool_.size(); }

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

  // The pool underneath (its name, layout, store granularity), the allocator and the epoch
  // domain, for what the node_memory members do not cover.
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

  static pool_layout layout(std::string_view label) {
    return {std::string(label), layout_fingerprint<Policy>()};
  }

  static result<pool_memory> created(alloc::pool p) {
    pool_memory m(std::move(p));
    if (auto s = m.heap_.finish_recovery(); !s) return std::move(s).error();
    return m;
  }

  explicit pool_memory(alloc::pool p) : pool_(std::move(p)), heap_(pool_) {}

  root_link& root_word() const noexcept { return *pool_.template root_as<root_link>(); }

  alloc::pool pool_;
  alloc::persistent_allocator<Policy> heap_;
  // Declared last: destroyed first, it frees what is still retired into heap_.
  alloc::epoch_domain domain_;
};

}  // namespace alloc
