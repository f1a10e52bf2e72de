// The Definition 1 checker on hand-written traces.
#include <gtest/gtest.h>

#include "pv_interface/checker.hpp"

namespace {

using pv::trace_event;
using type = trace_event::type;

trace_event store(std::uint32_t thread, std::uint64_t offset, std::uint64_t version,
                  bool persisted = true, bool shared = true) {
  return {.what = type::store, .persisted = persisted, .shared = shared, .thread = thread,
          .size = 8, .offset = offset, .version = version};
}
trace_event load(std::uint32_t thread, std::uint64_t offset, bool persisted = true) {
  return {.what = type::load, .persisted = persisted, .shared = true, .thread = thread,
          .size = 8, .offset = offset};
}
trace_event pwb(std::uint32_t thread, std::uint64_t offset, std::uint64_t version) {
  return {.what = type::pwb, .thread = thread, .offset = offset, .version = version};
}
trace_event pfence(std::uint32_t thread) { return {.what = type::pfence, .thread = thread}; }
trace_event complete(std::uint32_t thread) { return {.what = type::complete, .thread = thread}; }

TEST(CheckerTest, PersistedStoreBeforeCompletionPasses) {
  EXPECT_TRUE(pv::check_definition1({store(0, 0, 1), pwb(0, 0, 1), pfence(0), complete(0)})
                  .empty());
}

TEST(CheckerTest, OwnStoreNotPersistedAtCompletionFails) {
  auto v = pv::check_definition1({store(0, 0, 1), pwb(0, 0, 1), complete(0)});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(v[0].at_completion);
  EXPECT_EQ(v[0].event, 2u);
  EXPECT_FALSE(v[0].describe().empty());
}

TEST(CheckerTest, PLoadDependsOnThePendingStoreItRead) {
  // Thread 0 stores, thread 1 p-loads it and completes before thread 0's fence.
  auto v = pv::check_definition1({store(0, 0, 1), load(1, 0), complete(1), pwb(0, 0, 1),
                                  pfence(0), complete(0)});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].thread, 1u);
}

TEST(CheckerTest, ReaderThatWritesBackAndFencesPasses) {
  EXPECT_TRUE(pv::check_definition1({store(0, 0, 1), load(1, 0), pwb(1, 0, 1), pfence(1),
                                     complete(1), pwb(0, 0, 1), pfence(0), complete(0)})
                  .empty());
}

TEST(CheckerTest, VLoadAddsNoDependency) {
  EXPECT_TRUE(pv::check_definition1({store(0, 0, 1), load(1, 0, false), complete(1),
                                     pwb(0, 0, 1), pfence(0), complete(0)})
                  .empty());
}

TEST(CheckerTest, SharedStoreMustFollowTheThreadsDependencies) {
  // A private p-store not yet fenced, then a shared store publishing it: violation.
  auto v = pv::check_definition1(
      {store(0, 64, 1, true, false), pwb(0, 64, 1), store(0, 0, 1, false, true)});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_FALSE(v[0].at_completion);
  EXPECT_EQ(v[0].offset, 64u);
  EXPECT_TRUE(pv::check_definition1({store(0, 64, 1, true, false), pwb(0, 64, 1), pfence(0),
                                     store(0, 0, 1, false, true)})
                  .empty());
}

TEST(CheckerTest, ALaterVersionOfTheLineCoversEarlierStores) {
  // Two private p-stores to one line; the write-back of the second carries the first.
  EXPECT_TRUE(pv::check_definition1({store(0, 0, 1, true, false), store(0, 8, 2, true, false),
                                     pwb(0, 8, 2), pfence(0), complete(0)})
                  .empty());
  // Shared p-stores: the second must wait until the first is durable.
  EXPECT_EQ(pv::check_definition1({store(0, 0, 1), store(0, 8, 2)}).size(), 1u);
}

}  // namespace
