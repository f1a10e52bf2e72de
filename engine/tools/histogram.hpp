// A latency histogram with log-linear buckets, for the benchmark driver.
//
// Values (nanoseconds) below 32 have a bucket each; above, every power of two [2^e, 2^(e+1))
// is split into 32 equal buckets, so a bucket is at most 1/32 of its lower bound wide and a
// percentile is reported within about 3% of the exact one. The whole uint64 range fits in a
// fixed array of 1920 counters (15 KiB); adding a sample is a few instructions, no allocation.
//
// Thread safety: one histogram per thread; merge() the threads' histograms after joining.
// Invariants:
//  (1) count() equals the sum of the buckets; min() <= every sample <= max().
//  (2) percentile(q) lies in the bucket that holds the exact nearest-rank q-percentile,
//      clamped to [min(), max()].
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace flintkv::tools {

class latency_histogram {
 public:
  static constexpr unsigned kSubBits = 5;                   // 32 buckets per power of two
  static constexpr std::uint64_t kSub = std::uint64_t{1} << kSubBits;
  static constexpr std::size_t kBuckets = (64 - kSubBits + 1) * kSub;

  void add(std::uint64_t nanos) noexcept {
    ++buckets_[bucket_of(nanos)];
    ++count_;
    sum_ += nanos;
    if (nanos < min_) min_ = nanos;
    if (nanos > max_) max_ = nanos;
  }
  void merge(const latency_histogram& other) noexcept;

  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t min() const noexcept { return count_ == 0 ? 0 : min_; }
  std::uint64_t max() const noexcept { return max_; }
  double mean() const noexcept { return count_ == 0 ? 0 : double(sum_) / double(count_); }
  // The nearest-rank q-quantile (q in [0, 1]) in nanoseconds, interpolated within its
  // bucket; 0 for an empty histogram.
  double percentile(double q) const noexcept;

  // Several lines: count, mean, min, max, and P50/P75/P90/P99/P99.9/P99.99, in microseconds.
  std::string to_string() const;

  // Bucket index of a value, and the smallest value of a bucket (exposed for tests).
  static constexpr std::size_t bucket_of(std::uint64_t v) noexcept {
    if (v < kSub) return static_cast<std::size_t>(v);
    unsigned e = 63u - static_cast<unsigned>(__builtin_clzll(v));  // v in [2^e, 2^(e+1))
    unsigned shift = e - kSubBits;
    return static_cast<std::size_t>((shift + 1) * kSub + ((v >> shift) - kSub));
  }
  static constexpr std::uint64_t lower_bound_of(std::size_t bucket) noexcept {
    if (bucket < kSub) return bucket;
    std::uint64_t shift = bucket / kSub - 1;
    return (kSub + bucket % kSub) << shift;
  }

 private:
  std::array<std::uint64_t, kBuckets> buckets_{};
  std::uint64_t count_ = 0;
  std::uint64_t sum_ = 0;
  std::uint64_t min_ = ~std::uint64_t{0};
  std::uint64_t max_ = 0;
};

}  // namespace flintkv::tools
