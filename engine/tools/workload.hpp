// The workload of `flintkv bench`, shared with the peer benchmark (bench/peers), so that both
// drivers write and read the same keys, with the same values, in the same order:
//
//   random_source random(thread_seed(position, thread));   // per benchmark and thread
//   key_formatter keys(16);                                // "0000000000000042"
//   shuffled_share order(begin, end, random);              // fillrandom, overwrite
//   value_source values(64, kValueSeed);                   // one per process
//   std::size_t position = value_start(thread, 64);
//   db.Put(keys.key(order(i)), values.next(position));
//   db.Get(keys.key(random.uniform(num)), &value);         // readrandom
//
// Keys are the decimal numbers 0 .. num-1, zero-padded to a fixed width (LevelDB's "%016d").
// With T threads, thread t does the operations [share_bound(num, T, t), share_bound(num, T,
// t + 1)); writes cover that slice of the key space, reads draw keys over all of it.
//
// Thread safety: a key_formatter, random_source or shuffled_share is used by one thread; a
// value_source is only read after construction, so threads share one (each keeps its own
// position in it).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flintkv::tools {

// 128-bit products, so that num * t / threads and pool sizes cannot overflow.
__extension__ typedef unsigned __int128 uint128;

inline std::size_t decimal_digits(std::uint64_t v) {
  std::size_t d = 1;
  while (v >= 10) {
    v /= 10;
    ++d;
  }
  return d;
}

// Keys: the decimal number, zero-padded to a fixed width (LevelDB's "%016d"). A missing key
// is the same with a '.' appended: it sorts between keys and is never written.
class key_formatter {
 public:
  explicit key_formatter(std::size_t width) : width_(width), buffer_(width + 1, '0') {
    buffer_[width] = '.';
  }
  // REQUIRES: k has at most `width` digits. The view lasts until the next call.
  std::string_view key(std::uint64_t k) {
    char* p = buffer_.data() + width_;
    for (std::size_t i = 0; i < width_; ++i) {
      *--p = static_cast<char>('0' + k % 10);
      k /= 10;
    }
    return {buffer_.data(), width_};
  }
  std::string_view missing_key(std::uint64_t k) {
    key(k);
    return {buffer_.data(), width_ + 1};
  }

 private:
  std::size_t width_;
  std::string buffer_;
};

// Repeatable pseudo-random numbers (splitmix64), uniform over [0, n) by multiply-shift.
class random_source {
 public:
  explicit random_source(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // REQUIRES: n > 0.
  std::uint64_t uniform(std::uint64_t n) {
    return static_cast<std::uint64_t>((static_cast<uint128>(next()) * n) >> 64);
  }

 private:
  std::uint64_t state_;
};

// A pseudo-random permutation of [0, n): i = 0 .. n-1 maps to every key of [0, n) once, in an
// order that looks random. A bijection of [0, 2^k), the smallest power of two above n-1
// (xor with the seed, odd multiplies and xor-shifts, each invertible modulo 2^k), applied
// again while it lands at or above n (cycle walking: under two rounds on average).
// Needs no memory, so it does not add to the resident DRAM the drivers report.
class key_permutation {
 public:
  key_permutation(std::uint64_t n, std::uint64_t seed) : n_(n) {
    unsigned bits = n > 1 ? static_cast<unsigned>(std::bit_width(n - 1)) : 1;
    mask_ = bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
    shift_ = std::max(1u, bits / 2);
    seed_ = random_source(seed).next() & mask_;
  }
  // REQUIRES: i < n.
  std::uint64_t operator()(std::uint64_t i) const {
    std::uint64_t x = i;
    do {
      x = round(x);
    } while (x >= n_);
    return x;
  }

 private:
  std::uint64_t round(std::uint64_t x) const {
    x = (x ^ seed_) * 0x9e3779b97f4a7c15ull & mask_;
    x ^= x >> shift_;
    x = x * 0xbf58476d1ce4e5b9ull & mask_;
    return x ^ (x >> shift_);
  }
  std::uint64_t n_, mask_, seed_;
  unsigned shift_;
};

// The keys one thread writes in fillrandom, overwrite and deleterandom: every key of its
// share [begin, end) once, in a permutation seeded by one draw from the thread's source.
class shuffled_share {
 public:
  shuffled_share(std::uint64_t begin, std::uint64_t end, random_source& random)
      : begin_(begin), permutation_(end - begin, random.next()) {}
  // The key of the share's i-th write. REQUIRES: begin <= i < end.
  std::uint64_t operator()(std::uint64_t i) const { return begin_ + permutation_(i - begin_); }

 private:
  std::uint64_t begin_;
  key_permutation permutation_;
};

// Values: consecutive slices of one buffer of random letters, built once (like db_bench's
// RandomGenerator); each thread keeps its own position in it.
class value_source {
 public:
  value_source(std::size_t value_size, std::uint64_t seed)
      : size_(value_size), data_(std::max<std::size_t>(std::size_t{1} << 20, 2 * value_size), 0) {
    random_source r(seed);
    for (char& c : data_) c = static_cast<char>('a' + r.uniform(26));
  }
  std::string_view next(std::size_t& position) const {
    if (position + size_ > data_.size()) position = 0;
    std::string_view v(data_.data() + position, size_);
    position += size_ + 1;  // +1: successive values differ even when size_ divides the buffer
    return v;
  }

 private:
  std::size_t size_;
  std::string data_;
};

// The seed of the value buffer.
inline constexpr std::uint64_t kValueSeed = 42;

// The seed of thread `thread` (0-based) in the benchmark at `position` (0-based) of a list:
// readrandom after fillrandom draws other keys than the fill wrote. In readwhilewriting the
// writer is the thread after the T readers.
constexpr std::uint64_t thread_seed(std::uint64_t position, std::uint64_t thread) {
  return 1000 * (position + 1) + thread;
}

// Where thread `thread` starts in the value buffer.
constexpr std::size_t value_start(std::uint64_t thread, std::uint64_t value_size) {
  return static_cast<std::size_t>((thread * 7919 * (value_size + 1)) % (std::uint64_t{1} << 20));
}

// Thread t's share of `total` operations split among `shares` threads is
// [share_bound(total, shares, t), share_bound(total, shares, t + 1)).
// REQUIRES: shares > 0, t <= shares.
constexpr std::uint64_t share_bound(std::uint64_t total, std::uint64_t shares, std::uint64_t t) {
  return static_cast<std::uint64_t>(static_cast<uint128>(total) * t / shares);
}

}  // namespace flintkv::tools
