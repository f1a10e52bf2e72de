#include "allocators/helper_thread.hpp"

#include <unistd.h>

namespace alloc {

bool helper_thread::runs_here() const noexcept {
  return state_.load(std::memory_order_acquire) == running && ::getpid() == pid_;
}

bool helper_thread::ask() noexcept {
  if (state_.load(std::memory_order_acquire) == none) {
    try {
      std::lock_guard lock(start_);
      if (state_.load(std::memory_order_relaxed) == none) {
        pid_ = ::getpid();
        thread_ = std::thread([this] { loop(); });
        state_.store(running, std::memory_order_release);
      }
    } catch (...) {  // the system refused the thread, or no DRAM for its state
      state_.store(unavailable, std::memory_order_release);
    }
  }
  if (!runs_here()) return false;
  asked_.fetch_add(1, std::memory_order_release);
  asked_.notify_one();
  return true;
}

void helper_thread::await() const noexcept {
  if (!runs_here()) return;
  const std::uint64_t asked = asked_.load(std::memory_order_acquire);
  for (std::uint64_t d = done_.load(std::memory_order_acquire); d < asked;
       d = done_.load(std::memory_order_acquire)) {
    done_.wait(d, std::memory_order_acquire);
  }
}

void helper_thread::stop() noexcept {
  if (state_.load(std::memory_order_acquire) != running) return;
  state_.store(unavailable, std::memory_order_release);
  if (::getpid() != pid_) {
    // A forked child: the thread object names the parent's thread, which this process does
    // not have. Neither joined nor destroyed (which would terminate a joinable thread).
    static_cast<void>(new std::thread(std::move(thread_)));
    return;
  }
  asked_.store(kStop, std::memory_order_release);
  asked_.notify_one();
  thread_.join();
}

void helper_thread::loop() noexcept {
  std::uint64_t done = 0;
  for (;;) {
    const std::uint64_t asked = asked_.load(std::memory_order_acquire);
    if (asked == kStop) return;
    if (asked == done) {
      asked_.wait(asked, std::memory_order_acquire);
      continue;
    }
    job_();
    done = asked;
    done_.store(done, std::memory_order_release);
    done_.notify_all();
  }
}

}  // namespace alloc
