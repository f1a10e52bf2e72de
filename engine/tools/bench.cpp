#include "bench.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <latch>
#include <memory>
#include <numeric>
#include <random>
#include <string_view>
#include <system_error>
#include <thread>

#include "flintkv/db.hpp"
#include "histogram.hpp"
#include "json.hpp"
#include "resident.hpp"
#include "workload.hpp"

namespace flintkv::tools {

namespace {

using steady = std::chrono::steady_clock;

constexpr std::uint64_t kMaxNum = std::uint64_t{1} << 40;
constexpr std::uint64_t kMaxThreads = kMaxThreadSlots;
constexpr std::uint64_t kHeadroomBytes = std::uint64_t{64} << 20;
constexpr std::uint64_t kMaxRepeat = 10000;  // the N of --benchmarks=name*N

double seconds_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct pool_file_slot {
  std::atomic<bool> used{false};
  char path[4096];
};

// Pool files this process created and must remove at exit, also on SIGINT/SIGTERM.
// Registered and unregistered by the main thread only; the handler only reads.
class pool_files {
 public:
  static void add(const std::string& path) {
    for (slot& s : slots_) {
      if (!s.used.load()) {
        std::snprintf(s.path, sizeof s.path, "%s", path.c_str());
        s.used.store(true);
        install_handlers();
        return;
      }
    }
  }
  // Removes the file (if it exists) and forgets it.
  static void remove(const std::string& path) {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    for (slot& s : slots_) {
      if (s.used.load() && path == s.path) s.used.store(false);
    }
  }

 private:
  using slot = pool_file_slot;
  static void install_handlers() {
    static bool installed = false;
    if (installed) return;
    installed = true;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
  }
  static void on_signal(int sig) {
    for (slot& s : slots_) {
      if (s.used.load()) ::unlink(s.path);
    }
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  static inline slot slots_[2];
};

// Removes a registered pool file when it goes out of scope.
struct pool_file_guard {
  std::string path;
  explicit pool_file_guard(std::string p) : path(std::move(p)) { pool_files::add(path); }
  ~pool_file_guard() { pool_files::remove(path); }
  pool_file_guard(const pool_file_guard&) = delete;
  pool_file_guard& operator=(const pool_file_guard&) = delete;
};

// One benchmark thread's state; written only by that thread until it is joined.
struct worker {
  unsigned index = 0;
  std::uint64_t begin = 0, end = 0;  // its share [begin, end) of the work (and of the keys)
  random_source random{0};
  key_formatter keys{0};
  std::size_t value_position = 0;
  latency_histogram latency;
  std::uint64_t ops = 0;    // operations done (entries, for fillbatch)
  std::uint64_t found = 0;  // reads that found their key
  std::uint64_t unpersisted = 0;  // --sync=0: writes since this worker's last Persist()
  std::uint64_t aborts = 0;  // transactions whose commit was refused (Busy), for transfer
  std::string value;        // where reads put their value, reused as db_bench does
  steady::time_point start, finish;
  Status status;
};

// The store's space after a benchmark: from GetStats() and the process's resident memory.
struct space_use {
  std::uint64_t live_keys = 0, pool_used = 0, obsolete_versions = 0;
  std::uint64_t reclaimed_versions = 0, reclaimed_bytes = 0, reclamation_passes = 0;
  std::optional<resident_memory> resident;  // read_resident(): DRAM is its anon (the pool is shmem)

  // Bytes per live key; nullopt when no key is live (or the bytes are unknown).
  std::optional<double> per_key(std::optional<std::uint64_t> bytes) const {
    if (!bytes || live_keys == 0) return std::nullopt;
    return double(*bytes) / double(live_keys);
  }
  std::optional<std::uint64_t> dram() const {
    return resident ? std::optional(resident->anon) : std::nullopt;
  }
};

space_use space_of(const Stats& stats) {
  return {stats.live_keys,          stats.pool_used,          stats.obsolete_versions,
          stats.reclaimed_versions, stats.reclaimed_bytes,    stats.reclamation_passes,
          read_resident()};
}

// What one benchmark measured; the fields of its JSON object.
struct result {
  std::string benchmark;
  std::uint64_t ops = 0;
  double seconds = 0;        // wall time from the barrier to the last thread's end
  double thread_seconds = 0; // sum of the threads' times (db_bench's micros/op numerator)
  latency_histogram latency;
  bool has_latency = true;
  double pwb_per_op = 0, pfence_per_op = 0;
  std::string message;  // extra text at the end of the line
  // Benchmark-specific fields, written to JSON when set.
  std::optional<std::uint64_t> found, writer_puts, batch_size, seek_nexts, aborts;
  std::optional<double> reopen_seconds, recovery_seconds, insert_seconds, ratio;
  std::optional<std::uint64_t> recovered_versions;
  space_use space;  // after the benchmark

