// The engine's storage: a pool (a file mapped with libpmem2, or the pv model's region in
// crash tests), its persistent allocator, and DRAM for index nodes. Maps the allocators
// layer's errors onto Status.
//
// Thread safety: allocate, free and the DRAM functions may be called from any thread;
// recovery functions only while the engine is being opened.
#pragma once

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>

#include "allocators/epoch.hpp"
#include "allocators/node_allocator.hpp"
#include "allocators/persistent_allocator.hpp"
#include "allocators/pool.hpp"
#include "flintkv/options.hpp"
#include "flintkv/status.hpp"
#include "flintkv/internal/layout.hpp"

namespace flintkv::internal {

inline Status to_status(const alloc::error& e) {
  switch (e.code()) {
    case alloc::errc::ok: return Status::OK();
    case alloc::errc::not_found: return Status::NotFound(e.message());
    case alloc::errc::corruption: return Status::Corruption(e.message());
    case alloc::errc::invalid_argument: return Status::InvalidArgument(e.message());
    case alloc::errc::io_error: return Status::IOError(e.message());
    case alloc::errc::no_space: return Status::NoSpace(e.message());
    case alloc::errc::busy: return Status::Busy(e.message());
  }
  return Status::IOError(e.message());
}

static_assert(kRootHolder == alloc::format::root_offset);

// The layout name in the pool header: a pool made for something else is refused.
inline constexpr const char* kLayoutName = "flintkv";

template <class Policy>
alloc::pool_layout engine_layout() {
  return {kLayoutName, alloc::layout_fingerprint<Policy>()};
}

// Opens the pool file at `path` as the options say, or creates it.
template <class Policy>
Status open_pool_file(const Options& options, const std::string& path,
                      std::optional<alloc::pool>* out) {
  if (path.empty()) return Status::InvalidArgument("empty pool path");
  std::error_code ec;
  bool exists = std::filesystem::exists(path, ec);
  if (exists && options.error_if_exists) {
    return Status::InvalidArgument(path + ": exists (error_if_exists is set)");
  }
  // `ec` is set only when not even the file's absence is known (a name too long, a
  // directory that cannot be searched): pool::open reports why.
  if (!exists && !ec) {
    if (options.read_only) {
      return Status::NotFound(path + ": no such pool (a read-only open never creates one)");
    }
    if (!options.create_if_missing) {
      return Status::NotFound(path + ": no such pool (create_if_missing is not set)");
    }
    if (options.pool_size < kMinPoolSize) {
      return Status::InvalidArgument("pool size " + std::to_string(options.pool_size) +
                                     " below the minimum " + std::to_string(kMinPoolSize));
    }
    auto created = alloc::pool::create<Policy>(path, options.pool_size, engine_layout<Policy>());
    if (!created) return to_status(created.error());
    out->emplace(std::move(*created));
    return Status::OK();
  }
  auto opened = alloc::pool::open(path, engine_layout<Policy>(),
                                 options.read_only ? alloc::pool_access::read_only
                                                   : alloc::pool_access::read_write);
  if (!opened) return to_status(opened.error());
  out->emplace(std::move(*opened));
  return Status::OK();
}

template <class Policy>
class storage {
 public:
  // The pool file at `path`, opened or created as `options` say.
  static Status open_file(const Options& options, const std::string& path,
                          std::unique_ptr<storage>* out) {
    std::optional<alloc::pool> p;
    if (Status s = open_pool_file<Policy>(options, path, &p); !s.ok()) return s;
    out->reset(new storage(std::move(*p)));
    return Status::OK();
  }

  // A pool over `region` (the pv model's, in crash tests): created when
  // options.create_if_missing is set and the region is blank (zero header), opened
  // otherwise.
  static Status open_region(std::span<std::byte> region, const Options& options,
                            std::unique_ptr<storage>* out) {
    const bool blank = region.size() >= 64 &&
                       std::all_of(region.begin(), region.begin() + 64,
                                   [](std::byte b) { return b == std::byte{0}; });
    auto opened = options.create_if_missing && blank
                      ? alloc::pool::create_in<Policy>(region, engine_layout<Policy>())
                      : alloc::pool::open_in(region, engine_layout<Policy>());
    if (!opened) return to_status(opened.error());
    out->reset(new storage(std::move(*opened)));
    return Status::OK();
  }

