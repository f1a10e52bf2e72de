// flintkv_peers: the driver of the peer benchmark (bench/peers/run.sh runs it). One run is one
// system, one workload and one thread count, in a fresh store (a new directory, removed at
// exit) and a fresh process; it prints one JSON line on stdout:
//
//   flintkv_peers --system=leveldb --benchmark=readrandom --threads=2 --num=1000000
//   {"system": "leveldb", "benchmark": "readrandom", "threads": 2, ..., "ops_per_sec": ...}
//
// The workloads are those of `flintkv bench --benchmarks=fillrandom,<workload>`, with its
// keys, values and seeds (engine/tools/workload.hpp):
//   fillrandom        timed: every key 0 .. num-1 once, in a random order, each thread its share
// Every workload but fillrandom fills first, untimed, then waits (untimed) until the
// background work the fill left is done, as far as each system can tell (store::settle;
// "settle_seconds" in the JSON line), so that its timed part meets a settled store:
//   readrandom        the fill (untimed), then num gets of keys uniform over [0, num)
//   seekrandom        the fill, then num times: a new iterator, Seek to a random key, and
//                     --seek_nexts Next
//   overwrite         the fill, then every key once more, in a new random order
//   readwhilewriting  the fill, then --threads readers do readrandom while one writer puts
//                     random keys until they are done (at most num puts); the readers' rate
//   transfer          the fill, then num transactions, each reading two keys uniform over
//                     [0, num) and writing both with the next two values (session::transfer;
//                     the systems of kTransactionalSystems only); an attempt that aborts on
//                     a conflict counts in "aborts" (and "abort_rate": aborts over all
//                     attempts) and is begun again, with new values, its time counted in the
//                     run's; ops are the committed transactions
// Besides ops/s: the store's bytes per live key after the workload, once the store has
// settled again (untimed, "final_settle_seconds"; its files' sizes; FlintKV: the pool's
// bytes in use) and the peak resident memory of the process
// (getrusage's ru_maxrss: the fill included), and its peak DRAM: the same, but for FlintKV
// the peak without its pool's pages, which stand for persistent memory (dram_sampler). With --verify=1 (for the tests), after the
// timed part, one session gets every key 0 .. num-1 and "verified_keys" says how many it
// found (untimed).
//
// Durability, as `flintkv bench` has it: --sync=1 (the default) makes every put durable on
// return; --sync=0 makes every put of the run weak (the untimed fill's too), each thread
// calling its session's persist() after every --persist_every of its puts and once at its
// end, inside the timed run (store.hpp says what persist() is in each system). The JSON
// line says "sync"; with --sync=0 also "persist_every" and "persists" (the timed run's
// persist() calls, the writer's included). A committed transfer counts as one put there,
// as one write in `flintkv bench` (its two puts are one commit).
//
// Thread safety: main runs on one thread and starts the workers.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "arguments.hpp"
#include "json.hpp"
#include "resident.hpp"
#include "store.hpp"
#include "workload.hpp"

