// alloc::pool_memory: a structure in a pool file survives closing and reopening (the
// example of docs/structures.md), node blocks are aligned as node_memory promises, and a
// pool made by another build layout is refused with a message that names it.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "allocators/pool_backend.hpp"
#include "allocators/alloc_support.hpp"
#include "support.hpp"

namespace structures_test {
namespace {

using file_policy = flit::policy<flit::adjacent, alloc::pool_backend>;
using file_memory = alloc::pool_memory<file_policy>;

class PoolMemoryTest : public ::testing::Test {
 protected:
  alloc_test::scratch_dir dir_;
  std::filesystem::path path_ = dir_.file("structures.pool");
};

TEST_F(PoolMemoryTest, SkiplistInAPoolFileIsFoundAgainAfterReopening) {
  using map = structures::skiplist<structures::manual, file_policy, file_memory>;
  {
    auto mem = file_memory::create(path_, 8 << 20, pool_label);
    ASSERT_TRUE(mem) << mem.error().to_string();
    map m(*mem);
    mem->set_root(m.root());
    for (std::uint64_t k = 0; k < 1000; ++k) ASSERT_TRUE(m.insert(k, k * 10));
    for (std::uint64_t k = 0; k < 1000; k += 3) ASSERT_TRUE(m.remove(k));
  }
  auto again = file_memory::open(path_, pool_label);
  ASSERT_TRUE(again) << again.error().to_string();
  std::size_t live = 0;
  auto mark = again->live_marker();
  map r = map::recover(*again, again->root(), [&](std::uint64_t offset, std::size_t bytes) {
    mark(offset, bytes);
    ++live;
  });
  again->finish_recovery();
  EXPECT_EQ(live, 1 + 666u) << "the head and every key's node";
  for (std::uint64_t k = 0; k < 1000; ++k) {
    EXPECT_EQ(r.find(k), k % 3 == 0 ? std::nullopt : std::optional(k * 10)) << k;
  }
  EXPECT_TRUE(r.insert(3, 30)) << "and it takes new keys";
  EXPECT_EQ(r.TEST_Validate(), std::nullopt);
}

TEST_F(PoolMemoryTest, SmallBlocksAreAlignedToTheirSize) {
  auto mem = file_memory::create(path_, 8 << 20, pool_label);
  ASSERT_TRUE(mem) << mem.error().to_string();
  for (std::size_t bytes : {8u, 16u, 24u, 32u, 40u, 48u, 56u, 64u, 72u, 200u}) {
    for (int i = 0; i < 50; ++i) {
      const std::uint64_t offset = mem->allocate(bytes);
      ASSERT_NE(offset, 0u);
      const std::uint64_t align = std::min<std::uint64_t>(64, std::bit_ceil(bytes));
      ASSERT_EQ(offset % align, 0u) << bytes << " bytes at offset " << offset;
      ASSERT_EQ(offset / 64, (offset + std::min<std::size_t>(bytes, 64) - 1) / 64)
          << "a block of up to a line stays in one line";
    }
  }
}

TEST_F(PoolMemoryTest, PoolOfAnotherBuildLayoutIsRefused) {
  {
    auto mem = alloc::pool_memory<flit::policy<flit::hashed<4096>, alloc::pool_backend>>::create(path_, 1 << 20, pool_label);
    ASSERT_TRUE(mem) << mem.error().to_string();
  }
  auto other = file_memory::open(path_, pool_label);  // adjacent words are twice as large
  ASSERT_FALSE(other);
  EXPECT_EQ(other.code(), alloc::errc::invalid_argument);
  EXPECT_NE(other.error().message().find(path_.string()), std::string::npos) << other.error().message();
}

}  // namespace
}  // namespace structures_test
