// The FliT paper's evaluation (section 6) on this machine: each structure in each durability
// mode under each counter placement, side by side, enumerated at compile time with Hana.
//
// Benchmark names: <structure>/<mode>/<placement>/keys:<K>/updates:<U>/real_time/threads:<T>
//   structure  list, hash_table, bst, skiplist
//   mode       original (plain atomics; placement "atomic"), automatic, traversal, manual
//   placement  hashed (1 MiB table), adjacent, link_and_persist, plain, nonpersistent
//   K          the key range; the structure is prefilled with K/2 distinct random keys
//   U          percent of operations that are updates (half inserts, half removes; the rest
//              are finds), keys uniform in [0, K)
// Counters: Mops (million operations per second, all threads together; the console shows
// it as N/s), pwb/op, pfence/op, and vs_original: this throughput over the `original`
// mode's for the same structure and point, measured earlier in the same run (absent when
// that point was filtered out).
//
// Nodes live in a pool over an anonymous DRAM mapping (the emulated NVM), allocated by the
// persistent allocator and reclaimed through the epoch domain, as in a real deployment;
// flushes use the CPU's best instruction. Each (structure, mode, placement, keys) is
// prefilled once and measured at every update ratio and thread count, original first.
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <boost/hana.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "flit/flit.hpp"
#include "structures/bst.hpp"
#include "structures/harris_list.hpp"
#include "structures/hash_table.hpp"
#include "allocators/modes.hpp"
#include "allocators/pool_memory.hpp"
#include "structures/skiplist.hpp"

namespace hana = boost::hana;

