// GoogleTest integration for the crash harness (optional; the harness needs no test
// framework). Including this header in a test program makes every replay line end with
// `--gtest_filter=<Suite>.<Test>` of the test that ran the campaign, so that the printed
// line reruns exactly that test. Link GoogleTest yourself; nothing else changes.
//
//   #include "crashtest/gtest.hpp"
//   TEST(MyQueueCrashTest, Campaign) {
//     auto r = crashtest::run_queue_campaign<my_queue>(config);
//     EXPECT_EQ(r.failed, 0u) << r.summary;
//   }
//
// Thread safety: the hook is installed during static initialization.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "crashtest/harness.hpp"

namespace crashtest::gtest {

// "--gtest_filter=Suite.Test" of the running test, or "" outside a test.
inline std::string current_test_filter() {
  const ::testing::UnitTest* unit = ::testing::UnitTest::GetInstance();
  const ::testing::TestInfo* info = unit != nullptr ? unit->current_test_info() : nullptr;
  if (info == nullptr) return "";
  return std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
}

inline const bool replay_names_the_test = (set_replay_arguments(&current_test_filter), true);

}  // namespace crashtest::gtest