  double ops_per_sec() const { return seconds > 0 ? double(ops) / seconds : 0; }
  double micros_per_op() const { return ops > 0 ? thread_seconds * 1e6 / double(ops) : 0; }
};

// Adds the first `count` workers' operations, times, latencies and finds to `r`; the wall
// time runs from the earliest start to the latest finish.
void add_workers(const std::vector<worker>& workers, std::size_t count, result* r) {
  steady::time_point first = workers.front().start, last = workers.front().finish;
  for (std::size_t i = 0; i < count; ++i) {
    const worker& w = workers[i];
    first = std::min(first, w.start);
    last = std::max(last, w.finish);
    r->ops += w.ops;
    r->thread_seconds += seconds_between(w.start, w.finish);
    r->latency.merge(w.latency);
    if (r->found) *r->found += w.found;
    if (r->aborts) *r->aborts += w.aborts;
  }
  r->seconds = seconds_between(first, last);
}

// The process's write-backs and fences between two GetStats() calls, per operation.
void set_flushes(const Stats& before, const Stats& after, std::uint64_t ops, result* r) {
  double n = double(std::max<std::uint64_t>(ops, 1));
  r->pwb_per_op = double(after.pwb - before.pwb) / n;
  r->pfence_per_op = double(after.pfence - before.pfence) / n;
}

class bench_runner {
 public:
  explicit bench_runner(const bench_config& config)
      : config_(config), values_(config.value_size, kValueSeed) {}

  int run();

  // The benchmarks, each run as the `position`-th of the list (its seeds derive from it);
  // they fill `r`, whose `benchmark` is already set. kBenchmarks says which runs which.
  enum class key_order { ascending, shuffled };
  enum class write_op { put, remove };
  // fillseq, fillrandom, overwrite, deleterandom: one write of each key, each thread over its
  // share of the key space, in ascending order or in a random permutation of it.
  Status run_writes(std::size_t position, key_order order, write_op op, result* r);
  Status run_reads(std::size_t position, bool missing, result* r);
  Status run_seekrandom(std::size_t position, result* r);
  Status run_fillbatch(std::size_t position, result* r);
  Status run_readwhilewriting(std::size_t position, result* r);
  Status run_recover(std::size_t position, result* r);
  WriteOptions write_options() const;
  ReadOptions read_options() const;
  Status persist_now_and_then(worker& w);
  Status persist_at_end();
  Status run_transfer(std::size_t position, result* r);

 private:
  using body = std::function<Status(worker&, const std::atomic<bool>& stop)>;

  Options store_options() const;  // what every store the run opens is opened with
  Status open_existing();
  Status open_fresh();
  // Runs `fn` on `count` threads after a start barrier. The first min(count, --threads)
  // workers split [0, total) into their [begin, end) shares; any others get none.
  Status run_workers(std::size_t position, std::size_t count, std::uint64_t total,
                     const body& fn, std::vector<worker>* workers);
  Status measure(std::size_t position, const body& fn, result* r);
  // A body doing each worker's share of num operations `op(w, key)`, on keys uniform over
  // [0, num).
  template <class Op>
  body random_ops(Op op);
  void print_header(const Stats& stats) const;
  void print_result(const result& r) const;
  Status write_json() const;

