// Two inserts in flight on one link, and a third that completes on top of them: the
// completed insert survives a crash. The list's and the skiplist's test files instantiate
// the suite in every persistent mode (the manual one under every placement).
//
// D inserts 20 into an empty structure and is held right after its CAS on the head link,
// before that link is written back. A inserts 15 in front of 20 (a CAS on the same head
// link) and is held the same way. Then E inserts 25 behind 20 and completes. Power fails
// with no pending line written back. E's node hangs off 20, which is reachable only through
// the head link's unpersisted values, so A must have persisted the value it overwrote
// (D's) before its own CAS: E's insert is then durable through 20 whatever happens to A.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <latch>
#include <optional>
#include <thread>
#include <vector>

#include "support.hpp"

namespace structures_test {

template <class Config>
class InFlightTest : public ::testing::Test {
 public:
  using S = typename Config::structure;
  using memory = typename Config::memory;

  void SetUp() override { on_.emplace(model_); }

  // The head link's word: the list's root block starts with it; the skiplist's head node
  // has its level-0 link where its links begin.
  std::atomic<std::uint64_t>* head_word(const S& s) {
    std::size_t offset = s.root();
    if constexpr (requires { S::node_bytes(0); }) offset += S::node_bytes(0);
    return reinterpret_cast<std::atomic<std::uint64_t>*>(model_.base() + offset);
  }

  pv::model model_{1 << 20};
  std::optional<pv::scoped_activation> on_;
};

template <class Fixture>
void completed_insert_on_top_of_two_in_flight_survives(Fixture& f) {
  using S = typename Fixture::S;
  using memory = typename Fixture::memory;
  const std::span<std::byte> region(f.model_.base(), f.model_.size());
  std::optional<memory> mem(unwrap(memory::create(region, pool_label)));
  auto s = create<S>(*mem);
  mem->set_root(s->root());
  std::atomic<std::uint64_t>* head = f.head_word(*s);
  f.model_.persist_all();

  constexpr std::uint64_t low_bits = structures::node_ref::low_bits;
  std::atomic<std::thread::id> d_id{}, a_id{};
  std::atomic<std::uint64_t> d_value{0};
  std::latch d_held(1), a_held(1), release(1);
  f.model_.set_event_hook([&](pv::event_kind kind, std::uint64_t) {
    if (kind != pv::event_kind::pwb) return;
    const std::uint64_t now = head->load() & ~low_bits;
    const auto me = std::this_thread::get_id();
    if (me == d_id.load() && now != 0) {
      d_id.store(std::thread::id{});
      d_value.store(now);
      d_held.count_down();
      release.wait();
    } else if (me == a_id.load() && now != 0 && now != d_value.load()) {
      a_id.store(std::thread::id{});
      a_held.count_down();
      release.wait();
    }
  });
  std::thread d([&] {
    d_id = std::this_thread::get_id();
    EXPECT_TRUE(s->insert(20, 200));
  });
  d_held.wait();
  std::thread a([&] {
    a_id = std::this_thread::get_id();
    EXPECT_TRUE(s->insert(15, 150));
  });
  a_held.wait();
  ASSERT_TRUE(s->insert(25, 250));  // E: completes
  const std::vector<std::byte> image = f.model_.crash(pv::writeback::none);
  release.count_down();
  d.join();
  a.join();
  f.model_.set_event_hook(nullptr);
  s.reset();
  mem.reset();

  f.model_.load_image(image);
  mem.emplace(unwrap(memory::open(region, pool_label)));
  auto r = recover<S>(*mem, mem->root(), mem->live_marker());
  mem->finish_recovery();
  EXPECT_EQ(r->find(25), std::optional<std::uint64_t>(250)) << "a completed insert was lost";
  EXPECT_EQ(r->TEST_Validate(), std::nullopt);
}

TYPED_TEST_SUITE_P(InFlightTest);

TYPED_TEST_P(InFlightTest, CompletedInsertOnTopOfTwoInFlightInsertsSurvives) {
  completed_insert_on_top_of_two_in_flight_survives(*this);
}

REGISTER_TYPED_TEST_SUITE_P(InFlightTest, CompletedInsertOnTopOfTwoInFlightInsertsSurvives);

}  // namespace structures_test
