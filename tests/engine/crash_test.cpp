// The engine through the crash harness: Put, Delete and WriteBatch workloads, single- and
// multi-threaded, crashed at enumerated persistence events under every write-back choice,
// recovered by DB::Open's recovery, and checked against the durable-linearizability rule
// (DESIGN.md section 7). Both durability modes, two counter placements. Then crashes during
// recovery itself: recovering what a crashed recovery left must give the same store.
#include <gtest/gtest.h>

#include <cstring>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "crash/harness.hpp"
#include "engine_support.hpp"
#include "support/policies.hpp"

namespace {

using namespace flintkv_test;
using crashtest::campaign_config;
using crashtest::campaign_result;

template <class Placement, class Mode>
using on_model = engine_config<flit_test::on_model<Placement>, Mode>;

std::string key_of(std::uint64_t k) {
  std::string s = "k" + std::to_string(k);
  return s;
}
std::string value_of(std::uint64_t v) { return std::string(reinterpret_cast<char*>(&v), sizeof v); }
std::uint64_t decode_value(std::string_view s) {
  if (s.size() != sizeof(std::uint64_t)) {
    throw crashtest::invariant_violation("value of " + std::to_string(s.size()) + " bytes");
  }
  std::uint64_t v;
  std::memcpy(&v, s.data(), sizeof v);
  return v;
}

// The engine as a crash-test subject, over the model's region.
template <class Config>
class engine_subject {
  using engine = internal::engine_for<Config>;

 public:
  engine_subject(pv::model& m, crashtest::start) {
    Options options;
    options.thread_slots = 4;
    options.create_if_missing = true;  // a blank region: a new store; else recover
    Status s = internal::open_region<Config>({m.base(), m.size()}, options, &db_);
    if (!s.ok()) throw crashtest::invariant_violation("open: " + s.ToString());
    engine_ = dynamic_cast<engine*>(db_.get());
  }

  std::uint64_t put(std::uint64_t key, std::uint64_t value) {
    check(db_->Put(key_of(key), value_of(value)));
    return engine::TEST_last_write_version();
  }
  std::uint64_t del(std::uint64_t key) {
    check(db_->Delete(key_of(key)));
    return engine::TEST_last_write_version();
  }
  std::uint64_t write_batch(std::span<const crashtest::kv_write> entries) {
    WriteBatch batch;
    for (const auto& e : entries) {
      if (e.del) {
        batch.Delete(key_of(e.key));
      } else {
        batch.Put(key_of(e.key), value_of(e.value));
      }
    }
    check(db_->Write(batch));
    return engine::TEST_last_write_version();
  }
  crashtest::kv_read get(std::uint64_t key) {
    auto found = engine_->TEST_read(key_of(key));
    if (!found) return {};
    return {true, decode_value(found->first), found->second};
  }
  std::vector<crashtest::kv_entry> state() const {
    std::vector<crashtest::kv_entry> out;
    for (auto& e : engine_->TEST_state()) {
      if (e.key.size() < 2 || e.key[0] != 'k') {
        throw crashtest::invariant_violation("recovered a key never written: " + e.key);
      }
      out.push_back({std::stoull(e.key.substr(1)), decode_value(e.value), e.version});
    }
    return out;
  }

