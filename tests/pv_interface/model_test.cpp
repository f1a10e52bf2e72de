// The model of persistent memory: what reaches a crash image, and when.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <thread>

#include "pv_interface/model.hpp"

namespace {

using pv::model;
using pv::writeback;

// A store of one 8-byte word at `offset` through the model backend, as the layer makes it.
void store(model& m, std::size_t offset, std::uint64_t v) {
  void* p = m.base() + offset;
  auto guard = pv::model_backend::observe({pv::access_kind::store, true, true}, p, sizeof v);
  std::memcpy(p, &v, sizeof v);
}

std::uint64_t word_at(const std::vector<std::byte>& image, std::size_t offset) {
  std::uint64_t v;
  std::memcpy(&v, image.data() + offset, sizeof v);
  return v;
}

class ModelTest : public ::testing::Test {
 protected:
  model m_{4096};
  pv::scoped_activation active_{m_};
};

TEST_F(ModelTest, StoreIsVisibleAtOnceButDurableOnlyAfterPwbAndPfence) {
  store(m_, 0, 7);
  std::uint64_t seen;
  std::memcpy(&seen, m_.base(), sizeof seen);
  EXPECT_EQ(seen, 7u) << "the volatile view has it";
  EXPECT_EQ(word_at(m_.crash(writeback::none), 0), 0u);
  EXPECT_EQ(word_at(m_.crash(writeback::all), 0), 7u) << "it may reach memory on its own";
  pv::model_backend::pwb(m_.base());
  EXPECT_EQ(word_at(m_.crash(writeback::none), 0), 0u) << "a pwb alone guarantees nothing";
  pv::model_backend::pfence();
  EXPECT_EQ(word_at(m_.crash(writeback::none), 0), 7u);
}

TEST_F(ModelTest, PfenceCompletesOnlyTheCallingThreadsWriteBacks) {
  store(m_, 0, 7);
  pv::model_backend::pwb(m_.base());
  std::thread([] { pv::model_backend::pfence(); }).join();
  EXPECT_EQ(word_at(m_.crash(writeback::none), 0), 0u);
  std::thread([&] {
    store(m_, 64, 9);
    pv::model_backend::pwb(m_.base() + 64);
  }).join();
  pv::model_backend::pfence();
  auto image = m_.crash(writeback::none);
  EXPECT_EQ(word_at(image, 0), 7u);
  EXPECT_EQ(word_at(image, 64), 0u) << "the other thread's write-back was never fenced";
}

TEST_F(ModelTest, PwbCapturesTheLineAsItWasThen) {
  store(m_, 0, 1);
  pv::model_backend::pwb(m_.base());
  store(m_, 8, 2);  // same line, after the pwb
  pv::model_backend::pfence();
  auto image = m_.crash(writeback::none);
  EXPECT_EQ(word_at(image, 0), 1u);
  EXPECT_EQ(word_at(image, 8), 0u) << "a store after the pwb is not covered by it";
}

TEST_F(ModelTest, ALinesStoresReachMemoryInOrder) {
  // Three stores to one line, none fenced: every image holds a prefix of them.
  store(m_, 0, 1);
  store(m_, 8, 1);
  store(m_, 16, 1);
  std::set<std::uint64_t> prefixes;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    auto image = m_.crash(writeback::random, seed);
    std::uint64_t a = word_at(image, 0), b = word_at(image, 8), c = word_at(image, 16);
    ASSERT_TRUE(a >= b && b >= c) << "seed " << seed << ": " << a << b << c;
    prefixes.insert(a + b + c);
  }
  EXPECT_EQ(prefixes.size(), 4u) << "random write-back reaches every prefix over 200 seeds";
}

TEST_F(ModelTest, RandomWriteBackIsSeededAndPerLine) {
  for (std::size_t line = 0; line < 32; ++line) store(m_, line * 64, line + 1);
  auto a = m_.crash(writeback::random, 42);
  auto b = m_.crash(writeback::random, 42);
  auto c = m_.crash(writeback::random, 43);
  EXPECT_EQ(a, b) << "same seed, same image";
  EXPECT_NE(a, c);
  int reached = 0;
  for (std::size_t line = 0; line < 32; ++line) reached += word_at(a, line * 64) != 0;
  EXPECT_GT(reached, 0);
  EXPECT_LT(reached, 32) << "lines are chosen independently";
}

TEST_F(ModelTest, UnobservedWritesNeverReachTheImageByThemselves) {
  std::uint64_t v = 5;
  std::memcpy(m_.base() + 128, &v, sizeof v);  // bypasses the layer
  pv::model_backend::pwb(m_.base() + 128);
  pv::model_backend::pfence();
  EXPECT_EQ(word_at(m_.crash(writeback::all), 128), 0u);
}

TEST_F(ModelTest, EventsAreNumberedAndHooked) {
  std::vector<std::pair<pv::event_kind, std::uint64_t>> seen;
  m_.set_event_hook([&](pv::event_kind k, std::uint64_t i) { seen.emplace_back(k, i); });
  std::uint64_t first = m_.persistence_events();
  pv::model_backend::pwb(m_.base());
  pv::model_backend::pwb(m_.base() + 1'000'000);  // outside the region: not an event
  pv::model_backend::pfence();
  m_.set_event_hook(nullptr);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::make_pair(pv::event_kind::pwb, first));
  EXPECT_EQ(seen[1], std::make_pair(pv::event_kind::pfence, first + 1));
  EXPECT_EQ(m_.persistence_events(), first + 2);
}

TEST_F(ModelTest, LoadImageRestartsFromACrash) {
  store(m_, 0, 3);
  pv::model_backend::pwb(m_.base());
  pv::model_backend::pfence();
  store(m_, 64, 4);
  auto image = m_.crash(writeback::none);
  m_.load_image(image);
  std::uint64_t a, b;
  std::memcpy(&a, m_.base(), 8);
  std::memcpy(&b, m_.base() + 64, 8);
  EXPECT_EQ(a, 3u);
  EXPECT_EQ(b, 0u);
  EXPECT_EQ(m_.crash(writeback::all), image) << "the loaded image is the durable state";
  EXPECT_THROW(m_.load_image(std::vector<std::byte>(10)), std::invalid_argument);
}

TEST_F(ModelTest, PersistAllIsACleanShutdown) {
  store(m_, 0, 3);
  m_.persist_all();
  EXPECT_EQ(word_at(m_.crash(writeback::none), 0), 3u);
}

TEST(ModelActivation, OneActiveModelAtATime) {
  model a(64), b(64);
  pv::scoped_activation on(a);
  EXPECT_EQ(model::active(), &a);
  EXPECT_THROW(pv::scoped_activation{b}, std::logic_error);
  EXPECT_TRUE(a.contains(a.base(), 64));
  EXPECT_FALSE(a.contains(a.base(), 65));
  EXPECT_FALSE(a.contains(b.base()));
}

TEST(ModelActivation, AccessesWithoutAModelAreNotObserved) {
  model m(64);
  std::uint64_t v = 1;
  {
    auto guard = pv::model_backend::observe({pv::access_kind::store, true, true}, m.base(), 8);
    std::memcpy(m.base(), &v, 8);
  }
  pv::scoped_activation on(m);
  EXPECT_EQ(word_at(m.crash(writeback::all), 0), 0u);
}

}  // namespace
