// The harness itself: recovery that crashes, hangs, throws or is not deterministic is a
// reported failure of that crash point, never a dead test runner; points are enumerated or
// sampled as configured; a printed replay reproduces a failure exactly.
#include "crashtest/gtest.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "subjects/node_area.hpp"
#include "subjects/test_kv.hpp"
#include "subjects/test_sequence.hpp"
#include "subjects/test_set.hpp"
#include "support/policies.hpp"

namespace {

using namespace crashtest;
using policy = flit_test::on_model<flit_test::test_hashed>;
using good_set = subjects::test_set<policy>;

campaign_config small(std::string config) {
  campaign_config c;
  c.subject = "test_set";
  c.config = std::move(config);
  c.work = {.writer_threads = 1, .ops_per_writer = 10, .key_space = 4};
  c.points = 6;
  c.random_images = 1;
  return c;
}

// The set, with a recovery that misbehaves as `Fault` says.
template <class Fault>
std::unique_ptr<good_set> faulty(pv::model& m, start how) {
  if (how == start::recover) Fault{}();
  return std::make_unique<good_set>(m, how);
}

struct aborts {
  void operator()() const { std::abort(); }
};
struct hangs {
  void operator()() const {
    std::atomic<bool> forever{true};
    while (forever.load()) std::this_thread::yield();
  }
};
struct throws {
  void operator()() const { throw std::runtime_error("the image is unreadable"); }
};

// Fails every image; checks that each failure says why.
template <class Fault>
void expect_every_image_fails(campaign_config c, const std::string& why) {
  auto r = run_set_campaign<good_set>(c, faulty<Fault>);
  EXPECT_EQ(r.points, c.points);
  EXPECT_GT(r.images, 0u);
  EXPECT_EQ(r.failed, r.images) << r.summary;
  ASSERT_FALSE(r.failures.empty());
  ASSERT_FALSE(r.failures[0].problems.empty());
  EXPECT_NE(r.failures[0].problems[0].find(why), std::string::npos) << r.failures[0].problems[0];
}

TEST(HarnessTest, RecoveryThatAbortsIsAFailureOfThatImage) {
  expect_every_image_fails<aborts>(small("aborts"), "died of signal");
}

TEST(HarnessTest, RecoveryThatHangsIsStoppedByTheTimeLimit) {
  auto c = small("hangs");
  c.points = 2;
  c.random_images = 0;
  c.recovery_timeout = std::chrono::milliseconds(200);
  expect_every_image_fails<hangs>(c, "did not finish within 200 ms");
}

TEST(HarnessTest, RecoveryThatThrowsIsAFailureWithItsMessage) {
  expect_every_image_fails<throws>(small("throws"), "the image is unreadable");
}

// A set whose second recovery in a process loses its smallest key.
class forgetful_set : public good_set {
 public:
  forgetful_set(pv::model& m, start how) : good_set(m, how) {
    if (how == start::recover) recoveries_ += 1;
  }
  std::vector<std::uint64_t> state() const {
    auto keys = good_set::state();
    if (recoveries_ % 2 == 0 && !keys.empty()) keys.erase(keys.begin());
    return keys;
  }

 private:
  static inline int recoveries_ = 0;
};

TEST(HarnessTest, NondeterministicRecoveryIsCaught) {
  auto c = small("forgetful");
  c.points = 40;
  auto r = run_set_campaign<forgetful_set>(c);
  ASSERT_GT(r.failed, 0u) << r.summary;
  EXPECT_NE(r.failures[0].problems[0].find("same image twice"), std::string::npos)
      << r.failures[0].problems[0];
}

TEST(HarnessTest, EveryEventOfASmallRunIsACrashPoint) {
  auto c = small("every event");
  c.points = 100000;
  auto r = run_set_campaign<good_set>(c);
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_EQ(r.points, r.events + 1) << "each event, and the end of the run";
}

TEST(HarnessTest, LargerRunsAreSampled) {
  auto c = small("sampled");
  c.work.ops_per_writer = 60;
  c.points = 25;
  auto r = run_set_campaign<good_set>(c);
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GT(r.events + 1, c.points);
  EXPECT_EQ(r.points, c.points);
}

// A map (insert-if-absent) made of the test store, single-threaded only: shows that map
// subjects plug in and that their values are checked.
class test_map {
 public:
  static constexpr bool ordered = true;
  test_map(pv::model& m, start how) : kv_(m, how) {}
  bool insert(std::uint64_t key, std::uint64_t value) {
    if (kv_.get(key).found) return false;
    kv_.put(key, value);
    return true;
  }
  bool remove(std::uint64_t key) {
    if (!kv_.get(key).found) return false;
    kv_.del(key);
    return true;
  }
  std::optional<std::uint64_t> get(std::uint64_t key) {
    kv_read r = kv_.get(key);
    return r.found ? std::optional<std::uint64_t>(r.value) : std::nullopt;
  }
  std::vector<kv_entry> state() const { return kv_.state(); }

