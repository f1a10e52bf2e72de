// helper_thread: a thread of an object's own that runs the object's job when asked, so that
// work a caller would otherwise wait for (the kernel mapping and zeroing fresh memory) is
// done ahead of it, off its path. The thread starts at the first ask and is stopped and
// joined by stop() or the destructor.
//
//   alloc::helper_thread helper([this] { make_spare(); });
//   if (!helper.ask()) make_spare();   // no thread: the caller does the work itself
//   helper.await();                    // the runs asked for so far have finished
//
// Thread safety: ask() and await() from any thread. The job runs on the helper only, one
// run at a time, at least once after each ask() (asks that come while it runs may share the
// next run), so the job must check what is still wanted. The job must not throw.
// Fork: a child process has no helper (threads are not copied). There ask() returns false,
// await() returns at once, and stop() leaves the parent's thread alone.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace alloc {

class helper_thread {
 public:
  explicit helper_thread(std::function<void()> job) : job_(std::move(job)) {}
  ~helper_thread() { stop(); }
  helper_thread(const helper_thread&) = delete;
  helper_thread& operator=(const helper_thread&) = delete;

  // Asks for a run of the job, starting the thread the first time. False if no helper runs
  // (no thread could be started, or this is a forked child): the caller does the work.
  bool ask() noexcept;
  // Waits until every run asked for before this call has finished.
  void await() const noexcept;
  // Ends the thread after its current run, if it runs. Idempotent. REQUIRES: no ask() or
  // await() during or after the call.
  void stop() noexcept;

 private:
  static constexpr std::uint64_t kStop = UINT64_MAX;  // in asked_: the thread ends
  enum state : int { none, running, unavailable };
  bool runs_here() const noexcept;
  void loop() noexcept;

  std::function<void()> job_;
  std::atomic<std::uint64_t> asked_{0};  // runs asked for
  std::atomic<std::uint64_t> done_{0};   // the asks the last finished run answered
  std::atomic<int> state_{none};
  pid_t pid_ = 0;  // the process that started the thread (written before state_ is running)
  std::mutex start_;
  std::thread thread_;
};

// Has the kernel map and zero fresh anonymous memory now, as a helper's job does ahead of
// its users: a store of zero into each 4 KiB page (the memory reads the same after it). Not
// MADV_POPULATE_WRITE, which holds the process's memory map for the whole range: a
// thread mapping memory meanwhile waits for it, and page faults queue behind that thread.
inline void touch_pages(void* memory, std::size_t bytes) noexcept {
  auto* p = static_cast<volatile unsigned char*>(memory);
  for (std::size_t at = 0; at < bytes; at += 4096) p[at] = 0;
}

}  // namespace alloc