  void* root_area() { return pool_.root(); }
  // The pool and its allocator, for the packed tier's runs (packed_run.hpp), which allocate,
  // free and mark their blocks themselves.
  const alloc::pool& pool() const { return pool_; }
  alloc::persistent_allocator<Policy>& heap() { return heap_; }

  Status allocate(std::size_t bytes, node_offset* out) {
    auto block = heap_.allocate(bytes);
    if (!block) return to_status(block.error());
    *out = node_offset{block->offset()};
    return Status::OK();
  }
  void free(node_offset off) { heap_.free(alloc::pptr<>(off.value)); }

  void* pointer(node_offset off) const { return pool_.base() + off.value; }
  // True if [off, off + n) lies inside the pool's heap (not its header, root or table).
  bool contains(node_offset off, std::size_t n) const {
    return off.value >= pool_.heap_begin() && off.value <= pool_.heap_end() &&
           n <= pool_.heap_end() - off.value;
  }
  std::uint64_t heap_bytes() const { return pool_.heap_end() - pool_.heap_begin(); }
  // No chunk of the heap was ever given out.
  bool untouched() const { return heap_.untouched(); }

  // Records that the node at `off`, of `bytes` bytes, is reachable; the first error (a
  // block its chunk tag does not describe) is reported by finish_recovery.
  void mark_live(node_offset off, std::size_t bytes) {
    if (auto s = heap_.mark_live(alloc::pptr<>(off.value), bytes); !s && recovery_error_.ok()) {
      recovery_error_ = to_status(s.error());
    }
  }
  Status finish_recovery() {
    if (!recovery_error_.ok()) return recovery_error_;
    if (auto s = heap_.finish_recovery(); !s) return to_status(s.error());
    return Status::OK();
  }

  void* dram_allocate(std::size_t bytes) {
    void* p = dram_.allocate(bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void dram_free(void* p, std::size_t bytes) { dram_.deallocate(p, bytes); }
  // True if a DRAM block of `bytes` need not be freed before the storage goes: the DRAM
  // allocator's destruction unmaps its arenas whole, and blocks of up to its largest class
  // live in them (node_allocator.hpp).
  static constexpr bool dram_released_whole(std::size_t bytes) {
    return bytes <= alloc::node_allocator::max_class_size;
  }
  // Frees DRAM that readers may still hold once none can (epoch.hpp).
  void retire_dram(void* p, std::size_t bytes) { epochs_.retire(dram_, p, bytes); }
  // The same for many blocks, behind one fence. Throws std::bad_alloc, none retired.
  void retire_dram(std::span<const alloc::node_block> blocks) { epochs_.retire(dram_, blocks); }
  // The DRAM allocator itself, for structures that retire what they free (the index's tree).
  alloc::node_allocator& dram() { return dram_; }
  // The readers' epochs: every reader of the index runs pinned.
  alloc::epoch_domain& epochs() { return epochs_; }

  std::string granularity() const { return std::string(alloc::to_string(pool_.store_granularity())); }
  std::uint64_t size() const { return pool_.size(); }
  std::uint64_t used() const { return heap_.stats().in_use_bytes; }
  std::string path() const { return pool_.name(); }
  bool read_only() const { return pool_.access() == alloc::pool_access::read_only; }

 private:
  explicit storage(alloc::pool p) : pool_(std::move(p)), heap_(pool_) {}

  alloc::pool pool_;
  alloc::persistent_allocator<Policy> heap_;
  alloc::node_allocator dram_;
  alloc::epoch_domain epochs_;  // after dram_: destroyed first, it frees what it holds there
  Status recovery_error_;
};

}  // namespace flintkv::internal