 private:
  subjects::test_kv<policy> kv_;
};
static_assert(map_subject<test_map>);

TEST(HarnessTest, MapSubjectsPlugIn) {
  campaign_config c = small("map");
  c.subject = "test_map";
  c.work.ops_per_writer = 40;
  c.points = 60;
  auto r = run_set_campaign<test_map>(c);
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_EQ(r.points, c.points);
}

// Sets an environment variable for the scope of the object.
class scoped_env {
 public:
  scoped_env(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~scoped_env() { ::unsetenv(name_); }

 private:
  const char* name_;
};

TEST(HarnessTest, AFailureReplaysExactlyFromItsReplayLine) {
  campaign_config c;
  c.subject = "test_kv";
  c.config = "missing-fence (broken)";
  c.work = {.writer_threads = 1, .ops_per_writer = 30, .key_space = 6};
  c.points = 200;
  c.stop_after_failures = 1;
  using broken = subjects::test_kv<policy, subjects::kv_bug::missing_fence_before_link>;
  auto r = run_kv_campaign<broken>(c);
  ASSERT_EQ(r.failed, 1u) << r.summary;
  const failure& f = r.failures[0];
  std::string replay = f.replay.substr(0, f.replay.find(' '));  // CRASH_REPLAY=e:wb:seed
  ASSERT_EQ(replay.rfind("CRASH_REPLAY=", 0), 0u) << f.replay;
  scoped_env env("CRASH_REPLAY", replay.substr(std::string("CRASH_REPLAY=").size()));
  auto again = run_kv_campaign<broken>(c);
  EXPECT_EQ(again.points, 1u);
  EXPECT_EQ(again.images, 1u);
  ASSERT_EQ(again.failed, 1u) << "the same image fails again";
  EXPECT_EQ(again.failures[0].event, f.event);
  EXPECT_EQ(again.failures[0].problems, f.problems);
}

TEST(HarnessTest, BadEnvironmentIsAClearError) {
  scoped_env env("CRASH_REPLAY", "12:sometimes:3");
  try {
    run_set_campaign<good_set>(small("bad env"));
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("CRASH_REPLAY=12:sometimes:3"), std::string::npos)
        << e.what();
  }
}

// ---- the region ----------------------------------------------------------------------------

// 2500 pushes of 64-byte nodes: more than the 128 KiB the harness starts from.
campaign_config big_stack(std::size_t region_bytes) {
  campaign_config c;
  c.subject = "test_stack";
  c.config = "2500 pushes";
  c.work = {.writer_threads = 1, .ops_per_writer = 2500, .put_percent = 100};
  c.points = 3;
  c.random_images = 0;
  c.region_bytes = region_bytes;
  return c;
}
using stack = subjects::test_sequence<policy, subjects::seq_kind::stack>;

TEST(HarnessRegionTest, TheHarnessChoosesARegionTheWorkloadFits) {
  auto r = run_stack_campaign<stack>(big_stack(0));
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_EQ(r.points, 3u);
  EXPECT_GT(r.region_bytes, default_region_bytes);
  EXPECT_GE(r.region_bytes, 2500 * pv::cache_line);
}

TEST(HarnessRegionTest, ARegionSetTooSmallNamesTheSizeThatWorks) {
  auto r = run_stack_campaign<stack>(big_stack(default_region_bytes));
  ASSERT_EQ(r.failed, 1u) << r.summary;
  EXPECT_EQ(r.points, 0u);
  const std::string& p = r.failures[0].problems[0];
  EXPECT_NE(p.find("ran out of room in the region of 131072 bytes"), std::string::npos) << p;
  EXPECT_NE(p.find("set region_bytes to at least 262144"), std::string::npos) << p;
}

// ---- a campaign of one's own ---------------------------------------------------------------

// A persistent counter with operations of its own kinds: "increment" and "read". Broken:
// the increment is a v-store, so a completed increment can be lost.
template <bool Broken>
class counter {
 public:
  static constexpr op_kind increment = user_kind(0);
  static constexpr op_kind read = user_kind(1);

