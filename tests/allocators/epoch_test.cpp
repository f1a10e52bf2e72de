// epoch_domain: nothing is reclaimed while a thread pinned before its retirement is still
// pinned; everything is reclaimed eventually, also what exited threads retired; readers
// under concurrent replacement never touch reclaimed memory (overwritten with a poison
// pattern at reclamation here, and poisoned for AddressSanitizer by node_allocator).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "allocators/epoch.hpp"
#include "alloc_support.hpp"
#include "support/gate.hpp"

namespace {

using test_support::gate;

std::atomic<int> reclaimed{0};
void count_reclaim(void*) { reclaimed.fetch_add(1); }

// A thread pinned in `domain` from construction (it is pinned when the constructor returns)
// until release().
class pinned_reader {
 public:
  explicit pinned_reader(alloc::epoch_domain& domain)
      : thread_([this, &domain] {
          auto g = domain.pin();
          pinned_.open();
          release_.wait();
        }) {
    pinned_.wait();
  }
  ~pinned_reader() {
    if (thread_.joinable()) release();
  }
  void release() {
    release_.open();
    thread_.join();
  }

 private:
  gate pinned_, release_;
  std::thread thread_;  // after the gates it uses
};

class EpochTest : public ::testing::Test {
 protected:
  void SetUp() override { reclaimed = 0; }
  // Enough collections to pass two epochs when nobody holds them back.
  void collect_a_while() {
    for (int i = 0; i < 4; ++i) domain_.collect();
  }
  alloc::epoch_domain domain_;
};

TEST_F(EpochTest, NothingIsReclaimedWhileAnEarlierPinHolds) {
  pinned_reader reader(domain_);
  int object = 0;
  domain_.retire(&object, count_reclaim);
  collect_a_while();
  EXPECT_EQ(reclaimed.load(), 0) << "reclaimed while a reader pinned before it still holds";
  EXPECT_EQ(domain_.pending(), 1u);
  reader.release();
  collect_a_while();
  EXPECT_EQ(reclaimed.load(), 1);
  EXPECT_EQ(domain_.pending(), 0u);
}

// Blocks retired together (one fence, one stamp) wait for a reader pinned before them as
// one retirement does, and all go back to their allocator once it unpins.
TEST_F(EpochTest, BlocksRetiredTogetherWaitForEarlierPins) {
  alloc::node_allocator nodes;
  constexpr std::size_t n = 100, bytes = 48;
  std::vector<alloc::node_block> blocks;
  for (std::size_t i = 0; i < n; ++i) blocks.push_back({nodes.allocate(bytes), bytes});
  auto retired_one = [&](void* p) {
    for (const alloc::node_block& b : blocks) {
      if (b.node == p) return true;
    }
    return false;
  };
  pinned_reader reader(domain_);
  domain_.retire(nodes, blocks);
  collect_a_while();
  EXPECT_EQ(domain_.pending(), n) << "reclaimed while a reader pinned before them holds";
  std::vector<void*> fresh;
  for (std::size_t i = 0; i < n; ++i) fresh.push_back(nodes.allocate(bytes));
  for (void* p : fresh) EXPECT_FALSE(retired_one(p)) << "a retired block was handed out";
  reader.release();
  collect_a_while();
  EXPECT_EQ(domain_.pending(), 0u);
  std::size_t back = 0;
  for (std::size_t i = 0; i < n; ++i) back += retired_one(nodes.allocate(bytes)) ? 1 : 0;
  EXPECT_EQ(back, n) << "every block retired together went back to the allocator";
  for (void* p : fresh) nodes.deallocate(p, bytes);
}

TEST_F(EpochTest, InnerUnpinDoesNotReleaseAnOuterPin) {
  gate pinned, release;
  std::thread reader([&] {
    auto outer = domain_.pin();
    { auto inner = domain_.pin(); }
    pinned.open();
    release.wait();
  });
  pinned.wait();
  int object = 0;
  domain_.retire(&object, count_reclaim);
  collect_a_while();
  EXPECT_EQ(reclaimed.load(), 0);
  release.open();
  reader.join();
  collect_a_while();
  EXPECT_EQ(reclaimed.load(), 1);
}

TEST_F(EpochTest, EverythingIsReclaimedWhenNobodyIsPinned) {
  std::vector<int> objects(1000);
  for (int& o : objects) domain_.retire(&o, count_reclaim);
  collect_a_while();
  EXPECT_EQ(reclaimed.load(), 1000);
  EXPECT_EQ(domain_.pending(), 0u);
  const std::uint64_t before = domain_.epoch();
  domain_.collect();
  EXPECT_GT(domain_.epoch(), before) << "the epoch advances when nobody is pinned";
}

TEST_F(EpochTest, ObjectsRetiredByExitedThreadsAreAdopted) {
  std::vector<int> objects(10);
  std::thread([&] {
    for (int& o : objects) domain_.retire(&o, count_reclaim);
  }).join();
  EXPECT_EQ(domain_.pending(), 10u);
  collect_a_while();
  EXPECT_EQ(reclaimed.load(), 10);
}

TEST_F(EpochTest, DestructionReclaimsWhatIsLeft) {
  {
    alloc::epoch_domain d;
    int a = 0, b = 0;
    auto g = std::make_unique<alloc::epoch_domain::guard>(d.pin());
    d.retire(&a, count_reclaim);
    d.retire(&b, count_reclaim);
    g.reset();
  }
  EXPECT_EQ(reclaimed.load(), 2);
}

// Writers replace the nodes of a table and retire the old ones; readers pin, read a node
// twice and check it is whole and belongs to the slot they read. Reclamation overwrites a
// node with a poison pattern before freeing it, and the node allocator poisons it for ASan.
struct test_node {
  std::uint64_t slot;
  std::uint64_t generation;
  std::uint64_t check;
  static constexpr std::uint64_t magic = 0x5eed5eed5eed5eedULL;
};
constexpr std::size_t node_size(std::uint64_t generation) {
  return sizeof(test_node) + (generation % 7) * 16;  // nodes of several classes
}

alloc::node_allocator* reclaim_into = nullptr;

TEST_F(EpochTest, ReadersNeverTouchReclaimedNodes) {
  alloc::node_allocator nodes;
  constexpr std::size_t slots = 4;
  std::atomic<test_node*> table[slots];
  auto make = [&](std::uint64_t slot, std::uint64_t gen) {
    auto* n = static_cast<test_node*>(nodes.allocate(node_size(gen)));
    n->slot = slot;
    n->generation = gen;
    n->check = slot ^ gen ^ test_node::magic;
    return n;
  };
  for (std::size_t i = 0; i < slots; ++i) table[i].store(make(i, 0));

  std::atomic<int> writers_left{2};
  std::atomic<bool> failed{false};
  std::atomic<std::uint64_t> retired_count{0};
  reclaim_into = &nodes;
  // Poisons a node, then gives it back: a reader that reads it afterwards sees the pattern.
  struct poisoner {
    static void reclaim(void* p) {
      auto* n = static_cast<test_node*>(p);
      const std::size_t bytes = node_size(n->generation);
      std::memset(p, 0xdd, bytes);
      reclaim_into->deallocate(p, bytes);
      reclaimed.fetch_add(1);
    }
  };
  auto writer = [&](unsigned seed) {
    std::uint64_t x = seed;
    for (std::uint64_t gen = 1; gen <= 100000; ++gen) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      const std::size_t slot = (x >> 33) % slots;
      test_node* old = table[slot].exchange(make(slot, gen * 2 + seed));
      domain_.retire(old, poisoner::reclaim);
      retired_count.fetch_add(1);
    }
    writers_left.fetch_sub(1);
  };
  auto reader = [&] {
    std::uint64_t reads = 0;
    while (writers_left.load() > 0 || reads < 1000) {
      auto g = domain_.pin();
      for (std::size_t i = 0; i < slots; ++i) {
        const test_node* n = table[i].load(std::memory_order_acquire);
        // Hold the node a while (and let writers run) before reading it again.
        for (int again = 0; again < 4; ++again) {
          const std::uint64_t slot = n->slot, gen = n->generation, check = n->check;
          if (slot != i || check != (slot ^ gen ^ test_node::magic)) failed = true;
          if (again == 1) std::this_thread::yield();
        }
        ++reads;
      }
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(writer, 1);
  threads.emplace_back(writer, 2);
  threads.emplace_back(reader);
  threads.emplace_back(reader);
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(failed) << "a reader saw a reclaimed node";
  EXPECT_GT(reclaimed.load(), 0) << "reclamation ran while readers were active";
  for (std::size_t i = 0; i < slots; ++i) {
    domain_.retire(table[i].load(), poisoner::reclaim);
    retired_count.fetch_add(1);
  }
  collect_a_while();
  EXPECT_EQ(domain_.pending(), 0u);
  EXPECT_EQ(static_cast<std::uint64_t>(reclaimed.load()), retired_count.load())
      << "each node reclaimed exactly once";
}

TEST_F(EpochTest, PersistentBlocksGoBackToTheirAllocator) {
  using P = alloc_test::file_policy;
  alloc_test::scratch_dir dir;
  auto pool = alloc::pool::create<P>(dir.file("epoch.pool"), 1 << 20,
                                     alloc_test::layout_for<P>());
  ASSERT_TRUE(pool.has_value()) << pool.error().to_string();
  alloc::persistent_allocator<P> heap(*pool);
  ASSERT_TRUE(heap.finish_recovery());
  {
    alloc::epoch_domain domain;
    auto block = heap.allocate(300);
    ASSERT_TRUE(block.has_value());
    EXPECT_GT(heap.stats().in_use_bytes, 0u);
    domain.retire(heap, *block);
    EXPECT_GT(heap.stats().in_use_bytes, 0u) << "not before it is safe";
    for (int i = 0; i < 4; ++i) domain.collect();
    EXPECT_EQ(heap.stats().in_use_bytes, 0u);
    alloc::node_allocator nodes;
    void* n = nodes.allocate(64);
    domain.retire(nodes, n, 64);
    for (int i = 0; i < 4; ++i) domain.collect();
    EXPECT_EQ(domain.pending(), 0u);
    EXPECT_EQ(nodes.allocate(64), n) << "the retired node went back to its allocator";
  }
}

}  // namespace
