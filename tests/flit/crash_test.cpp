// persist<T> under the pv model with real threads: what a completed reader saw survives a
// crash, what a v-load reader saw may not, and the Definition 1 checker agrees.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "pv_interface/checker.hpp"
#include "support/gate.hpp"
#include "support/policies.hpp"

namespace {

using namespace flit_test;

using test_support::gate;

template <class Policy>
class CrashTest : public ::testing::Test {
 protected:
  void SetUp() override { activation_.emplace(model_); }

  // The value found at `offset` in a crash image.
  template <class T>
  static T read_image(const std::vector<std::byte>& image, std::size_t offset) {
    T v;
    std::memcpy(&v, image.data() + offset, sizeof v);
    return v;
  }

  // A writer p-stores value(1) into a word and is held after the store, before its
  // write-back takes effect; meanwhile a reader loads the word with `mode` and completes its
  // operation. Returns the word as found in a crash image taken while the writer is held,
  // with no unfenced line reaching memory.
  template <class Mode>
  word reader_survives(Mode mode) {
    auto* w = new (model_.base()) flit::persist<word, Policy>();
    model_.persist_all();
    gate stored, reader_done;
    std::optional<std::vector<std::byte>> image;
    model_.set_event_hook([&](pv::event_kind kind, std::uint64_t) {
      // The writer's first persistence event after its store is the pwb of the word.
      if (kind == pv::event_kind::pwb && std::this_thread::get_id() == writer_id_) {
        writer_id_.store(std::thread::id{});
        stored.open();
        reader_done.wait();
      }
    });
    std::thread writer([&] {
      writer_id_ = std::this_thread::get_id();
      w->store(value(1));
      Policy::operation_completion();
    });
    stored.wait();
    word seen = w->load(mode);
    Policy::operation_completion();
    image = model_.crash(pv::writeback::none);
    reader_done.open();
    writer.join();
    model_.set_event_hook(nullptr);
    EXPECT_EQ(seen, value(1)) << "the reader sees the store in the volatile view";
    // A link_and_persist word may carry its flag in the image; recovery strips it.
    return flit::from_word<word>(flit::to_word(read_image<word>(*image, 0)) &
                                 ~flit::spare_bit<word>::mask);
  }

  pv::model model_{1 << 16};
  std::optional<pv::scoped_activation> activation_;
  std::atomic<std::thread::id> writer_id_;
};
TYPED_TEST_SUITE(CrashTest, persistent_model_policies);

TYPED_TEST(CrashTest, CompletedPLoadMakesWhatItReadDurable) {
  EXPECT_EQ(this->reader_survives(flit::persisted), value(1))
      << "a reader that p-loaded a value and completed depends on it: it must survive";
}

TYPED_TEST(CrashTest, CompletedVLoadCanLoseWhatItRead) {
  EXPECT_EQ(this->reader_survives(flit::volatile_), nullptr)
      << "a v-load adds no dependency: with the writer held, the value is not durable";
}

// A writer p-stores value(1) and is held at its write-back, before its fence; meanwhile
// another thread v-stores value(2) over it (a shared v-store adds no dependency of its own)
// and p-loads the word. The p-load depends on the writer's p-store (Definition 1 (3)), so the
// reader's completion must make that store durable: the v-store must not have untagged the
// location. (Under link_and_persist it did: it wrote the word without the flag.)
TYPED_TEST(CrashTest, VStoreOverAStoreInFlightKeepsItTagged) {
  using P = TypeParam;
  auto* w = new (this->model_.base()) flit::persist<word, P>();
  this->model_.persist_all();
  this->model_.set_tracing(true);
  gate stored, reader_done;
  this->model_.set_event_hook([&](pv::event_kind kind, std::uint64_t) {
    if (kind == pv::event_kind::pwb && std::this_thread::get_id() == this->writer_id_) {
      this->writer_id_.store(std::thread::id{});
      stored.open();
      reader_done.wait();
    }
  });
  std::thread writer([&] {
    this->writer_id_ = std::this_thread::get_id();
    w->store(value(1));
    P::operation_completion();
  });
  stored.wait();
  w->store(value(2), flit::volatile_);
  word seen = w->load();
  P::operation_completion();
  std::vector<std::byte> image = this->model_.crash(pv::writeback::none);
  auto violations = pv::check_definition1(this->model_.trace());
  reader_done.open();
  writer.join();
  this->model_.set_event_hook(nullptr);
  EXPECT_EQ(seen, value(2));
  EXPECT_NE(flit::to_word(this->template read_image<word>(image, 0)), 0u)
      << "the reader completed, so the p-store it depends on (or the v-store after it) "
         "is durable";
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: "
                                  << violations.front().describe();
}

TYPED_TEST(CrashTest, RandomConcurrentRunSatisfiesDefinition1) {
  using P = TypeParam;
  constexpr int words = 16;
  auto* cells = new (this->model_.base()) flit::persist<word, P>[words]();
  this->model_.set_tracing(true);
  std::vector<std::thread> pool;
  for (int t = 0; t < 3; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(1234 + t);
      for (int i = 0; i < 1500; ++i) {
        auto& c = cells[rng() % words];
        switch (rng() % 7) {
          case 0: (void)c.load(); break;
          case 1: (void)c.load(flit::volatile_); break;
          case 2: c.store(value(rng() % 64)); break;
          case 3: c.store(value(rng() % 64), flit::volatile_); break;
          case 4: {
            word e = c.load(flit::volatile_);
            c.compare_exchange(e, value(rng() % 64));
            break;
          }
          case 5: c.exchange(value(rng() % 64)); break;
          case 6: P::write_range(this->model_.base() + 4096 + 64 * t, &i, sizeof i,
                                 flit::persisted);
            break;
        }
        if (rng() % 3 == 0) P::operation_completion();
      }
      P::operation_completion();
    });
  }
  for (auto& t : pool) t.join();
  auto violations = pv::check_definition1(this->model_.trace());
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: "
                                  << violations.front().describe();
}

