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
//   readrandom        the fill (untimed), then num gets of keys uniform over [0, num)
//   seekrandom        the fill, then num times: a new iterator, Seek to a random key, and
//                     --seek_nexts Next
//   overwrite         the fill, then every key once more, in a new random order
//   readwhilewriting  the fill, then --threads readers do readrandom while one writer puts
//                     random keys until they are done (at most num puts); the readers' rate
// Besides ops/s: the store's bytes per live key after the workload (its files' sizes;
// FlintKV: the pool's bytes in use) and the peak resident memory of the process
// (getrusage's ru_maxrss: the fill included).
//
// Thread safety: main runs on one thread and starts the workers.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "arguments.hpp"
#include "json.hpp"
#include "store.hpp"
#include "workload.hpp"

namespace flintkv::peers {

namespace {

using steady = std::chrono::steady_clock;
using tools::key_formatter;
using tools::json_number;
using tools::random_source;

constexpr std::string_view kBenchmarks[] = {"fillrandom", "readrandom", "seekrandom",
                                            "overwrite", "readwhilewriting"};
constexpr std::uint64_t kMaxThreads = 256;

struct peers_config {
  std::string system, benchmark;
  std::uint64_t num = 1000000, threads = 1, key_size = 16, value_size = 64, seek_nexts = 10;
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
  steady::time_point start, finish;
  Status status;
};

// What the timed part measured.
struct result {
  std::uint64_t ops = 0;
  double seconds = 0;  // from the earliest start to the latest finish
  std::optional<std::uint64_t> found, writer_puts;
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
    }
    for (const worker& w : *workers) {
      if (!w.status.ok()) return w.status;
    }
    r->seconds = std::chrono::duration<double>(last - first).count();
    return Status::OK();
  }

  Status measure(std::size_t position, const body& fn, result* r) {
    std::vector<worker> workers;
    return run_workers(position, config_.threads, config_.threads, fn, &workers, r);
  }

  Status writes(std::size_t position, result* r) {
    return measure(position, [this](worker& w) {
      tools::shuffled_share order(w.begin, w.end, w.random);
      for (std::uint64_t i = w.begin; i < w.end; ++i, ++w.ops) {
        Status s = w.me->put(w.keys.key(order(i)), values_.next(w.value_position));
        if (!s.ok()) return s;
      }
      return Status::OK();
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

  Status read_while_writing(std::size_t position, result* r) {
    const std::uint64_t readers = config_.threads, num = config_.num;
    std::atomic<std::uint64_t> readers_done{0};
    r->found = 0;
    std::vector<worker> workers;
    Status s = run_workers(position, readers + 1, readers, [&](worker& w) {
      if (w.index == readers) {  // the writer
        for (; readers_done.load(std::memory_order_relaxed) < readers && w.ops < num; ++w.ops) {
          Status st = w.me->put(w.keys.key(w.random.uniform(num)), values_.next(w.value_position));
          if (!st.ok()) return st;
        }
        return Status::OK();
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
  c.num = args.number("num", c.num, 1, std::uint64_t{1} << 40);
  c.threads = args.number("threads", c.threads, 1, kMaxThreads);
  c.key_size = args.number("key_size", c.key_size, 1, 4095);
  c.value_size = args.number("value_size", c.value_size, 0, 1u << 20);
  c.seek_nexts = args.number("seek_nexts", c.seek_nexts, 0, 1u << 20);
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
    "  --system=S        flintkv, rocksdb, leveldb or lmdb\n"
    "  --benchmark=B     fillrandom, readrandom, seekrandom, overwrite or readwhilewriting\n"
    "                    (all but fillrandom fill the store first, untimed)\n"
    "  --num=N           keys, and operations timed (default 1000000)\n"
    "  --threads=T       threads sharing the operations (default 1); readwhilewriting runs\n"
    "                    T readers and one writer\n"
    "  --key_size=B      bytes per key, decimal zero-padded (default 16)\n"
    "  --value_size=B    bytes per value (default 64)\n"
    "  --seek_nexts=N    Next() calls after each Seek in seekrandom (default 10)\n"
    "  --db=DIR          the store's directory: must not exist; created, removed at exit\n"
    "                    (default /dev/shm/flintkv-peers-PID)\n"
    "Prints one JSON line: ops/s, store bytes per live key, peak resident memory, settings.\n";

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
  sc.versions = config.num * (writes_more ? 2 : 1);
  std::unique_ptr<store> db;
  if (Status s = open_store(config.system, sc, &db); !s.ok()) return fail(s);

  runner bench(config, *db);
  result fill, timed;
  if (fills_first) {
    if (Status s = bench.run("fillrandom", 0, &fill); !s.ok()) return fail(s);
  }
  if (Status s = bench.run(config.benchmark, fills_first ? 1 : 0, &timed); !s.ok()) {
    return fail(s);
  }
  const std::uint64_t bytes = db->bytes();
  const std::uint64_t live = db->live_keys().value_or(config.num);
  const std::string settings = db->settings();
  db.reset();
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const std::uint64_t peak_rss = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;

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
  field("ops", integer(timed.ops));
  field("seconds", json_number(timed.seconds));
  field("ops_per_sec", json_number(timed.seconds > 0 ? double(timed.ops) / timed.seconds : 0));
  if (timed.found) field("found", integer(*timed.found));
  if (timed.writer_puts) field("writer_puts", integer(*timed.writer_puts));
  if (fills_first) field("fill_seconds", json_number(fill.seconds));
  field("live_keys", integer(live));
  field("store_bytes", integer(bytes));
  field("bytes_per_key", live > 0 ? json_number(double(bytes) / double(live)) : "null");
  field("peak_rss_bytes", integer(peak_rss));
  field("settings", json_string(settings));
  std::printf("%s}\n", o.c_str());
  return 0;
}

}  // namespace

Status open_store(std::string_view system, const store_config& config,
                  std::unique_ptr<store>* out) {
  if (system == "flintkv") return open_flintkv(config, out);
  if (system == "rocksdb") return open_rocksdb(config, out);
  if (system == "leveldb") return open_leveldb(config, out);
  if (system == "lmdb") return open_lmdb(config, out);
  return Status::InvalidArgument("unknown system " + std::string(system));
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
