// Crash campaigns on the test-only persistent set: the correct set passes, single- and
// multi-threaded; a node linked before its contents are written back is caught.
#include <gtest/gtest.h>

#include "crashtest/gtest.hpp"
#include "subjects/test_set.hpp"
#include "support/policies.hpp"

namespace {

using namespace crashtest;
using subjects::set_bug;
using subjects::test_set;
using policy = flit_test::on_model<flit_test::test_hashed>;

campaign_config set_config(std::string config, unsigned writers, unsigned readers) {
  campaign_config c;
  c.subject = "test_set";
  c.config = std::move(config);
  c.work = {.writer_threads = writers, .reader_threads = readers, .ops_per_writer = 320 / writers,
            .ops_per_reader = 200, .key_space = 16, .put_percent = 50, .del_percent = 30};
  c.points = 400;
  // Every operation holds the set's one mutex: nobody progresses while the crashing thread
  // waits, so no stall.
  return c;
}

TEST(TestSetCampaign, SingleThreadedPassesEveryCrashPoint) {
  auto c = set_config("hashed st", 1, 0);
  auto r = run_set_campaign<test_set<policy>>(c);
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GE(r.points, std::min<std::uint64_t>(300, r.events)) << "several hundred points";
  EXPECT_GT(r.events, 0u);
}

TEST(TestSetCampaign, WritersAndReadersPass) {
  auto c = set_config("hashed w2r1", 2, 1);
  auto r = run_set_campaign<test_set<policy>>(c);
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GT(r.points, 0u);
}

TEST(TestSetBrokenTest, NodeLinkedBeforeItsContentsAreFlushedIsCaught) {
  auto c = set_config("link-before-flush (broken)", 1, 0);
  c.stop_after_failures = 3;
  auto r = run_set_campaign<test_set<policy, set_bug::link_before_flush>>(c);
  EXPECT_GT(r.failed, 0u) << r.summary;
}

}  // namespace
