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

// DB::Check for any configuration.
template <class Config>
Status check_file(const std::string& path, CheckReport* report) {
  using P = typename Config::policy;
  Options options;
  options.read_only = true;  // never creates, cannot write: mapped read-only
  std::optional<alloc::pool> pool;
  if (Status s = open_pool_file<P>(options, path, &pool); !s.ok()) return s;
  pool_view view(*pool);
  auto& r = *pool->root_as<root<P>>();
  report->pool_size = pool->size();
  report->granularity = std::string(alloc::to_string(pool->store_granularity()));
  report->configuration = engine_for<Config>::configuration();
  std::uint64_t format = r.format.load(flit::volatile_, flit::private_).bits;
  if (Status s = engine_for<Config>::check_format(format, path); !s.ok()) return s;
  if (format == 0) return Status::OK();  // created, never initialised: empty
  typename engine_for<Config>::walk_result found;
  Status s = engine_for<Config>::walk(r, view, /*repair=*/false,
                                      [](auto&&...) {}, &found);
  report->versions = found.versions;
  report->keys = found.keys;
  report->live_keys = found.live_keys;
  report->uncommitted = found.uncommitted;
  report->batch_in_progress = found.batch_in_progress;
  report->newest_version = found.newest_version;
  return s;
}

}  // namespace flintkv::internal