  const bench_config& config_;
  value_source values_;
  std::string path_;
  std::optional<pool_file_guard> own_pool_;  // set when the pool is removed at exit
  std::uint64_t pool_size_ = 0;
  std::unique_ptr<DB> db_;
  bool pristine_ = false;  // the open pool is empty and was created by this run
  std::string configuration_;
  std::vector<result> results_;
};

// What a benchmark does to the pool, for the runner (fresh pools) and default_pool_size.
enum class pool_use {
  reads,          // writes nothing
  fresh_fill,     // starts from an empty pool, then writes num versions
  adds_versions,  // writes up to num versions into the store the previous benchmark left
};

// The benchmarks: one row each, in the order of the default list.
struct benchmark {
  std::string_view name;
  std::string_view description;  // one line of --help
  pool_use pool;
  Status (*run)(bench_runner& runner, std::size_t position, result* r);
};

using key_order = bench_runner::key_order;
using write_op = bench_runner::write_op;
constexpr benchmark kBenchmarks[] = {
    {"fillseq", "fresh pool; puts keys 0 .. num-1 in ascending order", pool_use::fresh_fill,
     [](bench_runner& b, std::size_t p, result* r) {
       return b.run_writes(p, key_order::ascending, write_op::put, r);
     }},
    {"fillrandom", "fresh pool; puts every key 0 .. num-1 once, in a random order",
     pool_use::fresh_fill,
     [](bench_runner& b, std::size_t p, result* r) {
       return b.run_writes(p, key_order::shuffled, write_op::put, r);
     }},
    {"overwrite", "puts every key once more, in a new random order, into the current store",
     pool_use::adds_versions,
     [](bench_runner& b, std::size_t p, result* r) {
       return b.run_writes(p, key_order::shuffled, write_op::put, r);
     }},
    {"readrandom", "gets num random keys; reports how many were found", pool_use::reads,
     [](bench_runner& b, std::size_t p, result* r) { return b.run_reads(p, false, r); }},
    {"readmissing", "gets num keys that are never written", pool_use::reads,
     [](bench_runner& b, std::size_t p, result* r) { return b.run_reads(p, true, r); }},
    {"seekrandom", "num times: a new iterator, Seek to a random key, --seek_nexts Next()",
     pool_use::reads,
     [](bench_runner& b, std::size_t p, result* r) { return b.run_seekrandom(p, r); }},
    {"deleterandom", "deletes every key once, in a random order", pool_use::adds_versions,
     [](bench_runner& b, std::size_t p, result* r) {
       return b.run_writes(p, key_order::shuffled, write_op::remove, r);
     }},
    {"fillbatch", "fresh pool; keys 0 .. num-1 in ascending order, --batch_size per batch",
     pool_use::fresh_fill,
     [](bench_runner& b, std::size_t p, result* r) { return b.run_fillbatch(p, r); }},
    {"readwhilewriting", "--threads readers do readrandom while one thread puts random keys",
     pool_use::adds_versions,
     [](bench_runner& b, std::size_t p, result* r) { return b.run_readwhilewriting(p, r); }},
    {"recover", "times reopening (recovering) the store, and inserting as many keys afresh",
     pool_use::reads,
     [](bench_runner& b, std::size_t p, result* r) { return b.run_recover(p, r); }},
    {"transfer", "num transactions, each reads two random keys and writes both; retries on Busy",
     pool_use::adds_versions,
     [](bench_runner& b, std::size_t p, result* r) { return b.run_transfer(p, r); }},
};

// The row named `name`; nullptr if there is none.
const benchmark* find_benchmark(std::string_view name) {
  for (const benchmark& b : kBenchmarks) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

Options bench_runner::store_options() const {
  Options options;
  options.merge_interval = std::chrono::milliseconds(config_.merge_interval_ms);
  return options;
}

Status bench_runner::open_existing() {
  Options options = store_options();
  options.create_if_missing = false;
  return DB::Open(options, path_, &db_);
}

Status bench_runner::open_fresh() {
  db_.reset();
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);  // only ever a pool this run created
  Options options = store_options();
  options.create_if_missing = true;
  options.error_if_exists = true;
  options.pool_size = pool_size_;
  Status s = DB::Open(options, path_, &db_);
  pristine_ = s.ok();
  return s;
}

Status bench_runner::run_workers(std::size_t position, std::size_t count, std::uint64_t total,
                                 const body& fn, std::vector<worker>* workers) {
  workers->resize(count);
  std::uint64_t shares = std::min<std::uint64_t>(count, config_.threads);
  for (std::size_t i = 0; i < count; ++i) {
    worker& w = (*workers)[i];
    w.index = static_cast<unsigned>(i);
    if (i < shares) {
      w.begin = share_bound(total, shares, i);
      w.end = share_bound(total, shares, i + 1);
    }
    w.random = random_source(thread_seed(position, i));
    w.keys = key_formatter(config_.key_size);
    w.value_position = value_start(i, config_.value_size);
  }
  std::atomic<bool> stop{false};
  std::latch start(static_cast<std::ptrdiff_t>(count));
  {
    std::vector<std::jthread> threads;
    threads.reserve(count);
    try {
      for (std::size_t i = 0; i < count; ++i) {
        threads.emplace_back([&, i] {
          worker& w = (*workers)[i];
          start.arrive_and_wait();
          w.start = steady::now();
          if (!stop.load(std::memory_order_relaxed)) w.status = fn(w, stop);
          w.finish = steady::now();
          if (!w.status.ok()) stop.store(true);
        });
      }
    } catch (const std::system_error& e) {
      stop.store(true);
      start.count_down(static_cast<std::ptrdiff_t>(count - threads.size()));
      return Status::IOError(std::string("cannot start thread ") +
                             std::to_string(threads.size()) + ": " + e.what());
    }
  }
  for (const worker& w : *workers) {
    if (!w.status.ok()) return w.status;
  }
  return Status::OK();
}

// Runs `fn` on --threads threads and fills the common fields of `r`.
Status bench_runner::measure(std::size_t position, const body& fn, result* r) {
  Stats before = db_->GetStats();
  std::vector<worker> workers;
  Status s = run_workers(position, config_.threads, config_.num, fn, &workers);
  if (!s.ok()) return s;
  Stats after = db_->GetStats();
  add_workers(workers, workers.size(), r);
  set_flushes(before, after, r->ops, r);
  return Status::OK();
}

template <class Op>
Status timed(worker& w, Op&& op) {
  steady::time_point t0 = steady::now();
  Status s = op();
  w.latency.add(static_cast<std::uint64_t>((steady::now() - t0).count()));
  return s;
}

// A read that finds nothing is a result, not an error.
Status count_read(worker& w, Status s) {
  if (s.ok()) {
    ++w.found;
    return s;
  }
  return s.IsNotFound() ? Status::OK() : s;
}

template <class Op>
bench_runner::body bench_runner::random_ops(Op op) {
  return [this, op](worker& w, const std::atomic<bool>& stop) {
    for (std::uint64_t i = w.begin; i < w.end && !stop.load(std::memory_order_relaxed); ++i) {
      Status s = op(w, w.random.uniform(config_.num));
      if (!s.ok()) return s;
      ++w.ops;
    }
    return Status::OK();
  };
}

Status bench_runner::run_writes(std::size_t position, key_order order, write_op op,
                                result* r) {
  return measure(position, [this, order, op](worker& w, const std::atomic<bool>& stop) {
    shuffled_share shuffle(w.begin, w.end, w.random);
    for (std::uint64_t i = w.begin; i < w.end && !stop.load(std::memory_order_relaxed); ++i) {
      std::uint64_t k = order == key_order::ascending ? i : shuffle(i);
      std::string_view key = w.keys.key(k);
      Status s;
      if (op == write_op::put) {
        std::string_view value = values_.next(w.value_position);
        s = timed(w, [&] { return db_->Put(key, value, write_options()); });
      } else {
        s = timed(w, [&] { return db_->Delete(key, write_options()); });
      }
      if (!s.ok()) return s;
      ++w.ops;
      if (Status p = persist_now_and_then(w); !p.ok()) return p;
    }
    return persist_at_end();
  }, r);
}

WriteOptions bench_runner::write_options() const {
  WriteOptions o;
  o.sync = config_.sync;
  return o;
}

ReadOptions bench_runner::read_options() const {
  ReadOptions o;
  o.verify_checksums = config_.verify_checksums;
  return o;
}

// After each write (a batch or a commit counts as one): with --sync=0, a Persist() after
// every --persist_every writes of this worker (counted in its `unpersisted`); its time
// counts in the run's, not in the latency of a write.
Status bench_runner::persist_now_and_then(worker& w) {
  if (config_.sync || config_.persist_every == 0) return Status::OK();
  if (++w.unpersisted < config_.persist_every) return Status::OK();
  w.unpersisted = 0;
  return db_->Persist();
}

// With --sync=0: the run's weak writes are made durable before it counts as done.
Status bench_runner::persist_at_end() {
  return config_.sync ? Status::OK() : db_->Persist();
}

// After the reads: "(found of ops found)".
void set_found_message(result* r) {
  r->message = "(" + std::to_string(*r->found) + " of " + std::to_string(r->ops) + " found)";
}

Status bench_runner::run_reads(std::size_t position, bool missing, result* r) {
  r->found = 0;
  Status s = measure(position, random_ops([this, missing](worker& w, std::uint64_t k) {
    std::string_view key = missing ? w.keys.missing_key(k) : w.keys.key(k);
    return count_read(w, timed(w, [&] { return db_->Get(key, &w.value, read_options()); }));
  }), r);
  set_found_message(r);
  return s;
}

Status bench_runner::run_seekrandom(std::size_t position, result* r) {
  r->found = 0;
  r->seek_nexts = config_.seek_nexts;
  const std::uint64_t nexts = config_.seek_nexts;
  Status s = measure(position, random_ops([this, nexts](worker& w, std::uint64_t k) {
    std::string_view key = w.keys.key(k);
    return timed(w, [&] {
      std::unique_ptr<Iterator> it = db_->NewIterator(read_options());
      it->Seek(key);
      if (it->Valid() && it->key() == key) ++w.found;
      for (std::uint64_t j = 0; j < nexts && it->Valid(); ++j) it->Next();
      return it->status();
    });
  }), r);
  set_found_message(r);
  return s;
}

Status bench_runner::run_fillbatch(std::size_t position, result* r) {
  r->batch_size = config_.batch_size;
  r->message = "(latency per batch of " + std::to_string(config_.batch_size) + ")";
  const std::uint64_t batch_size = config_.batch_size;
  return measure(position, [this, batch_size](worker& w, const std::atomic<bool>& stop) {
    WriteBatch batch;
    for (std::uint64_t i = w.begin; i < w.end && !stop.load(std::memory_order_relaxed);) {
      batch.Clear();
      std::uint64_t n = std::min(batch_size, w.end - i);
      for (std::uint64_t j = 0; j < n; ++j) {
        batch.Put(w.keys.key(i + j), values_.next(w.value_position));
      }
      Status s = timed(w, [&] { return db_->Write(batch, write_options()); });
      if (!s.ok()) return s;
      w.ops += n;
      i += n;
      if (Status p = persist_now_and_then(w); !p.ok()) return p;
    }
    return persist_at_end();
  }, r);
}

// --threads readers doing readrandom, and one writer doing random puts until every reader is
// done (or it has written num keys, so the pool's size stays predictable). The result is the
// readers' rate; pwb/op and pfence/op divide the process's flushes by reads plus writes.
Status bench_runner::run_readwhilewriting(std::size_t position, result* r) {
  DB& db = *db_;
  const std::uint64_t readers = config_.threads, num = config_.num;
  std::atomic<std::uint64_t> readers_done{0};
  r->found = 0;
  Stats before = db.GetStats();
  std::vector<worker> workers;
  Status s = run_workers(position, readers + 1, num, [&](worker& w, const std::atomic<bool>& stop) {
    if (w.index == readers) {  // the writer
      while (readers_done.load(std::memory_order_relaxed) < readers && w.ops < num &&
             !stop.load(std::memory_order_relaxed)) {
        std::string_view key = w.keys.key(w.random.uniform(num));
        std::string_view value = values_.next(w.value_position);
        // Not timed: only the readers' latencies are reported.
        if (Status st = db.Put(key, value, write_options()); !st.ok()) return st;
        if (Status p = persist_now_and_then(w); !p.ok()) return p;
        ++w.ops;
      }
      return persist_at_end();
    }
    Status result_status;
    for (std::uint64_t i = w.begin; i < w.end && !stop.load(std::memory_order_relaxed); ++i) {
      std::string_view key = w.keys.key(w.random.uniform(num));
      result_status =
          count_read(w, timed(w, [&] { return db.Get(key, &w.value, read_options()); }));
      if (!result_status.ok()) break;
      ++w.ops;
    }
    readers_done.fetch_add(1);
    return result_status;
  }, &workers);
  if (!s.ok()) return s;
  Stats after = db.GetStats();
  add_workers(workers, readers, r);
  r->writer_puts = workers.back().ops;
  set_flushes(before, after, r->ops + *r->writer_puts, r);
  r->message = "(" + std::to_string(*r->found) + " of " + std::to_string(r->ops) +
               " found; writer: " + std::to_string(*r->writer_puts) + " puts)";
  return Status::OK();
}

// Each operation a transaction moving value between two random keys: it reads both and
// writes both (new values from the value source), committing, or beginning again while the
// commit is Busy. The latency is the whole transaction's, retries included.
Status bench_runner::run_transfer(std::size_t position, result* r) {
  r->aborts = 0;
  Status s = measure(position, random_ops([this](worker& w, std::uint64_t k) {
    const std::string from(w.keys.key(k));
    const std::string to(w.keys.key(w.random.uniform(config_.num)));
    return timed(w, [&]() -> Status {
      while (true) {
        TransactionOptions txn_options;
        txn_options.verify_checksums = config_.verify_checksums;
        std::unique_ptr<Transaction> txn = db_->BeginTransaction(write_options(), txn_options);
        for (const std::string* key : {&from, &to}) {
          if (Status st = txn->Get(*key, &w.value); !st.ok() && !st.IsNotFound()) return st;
        }
        for (const std::string* key : {&from, &to}) {
          if (Status st = txn->Put(*key, values_.next(w.value_position)); !st.ok()) return st;
        }
        Status st = txn->Commit();
        if (st.ok()) return persist_now_and_then(w);
        if (!st.IsBusy()) return st;
        ++w.aborts;
      }
    });
  }), r);
  if (s.ok()) s = persist_at_end();
  const double attempts = double(r->ops + *r->aborts);
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.2f%%",
                attempts > 0 ? 100.0 * double(*r->aborts) / attempts : 0.0);
  r->message = "(" + std::to_string(*r->aborts) + " aborts: " + rate + " of commits Busy)";
  return s;
}

// Closes the store, times DB::Open (which recovers it), then times inserting as many keys
// as recovery found versions, in random order, into a fresh pool with --threads threads. The
// store is closed while the fresh one is filled, so that the two indexes are never in DRAM
// together, and opened again (untimed) for the benchmarks after this one.
Status bench_runner::run_recover(std::size_t position, result* r) {
  r->has_latency = false;
  Stats before = db_->GetStats();
  if (before.versions == 0) {
    return Status::InvalidArgument(
        "recover needs a populated pool: run it after a fill benchmark, or with "
        "--use_existing_db on a pool that has data");
  }
  db_.reset();
  steady::time_point t0 = steady::now();
  Status s = open_existing();
  steady::time_point t1 = steady::now();
  if (!s.ok()) return s;
  pristine_ = false;
  Stats after = db_->GetStats();
  const std::uint64_t versions = std::max<std::uint64_t>(after.recovered_versions, 1);
  r->ops = versions;
  r->seconds = r->thread_seconds = seconds_between(t0, t1);
  r->reopen_seconds = r->seconds;
  r->recovery_seconds = after.recovery_seconds;
  r->recovered_versions = after.recovered_versions;
  set_flushes(before, after, versions, r);

  // The same number of distinct keys, shuffled, into a fresh pool of the same size.
  std::vector<std::uint64_t> order(versions);
  std::iota(order.begin(), order.end(), std::uint64_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(1000 * (position + 1)));
  const std::size_t width = std::max<std::size_t>(config_.key_size, decimal_digits(versions - 1));
  db_.reset();
  pool_file_guard insert_pool(path_ + ".recover-insert");
  std::unique_ptr<DB> fresh;
  Options options = store_options();
  options.create_if_missing = true;
  options.error_if_exists = true;
  options.pool_size = std::max<std::uint64_t>(pool_size_, after.pool_size);
  s = DB::Open(options, insert_pool.path, &fresh);
  if (!s.ok()) return s;
  std::vector<worker> workers;
  s = run_workers(position, config_.threads, versions, [&](worker& w,
                                                             const std::atomic<bool>& stop) {
    key_formatter keys(width);
    for (std::uint64_t i = w.begin; i < w.end && !stop.load(std::memory_order_relaxed); ++i) {
      Status st = fresh->Put(keys.key(order[i]), values_.next(w.value_position));
      if (!st.ok()) return st;
    }
    return Status::OK();
  }, &workers);
  if (!s.ok()) return s;
  fresh.reset();
  s = open_existing();
  if (!s.ok()) return s;
  result insert;
  add_workers(workers, workers.size(), &insert);
  r->insert_seconds = insert.seconds;
  r->ratio = *r->insert_seconds > 0 ? *r->reopen_seconds / *r->insert_seconds : 0;
  char text[256];
  std::snprintf(text, sizeof text,
                "(reopen %.3f s, of which recovery %.3f s, %llu versions, %llu live keys; "
                "insert %llu keys in random order %.3f s; reopen/insert %.3f)",
                *r->reopen_seconds, *r->recovery_seconds,
                static_cast<unsigned long long>(after.recovered_versions),
                static_cast<unsigned long long>(after.live_keys),
                static_cast<unsigned long long>(versions), *r->insert_seconds, *r->ratio);
  r->message = text;
  return Status::OK();
}

void bench_runner::print_header(const Stats& stats) const {
  std::printf("FlintKV:       %s\n", stats.configuration.c_str());
  std::printf("Granularity:   %s\n", stats.granularity.c_str());
  std::printf("Keys:          %llu bytes each\n",
              static_cast<unsigned long long>(config_.key_size));
  std::printf("Values:        %llu bytes each\n",
              static_cast<unsigned long long>(config_.value_size));
  std::printf("Entries:       %llu\n", static_cast<unsigned long long>(config_.num));
  std::printf("Threads:       %llu\n", static_cast<unsigned long long>(config_.threads));
  if (config_.sync) {
    std::printf("Writes:        durable on return (sync)\n");
  } else {
    std::printf("Writes:        weak (sync = false), Persist() every %llu writes per thread\n",
                static_cast<unsigned long long>(config_.persist_every));
  }
  if (!config_.verify_checksums) {
    std::printf("Reads:         checksums not verified (verify_checksums = false)\n");
  }
  if (config_.merge_interval_ms != 0) {
    std::printf("Merges:        every %llu ms (merge_interval)\n",
                static_cast<unsigned long long>(config_.merge_interval_ms));
  }
  std::printf("Pool:          %s, %.1f MiB%s\n", path_.c_str(),
              double(stats.pool_size) / double(1 << 20),
              own_pool_ ? " (removed at exit)" : "");
  std::printf("------------------------------------------------\n");
  std::fflush(stdout);
}

// "  space: ..." after each result line: the store's size and the process's DRAM, in MiB
// and per live key ("-" when no key is live), and what reclamation has done so far.
void print_space(const space_use& space) {
  auto amount = [&](std::optional<std::uint64_t> bytes) {
    char text[64] = "-";
    std::optional<double> each = space.per_key(bytes);
    if (bytes && each) {
      std::snprintf(text, sizeof text, "%.1f MiB, %.1f B/key", double(*bytes) / (1 << 20), *each);
    } else if (bytes) {
      std::snprintf(text, sizeof text, "%.1f MiB, - B/key", double(*bytes) / (1 << 20));
    }
    return std::string(text);
  };
  std::printf("  space: %llu live keys; pool %s; DRAM %s; %llu obsolete versions; "
              "reclaimed %llu versions in %llu passes\n",
              static_cast<unsigned long long>(space.live_keys), amount(space.pool_used).c_str(),
              amount(space.dram()).c_str(),
              static_cast<unsigned long long>(space.obsolete_versions),
              static_cast<unsigned long long>(space.reclaimed_versions),
              static_cast<unsigned long long>(space.reclamation_passes));
}

void bench_runner::print_result(const result& r) const {
  char latency[96] = "p50       - us; p99       - us";
  if (r.has_latency) {
    std::snprintf(latency, sizeof latency, "p50 %9.3f us; p99 %9.3f us",
                  r.latency.percentile(0.50) / 1e3, r.latency.percentile(0.99) / 1e3);
  }
  std::printf("%-16s : %11.3f micros/op; %11.0f ops/s; %s; %7.2f pwb/op; %7.2f pfence/op%s%s\n",
              r.benchmark.c_str(), r.micros_per_op(), r.ops_per_sec(), latency, r.pwb_per_op,
              r.pfence_per_op, r.message.empty() ? "" : "; ", r.message.c_str());
  print_space(r.space);
  if (config_.histogram && r.has_latency) std::fputs(r.latency.to_string().c_str(), stdout);
  std::fflush(stdout);
}

Status bench_runner::write_json() const {
  std::string out = "[\n";
  for (std::size_t i = 0; i < results_.size(); ++i) {
    const result& r = results_[i];
    std::string o = "  {";
    auto field = [&o](std::string_view name, const std::string& value) {
      if (o.size() > 3) o += ", ";
      o += "\"" + std::string(name) + "\": " + value;
    };
    auto integer = [](std::uint64_t v) { return std::to_string(v); };
    auto text = [](std::string_view s) { return "\"" + json_escape(s) + "\""; };
    field("benchmark", text(r.benchmark));
    field("ops", integer(r.ops));
    field("seconds", json_number(r.seconds));
    field("ops_per_sec", json_number(r.ops_per_sec()));
    field("micros_per_op", json_number(r.micros_per_op()));
    field("p50_us", r.has_latency ? json_number(r.latency.percentile(0.50) / 1e3) : "null");
    field("p99_us", r.has_latency ? json_number(r.latency.percentile(0.99) / 1e3) : "null");
    field("pwb_per_op", json_number(r.pwb_per_op));
    field("pfence_per_op", json_number(r.pfence_per_op));
    field("threads", integer(config_.threads));
    field("sync", config_.sync ? "true" : "false");
    if (!config_.sync) field("persist_every", integer(config_.persist_every));
    field("verify_checksums", config_.verify_checksums ? "true" : "false");
    field("merge_interval_ms", integer(config_.merge_interval_ms));
    field("num", integer(config_.num));
    field("key_size", integer(config_.key_size));
    field("value_size", integer(config_.value_size));
    field("configuration", text(configuration_));
    if (r.found) field("found", integer(*r.found));
    if (r.writer_puts) field("writer_puts", integer(*r.writer_puts));
    if (r.batch_size) field("batch_size", integer(*r.batch_size));
    if (r.seek_nexts) field("seek_nexts", integer(*r.seek_nexts));
    if (r.aborts) field("aborts", integer(*r.aborts));
    if (r.reopen_seconds) field("reopen_seconds", json_number(*r.reopen_seconds));
    if (r.recovery_seconds) field("recovery_seconds", json_number(*r.recovery_seconds));
    if (r.recovered_versions) field("recovered_versions", integer(*r.recovered_versions));
    if (r.insert_seconds) field("insert_seconds", json_number(*r.insert_seconds));
    if (r.ratio) field("ratio", json_number(*r.ratio));
    const space_use& space = r.space;
    auto maybe_integer = [&](std::optional<std::uint64_t> v) {
      return v ? integer(*v) : std::string("null");
    };
    auto maybe_number = [](std::optional<double> v) { return v ? json_number(*v) : "null"; };
    field("live_keys", integer(space.live_keys));
    field("pool_used", integer(space.pool_used));
    field("pool_bytes_per_key", maybe_number(space.per_key(space.pool_used)));
    field("dram_bytes", maybe_integer(space.dram()));
    field("dram_bytes_per_key", maybe_number(space.per_key(space.dram())));
    field("rss_bytes", maybe_integer(space.resident ? std::optional(space.resident->total())
                                                    : std::nullopt));
    field("obsolete_versions", integer(space.obsolete_versions));
    field("reclaimed_versions", integer(space.reclaimed_versions));
    field("reclaimed_bytes", integer(space.reclaimed_bytes));
    field("reclamation_passes", integer(space.reclamation_passes));
    out += o + (i + 1 < results_.size() ? "},\n" : "}\n");
  }
  out += "]\n";
  const std::string& file = *config_.json;
  std::FILE* f = std::fopen(file.c_str(), "w");
  if (f == nullptr) {
    return Status::IOError("cannot write --json=" + file + ": " + std::strerror(errno));
  }
  bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return Status::IOError("cannot write --json=" + file + ": " + std::strerror(errno));
  return Status::OK();
}

int bench_runner::run() {
  auto fail = [](std::string_view what, const Status& s) {
    std::fprintf(stderr, "flintkv bench: %.*s: %s\n", static_cast<int>(what.size()), what.data(),
                 s.ToString().c_str());
    return 1;
  };
  if (config_.json) {
    Status s = write_json();  // an empty array: finds an unwritable file before any work
    if (!s.ok()) return fail("json", s);
  }
  pool_size_ = config_.pool_size.value_or(default_pool_size(config_));
  if (config_.db) {
    path_ = *config_.db;
    std::error_code ec;
    bool exists = std::filesystem::exists(path_, ec);
    if (!config_.use_existing_db && exists) {
      return fail(path_, Status::InvalidArgument(
                             "the pool exists: pass --use_existing_db to benchmark it, or "
                             "remove it (bench never overwrites a pool it did not create)"));
    }
  } else {
    path_ = "/dev/shm/flintkv-bench-" + std::to_string(::getpid()) + ".pool";
    own_pool_.emplace(path_);
  }
  Status s = config_.use_existing_db ? open_existing() : open_fresh();
  if (!s.ok()) return fail(path_, s);
  Stats stats = db_->GetStats();
  configuration_ = stats.configuration;
  print_header(stats);

  for (std::size_t i = 0; i < config_.benchmarks.size(); ++i) {
    const std::string& name = config_.benchmarks[i];
    const benchmark& spec = *find_benchmark(name);  // parse_bench_config checked the names
    if (spec.pool == pool_use::fresh_fill) {
      if (config_.use_existing_db) {
        std::printf("%-16s : skipped (--use_existing_db)\n", name.c_str());
        continue;
      }
      if (!pristine_) {
        s = open_fresh();
        if (!s.ok()) return fail(name, s);
      }
    }
    result r;
    r.benchmark = name;
    s = spec.run(*this, i, &r);
    if (!s.ok()) return fail(name, s);
    r.space = space_of(db_->GetStats());
    pristine_ = false;
    print_result(r);
    results_.push_back(std::move(r));
    if (config_.json) {
      s = write_json();
      if (!s.ok()) return fail("json", s);
    }
  }
  db_.reset();
  return 0;
}

}  // namespace

const std::vector<std::string>& bench_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const benchmark& b : kBenchmarks) v.emplace_back(b.name);
    return v;
  }();
  return names;
}

