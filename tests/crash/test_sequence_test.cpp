// Crash campaigns on the test-only persistent queue and stack: the correct ones pass, and
// each checker catches a lost completed add and a taken value that comes back.
#include <gtest/gtest.h>

#include "crashtest/gtest.hpp"
#include "subjects/test_sequence.hpp"
#include "support/policies.hpp"

namespace {

using namespace crashtest;
using subjects::seq_bug;
using subjects::seq_kind;
using subjects::test_sequence;
using policy = flit_test::on_model<flit_test::test_hashed>;
template <seq_bug Bug = seq_bug::none>
using test_queue = test_sequence<policy, seq_kind::queue, Bug>;
template <seq_bug Bug = seq_bug::none>
using test_stack = test_sequence<policy, seq_kind::stack, Bug>;

static_assert(queue_subject<test_queue<>> && !stack_subject<test_queue<>>);
static_assert(stack_subject<test_stack<>> && !queue_subject<test_stack<>>);

campaign_config sequence_config(std::string subject, std::string config, unsigned writers,
                                unsigned readers) {
  campaign_config c;
  c.subject = std::move(subject);
  c.config = std::move(config);
  c.work = {.writer_threads = writers, .reader_threads = readers,
            .ops_per_writer = 120 / writers, .ops_per_reader = 40, .put_percent = 60};
  c.points = 150;
  c.random_images = 1;
  return c;
}

TEST(TestQueueCampaign, SingleThreadedPasses) {
  auto r = run_queue_campaign<test_queue<>>(sequence_config("test_queue", "hashed st", 1, 0));
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GT(r.events, 0u);
}

TEST(TestQueueCampaign, WritersAndReadersPass) {
  auto r = run_queue_campaign<test_queue<>>(sequence_config("test_queue", "hashed w2r1", 2, 1));
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GT(r.points, 0u);
}

TEST(TestStackCampaign, SingleThreadedPasses) {
  auto r = run_stack_campaign<test_stack<>>(sequence_config("test_stack", "hashed st", 1, 0));
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GT(r.events, 0u);
}

TEST(TestStackCampaign, WritersAndReadersPass) {
  auto r = run_stack_campaign<test_stack<>>(sequence_config("test_stack", "hashed w2r1", 2, 1));
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GT(r.points, 0u);
}

template <class Result>
void expect_caught(const Result& r, const std::string& problem) {
  EXPECT_GT(r.failed, 0u) << r.summary;
  EXPECT_TRUE(r.any_problem_contains(problem)) << r.summary;
}

TEST(TestQueueBrokenTest, ALostEnqueueIsCaught) {
  auto c = sequence_config("test_queue", "add-not-persisted (broken)", 1, 0);
  c.stop_after_failures = 3;
  expect_caught(run_queue_campaign<test_queue<seq_bug::add_not_persisted>>(c), "lost");
}

TEST(TestQueueBrokenTest, ADequeuedValueThatComesBackIsCaught) {
  auto c = sequence_config("test_queue", "take-not-persisted (broken)", 1, 0);
  c.stop_after_failures = 3;
  expect_caught(run_queue_campaign<test_queue<seq_bug::take_not_persisted>>(c), "returned it");
}

TEST(TestStackBrokenTest, ALostPushIsCaught) {
  auto c = sequence_config("test_stack", "add-not-persisted (broken)", 1, 0);
  c.stop_after_failures = 3;
  expect_caught(run_stack_campaign<test_stack<seq_bug::add_not_persisted>>(c), "lost");
}

TEST(TestStackBrokenTest, APoppedValueThatComesBackIsCaught) {
  auto c = sequence_config("test_stack", "take-not-persisted (broken)", 1, 0);
  c.stop_after_failures = 3;
  expect_caught(run_stack_campaign<test_stack<seq_bug::take_not_persisted>>(c), "returned it");
}

// The queue names its operations "offer" and "poll": failures and replays print those.
TEST(TestQueueBrokenTest, FailuresNameOperationsAsTheSubjectDoes) {
  auto c = sequence_config("test_queue", "add-not-persisted (broken)", 1, 0);
  c.stop_after_failures = 1;
  auto r = run_queue_campaign<test_queue<seq_bug::add_not_persisted>>(c);
  ASSERT_GT(r.failed, 0u) << r.summary;
  EXPECT_TRUE(r.any_problem_contains("(offer value ")) << r.failures[0].problems[0];
  EXPECT_FALSE(r.any_problem_contains("enqueue value")) << r.failures[0].problems[0];
}

}  // namespace