namespace flintkv::peers {

namespace {

using steady = std::chrono::steady_clock;
using tools::key_formatter;
using tools::json_number;
using tools::random_source;

constexpr std::string_view kBenchmarks[] = {"fillrandom", "readrandom", "seekrandom",
                                            "overwrite", "readwhilewriting", "transfer"};
constexpr std::uint64_t kMaxThreads = 256;

struct peers_config {
  std::string system, benchmark;
  std::uint64_t num = 1000000, threads = 1, key_size = 16, value_size = 64, seek_nexts = 10;
  bool sync = true;                    // every put durable on return; false: weak puts
  bool verify = false;                 // after the timed part, count the keys present
  std::uint64_t persist_every = 1000;  // with sync false: each thread's puts per persist()
  std::optional<std::string> db;  // the store's directory; nullopt: /dev/shm/flintkv-peers-PID
};

// One benchmark thread's state; written only by that thread until it is joined.
struct worker {
  std::uint64_t index = 0;
  std::uint64_t begin = 0, end = 0;  // its share [begin, end) of the operations (and keys)
  random_source random{0};
  key_formatter keys{0};
  std::size_t value_position = 0;
  std::unique_ptr<session> me;
  std::uint64_t ops = 0, found = 0;
  std::uint64_t unpersisted = 0;  // --sync=0: puts since this worker's last persist()
  std::uint64_t persists = 0;     // persist() calls
  std::uint64_t aborts = 0;       // transfer: attempts that aborted on a conflict
  std::string key_a, key_b;       // transfer: the keys of the current transaction
  steady::time_point start, finish;
  Status status;
};

// The peak of the process's resident memory without its shared-memory pages (RssShmem: in
// FlintKV's runs, its pool's pages, the only shared mapping the process has, a file in
// /dev/shm), sampled every kEvery from construction to stop(): the DRAM of a system whose
// store is a mapped pool of persistent memory (store::maps_persistent_memory). A peak
// shorter than kEvery may be missed, so the figure is at most the true peak.
class dram_sampler {
 public:
  static constexpr std::chrono::milliseconds kEvery{5};
  dram_sampler() : thread_([this] { loop(); }) {}
  ~dram_sampler() { stop(); }
  // Stops sampling (one last sample first); nullopt if /proc/self/status could not be read.
  std::optional<std::uint64_t> stop() {
    if (thread_.joinable()) {
      {
        std::lock_guard lock(mutex_);
        stop_ = true;
      }
      cv_.notify_all();
      thread_.join();
    }
    return read_ ? std::optional(peak_) : std::nullopt;
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    do {
      if (const auto r = tools::read_resident()) {
        read_ = true;
        peak_ = std::max(peak_, r->anon + r->file);
      }
    } while (!cv_.wait_for(lock, kEvery, [this] { return stop_; }));
    if (const auto r = tools::read_resident()) peak_ = std::max(peak_, r->anon + r->file);
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false, read_ = false;
  std::uint64_t peak_ = 0;
  std::thread thread_;  // last: started once the rest is set
};

// What the timed part measured.
struct result {
  std::uint64_t ops = 0;
  double seconds = 0;  // from the earliest start to the latest finish
  std::optional<std::uint64_t> found, writer_puts;
  std::uint64_t persists = 0;  // persist() calls of every worker (--sync=0)
  std::optional<std::uint64_t> aborts;  // transfer: aborted attempts of every worker
};

class runner {
 public:
  runner(const peers_config& config, store& db)
      : config_(config), db_(db), values_(config.value_size, tools::kValueSeed) {}

  // The benchmark at `position` of the list "fillrandom,<benchmark>", as `flintkv bench`
  // seeds it; overwrite and fillrandom are the same writes at different positions.
  Status run(std::string_view benchmark, std::size_t position, result* r) {
    if (benchmark == "fillrandom" || benchmark == "overwrite") return writes(position, r);
    if (benchmark == "readrandom") return reads(position, r);
    if (benchmark == "seekrandom") return seeks(position, r);
    if (benchmark == "transfer") return transfers(position, r);
    return read_while_writing(position, r);
  }

 private:
  using body = std::function<Status(worker&)>;

  // Runs `fn` on `count` threads, each with its own session, after a start barrier. The
  // first min(count, --threads) workers split [0, total) into their shares; any other
  // (readwhilewriting's writer) gets none. Fills r->ops and r->seconds from the first
  // `timed` workers.
  Status run_workers(std::size_t position, std::uint64_t count, std::size_t timed,
                     const body& fn, std::vector<worker>* workers, result* r) {
    workers->resize(count);
    const std::uint64_t shares = std::min(count, config_.threads);
    for (std::uint64_t i = 0; i < count; ++i) {
      worker& w = (*workers)[i];
      w.index = i;
      if (i < shares) {
        w.begin = tools::share_bound(config_.num, shares, i);
        w.end = tools::share_bound(config_.num, shares, i + 1);
      }
      w.random = random_source(tools::thread_seed(position, i));
      w.keys = key_formatter(config_.key_size);
      w.value_position = tools::value_start(i, config_.value_size);
    }
    std::latch start(static_cast<std::ptrdiff_t>(count));
    std::atomic<bool> abandoned{false};  // a thread could not be started: the others stop
    std::vector<std::jthread> threads;
    try {
      for (worker& w : *workers) {
        threads.emplace_back([&] {
          w.status = db_.new_session(&w.me);
          start.arrive_and_wait();
          w.start = steady::now();
          if (w.status.ok() && !abandoned.load()) w.status = fn(w);
          w.finish = steady::now();
        });
      }
    } catch (const std::system_error& e) {
      const std::size_t started = threads.size();
      abandoned.store(true);
      start.count_down(static_cast<std::ptrdiff_t>(count - started));
      threads.clear();
      return Status::IOError("cannot start thread " + std::to_string(started) + ": " + e.what());
    }
    threads.clear();  // joins
    steady::time_point first = workers->front().start, last = workers->front().finish;
    for (std::size_t i = 0; i < timed; ++i) {
      const worker& w = (*workers)[i];
      if (!w.status.ok()) return w.status;
      first = std::min(first, w.start);
      last = std::max(last, w.finish);
      r->ops += w.ops;
      if (r->found) *r->found += w.found;
      if (r->aborts) *r->aborts += w.aborts;
    }
    for (const worker& w : *workers) {
      if (!w.status.ok()) return w.status;
      r->persists += w.persists;
    }
    r->seconds = std::chrono::duration<double>(last - first).count();
    return Status::OK();
  }