// A placement that untags a location before its store is fenced: the mistake that
// Algorithm 3's second fence prevents. Built only for this test.
struct untags_too_early : flit::hashed<(1u << 16)> {
  static constexpr bool fence_before_release = false;
};
using broken_policy = flit::policy<untags_too_early, pv::model_backend>;

TEST(BrokenPolicyTest, ModelAndCheckerCatchAStoreUntaggedBeforeItsFence) {
  pv::model model(1 << 16);
  pv::scoped_activation active(model);
  auto* w = new (model.base()) flit::persist<word, broken_policy>();
  model.persist_all();
  model.set_tracing(true);
  gate stored, reader_done;
  std::atomic<std::thread::id> writer_id;
  model.set_event_hook([&](pv::event_kind kind, std::uint64_t) {
    // Hold the writer at the fence it issues at completion: its store is not yet durable,
    // but the location is no longer tagged.
    if (kind == pv::event_kind::pfence && std::this_thread::get_id() == writer_id) {
      writer_id.store(std::thread::id{});
      stored.open();
      reader_done.wait();
    }
  });
  std::thread writer([&] {
    writer_id = std::this_thread::get_id();
    w->store(value(1));
    broken_policy::operation_completion();
  });
  stored.wait();
  word seen = w->load();
  broken_policy::operation_completion();
  std::vector<std::byte> image = model.crash(pv::writeback::none);
  reader_done.open();
  writer.join();
  ASSERT_EQ(seen, value(1));
  word durable;
  std::memcpy(&durable, image.data(), sizeof durable);
  EXPECT_EQ(durable, nullptr) << "the crash loses a value a completed reader returned";
  auto violations = pv::check_definition1(model.trace());
  ASSERT_FALSE(violations.empty()) << "the checker must flag the reader's completion";
  EXPECT_TRUE(violations.front().at_completion);
  EXPECT_EQ(violations.front().offset, 0u);
}

// Publishes a node holding key 42 through a link, writing the key with a p-store or (the
// mistake) a v-store; returns (link, key) as found in a crash image with no unfenced line
// written back.
template <class KeyMode>
std::pair<std::uint64_t, std::uint64_t> publish_node_then_crash(KeyMode key_mode) {
  using P = on_model<test_hashed>;
  struct node {
    flit::persist<std::uint64_t, P> key;
  };
  pv::model model(1 << 16);
  pv::scoped_activation active(model);
  auto* head = new (model.base()) flit::persist<std::uint64_t, P>();
  auto* n = new (model.base() + 256) node();
  model.persist_all();
  n->key.store(42, key_mode, flit::private_);
  head->store(256);  // publish the node
  P::operation_completion();
  std::vector<std::byte> image = model.crash(pv::writeback::none);
  std::uint64_t link, key;
  std::memcpy(&link, image.data(), sizeof link);
  std::memcpy(&key, image.data() + 256, sizeof key);
  return {link, key};
}

TEST(BrokenProgramTest, NodePublishedBeforeItsContentsAreDurableIsCaught) {
  auto [link, key] = publish_node_then_crash(flit::volatile_);
  EXPECT_EQ(link, 256u) << "the link is durable";
  EXPECT_EQ(key, 0u) << "but not the node it points to: recovery would read garbage";
}

TEST(BrokenProgramTest, TheSameProgramWithAPStoreSurvives) {
  auto [link, key] = publish_node_then_crash(flit::persisted);
  EXPECT_EQ(link, 256u);
  EXPECT_EQ(key, 42u);
}

}  // namespace
