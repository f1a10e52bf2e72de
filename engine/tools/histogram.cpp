#include "histogram.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace flintkv::tools {

void latency_histogram::merge(const latency_histogram& other) noexcept {
  for (std::size_t i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

double latency_histogram::percentile(double q) const noexcept {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // Nearest rank: the smallest sample with at least q * count samples at or below it.
  auto rank = static_cast<std::uint64_t>(std::ceil(q * double(count_)));
  rank = std::clamp<std::uint64_t>(rank, 1, count_);
  std::uint64_t below = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    if (buckets_[i] == 0) continue;
    if (below + buckets_[i] >= rank) {
      double lo = double(lower_bound_of(i));
      double width = (i + 1 < kBuckets ? double(lower_bound_of(i + 1)) : double(max_) + 1) - lo;
      // Samples spread evenly over the bucket: the rank-th of them sits this far in.
      double inside = width <= 1 ? 0 : width * double(rank - below - 1) / double(buckets_[i]);
      return std::clamp(lo + inside, double(min()), double(max_));
    }
    below += buckets_[i];
  }
  return double(max_);
}

std::string latency_histogram::to_string() const {
  char line[256];
  std::string out;
  std::snprintf(line, sizeof line,
                "  latency (us): count %llu  mean %.3f  min %.3f  max %.3f\n",
                static_cast<unsigned long long>(count_), mean() / 1e3, double(min()) / 1e3,
                double(max_) / 1e3);
  out += line;
  std::snprintf(line, sizeof line,
                "  percentiles (us): P50 %.3f  P75 %.3f  P90 %.3f  P99 %.3f  P99.9 %.3f  "
                "P99.99 %.3f\n",
                percentile(0.50) / 1e3, percentile(0.75) / 1e3, percentile(0.90) / 1e3,
                percentile(0.99) / 1e3, percentile(0.999) / 1e3, percentile(0.9999) / 1e3);
  out += line;
  return out;
}

}  // namespace flintkv::tools
