// The engine through the crash harness.
//
// The crash matrix: every durability mode x counter placement x workload x value width is
// one campaign (a "cell"), crashed at persistence events under every write-back choice,
// recovered by DB::Open's recovery, and checked against the durable-linearizability rule
// (DESIGN.md section 7). The default suite samples each cell with a few crash points; the
// crash-long suite runs at least 10,000 images per cell (CRASH_MIN_IMAGES). Then teeth: the
// same campaigns fail engines that skip their fences or free a block before its unlink is
// durable. Then crashes during recovery itself (and the close's reclamation after it):
// recovering what a crashed recovery left must give the same store.
#include <gtest/gtest.h>

#include <boost/hana.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "crashtest/gtest.hpp"
#include "engine_support.hpp"
#include "support/policies.hpp"

namespace {

namespace hana = boost::hana;
using namespace flintkv_test;
using crashtest::campaign_config;
using crashtest::campaign_result;

template <class Placement, class Mode>
using on_model = engine_config<flit_test::on_model<Placement>, Mode>;

std::string key_of(std::uint64_t k) {
  std::string s = "k" + std::to_string(k);
  return s;
}

// ---- values of a chosen width ------------------------------------------------------------
//
// A value is its 64-bit id (crashtest::value_id: it names the write), then padding up to the
// cell's width, every byte derived from the id and its position. Reading a value back checks
// every byte, so a value torn by a crash (a line of the node lost) or mixed from two writes
// is reported at the first byte that differs.

char padding_byte(std::uint64_t id, std::size_t i) {
  std::uint64_t x = id + (i / 8 + 1) * 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return static_cast<char>(x >> (8 * (i % 8)));
}

std::string value_of(std::uint64_t id, std::size_t width) {
  std::string s(width, '\0');
  std::memcpy(s.data(), &id, sizeof id);
  for (std::size_t i = sizeof id; i < width; ++i) s[i] = padding_byte(id, i);
  return s;
}

std::uint64_t decode_value(std::string_view key, std::string_view s, std::size_t width) {
  if (s.size() != width) {
    throw crashtest::invariant_violation(std::string(key) + ": value of " +
                                         std::to_string(s.size()) + " bytes, every write wrote " +
                                         std::to_string(width));
  }
  std::uint64_t id;
  std::memcpy(&id, s.data(), sizeof id);
  for (std::size_t i = sizeof id; i < width; ++i) {
    if (s[i] != padding_byte(id, i)) {
      std::ostringstream m;
      m << key << ": torn value padding at byte " << i << " of " << width << " (value id 0x"
        << std::hex << id << ")";
      throw crashtest::invariant_violation(m.str());
    }
  }
  return id;
}

// What a run of a reclaiming workload did, in memory shared with the harness's children
// (created before they fork): each run that reaches its end (the counting run, and the run
// that stops at every point) publishes its own figures, taken before the store is closed,
// so the figures are those of the workload's operations, not of the close's final pass.
// The largest run's figures are kept.
struct reclaim_probe {
  std::atomic<std::uint64_t> runs{0};
  std::atomic<std::uint64_t> reclaimed_versions{0};  // versions reclaimed during the run
  std::atomic<std::uint64_t> reclaiming_writes{0};   // writes during which that count grew
  std::atomic<std::uint64_t> events_in_them{0};      // persistence events inside those writes
  std::atomic<std::uint64_t> merged_keys{0};         // keys merges moved to the packed tier

  void publish(std::uint64_t versions, std::uint64_t writes, std::uint64_t events,
               std::uint64_t merged) {
    runs.fetch_add(1);
    raise(reclaimed_versions, versions);
    raise(reclaiming_writes, writes);
    raise(events_in_them, events);
    raise(merged_keys, merged);
  }

 private:
  static void raise(std::atomic<std::uint64_t>& a, std::uint64_t v) {
    std::uint64_t now = a.load();
    while (now < v && !a.compare_exchange_weak(now, v)) {
    }
  }
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

// The versions of the values a merge may move into the packed tier, which keeps none: each
// write's value id with the version it was given, so that the recovered state reports a
// tier key's version as the list would. Filled by every run (a cell with merges has one
// writer, so each run gives a value the version the others gave it).
struct version_table {
  static constexpr std::size_t kSlots = 1 << 14;
  struct slot {
    std::atomic<std::uint64_t> id{0}, version{0};
  };
  void put(std::uint64_t id, std::uint64_t version) {
    for (std::size_t i = id % kSlots, n = 0; n < kSlots; i = (i + 1) % kSlots, ++n) {
      std::uint64_t expected = 0;
      if (slots[i].id.load() == id ||
          slots[i].id.compare_exchange_strong(expected, id) || expected == id) {
        slots[i].version.store(version);
        return;
      }
    }
    throw std::runtime_error("version table full");
  }
  std::uint64_t find(std::uint64_t id) const {
    for (std::size_t i = id % kSlots, n = 0; n < kSlots; i = (i + 1) % kSlots, ++n) {
      const std::uint64_t here = slots[i].id.load();
      if (here == id) return slots[i].version.load();
      if (here == 0) return 0;
    }
    return 0;
  }
  slot slots[kSlots];
};

// An object in an anonymous shared mapping, so that forked children write the parent's copy.
template <class T>
class shared {
 public:
  shared() {
    void* p = ::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of a shared probe failed");
    object_ = new (p) T;
  }
  ~shared() {
    object_->~T();
    ::munmap(object_, sizeof(T));
  }
  shared(const shared&) = delete;
  shared& operator=(const shared&) = delete;
  T& operator*() const { return *object_; }
  T* get() const { return object_; }

 private:
  T* object_;
};
using shared_probe = shared<reclaim_probe>;

// How the subject drives the engine besides the workload's operations.
struct subject_options {
  std::size_t width = 8;         // value bytes (at least 8)
  unsigned reclaim_every = 0;    // TEST_reclaim_every (0: the engine's own trigger)
  // Snapshots held across writes: one taken after every `snapshot_every`-th write (0: none),
  // released `snapshot_hold` writes later. The versions they can see are kept, and released
  // together: reclamation meets keys with several versions, some of them kept.
  unsigned snapshot_every = 0;
  unsigned snapshot_hold = 0;
  // Every second batch is written as a transaction instead (it reads each of its keys,
  // then writes them, and commits; a Busy commit begins again): its commit is a batch
  // validated by the combiner, and must survive whole or not at all like one.
  bool transactions = false;
  // A merge (TEST_merge) after every `merge_every`-th write, by the writing thread (0:
  // none): keys move into the packed tier, whose versions `versions` keeps (one writer).
  unsigned merge_every = 0;
  version_table* versions = nullptr;
  reclaim_probe* probe = nullptr;  // a fresh store's run publishes its figures here
};

// The engine as a crash-test subject, over the model's region, with values `width` bytes
// long (at least 8).
template <class Config>
class engine_subject {
  using engine = internal::engine_for<Config>;

