// Per-thread counts of persistence instructions issued through the layer.
//
// Thread safety: each thread writes only its own counters (relaxed stores, no read-modify-
// write), so counting costs a load and a store to a thread-local line. all_threads() may run
// on any thread and sums the live threads' counters with those of threads that exited.
// Counting is compiled out when the build's `flit_stats` option is off; the readers then
// return zeros.
#pragma once

#include <atomic>
#include <cstdint>

#include "flit/config.hpp"

namespace flit {

struct counts {
  std::uint64_t pwb = 0;           // write-backs issued
  std::uint64_t pfence = 0;        // fences issued
  std::uint64_t tagged_flush = 0;  // p-loads that wrote back because the location was tagged

  friend counts operator-(const counts& a, const counts& b) {
    return {a.pwb - b.pwb, a.pfence - b.pfence, a.tagged_flush - b.tagged_flush};
  }
  friend counts operator+(const counts& a, const counts& b) {
    return {a.pwb + b.pwb, a.pfence + b.pfence, a.tagged_flush + b.tagged_flush};
  }
  friend bool operator==(const counts&, const counts&) = default;
};

inline constexpr bool stats_enabled = config::stats;

namespace detail {

struct thread_counts {
  std::atomic<std::uint64_t> pwb{0};
  std::atomic<std::uint64_t> pfence{0};
  std::atomic<std::uint64_t> tagged_flush{0};
  bool registered = false;
};

inline thread_local constinit thread_counts this_thread_counts{};

void register_this_thread();  // adds this thread's counters to the registry, once

inline void bump(std::atomic<std::uint64_t>& c) {
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

inline thread_counts& counters() {
  thread_counts& t = this_thread_counts;
  if (!t.registered) [[unlikely]] register_this_thread();
  return t;
}

inline void count_pwb() {
  if constexpr (stats_enabled) bump(counters().pwb);
}
inline void count_pfence() {
  if constexpr (stats_enabled) bump(counters().pfence);
}
inline void count_tagged_flush() {
  if constexpr (stats_enabled) bump(counters().tagged_flush);
}

}  // namespace detail

// This thread's counts since it started.
inline counts this_thread() {
  const detail::thread_counts& t = detail::this_thread_counts;
  return {t.pwb.load(std::memory_order_relaxed), t.pfence.load(std::memory_order_relaxed),
          t.tagged_flush.load(std::memory_order_relaxed)};
}

// Counts of every thread of the process, live or exited.
counts all_threads();

// The counts of this thread between construction and delta(): "per operation" figures.
class stats_scope {
 public:
  stats_scope() : start_(this_thread()) {}
  counts delta() const { return this_thread() - start_; }

 private:
  counts start_;
};

}  // namespace flit