  Status measure(std::size_t position, const body& fn, result* r) {
    std::vector<worker> workers;
    return run_workers(position, config_.threads, config_.threads, fn, &workers, r);
  }

  // One put, and with --sync=0 the persist() that every --persist_every puts of `w` call for.
  Status put_one(worker& w, std::string_view key) {
    if (Status s = w.me->put(key, values_.next(w.value_position)); !s.ok()) return s;
    return persist_now_and_then(w);
  }

  // With --sync=0: counts one put (or committed transfer) of `w`, and calls persist() when
  // they make --persist_every since its last.
  Status persist_now_and_then(worker& w) {
    if (config_.sync || config_.persist_every == 0) return Status::OK();
    if (++w.unpersisted < config_.persist_every) return Status::OK();
    w.unpersisted = 0;
    ++w.persists;
    return w.me->persist();
  }

  // With --sync=0: the end of a writing thread's run, after which all its puts are durable.
  Status persist_at_end(worker& w) {
    if (config_.sync) return Status::OK();
    w.unpersisted = 0;
    ++w.persists;
    return w.me->persist();
  }

  Status writes(std::size_t position, result* r) {
    return measure(position, [this](worker& w) {
      tools::shuffled_share order(w.begin, w.end, w.random);
      for (std::uint64_t i = w.begin; i < w.end; ++i, ++w.ops) {
        if (Status s = put_one(w, w.keys.key(order(i))); !s.ok()) return s;
      }
      return persist_at_end(w);
    }, r);
  }

  // One read of a key uniform over [0, num), counted in w.found.
  Status read_one(worker& w) {
    bool found = false;
    Status s = w.me->get(w.keys.key(w.random.uniform(config_.num)), &found);
    w.found += found;
    return s;
  }

  Status reads(std::size_t position, result* r) {
    r->found = 0;
    return measure(position, [this](worker& w) {
      for (std::uint64_t i = w.begin; i < w.end; ++i, ++w.ops) {
        if (Status s = read_one(w); !s.ok()) return s;
      }
      return Status::OK();
    }, r);
  }

  Status seeks(std::size_t position, result* r) {
    r->found = 0;
    return measure(position, [this](worker& w) {
      for (std::uint64_t i = w.begin; i < w.end; ++i, ++w.ops) {
        bool found = false;
        Status s = w.me->seek(w.keys.key(w.random.uniform(config_.num)), config_.seek_nexts,
                              &found);
        if (!s.ok()) return s;
        w.found += found;
      }
      return Status::OK();
    }, r);
  }

  // Each transaction: two keys uniform over [0, num), as `flintkv bench`'s transfer draws
  // them, and two new values per attempt; begun again while it aborts.
  Status transfers(std::size_t position, result* r) {
    r->aborts = 0;
    return measure(position, [this](worker& w) {
      for (std::uint64_t i = w.begin; i < w.end; ++i, ++w.ops) {
        w.key_a = w.keys.key(w.random.uniform(config_.num));
        w.key_b = w.keys.key(w.random.uniform(config_.num));
        for (bool aborted = true; aborted;) {
          const std::string_view value_a = values_.next(w.value_position);
          const std::string_view value_b = values_.next(w.value_position);
          if (Status s = w.me->transfer(w.key_a, w.key_b, value_a, value_b, &aborted);
              !s.ok()) {
            return s;
          }
          w.aborts += aborted;
        }
        if (Status s = persist_now_and_then(w); !s.ok()) return s;
      }
      return persist_at_end(w);
    }, r);
  }