 public:
  engine_subject(pv::model& m, crashtest::start how, std::size_t width = 8)
      : engine_subject(m, how, subject_options{.width = width}) {}

  engine_subject(pv::model& m, crashtest::start how, const subject_options& options)
      : model_(m), options_(options), width_(options.width) {
    Options o;
    o.thread_slots = 4;
    o.create_if_missing = true;  // a blank region: a new store; else recover
    Status s = internal::open_region<Config>({m.base(), m.size()}, o, &db_);
    if (!s.ok()) throw crashtest::invariant_violation("open: " + s.ToString());
    engine_ = dynamic_cast<engine*>(db_.get());
    if (options_.reclaim_every != 0) engine_->TEST_reclaim_every(options_.reclaim_every);
    // A merge (merged(): at most the workload's few keys) unlinks them two per step, each
    // step under the lock and fenced, so that crashes meet a merge between its steps as
    // well as inside one.
    engine_->TEST_set_unlink_step(2);
    if (how != crashtest::start::fresh) options_.probe = nullptr;
  }

  engine_subject(const engine_subject&) = delete;
  engine_subject& operator=(const engine_subject&) = delete;

  // Snapshots go before the DB (its close then reclaims everything, as at every close).
  ~engine_subject() {
    if (options_.probe != nullptr) {
      const Stats stats = engine_->GetStats();
      options_.probe->publish(stats.reclaimed_versions, reclaiming_writes_.load(),
                              events_in_them_.load(), stats.merged_keys);
    }
    for (const held& h : held_) db_->ReleaseSnapshot(h.snapshot);
  }

  std::uint64_t put(std::uint64_t key, std::uint64_t value,
                    crashtest::durability d = crashtest::durability::sync) {
    const std::uint64_t v =
        write([&] { return db_->Put(key_of(key), value_of(value, width_), options(d)); });
    if (options_.versions != nullptr) options_.versions->put(value, v);
    return merged(v);
  }
  std::uint64_t del(std::uint64_t key, crashtest::durability d = crashtest::durability::sync) {
    return merged(write([&] { return db_->Delete(key_of(key), options(d)); }));
  }
  void persist() { check(db_->Persist()); }
  // One merge of at most `limit` keys (TEST_merge); the keys it moved.
  std::size_t merge(std::size_t limit) {
    std::size_t moved = 0;
    check(engine_->TEST_merge(limit, &moved));
    return moved;
  }
  std::uint64_t write_batch(std::span<const crashtest::kv_write> entries,
                            crashtest::durability d = crashtest::durability::sync) {
    WriteBatch batch;
    for (const auto& e : entries) {
      if (e.del) {
        batch.Delete(key_of(e.key));
      } else {
        batch.Put(key_of(e.key), value_of(e.value, width_));
      }
    }
    const std::uint64_t v = options_.transactions && batches_.fetch_add(1) % 2 == 1
                                ? write([&] { return commit_transaction(entries, d); })
                                : write([&] { return db_->Write(batch, options(d)); });
    if (options_.versions != nullptr) {
      for (const auto& e : entries) {
        if (!e.del) options_.versions->put(e.value, v);
      }
    }
    return merged(v);
  }
  crashtest::kv_read get(std::uint64_t key) {
    auto found = engine_->TEST_read(key_of(key));
    if (!found) return {};
    return {true, decode_value(key_of(key), found->first, width_), found->second};
  }
  // The recovered state, read from the index over the packed tier (a tier key's version
  // from `versions`); Get (which answers from the point table's newest words, rebuilt by
  // recovery, or from the tier) must agree with it for every key.
  std::vector<crashtest::kv_entry> state() const {
    std::vector<crashtest::kv_entry> out;
    for (auto& e : engine_->TEST_state()) {
      if (e.version == 0 && options_.versions != nullptr) {
        e.version = options_.versions->find(decode_value(e.key, e.value, width_));
      }
      if (e.key.size() < 2 || e.key[0] != 'k') {
        throw crashtest::invariant_violation("recovered a key never written: " + e.key);
      }
      std::string got;
      if (!db_->Get(e.key, &got).ok() || got != e.value) {
        throw crashtest::invariant_violation("Get(" + e.key + ") disagrees with the index");
      }
      out.push_back(
          {std::stoull(e.key.substr(1)), decode_value(e.key, e.value, width_), e.version});
    }
    return out;
  }
  Stats stats() const { return engine_->GetStats(); }

 private:
  struct held {
    const Snapshot* snapshot;
    std::uint64_t until;  // released once this many writes were made
  };

  // One write: its status checked, its version returned; then the snapshot schedule. With
  // a probe, notes whether versions were reclaimed during it (by this thread's combining
  // pass, or by another thread's while this one waited) and the events it spanned.
  template <class Write>
  std::uint64_t write(Write w) {
    const bool probing = options_.probe != nullptr;
    const std::uint64_t reclaimed = probing ? engine_->GetStats().reclaimed_versions : 0;
    const std::uint64_t events = probing ? model_.persistence_events() : 0;
    check(w());
    const std::uint64_t version = engine::TEST_last_write_version();
    if (probing && engine_->GetStats().reclaimed_versions > reclaimed) {
      reclaiming_writes_.fetch_add(1);
      events_in_them_.fetch_add(model_.persistence_events() - events);
    }
    if (options_.snapshot_every != 0) {
      std::lock_guard lock(held_mutex_);
      const std::uint64_t n = ++writes_;
      while (!held_.empty() && held_.front().until <= n) {
        db_->ReleaseSnapshot(held_.front().snapshot);
        held_.erase(held_.begin());
      }
      if (n % options_.snapshot_every == 0) {
        const Snapshot* s = db_->GetSnapshot();
        if (s == nullptr) throw std::runtime_error("GetSnapshot: out of DRAM");
        held_.push_back({s, n + options_.snapshot_hold});
      }
    }
    return version;
  }

