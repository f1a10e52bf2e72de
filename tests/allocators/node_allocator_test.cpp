// node_allocator: aligned, disjoint blocks, reuse of freed blocks, blocks freed by other
// threads than the ones that allocated them, reserved blocks, and arenas mapped ahead by the
// allocator's helper thread.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "allocators/node_allocator.hpp"

namespace {

using alloc::detail::dram_classes;

TEST(NodeAllocatorTest, BlocksAreAlignedAndDisjoint) {
  alloc::node_allocator nodes;
  std::map<std::uintptr_t, std::uintptr_t> taken;
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t bytes = 1; bytes <= 5000; bytes += 37) {
    void* p = nodes.allocate(bytes);
    ASSERT_NE(p, nullptr);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    EXPECT_EQ(a % 16, 0u);
    if (bytes <= dram_classes::max && dram_classes::sizes[dram_classes::of(bytes)] % 64 == 0) {
      EXPECT_EQ(a % 64, 0u) << bytes;
    }
    auto next = taken.lower_bound(a);
    if (next != taken.end()) {
      EXPECT_LE(a + bytes, next->first);
    }
    if (next != taken.begin()) {
      EXPECT_LE(std::prev(next)->second, a);
    }
    taken[a] = a + bytes;
    std::memset(p, static_cast<int>(bytes & 0xff), bytes);
    blocks.emplace_back(p, bytes);
  }
  for (auto [p, bytes] : blocks) {
    const auto* c = static_cast<const unsigned char*>(p);
    EXPECT_EQ(c[0], bytes & 0xff);
    EXPECT_EQ(c[bytes - 1], bytes & 0xff);
    nodes.deallocate(p, bytes);
  }
}

TEST(NodeAllocatorTest, FreedBlocksAreReusedFirst) {
  alloc::node_allocator nodes;
  void* a = nodes.allocate(100);
  nodes.deallocate(a, 100);
  EXPECT_EQ(nodes.allocate(110), a) << "same class, the block just freed";
  const std::size_t reserved = nodes.reserved_bytes();
  for (int round = 0; round < 1000; ++round) {
    void* p = nodes.allocate(200);
    nodes.deallocate(p, 200);
  }
  EXPECT_EQ(nodes.reserved_bytes(), reserved) << "a steady allocate/free needs no new arena";
  void* big = nodes.allocate(100000);
  ASSERT_NE(big, nullptr);
  std::memset(big, 1, 100000);
  nodes.deallocate(big, 100000);
}

// After reserve(bytes, n), the thread's next n allocations of that size map no arena (the
// engine reserves tree nodes before it takes the combiner lock, so that a split under the
// lock never faults a fresh arena in). Some rounds free blocks first, so that reserve also
// splices lists the thread handed over and lists that are partly used.
TEST(NodeAllocatorTest, ReservedBlocksNeedNoNewArena) {
  alloc::node_allocator nodes;
  std::vector<void*> live;
  std::set<void*> held;
  for (int round = 0; round < 3000; ++round) {
    if (round % 7 == 6) {
      for (int i = 0; i < 17 && !live.empty(); ++i) {
        held.erase(live.back());
        nodes.deallocate(live.back(), 1000);
        live.pop_back();
      }
    }
    ASSERT_TRUE(nodes.reserve(1000, 4));
    const std::size_t reserved = nodes.reserved_bytes();
    for (int i = 0; i < 4; ++i) {
      void* p = nodes.allocate(1000);
      ASSERT_NE(p, nullptr);
      ASSERT_TRUE(held.insert(p).second) << "round " << round << ": a block given twice";
      std::memset(p, 0xab, 1000);
      live.push_back(p);
    }
    ASSERT_EQ(nodes.reserved_bytes(), reserved) << "round " << round << ": an arena was mapped";
  }
  EXPECT_GT(nodes.reserved_bytes(), 2 * alloc::detail::node_core::arena_size)
      << "the rounds filled more than two arenas";
  for (void* p : live) nodes.deallocate(p, 1000);
}

// Once an allocator has taken two arenas, a helper thread maps and touches the next one
// ahead, and carving a new arena takes that one instead of waiting for the kernel to zero
// a fresh huge page. Blocks stay disjoint and writable across arenas of either kind.
TEST(NodeAllocatorTest, ArenasAreMappedAheadByTheHelper) {
  alloc::node_allocator nodes;
  constexpr std::size_t kBlock = 4096;
  constexpr std::size_t kArena = alloc::detail::node_core::arena_size;
  std::set<void*> held;
  auto fill_arena = [&] {  // allocates until a new arena was taken
    const std::size_t reserved = nodes.reserved_bytes();
    while (nodes.reserved_bytes() == reserved) {
      void* p = nodes.allocate(kBlock);
      ASSERT_NE(p, nullptr);
      ASSERT_TRUE(held.insert(p).second) << "a block given twice";
      std::memset(p, 0x5a, kBlock);
    }
  };
  fill_arena();
  fill_arena();
  EXPECT_EQ(nodes.TEST_arenas_from_helper(), 0u) << "no helper before the second arena";
  for (int i = 0; i < 4; ++i) {
    nodes.TEST_await_helper();
    fill_arena();
  }
  EXPECT_EQ(nodes.TEST_arenas_from_helper(), 4u) << "each arena after the wait was made ahead";
  EXPECT_EQ(nodes.TEST_arenas_mapped_on_demand(), 2u);
  EXPECT_EQ(nodes.reserved_bytes(), 6 * kArena);
  for (void* p : held) {
    EXPECT_EQ(static_cast<const unsigned char*>(p)[kBlock - 1], 0x5a);
    nodes.deallocate(p, kBlock);
  }
}

// Producers allocate and stamp nodes, consumers on other threads check and free them.
TEST(NodeAllocatorTest, BlocksFreedByOtherThreadsAreReused) {
  alloc::node_allocator nodes;
  struct item {
    void* p;
    std::size_t bytes;
    std::uint64_t stamp;
  };
  std::mutex mutex;
  std::vector<item> queue;
  std::atomic<bool> failed{false};
  std::atomic<int> producers_left{2};
  auto producer = [&](int t) {
    std::mt19937 rng(static_cast<unsigned>(t));
    for (int i = 0; i < 20000; ++i) {
      const std::size_t bytes = 8 + rng() % 600;
      void* p = nodes.allocate(bytes);
      if (p == nullptr) {
        failed = true;
        break;
      }
      const std::uint64_t stamp = (std::uint64_t(t) << 32) | static_cast<std::uint32_t>(i);
      std::memcpy(p, &stamp, sizeof stamp);
      std::lock_guard lock(mutex);
      queue.push_back({p, bytes, stamp});
    }
    producers_left.fetch_sub(1);
  };
  auto consumer = [&] {
    while (true) {
      std::vector<item> got;
      {
        std::lock_guard lock(mutex);
        got.swap(queue);
      }
      if (got.empty() && producers_left.load() == 0) break;
      for (const item& it : got) {
        std::uint64_t seen;
        std::memcpy(&seen, it.p, sizeof seen);
        if (seen != it.stamp) failed = true;
        nodes.deallocate(it.p, it.bytes);
      }
      std::this_thread::yield();
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(producer, 1);
  threads.emplace_back(producer, 2);
  threads.emplace_back(consumer);
  threads.emplace_back(consumer);
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(failed) << "a block was handed out while still in use";
}

}  // namespace
