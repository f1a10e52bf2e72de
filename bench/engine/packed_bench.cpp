// Packed runs (engine/src/flintkv/internal/packed_run.hpp) at the benchmarks' scale: what the
// planned packed tier costs in space, in merging and in reading, before any engine uses it
// (docs/engine-design.md, "The packed tier").
//
// The store: PACKED_BENCH_NUM keys (default 1M) of 16 bytes with 64-byte values, the keys and
// values `flintkv bench` writes, in a packed run of 4 KiB nodes, in a pool over an anonymous
// DRAM mapping (the emulated NVM), manual mode, the build's counter placement and the CPU's
// best flush instruction, every read checked. It is built once by one batch of every key.
//
// Benchmarks:
//   merge/B   a batch of B uniformly random keys with new values, merged into the run: the
//             packed tier's writing, on one core. Counters: keys/s (merged), node_bytes_per_key
//             (the blocks of the nodes the batch's keys are in afterwards, which it wrote,
//             over B).
//   tiered/B  a packed tier's writing (packed_tier.hpp, the same keys in a pool of its own):
//             24 batches of B random keys flushed, each a small run, then merged into the
//             large run: keys/s (of the 24 batches) and node_bytes_per_key (the small runs'
//             nodes and the large run's nodes the merge wrote, over the keys).
//   tiered_shared/B/S  tiered/B in a tier with an epoch domain (readers beside its writer
//             may be pinned; none is here), whose merges into the large run give old nodes
//             back after each slice (S = 1, packed_run's default) or only at their end
//             (S = 0): keys/s, and pool_resident_MiB (the pool's pages touched by the end).
//   get       a uniformly random key's value: the index's binary search, the node's header
//             check, its fingerprints, the record's check and compare, the value copied out.
//   tiered_get  a Get through the tier with 24 small runs of 4096 random keys in front of its
//             large run (key filters of 10 bits a key, asked first).
//   seek      a run cursor's seek to a uniformly random key, then it and the 10 records after
//             it (the peers' seekrandom: Seek + 10 Next), each record checked and its key and
//             value copied out.
//   tier_get, tier_seek  get and seek through a packed tier (packed_tier.hpp) of the same keys,
//             all in its large run: the tier's own cost over the run's.
// Counters on the run's benchmarks: bytes_per_key (the run's blocks over the keys).
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "flintkv/internal/packed_run.hpp"
#include "flintkv/internal/packed_tier.hpp"
#include "workload.hpp"

namespace {

namespace in = flintkv::internal;
using policy = flit::policy<flit::default_placement, flit::detected>;
using mode = flintkv::manual;
using run_type = in::packed_run<policy, mode>;

constexpr std::size_t kNode = 4096;
constexpr std::size_t kKeySize = 16, kValueSize = 64;
constexpr in::word_place kHeadPlace{in::kRootHolder, in::word_field::packed_next};

std::size_t num_keys() {
  const char* n = std::getenv("PACKED_BENCH_NUM");
  return n != nullptr ? std::stoull(n) : 1000000;
}

struct bench_root {
  flit::persist<in::stored_offset, policy> head;
  in::packed_tier_root<policy> tier;  // tier_store's
};

struct store {
  std::size_t keys = num_keys();
  std::size_t region_bytes = keys * 400 + (64 << 20);
  std::byte* region = nullptr;
  std::optional<alloc::pool> pool;
  std::unique_ptr<alloc::persistent_allocator<policy>> heap;
  std::unique_ptr<run_type> run;
  const flintkv::tools::value_source values{kValueSize, flintkv::tools::kValueSeed};
  std::size_t value_position = 0;

