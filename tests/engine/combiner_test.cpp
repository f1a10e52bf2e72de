// The flat combiner (combiner.hpp) on its own, with requests that record who served them.
//  - CombinerTest.AWriterThatFindsTheLockFreeServesItselfAndTheReadySlots: attach_if_free
//    attaches its own request first, then the slots advertised before the pass, in one pass,
//    and returns its outcome; with the lock held it returns nullopt and attaches nothing.
//  - CombinerConcurrencyTest.EveryRequestIsAttachedOnceAndPassesNeverOverlap: threads attach
//    requests both ways (without a slot when the lock is free, else advertised); each request
//    is attached exactly once, its writer gets the outcome its pass gave it, and no two
//    passes run at once.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include "flintkv/internal/combiner.hpp"

namespace {

using flintkv::internal::combiner;
using flintkv::internal::slot_state;

struct request {
  std::uint64_t id = 0;
};

TEST(CombinerTest, AWriterThatFindsTheLockFreeServesItselfAndTheReadySlots) {
  combiner<request> c(4);
  std::vector<std::uint64_t> attached;
  int passes = 0, housekeeping = 0;
  auto attach_one = [&](request& r) {
    attached.push_back(r.id);
    return r.id % 2 == 0 ? slot_state::done : slot_state::failed;
  };
  auto end_pass = [&] { ++passes; };
  auto after_pass = [&] { ++housekeeping; };

  // Another writer advertised a request in a slot and has not come back for it yet.
  combiner<request>::lease other(c);
  other->request = {7};
  other->state.store(slot_state::ready, std::memory_order_release);

  request mine{4};
  const std::optional<slot_state> outcome =
      c.attach_if_free(mine, attach_one, end_pass, after_pass);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(*outcome, slot_state::done);
  EXPECT_EQ(attached, (std::vector<std::uint64_t>{4, 7})) << "its own first, then the slot";
  EXPECT_EQ(passes, 1);
  EXPECT_EQ(housekeeping, 1);
  EXPECT_EQ(other->state.load(std::memory_order_acquire), slot_state::failed)
      << "the slot learnt its outcome in the same pass";

  // While another thread holds the lock, nothing is attached and the caller must advertise.
  std::atomic<bool> holding{false}, release{false};
  std::thread holder([&] {
    c.locked([&] {
      holding.store(true);
      while (!release.load()) std::this_thread::yield();
    });
  });
  while (!holding.load()) std::this_thread::yield();
  request blocked{6};
  EXPECT_FALSE(c.attach_if_free(blocked, attach_one, end_pass, after_pass).has_value());
  release.store(true);
  holder.join();
  EXPECT_EQ(attached.size(), 2u);
  EXPECT_EQ(passes, 1);
}

TEST(CombinerConcurrencyTest, EveryRequestIsAttachedOnceAndPassesNeverOverlap) {
  constexpr int kThreads = 4;
  constexpr std::uint64_t kPerThread = 20000;
  combiner<request> c(2);  // fewer slots than threads: some wait for a slot too
  std::vector<std::atomic<int>> times(kThreads * kPerThread);
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::atomic<std::uint64_t> direct{0}, advertised{0}, wrong_outcome{0};
  auto attach_one = [&](request& r) {
    times[r.id].fetch_add(1, std::memory_order_relaxed);
    return r.id % 3 == 0 ? slot_state::failed : slot_state::done;
  };
  auto after_pass = [] {};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < kPerThread; ++i) {
        request r{t * kPerThread + i};
        const slot_state want = r.id % 3 == 0 ? slot_state::failed : slot_state::done;
        // A pass is bracketed by the first attach_one and end_pass; `inside` counts passes
        // under way, so two at once are caught.
        bool opened = false;
        auto first = [&](request& x) {
          if (!opened && inside.fetch_add(1) != 0) overlapped.store(true);
          opened = true;
          return attach_one(x);
        };
        auto close = [&] {
          if (opened) inside.fetch_sub(1);
          opened = false;
        };
        std::optional<slot_state> got = c.attach_if_free(r, first, close, after_pass);
        if (got) {
          direct.fetch_add(1, std::memory_order_relaxed);
        } else {
          combiner<request>::lease me(c);
          me->request = r;
          got = c.attach(*me, first, close, after_pass);
          advertised.fetch_add(1, std::memory_order_relaxed);
        }
        if (*got != want) wrong_outcome.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (std::size_t id = 0; id < times.size(); ++id) {
    ASSERT_EQ(times[id].load(), 1) << "request " << id;
  }
  EXPECT_FALSE(overlapped.load()) << "two passes ran at once";
  EXPECT_EQ(wrong_outcome.load(), 0u);
  EXPECT_GT(direct.load(), 0u);
  EXPECT_EQ(direct.load() + advertised.load(), kThreads * kPerThread);
}

}  // namespace
