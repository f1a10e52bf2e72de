// `flintkv bench`: a benchmark driver that speaks LevelDB's db_bench vocabulary, so its output
// reads next to RocksDB's and LevelDB's.
//
//   flintkv bench --benchmarks=fillrandom,readrandom --num=1000000 --threads=2 --json=out.json
//
// Semantics (as db_bench): fill* start from an empty store; every other benchmark uses the
// store left by the previous one. Keys are the decimal numbers 0..num-1 zero-padded to
// key_size bytes; values come from a repeatable generator. Reads draw keys uniformly over
// [0, num); writes do not (unlike db_bench): fillrandom, overwrite and deleterandom write
// each key once in a random order, so that a pass covers the key space (overwrite*20 is 20
// whole-key-space passes; after deleterandom no key is left). With --threads=T each thread
// does its share (num / T) of the operations, writes over its own slice of the key space,
// all starting together at a barrier.
//
// Thread safety: run_bench runs on one thread and starts its own worker threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arguments.hpp"

namespace flintkv::tools {

struct bench_config {
  std::vector<std::string> benchmarks;
  std::uint64_t num = 1000000;
  std::uint64_t threads = 1;
  std::uint64_t key_size = 16;
  std::uint64_t value_size = 64;
  std::uint64_t batch_size = 100;
  std::uint64_t seek_nexts = 10;
  bool sync = true;                 // WriteOptions::sync of every write
  std::uint64_t persist_every = 1000;  // with sync false: each thread's writes per Persist()
  bool verify_checksums = true;  // ReadOptions/TransactionOptions::verify_checksums of reads
  std::uint64_t merge_interval_ms = 0;  // Options::merge_interval of every store opened
  std::optional<std::string> db;  // nullopt: a fresh pool in /dev/shm, removed at exit
  bool use_existing_db = false;
  std::optional<std::uint64_t> pool_size;  // nullopt: default_pool_size(config)
  bool histogram = false;
  std::optional<std::string> json;  // write every result as JSON to this file
};

// The benchmark names, in the order of the default list.
const std::vector<std::string>& bench_names();

// Reads the bench flags from `args` and validates them together (e.g. that num-1 fits in
// key_size digits); `name*N` in --benchmarks stands for N times `name`. Throws usage_error
// naming the flag.
bench_config parse_bench_config(arguments& args);

// A pool size that holds the most versions the benchmark list can write between two fresh
// pools (fills reset it; overwrite, deleterandom and readwhilewriting add versions), counting
// none as reclaimed, twice over, plus 64 MiB; never below kMinPoolSize. With many overwrite
// passes this is far more than a reclaiming engine needs: --pool_size sets the size.
std::uint64_t default_pool_size(const bench_config& config);

// Runs the benchmarks and prints db_bench-style lines on stdout, errors on stderr.
// Returns the process exit status: 0, or 1 after the first benchmark that failed.
int run_bench(const bench_config& config);

// The help text of `flintkv bench`.
std::string bench_usage();

}  // namespace flintkv::tools