  // With `fill`, every key, in one sorted batch, into the run.
  explicit store(bool fill = true) {
    void* p = mmap(nullptr, region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    region = static_cast<std::byte*>(p);
    auto created = alloc::pool::create_in<policy>(
        {region, region_bytes}, {"packed-bench", alloc::layout_fingerprint<policy>()});
    if (!created) throw std::runtime_error(created.error().to_string());
    pool.emplace(std::move(created).value());
    heap = std::make_unique<alloc::persistent_allocator<policy>>(*pool);
    if (!heap->finish_recovery()) throw std::runtime_error("finish_recovery");
    auto* root = pool->root_as<bench_root>();
    run_type::make_empty(&root->head, kHeadPlace);
    run = std::make_unique<run_type>(*pool, *heap, &root->head, kHeadPlace, kNode);
    check(run->recover(false));
    if (fill) {
      every_key([&](std::span<const run_type::change> changes) { return run->apply(changes); });
    }
  }
  // Writes every key with a value, in one sorted batch, by `write`.
  template <class Write>
  void every_key(Write write) {
    flintkv::tools::key_formatter formatter(kKeySize);
    std::vector<std::string> k(keys);
    std::vector<run_type::change> changes(keys);
    for (std::uint64_t i = 0; i < keys; ++i) {
      k[i] = formatter.key(i);
      changes[i] = {k[i], values.next(value_position), false};
    }
    check(write(std::span<const run_type::change>(changes)));
  }
  ~store() {
    run.reset();
    heap.reset();
    pool.reset();
    munmap(region, region_bytes);
  }
  static void check(const flintkv::Status& s) {
    if (!s.ok()) throw std::runtime_error(s.ToString());
  }
  void count(benchmark::State& state) const {
    state.counters["bytes_per_key"] =
        static_cast<double>(run->block_bytes()) / static_cast<double>(keys);
  }
};

store& the_store() {
  static store s;
  return s;
}

// The same keys and values in a packed tier (packed_tier.hpp) of its own pool: flushed as
// one batch, then merged, so that its large run holds them all and its small runs are empty.
// With `shared`, the tier has an epoch domain, as one with readers beside its writer has.
struct tier_store {
  using tier_type = in::packed_tier<policy, mode>;
  store base{false};  // the pool, its heap and the values; its run stays empty
  std::unique_ptr<alloc::epoch_domain> epochs;
  std::unique_ptr<tier_type> tier;