  static void check(const Status& s) {
    if (!s.ok()) throw std::runtime_error(s.ToString());
  }
  // After a write that returned `version`: a merge, every merge_every-th write; and every
  // kTierMergeEvery-th merge, the tier's small runs merged into its large run, as the merge
  // thread does once writes pause (their slots seldom fill: the tier gathers them), so that
  // a cell's 20 or so merges meet a few.
  std::uint64_t merged(std::uint64_t version) {
    if (options_.merge_every == 0) return version;
    const std::uint64_t n = merge_writes_.fetch_add(1);
    if (n % options_.merge_every == 0) {
      std::size_t moved = 0;
      check(engine_->TEST_merge(64, &moved));
      if (n / options_.merge_every % kTierMergeEvery == kTierMergeEvery - 1) {
        check(engine_->TEST_merge_tier());
      }
    }
    return version;
  }
  static constexpr std::uint64_t kTierMergeEvery = 6;
  Status commit_transaction(std::span<const crashtest::kv_write> entries,
                            crashtest::durability d) {
    while (true) {
      std::unique_ptr<Transaction> txn = db_->BeginTransaction(options(d));
      std::string ignored;
      for (const auto& e : entries) {
        Status s = txn->Get(key_of(e.key), &ignored);
        if (!s.ok() && !s.IsNotFound()) return s;
        s = e.del ? txn->Delete(key_of(e.key)) : txn->Put(key_of(e.key), value_of(e.value, width_));
        if (!s.ok()) return s;
      }
      Status s = txn->Commit();
      if (!s.IsBusy()) return s;
    }
  }
  static WriteOptions options(crashtest::durability d) {
    WriteOptions o;
    o.sync = d == crashtest::durability::sync;
    return o;
  }
  pv::model& model_;
  subject_options options_;
  std::size_t width_;
  std::unique_ptr<DB> db_;
  engine* engine_ = nullptr;
  std::mutex held_mutex_;
  std::vector<held> held_;  // oldest first
  std::uint64_t writes_ = 0;
  std::atomic<std::uint64_t> batches_{0};
  std::atomic<std::uint64_t> merge_writes_{0};
  std::atomic<std::uint64_t> reclaiming_writes_{0}, events_in_them_{0};
};

// ---- the crash matrix --------------------------------------------------------------------
//
// Types (each an engine instantiation): durability mode x counter placement. Values (the
// same engine runs them all): workload x value width. One test per cell, named
// EngineCrashMatrix.<mode>/<placement>/<workload>/v<width>; run one with
// --gtest_filter='EngineCrashMatrix.automatic/plain/w2r1/v8'.

constexpr auto modes = hana::tuple_t<manual, automatic>;
constexpr auto placements =
    hana::tuple_t<hashed, flit::adjacent, flit::link_and_persist, flit::plain>;

struct workload_kind {
  const char* name;
  crashtest::workload_config work;
  unsigned stall_ops;
  std::size_t points;  // crash points per cell in the default suite (CRASH_POINTS overrides)
  // Reclamation cells: a reclamation pass after every `reclaim_every`-th combining pass,
  // snapshots held as subject_options says; the cell requires that the run reclaimed.
  // 0: the engine's own trigger (a batch of 64 queued entries), and no snapshots.
  unsigned reclaim_every = 0;
  unsigned snapshot_every = 0, snapshot_hold = 0;
  bool transactions = false;  // every second batch a transaction (subject_options)
  unsigned merge_every = 0;   // a merge after every merge_every-th write (subject_options)
  std::size_t region_bytes = 0;  // the model's region (0: kCellRegion)

  bool reclaims() const { return reclaim_every != 0; }
};

// The merge cells' region: the tier's 4 KiB nodes take chunks of their own, beside the list's.
constexpr std::size_t kMergeRegion = 1 << 20;

const workload_kind workloads[] = {
    // One writer: puts, deletes and gets. Deterministic: every event is a crash point once
    // CRASH_POINTS exceeds the run's events.
    {"w1",
     {.writer_threads = 1, .ops_per_writer = 50, .key_space = 6, .put_percent = 55,
      .del_percent = 25, .batch_percent = 0},
     0, 55},
    // Two writers and a reader: combining for another thread, and reads of what another
    // thread wrote; the crashing thread lets the others complete two operations first.
    {"w2r1",
     {.writer_threads = 2, .reader_threads = 1, .ops_per_writer = 20, .ops_per_reader = 200,
      .key_space = 4, .put_percent = 60, .del_percent = 15, .batch_percent = 15},
     2, 45},
    // One writer, mostly batches of 2 to 4 entries (some deletes among them).
    {"batches",
     {.writer_threads = 1, .ops_per_writer = 30, .key_space = 8, .put_percent = 15,
      .del_percent = 10, .batch_percent = 65, .max_batch = 4},
     0, 55},
    // Reclamation: one writer overwriting and deleting four keys (puts, deletes, batches of
    // 2 or 3), a reclamation pass after every combining pass, and a snapshot taken every
    // third write and released five writes later. Crashes land in unlinks, in the fence
    // before the frees, in the freed nodes' markers, and in writes into reused blocks. The
    // default suite samples 120 of the run's 200 to 800 events (the long suite takes all).
    {"reclaim",
     {.writer_threads = 1, .ops_per_writer = 30, .key_space = 4, .put_percent = 50,
      .del_percent = 25, .batch_percent = 20, .max_batch = 3},
     0, 120, 1, 3, 5},
    // The same with two writers and a reader: a pass run by the combiner for another
    // thread's write, and gets racing with reclamation.
    {"reclaim2",
     {.writer_threads = 2, .reader_threads = 1, .ops_per_writer = 20, .ops_per_reader = 100,
      .key_space = 3, .put_percent = 55, .del_percent = 25, .batch_percent = 15,
      .max_batch = 3},
     2, 45, 1, 3, 5},
    // Weak durability: one writer, two thirds of its writes weak (puts, deletes, batches,
    // every second batch a transaction), a persist now and then, sync writes among them;
    // reclamation after every pass, with snapshots held, so reclaiming meets versions made
    // obsolete by weak ones. The recovered store must be a prefix of the version order
    // holding everything made durable.
    {"weak",
     {.writer_threads = 1, .ops_per_writer = 40, .key_space = 5, .put_percent = 50,
      .del_percent = 20, .batch_percent = 20, .max_batch = 3, .weak_percent = 65,
      .persist_percent = 10},
     0, 80, 1, 4, 3, true},
    // The same with two writers and a reader: one thread's sync write or persist covers the
    // other's weak writes, a pass groups both threads' writes, and transactions conflict.
    {"weak2",
     {.writer_threads = 2, .reader_threads = 1, .ops_per_writer = 20, .ops_per_reader = 100,
      .key_space = 4, .put_percent = 50, .del_percent = 20, .batch_percent = 20,
      .max_batch = 3, .weak_percent = 65, .persist_percent = 10},
     2, 45, 1, 4, 3, true},
    // Merges: one writer overwriting and deleting six keys, a third of its writes weak, a
    // merge into the packed tier after every second write (moving each key whose only
    // version every reader reads and is durable, a delete as an erasure record),
    // reclamation after every pass and snapshots held, as in "reclaim". Crashes land in a
    // merge's small run, its unlinks, its fences and its frees, and in merges of the tier's
    // small runs into its large run; a recovered key the tier holds must be a value its
    // writes left, as one the list holds, and the store a prefix of the version order.
    {"merge",
     {.writer_threads = 1, .ops_per_writer = 40, .key_space = 6, .put_percent = 50,
      .del_percent = 25, .batch_percent = 20, .max_batch = 3, .weak_percent = 35,
      .persist_percent = 10},
     0, 60, 1, 3, 5, false, 2, kMergeRegion},
};

// Value widths: with the node's header and key, nodes that span one to four cache lines.
constexpr std::size_t widths[] = {8, 64, 200};

// The model's region: room for every workload's nodes at every width (each image is this
// large, so smaller is faster).
constexpr std::size_t kCellRegion = 256 << 10;

struct cell {
  std::string mode, placement;
  const workload_kind* workload;
  std::size_t width;
  std::uint64_t seed;  // the workload seed (CRASH_SEED overrides)

