// Crash campaigns on the test-only key-value store: the correct store passes every crash
// point, single- and multi-threaded, under several counter placements; each of the four
// broken variants is caught.
#include <gtest/gtest.h>

#include "crashtest/gtest.hpp"
#include "subjects/test_kv.hpp"
#include "support/policies.hpp"

namespace {

using namespace crashtest;
using subjects::kv_bug;
using subjects::test_kv;
using flit_test::on_model;
using flit_test::test_hashed;

using hashed_policy = on_model<test_hashed>;

campaign_config single_threaded(std::string config) {
  campaign_config c;
  c.subject = "test_kv";
  c.config = std::move(config);
  c.work = {.writer_threads = 1, .ops_per_writer = 70, .key_space = 6};
  c.points = 400;
  return c;
}

// One writer that mostly puts, and readers that read the same few keys meanwhile: what a
// reader returns of a write in progress must survive.
campaign_config writer_and_readers(std::string config, unsigned writers, unsigned readers) {
  campaign_config c;
  c.subject = "test_kv";
  c.config = std::move(config);
  c.work = {.writer_threads = writers, .reader_threads = readers, .ops_per_writer = 40,
            .ops_per_reader = 400, .key_space = 4, .put_percent = 70, .del_percent = 10,
            .batch_percent = 10};
  c.points = 300;
  c.stall_ops = 2;
  return c;
}

void expect_passes(const campaign_result& r) {
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GT(r.events, 0u);
  EXPECT_GE(r.points, std::min<std::uint64_t>(300, r.events)) << "several hundred points";
  EXPECT_GE(r.images, r.points) << "at least one image per point";
}

TEST(TestKvCampaign, HashedSingleThreadedPassesEveryCrashPoint) {
  auto c = single_threaded("hashed st");
  auto r = run_kv_campaign<test_kv<hashed_policy>>(c);
  expect_passes(r);
}

TEST(TestKvCampaign, PlainSingleThreadedPassesEveryCrashPoint) {
  auto c = single_threaded("plain st");
  c.workload_seed = 2;
  auto r = run_kv_campaign<test_kv<on_model<flit::plain>>>(c);
  expect_passes(r);
}

TEST(TestKvCampaign, AdjacentSingleThreadedPassesEveryCrashPoint) {
  auto c = single_threaded("adjacent st");
  c.workload_seed = 3;
  auto r = run_kv_campaign<test_kv<on_model<flit::adjacent>>>(c);
  expect_passes(r);
}

TEST(TestKvCampaign, HashedWritersAndReadersPass) {
  auto c = writer_and_readers("hashed w2r1", 2, 1);
  auto r = run_kv_campaign<test_kv<hashed_policy>>(c);
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GE(r.points, std::min<std::uint64_t>(300, r.events)) << "several hundred points";
}

// ---- the broken variants: each must be caught --------------------------------------------

template <kv_bug Bug>
campaign_result run_broken(campaign_config c) {
  c.stop_after_failures = 3;
  c.config += " (broken)";
  return run_kv_campaign<test_kv<hashed_policy, Bug>>(c);
}

TEST(TestKvBrokenTest, NodeLinkedBeforeItsContentsAreFlushedIsCaught) {
  auto r = run_broken<kv_bug::link_before_flush>(single_threaded("link-before-flush"));
  ASSERT_GT(r.failed, 0u) << r.summary;
  EXPECT_FALSE(r.failures[0].replay.empty());
}

TEST(TestKvBrokenTest, MissingFenceBeforeLinkIsCaught) {
  auto r = run_broken<kv_bug::missing_fence_before_link>(single_threaded("missing-fence"));
  ASSERT_GT(r.failed, 0u) << r.summary;
  for (const failure& f : r.failures) {
    EXPECT_EQ(f.writeback, pv::writeback::random)
        << "with no pending line or every pending line written back, the order of write-backs "
           "cannot show: only a partial write-back exposes a missing fence";
  }
}

TEST(TestKvBrokenTest, VersionPublishedBeforeItsLinkIsDurableIsCaught) {
  auto c = writer_and_readers("version-before-link", 1, 1);
  c.work.batch_percent = 0;
  auto r = run_broken<kv_bug::version_before_link>(c);
  ASSERT_GT(r.failed, 0u) << r.summary;
  EXPECT_TRUE(r.any_problem_contains("completed get returned"))
      << "the lost write is one a reader returned";
}

TEST(TestKvBrokenTest, BatchFlagClearedBeforeTheLinksAreDurableIsCaught) {
  auto c = single_threaded("batch-flag-early");
  c.work.batch_percent = 50;
  auto r = run_broken<kv_bug::batch_flag_cleared_early>(c);
  ASSERT_GT(r.failed, 0u) << r.summary;
  EXPECT_TRUE(r.any_problem_contains("batch survived"))
      << "the failure is a batch that survived in part";
}

}  // namespace
