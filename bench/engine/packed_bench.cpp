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
//   tiered/B  25 batches of B random keys, each packed into a small run of its own, then the
//             small runs merged into the large run as one batch and emptied: keys/s (of the
//             25 batches) and node_bytes_per_key (the small runs' nodes and the large run's
//             nodes the merge wrote, over the keys).
//   get       a uniformly random key's value: the index's binary search, the node's header
//             check, its fingerprints, the record's check and compare, the value copied out.
//   tiered_get/F  a Get through 25 small runs of 4096 random keys, newest first, each with a
//             key filter of F bits a key (none at 0), then the large run (the key hashed
//             once, the 25 filters' lines requested together): what a Get costs
//             while small runs wait to be merged. Counter: in_small (the share of Gets the
//             small runs answered).
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

constexpr std::size_t kSmallRuns = 25;
struct bench_root {
  flit::persist<in::stored_offset, policy> head;
  flit::persist<in::stored_offset, policy> small[kSmallRuns];  // the tiered benchmark's
  in::packed_tier_root<policy> tier;                           // tier_store's
};
in::word_place small_place(std::size_t i) {
  return {in::kRootHolder + 64 * (i + 1), in::word_field::packed_next};
}

struct store {
  std::size_t keys = num_keys();
  std::size_t region_bytes = keys * 400 + (64 << 20);
  std::byte* region = nullptr;
  std::optional<alloc::pool> pool;
  std::unique_ptr<alloc::persistent_allocator<policy>> heap;
  std::unique_ptr<run_type> run;
  const flintkv::tools::value_source values{kValueSize, flintkv::tools::kValueSeed};
  std::size_t value_position = 0;