  std::string name() const {
    return mode + "/" + placement + "/" + workload->name + "/v" + std::to_string(width);
  }
};

campaign_config config_for(const cell& c) {
  campaign_config config;
  config.subject = "flintkv";
  config.config = c.mode + " " + c.placement + " " + c.workload->name + " v" +
                  std::to_string(c.width);
  config.work = c.workload->work;
  config.workload_seed = c.seed;
  config.region_bytes = c.workload->region_bytes != 0 ? c.workload->region_bytes : kCellRegion;
  config.points = c.workload->points;
  config.random_images = 1;
  config.stall_ops = c.workload->stall_ops;
  return config;
}

template <class Config>
campaign_result run_cell(const cell& c, campaign_config config, reclaim_probe* probe = nullptr,
                         version_table* versions = nullptr) {
  const subject_options options{.width = c.width,
                                .reclaim_every = c.workload->reclaim_every,
                                .snapshot_every = c.workload->snapshot_every,
                                .snapshot_hold = c.workload->snapshot_hold,
                                .transactions = c.workload->transactions,
                                .merge_every = c.workload->merge_every,
                                .versions = versions,
                                .probe = probe};
  return crashtest::run_kv_campaign<engine_subject<Config>>(
      config, [options](pv::model& m, crashtest::start how) {
        return std::make_unique<engine_subject<Config>>(m, how, options);
      });
}

// "reclaimed during the run: ..." for a cell's output.
std::string describe(const reclaim_probe& p) {
  return "reclaimed during the run (largest of " + std::to_string(p.runs.load()) +
         " runs to the end): " + std::to_string(p.reclaimed_versions.load()) + " versions, in " +
         std::to_string(p.reclaiming_writes.load()) + " writes spanning " +
         std::to_string(p.events_in_them.load()) + " persistence events; merged " +
         std::to_string(p.merged_keys.load()) + " keys";
}

// Campaigns a reclamation cell runs, each with the next seed, until one of its runs reclaims.
constexpr unsigned kReclaimAttempts = 3;

template <class Config>
class matrix_test : public ::testing::Test {
 public:
  explicit matrix_test(cell c) : cell_(std::move(c)) {}
  void TestBody() override {
    shared_probe probe;
    shared<version_table> versions;
    campaign_config config = config_for(cell_);
    std::string summary;
    for (unsigned attempt = 1;; ++attempt) {
      const campaign_result r = run_cell<Config>(cell_, config, probe.get(), versions.get());
      summary = r.summary;
      EXPECT_EQ(r.failed, 0u) << r.summary;
      EXPECT_GT(r.points, 0u) << r.summary;
      EXPECT_GE(r.images, r.points) << r.summary;
      std::printf("  %s\n", describe(*probe).c_str());
      // Whether a run reclaims depends on its threads' schedule: a thread descheduled while
      // pinned holds the epoch back, so on a loaded machine a short run of several threads
      // can end before any mark settles. Such a campaign crashed no reclamation pass: the
      // cell runs again, with the next seed, a few times at most.
      if (!cell_.workload->reclaims() || (*probe).reclaimed_versions.load() > 0 ||
          attempt == kReclaimAttempts || ::testing::Test::HasFailure()) {
        break;
      }
      ++config.workload_seed;
    }
    if (cell_.workload->reclaims()) {
      // A reclamation cell whose runs reclaim nothing crashes no reclamation pass.
      EXPECT_GT((*probe).runs.load(), 0u) << "no run reached its end";
      EXPECT_GT((*probe).reclaimed_versions.load(), 0u)
          << "the workload reclaimed nothing before the close: " << summary;
    }
    if (cell_.workload->merge_every != 0) {
      EXPECT_GT((*probe).merged_keys.load(), 0u)
          << "the workload merged nothing before the close: " << summary;
    }
  }

