// Opening the engine in any configuration: DB::Open uses the build's; tests and benchmarks
// name others (durability mode x counter placement x flush backend).
#pragma once

#include <memory>
#include <span>
#include <string>

#include "allocators/pool_backend.hpp"
#include "flintkv/db.hpp"
#include "flintkv/internal/build_config.hpp"
#include "flintkv/internal/engine.hpp"
#include "flintkv/internal/storage.hpp"

namespace flintkv::internal {

// The build's configuration: meson options flit_counters, flit_flush (through the pool's
// backend, which also handles page-granular mappings) and engine_durability.
using default_config = engine_config<flit::policy<flit::default_placement, alloc::pool_backend>,
                                     build_durability>;

template <class Config>
using engine_for = engine<Config, storage<typename Config::policy>>;

// The pool file at `path`.
template <class Config>
Status open_file(const Options& options, const std::string& path, std::unique_ptr<DB>* db) {
  std::unique_ptr<storage<typename Config::policy>> s;
  if (Status st = storage<typename Config::policy>::open_file(options, path, &s); !st.ok()) {
    return st;
  }
  return engine_for<Config>::open(std::move(s), options, db);
}

// A pool over a memory range (the pv model's region in crash tests); see
// storage::open_region.
template <class Config>
Status open_region(std::span<std::byte> region, const Options& options,
                   std::unique_ptr<DB>* db) {
  std::unique_ptr<storage<typename Config::policy>> s;
  if (Status st = storage<typename Config::policy>::open_region(region, options, &s);
      !st.ok()) {
    return st;
  }
  return engine_for<Config>::open(std::move(s), options, db);
}

// DB::Check for any configuration: every validation recovery makes (recovery.hpp: the
// root, every node and its checksum, the allocator's view of every block), writing nothing.
template <class Config>
Status check_file(const std::string& path, CheckReport* report) {
  using P = typename Config::policy;
  using recovery_t = recovery<P, typename Config::mode>;
  Options options;
  options.read_only = true;  // never creates, cannot write: mapped read-only
  std::unique_ptr<storage<P>> s;
  if (Status st = storage<P>::open_file(options, path, &s); !st.ok()) return st;
  report->pool_size = s->size();
  report->granularity = s->granularity();
  report->configuration = engine_for<Config>::configuration();
  struct ignore {
    void head(node_offset) {}
    void kept(node_offset, std::string_view, std::uint64_t, bool, std::size_t) {}
  };
  typename recovery_t::found found;
  typename recovery_t::plan repairs;
  Status st = recovery_t::validate(*s, ignore{}, &found, &repairs);
  report->versions = found.versions;
  report->keys = found.keys;
  report->live_keys = found.live_keys;
  report->uncommitted = found.uncommitted;
  report->batch_in_progress = found.batch_in_progress;
  report->newest_version = found.newest_version;
  return st;
}

}  // namespace flintkv::internal
