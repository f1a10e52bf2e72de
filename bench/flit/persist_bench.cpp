// persist<T> micro-benchmarks: p-load, p-store, CAS and fetch-add on shared words, for each
// counter placement with the build's flush backend, one and two threads. Each reports ns/op
// (Google Benchmark's time), pwb/op and pfence/op.
//
// Shared words: every thread works on the same small set of words (one cache line each), so
// two threads contend as they would on the hot words of a concurrent structure.
#include <benchmark/benchmark.h>

#include <boost/hana.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

#include "flit/flit.hpp"

namespace hana = boost::hana;

namespace {

constexpr std::size_t words = 64;

// The word each placement is measured on: a 64-bit integer, except under link_and_persist,
// which needs a spare bit in the word: a pointer to 8-byte aligned data (fetch-add, which
// needs a full-range integer, is not measured there).
template <class Policy>
using word_of = std::conditional_t<Policy::placement::tracks == flit::tracking::flush_bit,
                                   std::uint64_t*, std::uint64_t>;

template <class Policy>
struct alignas(64) padded {
  flit::persist<word_of<Policy>, Policy> value;
};

template <class Policy>
padded<Policy>* shared_words() {
  static padded<Policy> w[words];
  return w;
}

template <class Policy>
void report(benchmark::State& state, const flit::counts& used) {
  auto per_op = [&](std::uint64_t n) {
    return benchmark::Counter(static_cast<double>(n) / static_cast<double>(state.iterations()),
                              benchmark::Counter::kAvgThreads);
  };
  state.counters["pwb/op"] = per_op(used.pwb);
  state.counters["pfence/op"] = per_op(used.pfence);
}

enum class op { p_load, p_store, cas, fetch_add };

// One operation per iteration, ended by operation_completion() as a structure would.
template <class Policy, op Op>
void run(benchmark::State& state) {
  padded<Policy>* w = shared_words<Policy>();
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * 7;
  flit::stats_scope scope;
  for (auto _ : state) {
    auto& word = w[i++ % words].value;
    using W = word_of<Policy>;
    if constexpr (Op == op::p_load) {
      benchmark::DoNotOptimize(word.load());
    } else if constexpr (Op == op::p_store) {
      word.store(W(i));
    } else if constexpr (Op == op::cas) {
      W seen = word.load(flit::volatile_);
      benchmark::DoNotOptimize(word.compare_exchange(seen, seen + 1));
    } else if constexpr (!std::is_pointer_v<W>) {
      benchmark::DoNotOptimize(word.fetch_add(1));
    }
    Policy::operation_completion();
  }
  report<Policy>(state, scope.delta());
}

constexpr auto placements = hana::make_tuple(
    hana::type_c<flit::hashed<flit::config::hash_bytes>>, hana::type_c<flit::adjacent>,
    hana::type_c<flit::plain>, hana::type_c<flit::link_and_persist>,
    hana::type_c<flit::nonpersistent>);

constexpr auto ops = hana::make_tuple(
    hana::make_pair(hana::integral_c<op, op::p_load>, BOOST_HANA_STRING("p_load")),
    hana::make_pair(hana::integral_c<op, op::p_store>, BOOST_HANA_STRING("p_store")),
    hana::make_pair(hana::integral_c<op, op::cas>, BOOST_HANA_STRING("cas")),
    hana::make_pair(hana::integral_c<op, op::fetch_add>, BOOST_HANA_STRING("fetch_add")));

const bool registered = [] {
  hana::for_each(ops, [](auto o) {
    hana::for_each(placements, [&](auto t) {
      using placement = typename decltype(t)::type;
      using policy = flit::policy<placement, flit::default_backend>;
      constexpr op which = std::remove_cvref_t<decltype(hana::first(o))>::value;
      if constexpr (which != op::fetch_add || !std::is_pointer_v<word_of<policy>>) {
        std::string name = std::string(hana::to<const char*>(hana::second(o))) + "/" +
                           std::string(placement::name);
        benchmark::RegisterBenchmark(name.c_str(), run<policy, which>)->Threads(1)->Threads(2)
            ->UseRealTime();
      }
    });
  });
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