 private:
  cell cell_;
};

// ---- hand-offs between threads ------------------------------------------------------------
//
// A writer's update is often attached by another thread (the combiner), and readers see it
// through visible_version: both are hand-offs through stores outside the P-V layer. Here
// writers put distinct keys concurrently while every persistence event takes the image that
// a crash there would leave with no pending write-back; every image must recover, with no
// torn value, each put that had returned before the image was taken. A campaign samples one
// crash point per run; this checks every event of every run, so the few events in which one
// thread's update is linked by another are not missed.

constexpr std::size_t kHandOffRegion = 256 << 10;
constexpr unsigned kHandOffWriters = 3;  // with two, under ASan, most runs link no put of another
constexpr std::uint64_t kHandOffPuts = 8;  // per writer, each to its own key
constexpr std::size_t kHandOffWidth = 200;  // nodes of four lines
constexpr std::size_t kHandOffRuns = 6;
static_assert(kHandOffWriters * kHandOffPuts <= 64);

struct hand_off_result {
  std::size_t runs = 0, images = 0;
  std::vector<std::string> failures;
};

template <class Config>
hand_off_result check_hand_offs(std::size_t runs) {
  hand_off_result result;
  for (std::size_t run = 0; run < runs && result.failures.empty(); ++run) {
    ++result.runs;
    pv::model m(kHandOffRegion);
    pv::scoped_activation active(m);
    struct taken {
      std::vector<std::byte> bytes;
      std::uint64_t returned;  // bit n: put n had returned before the image was taken
    };
    std::vector<taken> images;
    std::mutex images_mutex;
    std::atomic<std::uint64_t> returned{0};
    std::vector<std::string> thrown(kHandOffWriters);
    {
      engine_subject<Config> store(m, crashtest::start::fresh, kHandOffWidth);
      m.persist_all();
      m.set_event_hook([&](pv::event_kind, std::uint64_t) {
        const std::uint64_t before = returned.load();
        std::vector<std::byte> i = m.crash(pv::writeback::none);
        std::lock_guard lock(images_mutex);
        // The durable image changes only at fences: an image like the last one is checked
        // once, against every put that had returned before either was taken.
        if (!images.empty() && images.back().bytes == i) {
          images.back().returned |= before;
        } else {
          images.push_back({std::move(i), before});
        }
      });
      std::atomic<unsigned> ready{0};
      std::vector<std::thread> writers;
      for (unsigned t = 0; t < kHandOffWriters; ++t) {
        writers.emplace_back([&, t] {
          ready.fetch_add(1);
          while (ready.load() < kHandOffWriters) std::this_thread::yield();
          try {
            for (std::uint32_t i = 0; i < kHandOffPuts; ++i) {
              const std::uint64_t n = t * kHandOffPuts + i;
              store.put(n + 1, crashtest::value_id(t, i, 0));
              returned.fetch_or(std::uint64_t{1} << n);
            }
          } catch (const std::exception& e) {
            thrown[t] = e.what();
          }
        });
      }
      for (std::thread& w : writers) w.join();
      m.set_event_hook({});
    }
    for (unsigned t = 0; t < kHandOffWriters; ++t) {
      if (!thrown[t].empty()) {
        result.failures.push_back("writer " + std::to_string(t) + " threw: " + thrown[t]);
      }
    }
    for (std::size_t k = 0; k < images.size(); ++k) {
      ++result.images;
      const std::string where = "run " + std::to_string(run) + ", image " + std::to_string(k);
      m.load_image(images[k].bytes);
      try {
        std::vector<crashtest::kv_entry> state =
            engine_subject<Config>(m, crashtest::start::recover, kHandOffWidth).state();
        for (std::uint64_t n = 0; n < kHandOffWriters * kHandOffPuts; ++n) {
          if ((images[k].returned >> n & 1) == 0) continue;
          const std::uint64_t want =
              crashtest::value_id(static_cast<std::uint32_t>(n / kHandOffPuts),
                                  static_cast<std::uint32_t>(n % kHandOffPuts), 0);
          auto found = std::find_if(state.begin(), state.end(),
                                    [&](const crashtest::kv_entry& e) { return e.key == n + 1; });
          if (found == state.end() || found->value != want) {
            result.failures.push_back(
                where + ": key " + std::to_string(n + 1) +
                (found == state.end() ? " is absent" : " holds another value") +
                ", but its put had returned");
            break;
          }
        }
      } catch (const std::exception& e) {
        result.failures.push_back(where + ": " + e.what());
      }
    }
  }
  return result;
}

template <class Config>
class hand_off_test : public ::testing::Test {
 public:
  void TestBody() override {
    hand_off_result r = check_hand_offs<Config>(kHandOffRuns);
    std::printf("hand-offs: %zu runs, %zu images, %zu failed\n", r.runs, r.images,
                r.failures.size());
    EXPECT_GT(r.images, r.runs) << "no image taken: the test checked nothing";
    for (std::size_t i = 0; i < r.failures.size() && i < 5; ++i) ADD_FAILURE() << r.failures[i];
  }
};

// Registers the tests of each configuration (a hand-off test, and one test per matrix cell),
// before main runs them.
const bool matrix_registered = [] {
  std::uint64_t seed = 0, reclaim_seed = 0;
  hana::for_each(modes, [&](auto mode) {
    hana::for_each(placements, [&](auto placement) {
      using Mode = typename decltype(mode)::type;
      using Placement = typename decltype(placement)::type;
      using Config = on_model<Placement, Mode>;
      const std::string name = std::string(Mode::name) + "/" + std::string(Placement::name);
      ::testing::RegisterTest(
          "EngineHandOffTest", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
          []() -> ::testing::Test* { return new hand_off_test<Config>; });
      for (const workload_kind& w : workloads) {
        for (std::size_t width : widths) {
          // The reclamation cells count their seeds apart, so the other cells keep theirs.
          const std::uint64_t s = w.reclaims() ? 100 + ++reclaim_seed : ++seed;
          cell c{std::string(Mode::name), std::string(Placement::name), &w, width, s};
          ::testing::RegisterTest("EngineCrashMatrix", c.name().c_str(), nullptr, nullptr,
                                  __FILE__, __LINE__,
                                  [c]() -> ::testing::Test* { return new matrix_test<Config>(c); });
        }
      }
    });
  });
  return true;
}();

// ---- teeth: the same campaigns must catch engines that skip their fences -----------------

struct skips_fences : manual {};
struct skips_hand_off : automatic {};
struct frees_early : manual {};
struct closes_window_early : manual {};
struct drops_prior : manual {};
struct relinks_unfenced : manual {};

// ---- crashes during recovery ------------------------------------------------------------
//
// Recovery repairs the list in place: it links around the nodes of unfinished writes, then
// clears batch_mode. A crash in the middle leaves an image that is neither the crashed one
// nor the repaired one, and recovering that image must give exactly the store the
// uninterrupted recovery gives (same keys, values and versions), and new writes must get
// versions above every recovered one. Recovery also queues the garbage it finds (older
// versions, deletes) for reclamation, which writes nothing until the first pass: here the
// store's close, whose pass (unlinks, fence, markers, frees) is crashed at every event too.

using image = std::vector<std::byte>;
// The model's region: the workload's six keys need a small part of it. Every event of every
// recovery copies and hashes three images of this size, which is most of these tests' cost
// (at 1 MiB, 300 s of the release suite and 800 s under the sanitizers; at 256 KiB, 37 s and
// 100 s, with the same images checked).
constexpr std::size_t kRecoveryRegion = 1 << 18;
// Workload events between start images: each start image's recovery and close (whose
// reclamation pass drops what the workload overwrote) is crashed at every one of its own
// events, and every such image is recovered and closed again, so this sets the cost. The
// broken engine is caught at 2.
constexpr std::uint64_t kRecoveryStride = 4;
constexpr std::uint64_t kBrokenRecoveryStride = 2;
// The images a crash at each persistence event of `body` could leave on `m`: write-back none,
// all, and one seeded random choice per event; each distinct image once. Images are compared
// in full only when their checksums (the engine's CRC-32C) match: a recovery's hundreds of
// events each leave three images of kRecoveryRegion bytes, and comparing each with all kept
// before took most of these tests' time.
std::vector<image> images_during(pv::model& m, const std::function<void()>& body,
                                 std::uint64_t seed, std::optional<std::uint64_t> only_event = {}) {
  std::vector<image> out;
  std::unordered_multimap<std::uint32_t, std::size_t> by_hash;  // checksum -> index in out
  auto keep = [&](image i) {
    const std::uint32_t h = flintkv::internal::crc32c(0, i.data(), i.size());
    auto [first, last] = by_hash.equal_range(h);
    for (auto it = first; it != last; ++it) {
      if (out[it->second].size() == i.size() &&
          std::memcmp(out[it->second].data(), i.data(), i.size()) == 0) {
        return;
      }
    }
    by_hash.emplace(h, out.size());
    out.push_back(std::move(i));
  };
  const std::uint64_t first = m.persistence_events();
  m.set_event_hook([&](pv::event_kind, std::uint64_t index) {
    if (only_event && index - first != *only_event) return;
    keep(m.crash(pv::writeback::none));
    keep(m.crash(pv::writeback::all));
    keep(m.crash(pv::writeback::random, seed * 1000003 + index));
  });
  body();
  m.set_event_hook({});
  return out;
}

std::string describe(const crashtest::kv_entry& e) {
  return "key " + std::to_string(e.key) + " = " + std::to_string(e.value) + " at version " +
         std::to_string(e.version);
}

// The first entry where a recovered state differs from the expected one.
std::string first_difference(const std::vector<crashtest::kv_entry>& got,
                             const std::vector<crashtest::kv_entry>& expected) {
  for (std::size_t i = 0; i < std::max(got.size(), expected.size()); ++i) {
    if (i >= got.size()) return "missing " + describe(expected[i]);
    if (i >= expected.size()) return "extra " + describe(got[i]);
    if (!(got[i] == expected[i])) {
      return "recovered " + describe(got[i]) + ", expected " + describe(expected[i]);
    }
  }
  return "no difference";
}

// Puts, deletes and (mostly) batches over six keys, the same sequence every time.
const crashtest::workload& recovery_workload() {
  static const crashtest::workload w = crashtest::make_workload(
      {.writer_threads = 1, .ops_per_writer = 16, .key_space = 6, .put_percent = 30,
       .del_percent = 15, .batch_percent = 55},
      crashtest::workload_family::kv, 42);
  return w;
}

template <class Config>
void run_recovery_workload(engine_subject<Config>& s) {
  const crashtest::workload& w = recovery_workload();
  for (const crashtest::operation& o : w.threads[0]) {
    crashtest::op_outcome ignored;
    crashtest::perform_kv(s, o, w, ignored);
  }
}

struct recovery_crash_result {
  std::uint64_t starts = 0;      // crash images of the workload, recovered
  std::uint64_t repairing = 0;   // of those, recoveries that wrote to the pool
  std::uint64_t reclaiming = 0;  // of those, stores whose close then reclaimed garbage
  std::uint64_t mid_images = 0;  // images of crashes during those recoveries, recovered
  std::vector<std::string> failures;
};

// Crashes the workload (run by engine configuration W) at every `stride`-th persistence event
// from the first, and each recovery of those images (by configuration R) at every one of its own
// events.
template <class W, class R = W>
recovery_crash_result crash_recoveries(std::uint64_t stride) {
  recovery_crash_result result;
  std::uint64_t events = 0;
  {
    pv::model m(kRecoveryRegion);
    pv::scoped_activation active(m);
    engine_subject<W> store(m, crashtest::start::fresh);
    const std::uint64_t before = m.persistence_events();
    run_recovery_workload(store);
    events = m.persistence_events() - before;
  }
  for (std::uint64_t event = 0; event < events; event += stride) {
    pv::model m(kRecoveryRegion);
    pv::scoped_activation active(m);
    auto store = std::make_unique<engine_subject<W>>(m, crashtest::start::fresh);
    std::vector<image> starts =
        images_during(m, [&] { run_recovery_workload(*store); }, event, event);
    store.reset();
    for (const image& start : starts) {
      ++result.starts;
      const std::string at = "workload event " + std::to_string(event);
      m.load_image(start);
      std::vector<crashtest::kv_entry> reference;
      std::vector<image> mids;
      // The images are those of the recovery's repairs and of the store's close, whose
      // reclamation pass drops the garbage that recovery found (and queued): the workload's
      // overwrites and deletes, so crashes in the first pass after a recovery are checked.
      bool repaired = false;
      std::uint64_t garbage = 0;
      try {
        mids = images_during(m, [&] {
          const std::uint64_t before = m.persistence_events();
          engine_subject<R> s(m, crashtest::start::recover);
          repaired = m.persistence_events() != before;
          reference = s.state();
          garbage = s.stats().obsolete_versions;
        }, event);
      } catch (const std::exception& e) {
        result.failures.push_back(at + ": recovery of the crash image: " + e.what());
        continue;
      }
      if (mids.empty()) continue;
      if (repaired) ++result.repairing;
      if (garbage > 0) ++result.reclaiming;
      std::uint64_t newest = 0;
      for (const auto& e : reference) newest = std::max(newest, e.version);
      for (const image& mid : mids) {
        const std::string where = at + ", recovery image " + std::to_string(++result.mid_images);
        m.load_image(mid);
        try {
          engine_subject<R> again(m, crashtest::start::recover);
          std::vector<crashtest::kv_entry> got = again.state();
          if (got != reference) {
            result.failures.push_back(where + ": " + first_difference(got, reference));
            continue;
          }
          if (const std::uint64_t v = again.put(99, 1); v <= newest) {
            result.failures.push_back(where + ": new write got version " + std::to_string(v) +
                                      ", not above the recovered " + std::to_string(newest));
          }
        } catch (const std::exception& e) {
          result.failures.push_back(where + ": " + e.what());
        }
      }
    }
  }
  return result;
}

template <class Config>
void expect_recoveries_survive_crashes() {
  recovery_crash_result r = crash_recoveries<Config>(kRecoveryStride);
  std::printf("crash during recovery: %llu start images, %llu recoveries repairing, "
              "%llu closes reclaiming, %llu images of crashed recoveries, %zu failed\n",
              static_cast<unsigned long long>(r.starts),
              static_cast<unsigned long long>(r.repairing),
              static_cast<unsigned long long>(r.reclaiming),
              static_cast<unsigned long long>(r.mid_images), r.failures.size());
  EXPECT_GT(r.repairing, 0u) << "no start image needed a repair: the test checked nothing";
  EXPECT_GT(r.reclaiming, 0u) << "no recovered store had garbage: no reclamation was crashed";
  for (std::size_t i = 0; i < r.failures.size() && i < 5; ++i) ADD_FAILURE() << r.failures[i];
}

TEST(EngineRecoveryCrashTest, ManualHashed) {
  expect_recoveries_survive_crashes<on_model<hashed, manual>>();
}

TEST(EngineRecoveryCrashTest, ManualAdjacent) {
  expect_recoveries_survive_crashes<on_model<flit::adjacent, manual>>();
}

TEST(EngineRecoveryCrashTest, AutomaticHashed) {
  expect_recoveries_survive_crashes<on_model<hashed, automatic>>();
}

TEST(EngineRecoveryCrashTest, AutomaticAdjacent) {
  expect_recoveries_survive_crashes<on_model<flit::adjacent, automatic>>();
}

}  // namespace

// The engine in manual mode with every explicit fence removed: write-backs are issued but
// never completed before a write is acknowledged. Built only for this test.
template <class Policy>
struct flintkv::internal::durable<Policy, skips_fences> : durable<Policy, manual> {
  static void fence() {}
};

// The engine in automatic mode whose hand-offs skip the fence of the thread's pending
// write-backs (the engine before issue 10): a writer advertises its node while its bytes
// are still in flight, and the combiner publishes a version before its link is durable.
template <class Policy>
struct flintkv::internal::durable<Policy, skips_hand_off> : durable<Policy, automatic> {
  static void hand_off() {}
};

// The engine in manual mode whose reclamation frees blocks before their unlinks are durable
// (before_free() does nothing): a freed block is reused while the durable list may still
// link it. Built only for this test.
template <class Policy>
struct flintkv::internal::durable<Policy, frees_early> : durable<Policy, manual> {
  static void before_free() {}
};

// The engine in manual mode that closes a weak window without first fencing the window's
// versions and links (before_window_close() does nothing): the marker that makes recovery
// count the weak writes may become durable before the writes it covers. Built only for
// this test.
template <class Policy>
struct flintkv::internal::durable<Policy, closes_window_early> : durable<Policy, manual> {
  static void before_window_close() {}
};

// The engine in manual mode whose links do not keep the successor they replace (no prior):
// a sync put's node and link are made durable by one fence, so a crash may leave the link
// to a torn node, and recovery then has no way past it. Built only for this test.
template <class Policy>
struct flintkv::internal::durable<Policy, drops_prior> : durable<Policy, manual> {
  static constexpr bool keeps_prior = false;
};

// The engine in manual mode that links after a node not yet fenced (of its weak window, or
// of its pass) without fencing first: the link's prior then names a node that a crash may
// tear. Built only for these tests.
template <class Policy>
struct flintkv::internal::durable<Policy, relinks_unfenced> : durable<Policy, manual> {
  static constexpr bool fences_unfenced_priors = false;
};

namespace {

// A matrix cell run on a broken configuration, stopping at the first few failures.
template <class Config>
campaign_result run_broken_cell(const char* mode, const char* placement, std::size_t workload,
                                std::size_t width, std::uint64_t seed, std::size_t points = 200,
                                std::size_t stop_after_failures = 3) {
  cell c{mode, placement, &workloads[workload], width, seed};
  campaign_config config = config_for(c);
  config.config += " (broken)";
  config.points = points;  // it stops at the failures asked for
  config.stop_after_failures = stop_after_failures;
  config.print_failures = false;
  return run_cell<Config>(c, config);
}

// The index of the workload named `name`.
std::size_t workload_named(std::string_view name) {
  for (std::size_t i = 0; i < std::size(workloads); ++i) {
    if (workloads[i].name == name) return i;
  }
  throw std::logic_error("no workload named " + std::string(name));
}

// A broken engine's campaign must fail; prints the first problem it found.
void expect_caught(const campaign_result& r) {
  ASSERT_GT(r.failed, 0u) << "a harness that passes a broken engine is broken: " << r.summary;
  for (const std::string& p : r.failures.front().problems) std::printf("  first: %s\n", p.c_str());
}

// Batches: a sync put fences at the end of its pass, and the operation's completion
// fences what is left whatever the engine does, so a put-only workload no longer tells an
// engine without fences apart; a batch's nodes must be durable before its links, and its
// links before batch_mode is cleared.
TEST(EngineCrashTest, CampaignCatchesAnEngineThatSkipsItsFences) {
  expect_caught(run_broken_cell<on_model<hashed, skips_fences>>(
      "manual-without-fences", "hashed", workload_named("batches"), 8, 7, 1000));
}

TEST(EngineCrashTest, CampaignCatchesAnEngineThatClosesAWeakWindowBeforeItsWritesAreDurable) {
  expect_caught(run_broken_cell<on_model<hashed, closes_window_early>>(
      "manual-closing-window-early", "hashed", workload_named("weak"), 8, 11, 1000));
}

TEST(EngineCrashTest, CampaignCatchesAnEngineThatFreesBeforeItsUnlinkIsDurable) {
  campaign_result r = run_broken_cell<on_model<hashed, frees_early>>(
      "manual-freeing-early", "hashed", workload_named("reclaim"), 8, 9, 1000);
  expect_caught(r);
  if (!r.failures.empty()) std::printf("  %s\n", r.failures.front().replay.c_str());
}

TEST(EngineCrashTest, CampaignCatchesAWeakWindowThatRelinksAnUnfencedNode) {
  expect_caught(run_broken_cell<on_model<hashed, relinks_unfenced>>(
      "manual-relinking-unfenced", "hashed", workload_named("weak"), 64, 16, 1000));
}

TEST(EngineCrashTest, CampaignCatchesAnEngineWhoseLinksKeepNoPrior) {
  expect_caught(run_broken_cell<on_model<hashed, drops_prior>>(
      "manual-without-prior", "hashed", workload_named("w1"), 64, 12, 1000));
}

// Two sync puts served by one combining pass, the second (another writer's, advertised while
// the pass ran) of a key just before the first's: its link replaces the first put's node as
// the head's successor, so its prior names a node whose write-back the pass has not fenced.
// Each image a crash during the pass can leave (write-back none, all, and 24 random draws
// per event) is recovered; returns what went wrong. An engine that links there without
// fencing first leaves an image that keeps the head's link and loses the first node, and
// recovery, taking the prior, meets a block never written ("damaged size word 0"): the
// crash-long suite met that once in 219,265 images (manual, hashed, weak2).
template <class Config>
std::vector<std::string> images_of_a_pass_that_relinks_its_own_node() {
  pv::model m(kRecoveryRegion);
  pv::scoped_activation active(m);
  Options o;
  o.create_if_missing = true;
  o.thread_slots = 4;
  std::unique_ptr<DB> db;
  Status s = internal::open_region<Config>({m.base(), m.size()}, o, &db);
  if (!s.ok()) return {"open: " + s.ToString()};
  auto* e = engine_of<Config>(db.get());
  if (!db->Put("k3", "3").ok()) return {"the first put failed"};
  std::thread other;
  bool shared = false;
  e->TEST_once_in_pass([&] {  // the pass has linked k2: k1's writer finds it its successor
    other = std::thread([&] { EXPECT_TRUE(db->Put("k1", "1").ok()); });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!e->TEST_advertised() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    shared = e->TEST_advertised();
  });
  std::vector<image> images;
  std::mutex images_mutex;
  m.set_event_hook([&](pv::event_kind, std::uint64_t event) {
    std::lock_guard lock(images_mutex);
    images.push_back(m.crash(pv::writeback::none));
    images.push_back(m.crash(pv::writeback::all));
    for (std::uint64_t draw = 0; draw < 24; ++draw) {
      images.push_back(m.crash(pv::writeback::random, event * 131 + draw));
    }
  });
  s = db->Put("k2", "2");
  if (other.joinable()) other.join();
  m.set_event_hook({});
  if (!s.ok()) return {"put: " + s.ToString()};
  if (!shared) return {"the second put did not reach the pass"};
  db.reset();
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < images.size(); ++i) {
    m.load_image(images[i]);
    std::unique_ptr<DB> recovered;
    s = internal::open_region<Config>({m.base(), m.size()}, o, &recovered);
    if (!s.ok()) {
      problems.push_back("image " + std::to_string(i) + ": open: " + s.ToString());
      continue;
    }
    std::map<std::string, std::string> got;
    auto it = recovered->NewIterator();
    for (it->SeekToFirst(); it->Valid(); it->Next()) got[std::string(it->key())] = it->value();
    if (got.erase("k3") != 1 || got.size() > 2 || (got.count("k1") && got["k1"] != "1") ||
        (got.count("k2") && got["k2"] != "2")) {
      problems.push_back("image " + std::to_string(i) + ": recovered a wrong store");
    }
  }
  return problems;
}

TEST(EngineCrashTest, APutServedBeforeANodeOfItsOwnPassLeavesRecoverableImages) {
  const std::vector<std::string> problems =
      images_of_a_pass_that_relinks_its_own_node<on_model<hashed, manual>>();
  EXPECT_TRUE(problems.empty()) << problems.size() << " images, first: " << problems.front();
}

TEST(EngineCrashTest, CatchesAPassThatRelinksItsOwnUnfencedNode) {
  const std::vector<std::string> problems =
      images_of_a_pass_that_relinks_its_own_node<on_model<hashed, relinks_unfenced>>();
  ASSERT_FALSE(problems.empty()) << "the images of a broken engine all recovered";
  EXPECT_NE(problems.front().find("damaged size word 0"), std::string::npos) << problems.front();
  std::printf("  %zu images failed, first: %s\n", problems.size(), problems.front().c_str());
}

// A skipped hand-off is no longer left to a matrix cell: a sync put's node may now be torn
// behind a durable link (recovery passes it by its prior), so only the images taken after
// the pass stored the root's fenced version over it and before the writer's own completion
// fence show it, and a campaign that samples crash points meets one in about a thousand
// points, depending on how the threads interleave. The test below takes every image.
TEST(EngineHandOffTest, CatchesAnAutomaticModeThatSkipsItsHandOffFence) {
  // Under hashed, the combiner's own stores are fenced: only the writer's pending node
  // bytes are left, the case the campaigns catch least often.
  // It stops at the first run that fails (the first, nearly always).
  hand_off_result r = check_hand_offs<on_model<hashed, skips_hand_off>>(4 * kHandOffRuns);
  ASSERT_FALSE(r.failures.empty())
      << r.runs << " runs, " << r.images << " images, no failure found";
  std::printf("hand-offs without the fence (broken): caught in run %zu of %zu, first: %s\n",
              r.runs, 4 * kHandOffRuns, r.failures.front().c_str());
}

TEST(EngineRecoveryCrashTest, CatchesARecoveryThatSkipsItsFences) {
  // The workload runs on the correct engine; recovery on one without fences. Without the
  // fence between linking around a batch's nodes and clearing batch_mode, a crash can keep
  // the cleared flag and lose the links: the batch's nodes come back as committed.
  recovery_crash_result r = crash_recoveries<on_model<hashed, manual>, on_model<hashed, skips_fences>>(
      kBrokenRecoveryStride);
  ASSERT_FALSE(r.failures.empty()) << r.repairing << " repairing recoveries, " << r.mid_images
                                   << " images, no failure found";
  std::printf("recovery without fences (broken): %zu of %llu images caught, first: %s\n",
              r.failures.size(), static_cast<unsigned long long>(r.mid_images),
              r.failures.front().c_str());
}

// ---- merges move only durable versions ------------------------------------------------------
//
// Weak writes wait in an open window (no persist, no sync write) while merges run: a crash
// anywhere in the merges must not leave a key the tier took while an older weak write was
// lost. Keys 2 then 1 are written weakly, and each merge moves one key, in key order: a
// merge that took a version above the durable bound would take key 1's (the newer) and a
// crash before its step (c) closes the window would keep it in the tier, key 2 lost with
// the window. Every image of the merges (write-back none, all, random) is recovered and
// checked. (A variant whose bound leaves out durable_through_ fails it; the crash matrix's
// merge cells did not catch that variant, as their merges seldom meet an open window.)
template <class Config>
std::vector<std::string> merge_durability_failures(std::size_t* images_checked) {
  pv::model m(kMergeRegion);
  pv::scoped_activation active(m);
  auto store = std::make_unique<engine_subject<Config>>(m, crashtest::start::fresh);
  store->put(2, crashtest::value_id(0, 0, 0), crashtest::durability::weak);
  store->put(1, crashtest::value_id(0, 1, 0), crashtest::durability::weak);
  std::vector<image> images = images_during(m, [&] {
    for (int i = 0; i < 16; ++i) store->merge(1);
  }, 1);
  store.reset();
  std::vector<std::string> failures;
  *images_checked = images.size();
  for (std::size_t k = 0; k < images.size(); ++k) {
    m.load_image(images[k]);
    try {
      const std::vector<crashtest::kv_entry> state =
          engine_subject<Config>(m, crashtest::start::recover).state();
      auto has = [&](std::uint64_t key) {
        return std::any_of(state.begin(), state.end(),
                           [&](const crashtest::kv_entry& e) { return e.key == key; });
      };
      if (has(1) && !has(2)) {
        failures.push_back("image " + std::to_string(k) +
                           ": key 1 survived (from the tier) but key 2, written before it, did not");
      }
    } catch (const std::exception& e) {
      failures.push_back("image " + std::to_string(k) + ": " + e.what());
    }
  }
  return failures;
}

template <class Config>
void expect_merges_keep_the_prefix() {
  std::size_t images = 0;
  const std::vector<std::string> failures = merge_durability_failures<Config>(&images);
  EXPECT_GT(images, 0u);
  for (std::size_t i = 0; i < failures.size() && i < 5; ++i) ADD_FAILURE() << failures[i];
}

TEST(EngineMergeCrashTest, AMergeTakesNoWeakWriteBeforeItIsDurableHashed) {
  expect_merges_keep_the_prefix<on_model<hashed, manual>>();
}
TEST(EngineMergeCrashTest, AMergeTakesNoWeakWriteBeforeItIsDurableAdjacent) {
  expect_merges_keep_the_prefix<on_model<flit::adjacent, manual>>();
}

}  // namespace