  explicit tier_store(bool shared = false) {
    if (shared) epochs = std::make_unique<alloc::epoch_domain>();
    auto* root = base.pool->root_as<bench_root>();
    tier_type::make_empty(*base.pool, &root->tier, kNode);
    in::durable<policy, mode>::fence();
    tier = std::make_unique<tier_type>(*base.pool, *base.heap, &root->tier, kNode, epochs.get());
    store::check(tier->recover(false));
    base.every_key([&](std::span<const run_type::change> changes) { return tier->flush(changes); });
    store::check(tier->merge());
  }
  ~tier_store() {
    tier.reset();
    for (int i = 0; epochs && epochs->pending() != 0 && i < 8; ++i) epochs->collect();
  }
  // The pool's pages touched so far (they count in the process's resident memory).
  double resident_mib() const {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> in((base.region_bytes + page - 1) / page);
    if (mincore(base.region, base.region_bytes, in.data()) != 0) throw std::runtime_error("mincore");
    std::size_t touched = 0;
    for (unsigned char c : in) touched += c & 1;
    return static_cast<double>(touched * page) / (1 << 20);
  }
};

tier_store& the_tier() {
  static tier_store s;
  return s;
}

// A batch of `n` distinct uniformly random keys with new values, sorted, into *changes
// (whose keys are views into *picked).
void pick_batch(store& s, std::size_t n, flintkv::tools::random_source& random,
                std::map<std::string, std::string_view>* picked,
                std::vector<run_type::change>* changes) {
  flintkv::tools::key_formatter formatter(kKeySize);
  picked->clear();
  while (picked->size() < n) {
    picked->emplace(formatter.key(random.uniform(s.keys)), s.values.next(s.value_position));
  }
  changes->clear();
  for (const auto& [k, v] : *picked) changes->push_back({k, v, false});
}

// The bytes of the nodes of `run` a merge of `changes` wrote: the nodes its keys are in now
// (each written once).
double written_by(const run_type& run, std::span<const run_type::change> changes) {
  std::size_t touched = 0;
  std::optional<in::node_offset> last;
  for (const auto& c : changes) {
    const auto at = run.locate(c.key);
    if (at && (!last || at->first != *last)) {
      ++touched;
      last = at->first;
    }
  }
  return static_cast<double>(touched * kNode);
}

void BM_Merge(benchmark::State& state) {
  store& s = the_store();
  const auto batch = static_cast<std::size_t>(state.range(0));
  flintkv::tools::random_source random(300);
  std::map<std::string, std::string_view> picked;
  std::vector<run_type::change> changes;
  double written = 0;
  for (auto _ : state) {
    state.PauseTiming();
    pick_batch(s, batch, random, &picked, &changes);
    state.ResumeTiming();
    store::check(s.run->apply(changes));
    state.PauseTiming();
    written += written_by(*s.run, changes);
    state.ResumeTiming();
  }
  state.counters["keys/s"] = benchmark::Counter(
      static_cast<double>(batch * static_cast<std::size_t>(state.iterations())),
      benchmark::Counter::kIsRate);
  state.counters["node_bytes_per_key"] =
      written / static_cast<double>(batch * static_cast<std::size_t>(state.iterations()));
  s.count(state);
}
BENCHMARK(BM_Merge)->Name("merge")->Arg(4096)->Arg(32768)->Unit(benchmark::kMillisecond)->UseRealTime();

// A tier's writing: 24 batches of B random keys flushed (each a small run of its own), then
// merged into the large run (the newest value of a key written twice), the small runs
// emptied: the other way to large batches (engine-design.md, "The packed tier").
void tiered_rounds(benchmark::State& state, tier_store& t) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  flintkv::tools::random_source random(303);
  std::map<std::string, std::string_view> picked;
  std::vector<run_type::change> changes;
  std::vector<std::string> merged;  // the keys of a merge, for its bytes written
  double written = 0;
  for (auto _ : state) {
    state.PauseTiming();
    merged.clear();
    state.ResumeTiming();
    for (std::size_t r = 0; r < in::kPackedSmallRuns; ++r) {
      state.PauseTiming();
      pick_batch(t.base, batch, random, &picked, &changes);
      for (const auto& c : changes) merged.emplace_back(c.key);
      state.ResumeTiming();
      store::check(t.tier->flush(changes));
    }
    state.PauseTiming();
    for (std::size_t slot = 0; slot < in::kPackedSmallRuns; ++slot) {
      written += static_cast<double>(t.tier->small(slot).nodes() * kNode);
    }
    state.ResumeTiming();
    store::check(t.tier->merge());
    state.PauseTiming();
    std::sort(merged.begin(), merged.end());
    merged.erase(std::unique(merged.begin(), merged.end()), merged.end());
    changes.clear();
    for (const auto& k : merged) changes.push_back({k, {}, false});
    written += written_by(t.tier->large(), changes);
    state.ResumeTiming();
  }
  const double keys_in = static_cast<double>(in::kPackedSmallRuns * batch) *
                         static_cast<double>(state.iterations());
  state.counters["keys/s"] = benchmark::Counter(keys_in, benchmark::Counter::kIsRate);
  state.counters["node_bytes_per_key"] = written / keys_in;
}

void BM_Tiered(benchmark::State& state) { tiered_rounds(state, the_tier()); }
BENCHMARK(BM_Tiered)->Name("tiered")->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();

// tiered/B with an epoch domain, as beside readers, whose merges publish the large run
// after each slice of old nodes (sliced = 1) or only at their end (0), each in a store of its
// own: keys/s, and the pool's pages touched by the end.
void BM_TieredShared(benchmark::State& state) {
  static tier_store stores[2]{tier_store(true), tier_store(true)};
  tier_store& t = stores[state.range(1)];
  if (state.range(1) == 0) t.tier->set_slice_bytes(SIZE_MAX);
  tiered_rounds(state, t);
  state.counters["pool_resident_MiB"] = t.resident_mib();
}
BENCHMARK(BM_TieredShared)
    ->Name("tiered_shared")
    ->Args({4096, 1})
    ->Args({4096, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_Get(benchmark::State& state) {
  store& s = the_store();
  flintkv::tools::key_formatter formatter(kKeySize);
  flintkv::tools::random_source random(301);
  std::string value;
  for (auto _ : state) {
    store::check(s.run->get(formatter.key(random.uniform(s.keys)), &value));
  }
  s.count(state);
}
BENCHMARK(BM_Get)->Name("get")->UseRealTime();

// A Get through a tier with 24 small runs of 4096 random keys each in front of its large
// run (their filters asked first): what a Get costs while small runs wait to be merged.
void BM_TieredGet(benchmark::State& state) {
  tier_store& t = the_tier();
  constexpr std::size_t kSmallKeys = 4096;
  flintkv::tools::random_source random(304);
  std::map<std::string, std::string_view> picked;
  std::vector<run_type::change> changes;
  for (std::size_t r = 0; r < in::kPackedSmallRuns; ++r) {
    pick_batch(t.base, kSmallKeys, random, &picked, &changes);
    store::check(t.tier->flush(changes));
  }
  flintkv::tools::key_formatter formatter(kKeySize);
  std::string value;
  for (auto _ : state) {
    store::check(t.tier->get(formatter.key(random.uniform(t.base.keys)), &value));
  }
  store::check(t.tier->merge());
}
BENCHMARK(BM_TieredGet)->Name("tiered_get")->UseRealTime();

// The peers' seekrandom on a cursor: a seek to a uniformly random key of `keys`, then it and
// the 10 keys after it (Seek + 10 Next), each key and value copied out.
template <class Cursor>
void seek_and_next(benchmark::State& state, Cursor& cursor, std::size_t keys) {
  flintkv::tools::key_formatter formatter(kKeySize);
  flintkv::tools::random_source random(302);
  std::string key, value;
  for (auto _ : state) {
    store::check(cursor.seek(formatter.key(random.uniform(keys))));
    for (int step = 0; cursor.valid(); ++step) {
      key.assign(cursor.key());
      value.assign(cursor.value());
      benchmark::DoNotOptimize(key.data());
      benchmark::DoNotOptimize(value.data());
      if (step == 10) break;
      store::check(cursor.next());
    }
  }
}

void BM_Seek(benchmark::State& state) {
  store& s = the_store();
  run_type::cursor cursor(*s.run, true);
  seek_and_next(state, cursor, s.keys);
  s.count(state);
}
BENCHMARK(BM_Seek)->Name("seek")->UseRealTime();

// get and seek through a tier whose keys are all in its large run: what the tier's own
// work costs (its empty small runs passed, its cursor's checks that no run changed).
void BM_TierGet(benchmark::State& state) {
  tier_store& t = the_tier();
  flintkv::tools::key_formatter formatter(kKeySize);
  flintkv::tools::random_source random(301);
  std::string value;
  for (auto _ : state) {
    store::check(t.tier->get(formatter.key(random.uniform(t.base.keys)), &value));
  }
}
BENCHMARK(BM_TierGet)->Name("tier_get")->UseRealTime();

void BM_TierSeek(benchmark::State& state) {
  tier_store& t = the_tier();
  tier_store::tier_type::cursor cursor(*t.tier, true);
  seek_and_next(state, cursor, t.base.keys);
}
BENCHMARK(BM_TierSeek)->Name("tier_seek")->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