namespace {

// ---- what is enumerated -----------------------------------------------------------------

struct list_kind {
  template <class M, class P, class Mem>
  using type = structures::harris_list<M, P, Mem>;
  static std::vector<std::int64_t> key_ranges() { return {128}; }
};
struct hash_table_kind {
  template <class M, class P, class Mem>
  using type = structures::hash_table<M, P, Mem>;
  static std::vector<std::int64_t> key_ranges() { return {10'000, 1'000'000}; }
};
struct bst_kind {
  template <class M, class P, class Mem>
  using type = structures::bst<M, P, Mem>;
  static std::vector<std::int64_t> key_ranges() { return {10'000, 1'000'000}; }
};
struct skiplist_kind {
  template <class M, class P, class Mem>
  using type = structures::skiplist<M, P, Mem>;
  static std::vector<std::int64_t> key_ranges() { return {10'000, 1'000'000}; }
};

constexpr auto kinds = hana::tuple_t<list_kind, hash_table_kind, bst_kind, skiplist_kind>;
constexpr auto persistent_modes = hana::tuple_t<structures::automatic, structures::traversal, structures::manual>;
constexpr auto placements =
    hana::tuple_t<flit::hashed<(1u << 20)>, flit::adjacent, flit::link_and_persist, flit::plain, flit::nonpersistent>;
const std::vector<std::int64_t> update_percents{0, 5, 50};
const std::vector<int> thread_counts{1, 2};

template <class Placement>
using policy_of = flit::policy<Placement, flit::default_backend>;

// ---- the structure under test, prefilled once per (configuration, key range) ------------

constexpr std::size_t region_bytes = std::size_t{4} << 30;  // reserved, touched as used

// An anonymous mapping: pages cost nothing until a node is allocated there.
struct mapping {
  explicit mapping(std::size_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<std::byte*>(p);
  }
  ~mapping() { ::munmap(base_, bytes_); }
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  std::span<std::byte> span() const { return {base_, bytes_}; }

 private:
  std::byte* base_;
  std::size_t bytes_;
};

template <class Memory>
Memory created(alloc::result<Memory> r) {
  if (!r) throw std::runtime_error(r.error().to_string());
  return std::move(*r);
}

struct instance_base {
  virtual ~instance_base() = default;
};

template <class Kind, class Mode, class Policy>
struct instance : instance_base {
  using memory = alloc::pool_memory<typename Mode::template policy_for<Policy>>;
  using structure = typename Kind::template type<Mode, Policy, memory>;

  explicit instance(std::int64_t keys) : region(region_bytes), mem(created(memory::create(region.span(), "structures"))) {
    if constexpr (std::is_constructible_v<structure, memory&, std::size_t>) {
      s = std::make_unique<structure>(mem, std::bit_ceil(static_cast<std::size_t>(keys) / 2));
    } else {
      s = std::make_unique<structure>(mem);
    }
    std::vector<std::uint64_t> order(static_cast<std::size_t>(keys));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(keys));
    for (std::size_t i = 0; i < order.size(); i += 2) s->insert(order[i], order[i]);
  }

  mapping region;
  memory mem;
  std::unique_ptr<structure> s;
};

// The one live instance (a new configuration drops the previous one).
std::mutex instance_mutex;
std::string instance_name;
std::unique_ptr<instance_base> current_instance;

template <class Kind, class Mode, class Policy>
auto& instance_for(const std::string& name, std::int64_t keys) {
  std::lock_guard lock(instance_mutex);
  if (instance_name != name) {
    current_instance.reset();
    current_instance = std::make_unique<instance<Kind, Mode, Policy>>(keys);
    instance_name = name;
  }
  return *static_cast<instance<Kind, Mode, Policy>*>(current_instance.get())->s;
}

// ---- the measured loop ------------------------------------------------------------------

template <class Kind, class Mode, class Policy>
void run(benchmark::State& state, const std::string& config) {
  const std::int64_t keys = state.range(0);
  const std::int64_t updates = state.range(1);
  auto& s = instance_for<Kind, Mode, Policy>(config + "/keys:" + std::to_string(keys), keys);
  std::mt19937_64 rng(0x5eed + 7919 * static_cast<std::uint64_t>(state.thread_index()));
  flit::stats_scope scope;
  for (auto _ : state) {
    const std::uint64_t r = rng();
    const std::uint64_t key = (r >> 8) % static_cast<std::uint64_t>(keys);
    const std::uint64_t dice = r % 200;  // updates / 200 inserts, as many removes, then finds
    if (dice < static_cast<std::uint64_t>(updates)) {
      benchmark::DoNotOptimize(s.insert(key, key));
    } else if (dice < static_cast<std::uint64_t>(2 * updates)) {
      benchmark::DoNotOptimize(s.remove(key));
    } else {
      benchmark::DoNotOptimize(s.find(key));
    }
  }
  const flit::counts used = scope.delta();
  using benchmark::Counter;
  state.counters["Mops"] = Counter(static_cast<double>(state.iterations()) / 1e6, Counter::kIsRate);
  state.counters["pwb/op"] = Counter(static_cast<double>(used.pwb), Counter::kAvgIterations);
  state.counters["pfence/op"] = Counter(static_cast<double>(used.pfence), Counter::kAvgIterations);
}

// Google Benchmark finishes the counters (sums over threads, divides rates by the run's real
// time) before it reports a run, so the ratio to `original` is added by the reporters: a
// run named <structure>/original/atomic/<point> is remembered, and every other run of the
// same structure and point gets vs_original = its Mops over that one.
template <class Base>
class with_ratio : public Base {
 public:
  void ReportRuns(const std::vector<benchmark::BenchmarkReporter::Run>& runs) override {
    std::vector<benchmark::BenchmarkReporter::Run> out = runs;
    for (auto& run : out) {
      auto mops = run.counters.find("Mops");
      if (mops == run.counters.end()) continue;
      const auto [structure, mode, point] = split(run.benchmark_name());
      const std::string key = structure + "|" + point;
      if (mode == "original") {
        original_[key] = mops->second.value;
      } else if (auto it = original_.find(key); it != original_.end() && it->second > 0) {
        run.counters["vs_original"] = benchmark::Counter(mops->second.value / it->second);
      }
    }
    Base::ReportRuns(out);
  }

 private:
  // "<structure>/<mode>/<placement>/<point>" -> (structure, mode, point)
  static std::tuple<std::string, std::string, std::string> split(const std::string& name) {
    const auto a = name.find('/');
    const auto b = name.find('/', a + 1);
    const auto c = name.find('/', b + 1);
    if (a == std::string::npos || b == std::string::npos || c == std::string::npos) return {name, "", ""};
    return {name.substr(0, a), name.substr(a + 1, b - a - 1), name.substr(c + 1)};
  }
  std::map<std::string, double> original_;
};

template <class Kind, class Mode, class Policy>
void register_config(const std::string& structure, const std::string& config_name, std::int64_t keys) {
  const std::string config = structure + "/" + config_name;
  auto* b = benchmark::RegisterBenchmark(config.c_str(), [config](benchmark::State& state) {
    run<Kind, Mode, Policy>(state, config);
  });
  for (std::int64_t u : update_percents) b->Args({keys, u});
  b->ArgNames({"keys", "updates"});
  for (int t : thread_counts) b->Threads(t);
  b->UseRealTime();
}

const std::string kind_names[] = {"list", "hash_table", "bst", "skiplist"};

void register_all() {
  std::size_t kind_index = 0;
  hana::for_each(kinds, [&](auto kind_type) {
    using kind = typename decltype(kind_type)::type;
    const std::string structure = kind_names[kind_index++];
    for (std::int64_t keys : kind::key_ranges()) {
      // Original first, so that every other configuration can be compared with it.
      register_config<kind, structures::original, policy_of<flit::nonpersistent>>(structure, "original/atomic", keys);
      hana::for_each(persistent_modes, [&](auto mode_type) {
        using mode = typename decltype(mode_type)::type;
        hana::for_each(placements, [&](auto placement_type) {
          using placement = typename decltype(placement_type)::type;
          register_config<kind, mode, policy_of<placement>>(
              structure, std::string(mode::name) + "/" + std::string(placement::name), keys);
        });
      });
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  // Google Benchmark takes a file reporter only together with --benchmark_out.
  const bool to_file = std::any_of(argv + 1, argv + argc, [](const char* a) {
    return std::string_view(a).starts_with("--benchmark_out=");
  });
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  with_ratio<benchmark::ConsoleReporter> display;
  with_ratio<benchmark::JSONReporter> file;
  benchmark::RunSpecifiedBenchmarks(&display, to_file ? &file : nullptr);
  // The last structure goes before main returns: its epoch domain hands retired nodes back
  // through per-thread allocator state, which this thread's exit destroys first.
  current_instance.reset();
  benchmark::Shutdown();
  return 0;
}