  counter(pv::model& m, start how) : word_(reinterpret_cast<subjects::line_word<policy>*>(m.base())) {
    if (how == start::fresh) {
      new (word_) subjects::line_word<policy>();
    } else {
      word_->w.reset_metadata();
    }
    policy::operation_completion();
  }
  void add_one() {
    std::uint64_t v = word_->w.load(flit::volatile_) + 1;
    if constexpr (Broken) {
      word_->w.store(v, flit::volatile_);
    } else {
      word_->w.store(v);
    }
    policy::operation_completion();
  }
  std::uint64_t value() const { return word_->w.load(); }

 private:
  subjects::line_word<policy>* word_;
};

// Workloads: each writer increments, each reader reads; named in the workload.
workload counter_workload(const workload_config& c, std::uint64_t) {
  workload w;
  w.names.set(user_kind(0), "increment");
  w.names.set(user_kind(1), "read");
  w.threads.resize(c.threads());
  for (unsigned t = 0; t < c.threads(); ++t) {
    w.threads[t].assign(c.ops_of(t), operation{t < c.writer_threads ? user_kind(0) : user_kind(1)});
  }
  return w;
}

// The count survives with every completed increment and at most the pending ones.
std::vector<std::string> check_counter(const workload& w, const history& h,
                                       const std::vector<kv_entry>& state) {
  std::uint64_t completed = 0, invoked = 0;
  std::string last_completed;
  for (unsigned t = 0; t < w.threads.size(); ++t) {
    for (std::size_t i = 0; i < w.threads[t].size(); ++i) {
      if (w.threads[t][i].kind != user_kind(0)) continue;
      if (h.threads[t][i].status != op_status::not_invoked) ++invoked;
      if (h.threads[t][i].status == op_status::completed) {
        ++completed;
        last_completed = describe_op(w, t, i);
      }
    }
  }
  std::uint64_t count = state.at(0).value;
  if (count < completed || count > invoked) {
    return {"the count is " + std::to_string(count) + ", not between " +
            std::to_string(completed) + " completed increments (the last " + last_completed +
            ") and " + std::to_string(invoked) + " invoked"};
  }
  return {};
}

template <bool Broken>
campaign_result run_counter_campaign() {
  campaign_config c;
  c.subject = "counter";
  c.config = Broken ? "v-store (broken)" : "p-store";
  c.work = {.writer_threads = 1, .ops_per_writer = 30};
  c.points = 1000;  // every event
  c.stop_after_failures = 1;
  auto perform = [](counter<Broken>& s, const operation& o, const workload&, op_outcome& out) {
    if (o.kind == counter<Broken>::increment) s.add_one();
    if (o.kind == counter<Broken>::read) out.value = s.value();
  };
  auto read_state = [](const counter<Broken>& s) {
    return std::vector<kv_entry>{{0, s.value(), 0}};
  };
  return run_campaign<counter<Broken>>(c, {counter_workload, check_counter}, perform,
                                       read_state);
}

TEST(HarnessCustomCampaignTest, OperationsRecoveryAndCheckerOfOnesOwn) {
  auto r = run_counter_campaign<false>();
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_EQ(r.points, r.events + 1);
}

TEST(HarnessCustomCampaignTest, ItsCheckerCatchesALostIncrementAndNamesIt) {
  auto r = run_counter_campaign<true>();
  ASSERT_GT(r.failed, 0u) << r.summary;
  EXPECT_TRUE(r.any_problem_contains("(increment)")) << r.failures[0].problems[0];
}

}  // namespace