bench_config parse_bench_config(arguments& args) {
  bench_config c;
  std::string list;
  for (const std::string& n : bench_names()) list += (list.empty() ? "" : ",") + n;
  std::string given = args.text("benchmarks").value_or(list);
  std::size_t from = 0;
  while (from <= given.size()) {
    std::size_t comma = std::min(given.find(',', from), given.size());
    std::string name = given.substr(from, comma - from);
    std::uint64_t times = 1;  // name*N: N runs in a row
    if (std::size_t star = name.find('*'); star != std::string::npos) {
      times = parse_number(std::string_view(name).substr(star + 1), "--benchmarks: " + name);
      if (times < 1 || times > kMaxRepeat) {
        throw usage_error("--benchmarks: " + name + ": the count must be 1 to " +
                          std::to_string(kMaxRepeat));
      }
      name.resize(star);
    }
    if (!name.empty()) {
      if (find_benchmark(name) == nullptr) {
        throw usage_error("--benchmarks: unknown benchmark '" + name + "' (known: " + list +
                          ")");
      }
      c.benchmarks.insert(c.benchmarks.end(), times, name);
    } else if (times != 1) {
      throw usage_error("--benchmarks: a count without a benchmark name");
    }
    from = comma + 1;
  }
  if (c.benchmarks.empty()) throw usage_error("--benchmarks: no benchmark named");

  c.num = args.number("num", c.num, 1, kMaxNum);
  c.threads = args.number("threads", c.threads, 1, kMaxThreads);
  c.key_size = args.number("key_size", c.key_size, 1, kMaxKeySize - 1);
  c.value_size = args.number("value_size", c.value_size, 0, kMaxValueSize);
  c.batch_size = args.number("batch_size", c.batch_size, 1, 1u << 20);
  c.seek_nexts = args.number("seek_nexts", c.seek_nexts, 0, 1u << 20);
  c.sync = args.number("sync", 1, 0, 1) == 1;
  c.persist_every = args.number("persist_every", c.persist_every, 0, kMaxNum);
  c.verify_checksums = args.number("verify_checksums", 1, 0, 1) == 1;
  c.merge_interval_ms = args.number("merge_interval", 0, 0, 1u << 30);
  c.db = args.text("db");
  if (c.db && c.db->empty()) throw usage_error("--db: empty path");
  c.use_existing_db = args.flag("use_existing_db");
  c.pool_size = args.bytes("pool_size", kMinPoolSize, ~std::uint64_t{0});
  c.histogram = args.flag("histogram");
  c.json = args.text("json");
  if (c.json && c.json->empty()) throw usage_error("--json: empty file name");

  if (decimal_digits(c.num - 1) > c.key_size) {
    throw usage_error("--key_size=" + std::to_string(c.key_size) + " cannot hold the keys of " +
                      "--num=" + std::to_string(c.num) + ": they need " +
                      std::to_string(decimal_digits(c.num - 1)) + " digits");
  }
  if (c.use_existing_db && !c.db) {
    throw usage_error("--use_existing_db needs --db=PATH (the default pool is always fresh)");
  }
  return c;
}

