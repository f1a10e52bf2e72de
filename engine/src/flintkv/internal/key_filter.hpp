// A key filter: a blocked Bloom filter over keys' key_hash (keys.hpp), for the packed tier's
// small runs (docs/engine-design.md, "The packed tier"), so that a Get passes a run that
// does not hold its key for one cache line, not for a node's search.
//
// The bits are in blocks of one cache line (512 bits). A key sets, and a lookup tests,
// kProbes bits of one block: the block is chosen by the hash's multiply-shift, the bits by
// 9-bit pieces of the hash mixed (splitmix64's finalizer). With 10 bits per key about 1% of
// the keys a filter does not hold pass it (KeyFilterTest.FalsePositivesAreFew checks under
// 2%); a key it holds always passes.
//
// Thread safety: built by one thread; may_contain on any threads once built (a filter is
// read-only after its last add; one that is to take more keys is copied, and the copy
// takes them).
// Persistence: none; DRAM only, rebuilt from the keys at recovery.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace flintkv::internal {

class key_filter {
 public:
  static constexpr unsigned kProbes = 6;

  // A filter for up to `keys` keys at `bits_per_key` (at least one block).
  key_filter(std::size_t keys, unsigned bits_per_key)
      : keys_(keys),
        blocks_(std::max<std::size_t>(1, (keys * bits_per_key + kBlockBits - 1) / kBlockBits)) {}

  void add(std::uint32_t hash) {
    ++added_;
    block& b = blocks_[block_of(hash)];
    std::uint64_t bits = mix(hash);
    for (unsigned i = 0; i < kProbes; ++i, bits >>= 9) {
      b.words[(bits >> 6) & 7] |= std::uint64_t{1} << (bits & 63);
    }
  }
  // False only if no key of this hash was added.
  bool may_contain(std::uint32_t hash) const {
    const block& b = blocks_[block_of(hash)];
    std::uint64_t bits = mix(hash);
    for (unsigned i = 0; i < kProbes; ++i, bits >>= 9) {
      if ((b.words[(bits >> 6) & 7] & (std::uint64_t{1} << (bits & 63))) == 0) return false;
    }
    return true;
  }
  // Requests the line may_contain(hash) reads, so that several filters' lines are fetched
  // side by side.
  void prefetch(std::uint32_t hash) const { __builtin_prefetch(&blocks_[block_of(hash)]); }
  std::size_t bytes() const { return blocks_.size() * sizeof(block); }
  // Whether `more` adds keep it within what it was made for (a key added twice counts
  // twice): a filter that is to take more keys is copied while they fit, else made anew.
  bool has_room(std::size_t more) const { return added_ + more <= keys_; }

 private:
  static constexpr std::size_t kBlockBits = 512;
  struct alignas(64) block {
    std::array<std::uint64_t, 8> words{};
  };

  std::size_t block_of(std::uint32_t hash) const {
    return static_cast<std::size_t>((std::uint64_t{hash} * blocks_.size()) >> 32);
  }
  static std::uint64_t mix(std::uint32_t hash) {
    std::uint64_t z = hash + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  std::size_t keys_;  // made for: past them, more keys pass that it does not hold
  std::size_t added_ = 0;
  std::vector<block> blocks_;
};

}  // namespace flintkv::internal