  Status read_while_writing(std::size_t position, result* r) {
    const std::uint64_t readers = config_.threads, num = config_.num;
    std::atomic<std::uint64_t> readers_done{0};
    r->found = 0;
    std::vector<worker> workers;
    Status s = run_workers(position, readers + 1, readers, [&](worker& w) {
      if (w.index == readers) {  // the writer
        for (; readers_done.load(std::memory_order_relaxed) < readers && w.ops < num; ++w.ops) {
          if (Status st = put_one(w, w.keys.key(w.random.uniform(num))); !st.ok()) return st;
        }
        return persist_at_end(w);
      }
      Status st;
      for (std::uint64_t i = w.begin; i < w.end && st.ok(); ++i) {
        st = read_one(w);
        w.ops += st.ok();
      }
      readers_done.fetch_add(1);
      return st;
    }, &workers, r);
    r->writer_puts = workers.back().ops;
    return s;
  }

  const peers_config& config_;
  store& db_;
  tools::value_source values_;
};

std::string names(const auto& list) {
  std::string out;
  for (std::string_view n : list) out += (out.empty() ? "" : ",") + std::string(n);
  return out;
}

bool listed(const auto& list, std::string_view name) {
  for (std::string_view n : list) {
    if (n == name) return true;
  }
  return false;
}

peers_config parse(tools::arguments& args) {
  peers_config c;
  c.system = args.text("system").value_or("");
  if (!listed(kSystems, c.system)) {
    throw tools::usage_error("--system: one of " + names(kSystems));
  }
  c.benchmark = args.text("benchmark").value_or("");
  if (!listed(kBenchmarks, c.benchmark)) {
    throw tools::usage_error("--benchmark: one of " + names(kBenchmarks));
  }
  if (c.benchmark == "transfer" && !listed(kTransactionalSystems, c.system)) {
    throw tools::usage_error("--benchmark=transfer: " + c.system +
                             " has no transactions (systems with them: " +
                             names(kTransactionalSystems) + ")");
  }
  c.num = args.number("num", c.num, 1, std::uint64_t{1} << 40);
  c.threads = args.number("threads", c.threads, 1, kMaxThreads);
  c.key_size = args.number("key_size", c.key_size, 1, 4095);
  c.value_size = args.number("value_size", c.value_size, 0, 1u << 20);
  c.seek_nexts = args.number("seek_nexts", c.seek_nexts, 0, 1u << 20);
  c.sync = args.number("sync", 1, 0, 1) == 1;
  c.persist_every = args.number("persist_every", c.persist_every, 0, std::uint64_t{1} << 40);
  c.verify = args.number("verify", 0, 0, 1) == 1;
  c.db = args.text("db");
  if (c.db && c.db->empty()) throw tools::usage_error("--db: empty path");
  args.reject_unused("flintkv_peers");
  if (tools::decimal_digits(c.num - 1) > c.key_size) {
    throw tools::usage_error("--key_size=" + std::to_string(c.key_size) +
                             " cannot hold the keys of --num=" + std::to_string(c.num));
  }
  return c;
}

constexpr const char* kUsage =
    "Usage: flintkv_peers --system=S --benchmark=B [--flag=value ...]\n"
    "  --system=S        flintkv, rocksdb, rocksdb-occ (RocksDB's OptimisticTransactionDB),\n"
    "                    rocksdb-2pl (its TransactionDB), leveldb or lmdb\n"
    "  --benchmark=B     fillrandom, readrandom, seekrandom, overwrite, readwhilewriting\n"
    "                    or transfer (each op a transaction: read two random keys, write\n"
    "                    both, begin again on a conflict; flintkv, rocksdb-occ,\n"
    "                    rocksdb-2pl and lmdb); all but fillrandom fill the store first,\n"
    "                    untimed\n"
    "  --num=N           keys, and operations timed (default 1000000)\n"
    "  --threads=T       threads sharing the operations (default 1); readwhilewriting runs\n"
    "                    T readers and one writer\n"
    "  --key_size=B      bytes per key, decimal zero-padded (default 16)\n"
    "  --value_size=B    bytes per value (default 64)\n"
    "  --seek_nexts=N    Next() calls after each Seek in seekrandom (default 10)\n"
    "  --sync=0|1        1: every put durable on return (default); 0: weak puts (FlintKV,\n"
    "                    RocksDB, LevelDB: WriteOptions::sync = false; LMDB: MDB_NOSYNC),\n"
    "                    each thread calling the system's persist after every\n"
    "                    --persist_every of its puts (default 1000; 0: never) and once at\n"
    "                    its end, inside the timed run\n"
    "  --verify=0|1      1: after the timed part, get every key 0 .. num-1 and print how\n"
    "                    many were found (\"verified_keys\"; untimed)\n"
    "  --db=DIR          the store's directory: must not exist; created, removed at exit\n"
    "                    (default /dev/shm/flintkv-peers-PID)\n"
    "Prints one JSON line: ops/s, store bytes per live key, peak resident memory, settings\n"
    "(transfer: also the aborted attempts and their share of all attempts).\n";

// --verify: gets every key 0 .. num-1 in one new session; *found counts those present.
Status count_keys(const peers_config& config, store& db, std::uint64_t* found) {
  std::unique_ptr<session> me;
  if (Status s = db.new_session(&me); !s.ok()) return s;
  key_formatter keys(config.key_size);
  for (std::uint64_t k = 0; k < config.num; ++k) {
    bool present = false;
    if (Status s = me->get(keys.key(k), &present); !s.ok()) return s;
    *found += present;
  }
  return Status::OK();
}

// A JSON string.
std::string json_string(std::string_view s) { return "\"" + tools::json_escape(s) + "\""; }

int run(const peers_config& config) {
  auto fail = [&](const Status& s) {
    std::fprintf(stderr, "flintkv_peers: %s %s: %s\n", config.system.c_str(),
                 config.benchmark.c_str(), s.ToString().c_str());
    return 1;
  };
  const std::string dir =
      config.db.value_or("/dev/shm/flintkv-peers-" + std::to_string(::getpid()));
  std::error_code ec;
  if (!std::filesystem::create_directory(dir, ec)) {
    return fail(Status::InvalidArgument(
        dir + ": " + (ec ? ec.message() : "exists (the driver never reuses a store)")));
  }
  struct remove_at_exit {
    const std::string& dir;
    ~remove_at_exit() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } cleanup{dir};

  const bool fills_first = config.benchmark != "fillrandom";
  store_config sc;
  sc.dir = dir;
  sc.num = config.num;
  sc.key_size = config.key_size;
  sc.value_size = config.value_size;
  const bool writes_more =
      config.benchmark == "overwrite" || config.benchmark == "readwhilewriting";
  // transfer: two versions per committed transaction (an aborted one writes none).
  sc.versions = config.num * (config.benchmark == "transfer" ? 3 : writes_more ? 2 : 1);
  sc.sync = config.sync;
  sc.persist_every = config.persist_every;
  sc.transfers = config.benchmark == "transfer";
  dram_sampler sampler;
  std::unique_ptr<store> db;
  if (Status s = open_store(config.system, sc, &db); !s.ok()) return fail(s);

  runner bench(config, *db);
  result fill, timed;
  // db->settle(), its time in *seconds.
  const auto settle = [&db](double* seconds) {
    const auto start = std::chrono::steady_clock::now();
    Status s = db->settle();
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return s;
  };
  double settle_seconds = 0;
  if (fills_first) {
    if (Status s = bench.run("fillrandom", 0, &fill); !s.ok()) return fail(s);
    if (Status s = settle(&settle_seconds); !s.ok()) return fail(s);
  }
  if (Status s = bench.run(config.benchmark, fills_first ? 1 : 0, &timed); !s.ok()) {
    return fail(s);
  }
  std::optional<std::uint64_t> verified;
  if (config.verify) {
    verified = 0;
    if (Status s = count_keys(config, *db, &*verified); !s.ok()) return fail(s);
  }
  // The space is the settled store's: what the workload left once the background work it
  // started is done (as far as the system can tell), not a figure that depends on where
  // that work stood when the timer stopped.
  double final_settle_seconds = 0;
  if (Status s = settle(&final_settle_seconds); !s.ok()) return fail(s);
  const std::uint64_t bytes = db->bytes();
  const std::uint64_t live = db->live_keys().value_or(config.num);
  const std::string settings = db->settings();
  const bool persistent_pool = db->maps_persistent_memory();
  db.reset();
  const std::optional<std::uint64_t> sampled = sampler.stop();
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const std::uint64_t peak_rss = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
  // DRAM: every resident page (ru_maxrss, exact), but for a store in a persistent-memory
  // pool the peak without the pool's pages (sampled).
  const std::optional<std::uint64_t> peak_dram = persistent_pool ? sampled : peak_rss;

  std::string o = "{";
  auto field = [&o](std::string_view name, const std::string& value) {
    if (o.size() > 1) o += ", ";
    o += json_string(name) + ": " + value;
  };
  auto integer = [](std::uint64_t v) { return std::to_string(v); };
  field("system", json_string(config.system));
  field("benchmark", json_string(config.benchmark));
  field("threads", integer(config.threads));
  field("num", integer(config.num));
  field("key_size", integer(config.key_size));
  field("value_size", integer(config.value_size));
  if (config.benchmark == "seekrandom") field("seek_nexts", integer(config.seek_nexts));
  field("sync", config.sync ? "true" : "false");
  if (!config.sync) field("persist_every", integer(config.persist_every));
  field("ops", integer(timed.ops));
  field("seconds", json_number(timed.seconds));
  field("ops_per_sec", json_number(timed.seconds > 0 ? double(timed.ops) / timed.seconds : 0));
  if (timed.found) field("found", integer(*timed.found));
  if (timed.writer_puts) field("writer_puts", integer(*timed.writer_puts));
  if (!config.sync) field("persists", integer(timed.persists));
  if (timed.aborts) {
    const std::uint64_t attempts = timed.ops + *timed.aborts;
    field("aborts", integer(*timed.aborts));
    field("abort_rate",
          json_number(attempts > 0 ? double(*timed.aborts) / double(attempts) : 0));
  }
  if (fills_first) field("fill_seconds", json_number(fill.seconds));
  if (fills_first) field("settle_seconds", json_number(settle_seconds));
  field("final_settle_seconds", json_number(final_settle_seconds));
  if (verified) field("verified_keys", integer(*verified));
  field("live_keys", integer(live));
  field("store_bytes", integer(bytes));
  field("bytes_per_key", live > 0 ? json_number(double(bytes) / double(live)) : "null");
  field("peak_rss_bytes", integer(peak_rss));
  field("peak_dram_bytes", peak_dram ? integer(*peak_dram) : "null");
  field("settings", json_string(settings));
  std::printf("%s}\n", o.c_str());
  return 0;
}

}  // namespace

Status open_store(std::string_view system, const store_config& config,
                  std::unique_ptr<store>* out) {
  if (system == "flintkv") return open_flintkv(config, out);
  if (system == "rocksdb") return open_rocksdb(config, out);
  if (system == "rocksdb-occ") return open_rocksdb_occ(config, out);
  if (system == "rocksdb-2pl") return open_rocksdb_2pl(config, out);
  if (system == "leveldb") return open_leveldb(config, out);
  if (system == "lmdb") return open_lmdb(config, out);
  return Status::InvalidArgument("unknown system " + std::string(system));
}

std::string persist_cadence(std::uint64_t persist_every, bool transfers) {
  if (persist_every == 0) return "at the end of each thread's run";
  return "after every " + std::to_string(persist_every) +
         (transfers ? " transfers (commits)" : " puts") + " of each thread and at its end";
}

std::uint64_t directory_bytes(const std::string& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, ec)) {
    std::error_code size_ec;
    if (entry.is_regular_file(size_ec)) {
      std::uint64_t size = entry.file_size(size_ec);
      if (!size_ec) total += size;
    }
  }
  return total;
}

}  // namespace flintkv::peers

int main(int argc, char** argv) {
  using namespace flintkv;
  try {
    tools::arguments args(argc, argv, 1);
    if (args.flag("help")) {
      std::fputs(peers::kUsage, stdout);
      return 0;
    }
    return peers::run(peers::parse(args));
  } catch (const tools::usage_error& e) {
    std::fprintf(stderr, "flintkv_peers: %s\n%s", e.what(), peers::kUsage);
    return 2;
  }
}
