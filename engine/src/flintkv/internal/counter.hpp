// A statistics counter that concurrent threads add to without sharing a cache line.
//
// Thread safety: add() and load() may run on any threads at once.
// Invariants:
//  (1) load() is the sum of the stripes; each add() lands in exactly one stripe, the one its
//      thread was given at first use. A load() concurrent with add()s sees some of them.
#pragma once

#include <atomic>
#include <cstdint>

namespace flintkv::internal {

class striped_counter {
 public:
  void add(std::uint64_t n = 1) { stripes_[stripe()].value.fetch_add(n, std::memory_order_relaxed); }

  std::uint64_t load() const {
    std::uint64_t sum = 0;
    for (const line& l : stripes_) sum += l.value.load(std::memory_order_relaxed);
    return sum;
  }

 private:
  static constexpr unsigned kStripes = 16;
  struct alignas(64) line {
    std::atomic<std::uint64_t> value{0};
  };

  // Threads take stripes round-robin, so up to kStripes threads never share one.
  static unsigned stripe() {
    static std::atomic<unsigned> next{0};
    thread_local const unsigned mine = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
    return mine;
  }

  line stripes_[kStripes];
};

}  // namespace flintkv::internal
