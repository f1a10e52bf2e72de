// helper_thread: each ask() is answered by a run of the job, await() returns once the runs
// asked for have finished, stop() ends the thread, and a forked child, which has no helper,
// is told so (ask() false, await() at once) and exits without touching the parent's thread.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "allocators/helper_thread.hpp"

namespace {

TEST(HelperThreadTest, EveryAskIsAnsweredByARunOfTheJob) {
  std::atomic<int> runs{0};
  std::atomic<std::thread::id> ran_on{};
  alloc::helper_thread helper([&] {
    ran_on.store(std::this_thread::get_id());
    runs.fetch_add(1);
  });
  for (int i = 1; i <= 50; ++i) {
    ASSERT_TRUE(helper.ask());
    helper.await();
    EXPECT_EQ(runs.load(), i) << "one run per ask, each awaited";
  }
  EXPECT_NE(ran_on.load(), std::this_thread::get_id()) << "the job runs on the helper";
  // Asks from several threads at once: each is followed by a run that started after it,
  // though runs may answer several asks.
  std::atomic<int> seen{0};
  auto asker = [&] {
    for (int i = 0; i < 200; ++i) {
      const int before = runs.load();
      helper.ask();
      helper.await();
      if (runs.load() > before) seen.fetch_add(1);
    }
  };
  {
    std::thread a(asker);
    std::thread b(asker);
    a.join();
    b.join();
  }
  EXPECT_EQ(seen.load(), 400) << "every await saw a run after its ask";
  helper.stop();
  helper.stop();  // idempotent
  EXPECT_FALSE(helper.ask()) << "stopped";
}

TEST(HelperThreadTest, AForkedChildHasNoHelper) {
  std::atomic<int> runs{0};
  alloc::helper_thread helper([&] { runs.fetch_add(1); });
  ASSERT_TRUE(helper.ask());
  helper.await();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Exit codes: 0 as expected; 1 ask() claimed a helper; 2 a run happened in the child.
    const int before = runs.load();
    if (helper.ask()) ::_exit(1);
    helper.await();
    if (runs.load() != before) ::_exit(2);
    helper.stop();  // must neither join nor terminate on the parent's thread object
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(helper.ask()) << "the parent's helper still runs";
  helper.await();
  EXPECT_EQ(runs.load(), 2);
}

}  // namespace
