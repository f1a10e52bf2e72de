// A one-shot gate between threads, for tests that order steps of real threads without
// sleeping: wait() returns once open() was called.
#pragma once

#include <condition_variable>
#include <mutex>

namespace test_support {

class gate {
 public:
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

}  // namespace test_support