 private:
  static void check(const Status& s) {
    if (!s.ok()) throw std::runtime_error(s.ToString());
  }
  std::unique_ptr<DB> db_;
  engine* engine_ = nullptr;
};

campaign_config single_threaded(std::string config, std::uint64_t seed) {
  campaign_config c;
  c.subject = "flintkv";
  c.config = std::move(config);
  c.work = {.writer_threads = 1, .ops_per_writer = 60, .key_space = 6, .put_percent = 50,
            .del_percent = 20, .batch_percent = 15};
  c.workload_seed = seed;
  c.region_bytes = 1 << 20;
  c.points = 300;
  c.random_images = 1;
  return c;
}

campaign_config multi_threaded(std::string config, std::uint64_t seed) {
  campaign_config c = single_threaded(std::move(config), seed);
  c.work = {.writer_threads = 2, .reader_threads = 1, .ops_per_writer = 25,
            .ops_per_reader = 300, .key_space = 4, .put_percent = 60, .del_percent = 15,
            .batch_percent = 15};
  c.points = 200;
  c.stall_ops = 2;
  return c;
}

void expect_passes(const campaign_result& r, std::size_t min_points) {
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GE(r.points, std::min<std::uint64_t>(min_points, r.events)) << r.summary;
  EXPECT_GE(r.images, r.points) << r.summary;
}

TEST(EngineCrashTest, ManualHashedSingleThreaded) {
  using C = on_model<hashed, manual>;
  expect_passes(crashtest::run_kv_campaign<engine_subject<C>>(single_threaded("manual hashed st", 1)), 300);
}

TEST(EngineCrashTest, ManualAdjacentSingleThreaded) {
  using C = on_model<flit::adjacent, manual>;
  expect_passes(crashtest::run_kv_campaign<engine_subject<C>>(single_threaded("manual adjacent st", 2)), 300);
}

TEST(EngineCrashTest, AutomaticHashedSingleThreaded) {
  using C = on_model<hashed, automatic>;
  expect_passes(crashtest::run_kv_campaign<engine_subject<C>>(single_threaded("automatic hashed st", 3)), 300);
}

TEST(EngineCrashTest, AutomaticAdjacentSingleThreaded) {
  using C = on_model<flit::adjacent, automatic>;
  expect_passes(crashtest::run_kv_campaign<engine_subject<C>>(single_threaded("automatic adjacent st", 4)), 300);
}

TEST(EngineCrashTest, ManualHashedMultiThreaded) {
  using C = on_model<hashed, manual>;
  expect_passes(crashtest::run_kv_campaign<engine_subject<C>>(multi_threaded("manual hashed w2r1", 5)), 150);
}

TEST(EngineCrashTest, AutomaticAdjacentMultiThreaded) {
  using C = on_model<flit::adjacent, automatic>;
  expect_passes(crashtest::run_kv_campaign<engine_subject<C>>(multi_threaded("automatic adjacent w2r1", 6)), 150);
}

// ---- teeth: the same campaign must catch an engine that skips its fences ---------------

struct skips_fences : manual {};

// ---- crashes during recovery ------------------------------------------------------------
//
// Recovery repairs the list in place: it links around the nodes of unfinished writes, then
// clears batch_mode. A crash in the middle leaves an image that is neither the crashed one
// nor the repaired one, and recovering that image must give exactly the store the
// uninterrupted recovery gives (same keys, values and versions), and new writes must get
// versions above every recovered one.

using image = std::vector<std::byte>;
constexpr std::size_t kRecoveryRegion = 1 << 20;
constexpr std::uint64_t kRecoveryStride = 2;  // every other workload event

// The images a crash at each persistence event of `body` could leave on `m`: write-back none,
// all, and one seeded random choice per event; each distinct image once.
std::vector<image> images_during(pv::model& m, const std::function<void()>& body,
                                 std::uint64_t seed, std::optional<std::uint64_t> only_event = {}) {
  std::vector<image> out;
  auto keep = [&](image i) {
    if (std::find(out.begin(), out.end(), i) == out.end()) out.push_back(std::move(i));
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
  std::uint64_t mid_images = 0;  // images of crashes during those recoveries, recovered
  std::vector<std::string> failures;
};

// Crashes the workload (run by engine configuration W) at every `stride`-th persistence event,
// and each recovery of those images (by configuration R) at every one of its own events.
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
      try {
        mids = images_during(m, [&] {
          reference = engine_subject<R>(m, crashtest::start::recover).state();
        }, event);
      } catch (const std::exception& e) {
        result.failures.push_back(at + ": recovery of the crash image: " + e.what());
        continue;
      }
      if (mids.empty()) continue;
      ++result.repairing;
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
              "%llu images of crashed recoveries, %zu failed\n",
              static_cast<unsigned long long>(r.starts),
              static_cast<unsigned long long>(r.repairing),
              static_cast<unsigned long long>(r.mid_images), r.failures.size());
  EXPECT_GT(r.repairing, 0u) << "no start image needed a repair: the test checked nothing";
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

namespace {

TEST(EngineCrashTest, CampaignCatchesAnEngineThatSkipsItsFences) {
  using C = on_model<hashed, skips_fences>;
  campaign_config c = single_threaded("manual without fences (broken)", 7);
  c.stop_after_failures = 3;
  c.print_failures = false;
  campaign_result r = crashtest::run_kv_campaign<engine_subject<C>>(c);
  EXPECT_GT(r.failed, 0u) << "a harness that passes a broken engine is broken: " << r.summary;
}

TEST(EngineRecoveryCrashTest, CatchesARecoveryThatSkipsItsFences) {
  // The workload runs on the correct engine; recovery on one without fences. Without the
  // fence between linking around a batch's nodes and clearing batch_mode, a crash can keep
  // the cleared flag and lose the links: the batch's nodes come back as committed.
  recovery_crash_result r =
      crash_recoveries<on_model<hashed, manual>, on_model<hashed, skips_fences>>(kRecoveryStride);
  ASSERT_FALSE(r.failures.empty()) << r.repairing << " repairing recoveries, " << r.mid_images
                                   << " images, no failure found";
  std::printf("recovery without fences (broken): %zu of %llu images caught, first: %s\n",
              r.failures.size(), static_cast<unsigned long long>(r.mid_images),
              r.failures.front().c_str());
}

}  // namespace