std::uint64_t default_pool_size(const bench_config& config) {
  // Versions written since the last fresh pool, at their most.
  uint128 versions = 0, peak = 0;
  for (const std::string& name : config.benchmarks) {
    const benchmark* b = find_benchmark(name);
    if (b == nullptr) continue;  // parse_bench_config refuses it
    if (b->pool == pool_use::fresh_fill) versions = 0;
    if (b->pool != pool_use::reads) versions += config.num;
    peak = std::max(peak, versions);
  }
  // A node: three words of up to 16 bytes, the key and the value, rounded to a cache line.
  uint128 node = (48 + config.key_size + config.value_size + 63) / 64 * 64;
  uint128 bytes = 2 * peak * node + kHeadroomBytes;
  if (bytes > ~std::uint64_t{0}) return ~std::uint64_t{0};
  return std::max<std::uint64_t>(static_cast<std::uint64_t>(bytes), kMinPoolSize);
}

int run_bench(const bench_config& config) { return bench_runner(config).run(); }

std::string bench_usage() {
  std::string list, described;
  for (const benchmark& b : kBenchmarks) {
    if (!list.empty()) list += ',';
    list += b.name;
    std::string name(b.name);
    name.resize(std::max<std::size_t>(name.size() + 1, 18), ' ');
    described += "  " + name + std::string(b.description) + "\n";
  }
  return "Usage: flintkv bench [--flag=value ...]\n"
         "  --benchmarks=LIST   comma-separated, run in order (default: " + list + ")\n"
         "                      fill* start from an empty pool; the others use the pool the\n"
         "                      previous benchmark left; name*N runs a benchmark N times in a\n"
         "                      row (fillrandom,overwrite*20: 20 passes over the whole key\n"
         "                      space, each in a new order)\n"
         "  --num=N             keys in the key space, and operations per benchmark "
         "(default 1000000)\n"
         "  --threads=T         threads sharing the operations (default 1); readwhilewriting\n"
         "                      runs T readers and one writer\n"
         "  --key_size=B        bytes per key, decimal zero-padded (default 16)\n"
         "  --value_size=B      bytes per value (default 64)\n"
         "  --batch_size=N      puts per WriteBatch in fillbatch (default 100)\n"
         "  --seek_nexts=N      Next() calls after each Seek in seekrandom (default 10)\n"
         "  --sync=0|1          1: every write durable on return (default); 0: weak writes\n"
         "                      (WriteOptions::sync = false), each thread calling Persist()\n"
         "                      after every --persist_every of its writes (default 1000; 0:\n"
         "                      never) and once at its end, inside the timed run\n"
         "  --verify_checksums=0|1\n"
         "                      1: every value read is checked against its node's checksum\n"
         "                      (ReadOptions::verify_checksums, the default); 0: reads,\n"
         "                      scans and transactions skip the check\n"
         "  --merge_interval=MS Options::merge_interval of the stores opened: a thread moves\n"
         "                      keys that stopped changing to the packed tier every MS\n"
         "                      milliseconds (default 0: none)\n"
         "  --db=PATH           the pool file (default: a fresh pool in /dev/shm, removed at "
         "exit)\n"
         "  --use_existing_db   benchmark the existing pool at --db; fill* are skipped\n"
         "  --pool_size=BYTES   size of the pools bench creates (suffix K, M, G; default: room\n"
         "                      for every version the list writes, none reclaimed, twice\n"
         "                      over, + 64M)\n"
         "  --histogram         print latency percentiles after each benchmark\n"
         "  --json=FILE         write every benchmark's results to FILE as a JSON array\n"
         "Benchmarks:\n" + described;
}

}  // namespace flintkv::tools