  store() {
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
    // Every key, in one sorted batch.
    flintkv::tools::key_formatter formatter(kKeySize);
    std::vector<std::string> k(keys);
    std::vector<run_type::change> changes(keys);
    for (std::uint64_t i = 0; i < keys; ++i) {
      k[i] = formatter.key(i);
      changes[i] = {k[i], values.next(value_position), false};
    }
    check(run->apply(changes));
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
struct tier_store {
  using tier_type = in::packed_tier<policy, mode>;
  store base;  // its own pool and run, unused but for the pool and heap
  std::unique_ptr<tier_type> tier;

  tier_store() {
    auto* root = base.pool->root_as<bench_root>();
    tier_type::make_empty(*base.pool, &root->tier);
    in::durable<policy, mode>::fence();
    base.run->clear();
    tier = std::make_unique<tier_type>(*base.pool, *base.heap, &root->tier, kNode);
    store::check(tier->recover(false));
    flintkv::tools::key_formatter formatter(kKeySize);
    std::vector<std::string> k(base.keys);
    std::vector<run_type::change> changes(base.keys);
    std::size_t position = 0;
    for (std::uint64_t i = 0; i < base.keys; ++i) {
      k[i] = formatter.key(i);
      changes[i] = {k[i], base.values.next(position), false};
    }
    store::check(tier->flush(changes));
    store::check(tier->merge());
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

// The bytes of the large run's nodes a merge of `changes` wrote: the nodes its keys are in
// now (each written once).
double written_by(const store& s, const std::vector<run_type::change>& changes) {
  std::size_t touched = 0;
  std::optional<in::node_offset> last;
  for (const auto& c : changes) {
    const auto at = s.run->locate(c.key);
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
    written += written_by(s, changes);
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

// 25 batches of B random keys, each written as a small run of its own, then the 25 runs
// merged into the large run as one batch (the newest value of a key written twice) and
// emptied: the other way to large batches (engine-design.md, "The packed tier").
void BM_Tiered(benchmark::State& state) {
  store& s = the_store();
  const auto batch = static_cast<std::size_t>(state.range(0));
  flintkv::tools::random_source random(303);
  auto* root = s.pool->root_as<bench_root>();
  std::vector<std::unique_ptr<run_type>> small;
  for (std::size_t i = 0; i < kSmallRuns; ++i) {
    run_type::make_empty(&root->small[i], small_place(i));
    small.push_back(std::make_unique<run_type>(*s.pool, *s.heap, &root->small[i],
                                               small_place(i), kNode));
    store::check(small.back()->recover(false));
  }
  std::map<std::string, std::string_view> picked;
  std::vector<run_type::change> changes;
  std::string keys;  // the merged batch's keys, back to back
  std::vector<std::pair<std::size_t, std::size_t>> key_spans;
  double written = 0;
  for (auto _ : state) {
    for (std::size_t r = 0; r < kSmallRuns; ++r) {
      state.PauseTiming();
      pick_batch(s, batch, random, &picked, &changes);
      state.ResumeTiming();
      store::check(small[r]->apply(changes));
      written += static_cast<double>(small[r]->nodes() * kNode);
    }
    // The merge of the small runs: their cursors side by side, the smallest key next, the
    // newest run's value where runs share a key.
    std::vector<run_type::cursor> cursors;
    for (auto& run : small) {
      cursors.emplace_back(*run, true);
      store::check(cursors.back().seek_to_first());
    }
    changes.clear();
    keys.clear();
    key_spans.clear();
    while (true) {
      std::size_t newest = kSmallRuns;
      for (std::size_t r = kSmallRuns; r-- > 0;) {
        if (!cursors[r].valid()) continue;
        if (newest == kSmallRuns || cursors[r].key() < cursors[newest].key()) newest = r;
      }
      if (newest == kSmallRuns) break;
      const std::string k(cursors[newest].key());
      key_spans.push_back({keys.size(), k.size()});
      keys += k;
      changes.push_back({{}, cursors[newest].value(), false});
      for (auto& c : cursors) {
        if (c.valid() && c.key() == k) store::check(c.next());
      }
    }
    for (std::size_t i = 0; i < changes.size(); ++i) {
      changes[i].key = std::string_view(keys).substr(key_spans[i].first, key_spans[i].second);
    }
    store::check(s.run->apply(changes));
    state.PauseTiming();
    written += written_by(s, changes);
    state.ResumeTiming();
    for (auto& run : small) run->clear();
  }
  const double keys_in = static_cast<double>(kSmallRuns * batch) *
                         static_cast<double>(state.iterations());
  state.counters["keys/s"] = benchmark::Counter(keys_in, benchmark::Counter::kIsRate);
  state.counters["node_bytes_per_key"] = written / keys_in;
  s.count(state);
}
BENCHMARK(BM_Tiered)->Name("tiered")->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();

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

// A Get through the tiered layout: 25 small runs of 4096 random keys each (filters of F bits
// a key, none at 0) in front of the large run, looked in newest first.
void BM_TieredGet(benchmark::State& state) {
  store& s = the_store();
  const auto filter_bits = static_cast<unsigned>(state.range(0));
  constexpr std::size_t kSmallKeys = 4096;
  flintkv::tools::random_source random(304);
  auto* root = s.pool->root_as<bench_root>();
  std::vector<std::unique_ptr<run_type>> small;
  std::map<std::string, std::string_view> picked;
  std::vector<run_type::change> changes;
  for (std::size_t i = 0; i < kSmallRuns; ++i) {
    run_type::make_empty(&root->small[i], small_place(i));
    small.push_back(std::make_unique<run_type>(*s.pool, *s.heap, &root->small[i], small_place(i),
                                               kNode, nullptr, filter_bits));
    store::check(small.back()->recover(false));
    pick_batch(s, kSmallKeys, random, &picked, &changes);
    store::check(small.back()->apply(changes));
  }
  flintkv::tools::key_formatter formatter(kKeySize);
  std::string value;
  std::size_t in_small = 0;
  for (auto _ : state) {
    const std::string_view key = formatter.key(random.uniform(s.keys));
    // The key hashed once, the filters' lines requested together, then the runs newest
    // first.
    const std::uint32_t hash = in::key_hash(key);
    for (const auto& run : small) run->prefetch_filter(hash);
    flintkv::Status found = flintkv::Status::NotFound("");
    for (std::size_t r = kSmallRuns; r-- > 0 && found.IsNotFound();) {
      if (small[r]->may_hold(hash)) found = small[r]->get_past_filter(key, &value);
    }
    if (found.ok()) {
      ++in_small;
    } else {
      store::check(s.run->get(key, &value));
    }
  }
  for (auto& run : small) run->clear();
  state.counters["in_small"] =
      static_cast<double>(in_small) / static_cast<double>(state.iterations());
  s.count(state);
}
BENCHMARK(BM_TieredGet)->Name("tiered_get")->Arg(0)->Arg(10)->UseRealTime();

void BM_Seek(benchmark::State& state) {
  store& s = the_store();
  flintkv::tools::key_formatter formatter(kKeySize);
  flintkv::tools::random_source random(302);
  std::string key, value;
  run_type::cursor cursor(*s.run, true);
  for (auto _ : state) {
    store::check(cursor.seek(formatter.key(random.uniform(s.keys))));
    for (int step = 0; cursor.valid(); ++step) {  // the Seek's key, then 10 Next
      key.assign(cursor.key());
      value.assign(cursor.value());
      benchmark::DoNotOptimize(key.data());
      benchmark::DoNotOptimize(value.data());
      if (step == 10) break;
      store::check(cursor.next());
    }
  }
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
  flintkv::tools::key_formatter formatter(kKeySize);
  flintkv::tools::random_source random(302);
  std::string key, value;
  tier_store::tier_type::cursor cursor(*t.tier, true);
  for (auto _ : state) {
    store::check(cursor.seek(formatter.key(random.uniform(t.base.keys))));
    for (int step = 0; cursor.valid(); ++step) {  // the Seek's key, then 10 Next
      key.assign(cursor.key());
      value.assign(cursor.value());
      benchmark::DoNotOptimize(key.data());
      benchmark::DoNotOptimize(value.data());
      if (step == 10) break;
      store::check(cursor.next());
    }
  }
}
BENCHMARK(BM_TierSeek)->Name("tier_seek")->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
