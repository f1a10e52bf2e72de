// Allocation and free throughput: the persistent allocator (on a pool in /dev/shm), the DRAM
// node allocator, and malloc, one and two threads, several sizes; the cost of an epoch pin;
// and the allocator's part of recovery (mark_live of a million blocks, finish_recovery). Each iteration frees the oldest of the thread's last 512 blocks and allocates a new
// one, so caches turn over as in a structure that keeps a working set (items/s counts
// allocate+free pairs).
//
// The pool files are /dev/shm/flint-alloc-bench-*-<pid>.pool (removed at exit). The store
// granularity is in each persistent benchmark's label (allocation writes nothing durable,
// so it does not change these figures).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "allocators/allocators.hpp"

namespace {

using policy = flit::policy<flit::default_placement, alloc::pool_backend>;
constexpr std::size_t window = 512;
constexpr std::uint64_t pool_bytes = std::uint64_t{256} << 20;

struct bench_pool {
  std::filesystem::path file;
  std::optional<alloc::pool> pool;
  std::optional<alloc::persistent_allocator<policy>> heap;

  explicit bench_pool(const std::string& name, std::uint64_t bytes = pool_bytes)
      : file("/dev/shm/flint-alloc-bench-" + name + "-" + std::to_string(::getpid()) +
             ".pool") {
    std::filesystem::remove(file);
    auto p = alloc::pool::create<policy>(file, bytes,
                                         {"alloc-bench", alloc::layout_fingerprint<policy>()});
    if (!p) {
      std::fprintf(stderr, "%s\n", p.error().to_string().c_str());
      std::exit(1);
    }
    pool.emplace(std::move(p).value());
    heap.emplace(*pool);
    if (!heap->finish_recovery()) std::exit(1);
  }
  ~bench_pool() {
    heap.reset();
    pool.reset();
    std::filesystem::remove(file);
  }
};

bench_pool& the_pool() {
  static bench_pool p("throughput");
  return p;
}

void persistent(benchmark::State& state) {
  auto& heap = *the_pool().heap;
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::array<alloc::pptr<>, window> blocks{};
  std::size_t i = 0;
  for (auto _ : state) {
    alloc::pptr<>& slot = blocks[i++ % window];
    if (slot) heap.free(slot);
    auto b = heap.allocate(bytes);
    if (!b) {
      state.SkipWithError(b.error().to_string().c_str());
      break;
    }
    slot = *b;
  }
  for (alloc::pptr<> b : blocks) {
    if (b) heap.free(b);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(alloc::to_string(the_pool().pool->store_granularity())) +
                 " granularity");
}

void node(benchmark::State& state) {
  static alloc::node_allocator nodes;
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::array<void*, window> blocks{};
  std::size_t i = 0;
  for (auto _ : state) {
    void*& slot = blocks[i++ % window];
    if (slot != nullptr) nodes.deallocate(slot, bytes);
    slot = nodes.allocate(bytes);
    benchmark::DoNotOptimize(slot);
  }
  for (void* b : blocks) {
    if (b != nullptr) nodes.deallocate(b, bytes);
  }
  state.SetItemsProcessed(state.iterations());
}

void malloc_free(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::array<void*, window> blocks{};
  std::size_t i = 0;
  for (auto _ : state) {
    void*& slot = blocks[i++ % window];
    std::free(slot);
    slot = std::malloc(bytes);
    benchmark::DoNotOptimize(slot);
  }
  for (void* b : blocks) std::free(b);
  state.SetItemsProcessed(state.iterations());
}

void epoch_pin(benchmark::State& state) {
  static alloc::epoch_domain domain;
  for (auto _ : state) {
    auto g = domain.pin();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

// Recovery of a pool holding a million 128-byte blocks: a fresh allocator, mark_live of
// every block (as a user's walk would), finish_recovery. One iteration is one recovery.
void recovery(benchmark::State& state) {
  constexpr std::size_t blocks = 1'000'000;
  bench_pool p("recovery", std::uint64_t{192} << 20);
  std::vector<alloc::pptr<>> live;
  live.reserve(blocks);
  for (std::size_t i = 0; i < blocks; ++i) live.push_back(*p.heap->allocate(128));
  p.heap.reset();
  for (auto _ : state) {
    alloc::persistent_allocator<policy> heap(*p.pool);
    for (alloc::pptr<> b : live) {
      if (!heap.mark_live(b, 128)) state.SkipWithError("mark_live refused a block");
    }
    if (!heap.finish_recovery()) state.SkipWithError("finish_recovery failed");
    benchmark::DoNotOptimize(heap.stats().in_use_bytes);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(blocks));
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int bytes : {64, 256, 1024, 4096}) b->Arg(bytes);
  b->Threads(1)->Threads(2)->UseRealTime();
}

BENCHMARK(persistent)->Apply(sizes);
BENCHMARK(node)->Apply(sizes);
BENCHMARK(malloc_free)->Apply(sizes);
BENCHMARK(epoch_pin)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(recovery)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
