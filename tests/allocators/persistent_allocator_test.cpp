// persistent_allocator: size classes, alignment, large blocks, no space, recovery from the
// user's walk, a many-thread stress with ownership checks, and huge pages under the part of
// a pool file in use.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "alloc_support.hpp"

namespace {

using namespace alloc_test;
using alloc::errc;
using alloc::pptr;
using P = file_policy;
using heap_t = alloc::persistent_allocator<P>;
using alloc::detail::pmem_classes;
using alloc::detail::dram_classes;

template <class Classes>
void expect_classes_cover_every_size() {
  for (std::size_t b = 0; b <= Classes::max; ++b) {
    const unsigned c = Classes::of(b);
    ASSERT_LT(c, Classes::count) << b;
    ASSERT_GE(Classes::sizes[c], std::max<std::size_t>(b, 1)) << b;
    if (c > 0) {
      ASSERT_LT(Classes::sizes[c - 1], b) << "not the smallest class for " << b;
    }
  }
  for (unsigned c = 0; c < Classes::count; ++c) {
    EXPECT_EQ(Classes::exact(Classes::sizes[c]), c);
    EXPECT_EQ(Classes::exact(Classes::sizes[c] + 1), Classes::count);
    EXPECT_EQ(Classes::sizes[c] % 16, 0u);
    if (Classes::sizes[c] > 64 && c > 0) {
      // Four classes per doubling at most: waste below 25 % above 64 bytes.
      EXPECT_LE(Classes::sizes[c], Classes::sizes[c - 1] * 5 / 4 + 64);
    }
  }
}

TEST(SizeClassesTest, EverySizeGetsTheSmallestClassThatHoldsIt) {
  expect_classes_cover_every_size<pmem_classes>();
  expect_classes_cover_every_size<dram_classes>();
  for (unsigned c = 0; c < pmem_classes::count; ++c) {
    if (pmem_classes::sizes[c] >= 64) {
      EXPECT_EQ(pmem_classes::sizes[c] % 64, 0u);
    }
  }
}

class PersistentAllocatorTest : public ::testing::Test {
 protected:
  void open_pool(std::uint64_t bytes) {
    auto p = alloc::pool::create<P>(dir_.file("heap.pool"), bytes, layout_for<P>());
    ASSERT_TRUE(p.has_value()) << p.error().to_string();
    pool_.emplace(std::move(p).value());
  }
  heap_t fresh_heap() {
    heap_t heap(*pool_);
    EXPECT_TRUE(heap.finish_recovery());
    return heap;
  }

  scratch_dir dir_;
  std::optional<alloc::pool> pool_;
};

TEST_F(PersistentAllocatorTest, AllocationBeforeRecoveryIsRefused) {
  open_pool(1 << 20);
  heap_t heap(*pool_);
  EXPECT_EQ(heap.allocate(64).code(), errc::invalid_argument);
  EXPECT_EQ(heap.allocate(1 << 20).code(), errc::invalid_argument);
  ASSERT_TRUE(heap.finish_recovery());
  EXPECT_TRUE(heap.allocate(64).has_value());
  EXPECT_EQ(heap.finish_recovery().code(), errc::invalid_argument) << "only once";
}

TEST_F(PersistentAllocatorTest, BlocksAreAlignedSizedAndDisjoint) {
  open_pool(8 << 20);
  heap_t heap = fresh_heap();
  std::map<std::uint64_t, std::uint64_t> taken;  // offset -> end
  std::uint64_t expected_in_use = 0;
  for (std::size_t bytes : {1, 16, 17, 48, 49, 64, 100, 500, 513, 4000, 32768, 32769, 200000}) {
    for (int i = 0; i < 5; ++i) {
      auto b = heap.allocate(bytes);
      ASSERT_TRUE(b.has_value()) << b.error().to_string();
      const std::uint64_t off = b->offset();
      EXPECT_EQ(off % 16, 0u);
      if (bytes > 48) {
        EXPECT_EQ(off % 64, 0u) << bytes;
      }
      const std::size_t usable = heap.usable_size(*b);
      EXPECT_GE(usable, bytes);
      EXPECT_TRUE(pool_->contains(pool_->get(*b), usable));
      EXPECT_GE(off, pool_->heap_begin());
      EXPECT_LE(off + usable, pool_->heap_end());
      auto next = taken.lower_bound(off);
      if (next != taken.end()) {
        EXPECT_LE(off + usable, next->first) << "overlap";
      }
      if (next != taken.begin()) {
        EXPECT_LE(std::prev(next)->second, off) << "overlap";
      }
      taken[off] = off + usable;
      expected_in_use += usable;
    }
  }
  EXPECT_EQ(heap.stats().in_use_bytes, expected_in_use);
  for (auto [off, end] : taken) heap.free(pptr<>(off));
  EXPECT_EQ(heap.stats().in_use_bytes, 0u);
}

TEST_F(PersistentAllocatorTest, LargeBlocksTakeWholeChunksAndGiveThemBack) {
  open_pool(4 << 20);
  heap_t heap = fresh_heap();
  const auto before = heap.stats();
  auto big = heap.allocate(3 * alloc::format::chunk_size + 1);
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(heap.usable_size(*big), 4 * alloc::format::chunk_size);
  EXPECT_EQ(heap.stats().free_chunks, before.free_chunks - 4);
  heap.free(*big);
  EXPECT_EQ(heap.stats().free_chunks, before.free_chunks);
  // The whole heap as one block: only possible if every chunk is free.
  auto all = heap.allocate(before.capacity_bytes);
  ASSERT_TRUE(all.has_value()) << all.error().to_string();
  heap.free(*all);
}

TEST_F(PersistentAllocatorTest, NoSpaceHarmsNothingAndThePoolStaysUsable) {
  open_pool(1 << 20);
  heap_t heap = fresh_heap();
  std::vector<pptr<>> blocks;
  alloc::result<pptr<>> r = pptr<>();
  std::uint32_t stamp = 0;
  while ((r = heap.allocate(4000)).has_value()) {
    blocks.push_back(*r);
    ++stamp;
    P::write_range(pool_->get(*r), &stamp, sizeof stamp, flit::persisted);
  }
  ASSERT_EQ(r.code(), errc::no_space);
  EXPECT_NE(r.error().message().find(pool_->name()), std::string::npos) << "names the pool";
  EXPECT_GT(blocks.size(), 100u);
  EXPECT_EQ(heap.allocate(16).code(), errc::no_space) << "no free chunk for a new class";
  EXPECT_EQ(heap.allocate(std::size_t{1} << 40).code(), errc::no_space);
  EXPECT_EQ(heap.allocate(~std::size_t{0}).code(), errc::no_space);
  for (std::uint32_t i = 0; i < blocks.size(); ++i) {
    std::uint32_t seen;
    std::memcpy(&seen, pool_->get(blocks[i]), sizeof seen);
    ASSERT_EQ(seen, i + 1) << "a failed allocation touched a live block";
  }
  // Free then allocate works, also for another class once a chunk empties.
  for (std::size_t i = 0; i < blocks.size(); i += 2) heap.free(blocks[i]);
  EXPECT_TRUE(heap.allocate(4000).has_value());
  for (std::size_t i = 1; i < blocks.size(); i += 2) heap.free(blocks[i]);
  EXPECT_TRUE(heap.allocate(16).has_value());
}

TEST_F(PersistentAllocatorTest, RecoveryKeepsMarkedBlocksAndFreesTheRest) {
  open_pool(8 << 20);
  std::vector<pptr<>> dropped;
  std::vector<std::pair<pptr<>, std::size_t>> live;  // block, size asked for
  std::uint64_t live_bytes = 0;
  {
    heap_t heap = fresh_heap();
    std::mt19937 rng(7);
    for (int i = 0; i < 600; ++i) {
      const std::size_t bytes = i % 97 == 0 ? 70000 : 16 + rng() % 2000;
      auto b = heap.allocate(bytes);
      ASSERT_TRUE(b.has_value()) << b.error().to_string();
      if (i % 3 == 0) {
        live.push_back({*b, bytes});
        live_bytes += heap.usable_size(*b);
      } else {
        dropped.push_back(*b);  // allocated, never linked
      }
    }
  }  // the allocator goes away as in a crash: nothing of its DRAM state survives
  heap_t heap(*pool_);
  for (auto [b, bytes] : live) ASSERT_TRUE(heap.mark_live(b, bytes));
  ASSERT_TRUE(heap.mark_live(live.front().first, live.front().second))
      << "marking twice is harmless";
  ASSERT_TRUE(heap.finish_recovery());
  EXPECT_EQ(heap.stats().in_use_bytes, live_bytes);

  // Allocate everything there is, whole chunks first, then every class (free blocks of a
  // chunk that keeps live blocks serve only its class): no block overlaps a live one, and
  // every dropped block's space comes back.
  std::vector<std::size_t> sizes = {alloc::format::chunk_size};
  sizes.insert(sizes.end(), pmem_classes::sizes.begin(), pmem_classes::sizes.end());
  std::map<std::uint64_t, std::uint64_t> got;
  for (std::size_t bytes : sizes) {
    alloc::result<pptr<>> r = pptr<>();
    while ((r = heap.allocate(bytes)).has_value()) got[r->offset()] = r->offset() + heap.usable_size(*r);
    ASSERT_EQ(r.code(), errc::no_space);
  }
  auto covered = [&](std::uint64_t off) {
    auto it = got.upper_bound(off);
    return it != got.begin() && std::prev(it)->second > off;
  };
  for (auto [b, bytes] : live) EXPECT_FALSE(covered(b.offset())) << "a live block handed out again";
  for (pptr<> b : dropped) EXPECT_TRUE(covered(b.offset())) << "a dropped block leaked";
}

TEST_F(PersistentAllocatorTest, MarkLiveRejectsWhatIsNotABlock) {
  open_pool(2 << 20);
  pptr<> small, large;
  {
    heap_t heap = fresh_heap();
    small = *heap.allocate(100);
    large = *heap.allocate(100000);
  }
  heap_t heap(*pool_);
  const auto bad = [&](std::uint64_t off) {
    alloc::status s = heap.mark_live(pptr<>(off), 100);
    EXPECT_EQ(s.code(), errc::corruption) << off;
    if (!s) {
      EXPECT_NE(s.error().message().find(std::to_string(off)), std::string::npos);
    }
  };
  bad(8);                                      // the header
  bad(pool_->size() + 64);                     // past the end
  bad(small.offset() + 16);                    // inside a block
  bad(large.offset() + 64);                    // inside a large block
  bad(large.offset() + alloc::format::chunk_size);  // its second chunk
  bad(large.offset() + 4 * alloc::format::chunk_size);  // a chunk never used
  EXPECT_TRUE(heap.mark_live(small, 100));
  EXPECT_TRUE(heap.mark_live(large, 100000));
  EXPECT_TRUE(heap.finish_recovery());
}

// A damaged chunk tag that describes another block size than the live block's is reported:
// trusting it would hand out the rest of the live block again.
TEST_F(PersistentAllocatorTest, MarkLiveRejectsABlockItsTagDoesNotDescribe) {
  open_pool(2 << 20);
  pptr<> small, large;
  {
    heap_t heap = fresh_heap();
    small = *heap.allocate(100);     // a 128-byte block
    large = *heap.allocate(100000);  // two chunks
  }
  heap_t heap(*pool_);
  for (std::size_t wrong : {16u, 64u, 129u, 40000u}) {
    alloc::status s = heap.mark_live(small, wrong);
    EXPECT_EQ(s.code(), errc::corruption) << wrong;
    if (!s) {
      EXPECT_NE(s.error().message().find("tag may be damaged"), std::string::npos);
    }
  }
  EXPECT_EQ(heap.mark_live(large, 200000).code(), errc::corruption);
  EXPECT_EQ(heap.mark_live(large, 1000).code(), errc::corruption);
  EXPECT_TRUE(heap.mark_live(small, 97));  // any size of the same class
  EXPECT_TRUE(heap.mark_live(large, 70000));
  EXPECT_TRUE(heap.finish_recovery());
}

// Threads allocate blocks of mixed sizes, claim every 16-byte granule of each block in a
// shared ownership map (a granule claimed twice is a block handed out twice), stamp it, pass
// some to other threads, and free them after checking the stamp. At the end every chunk is
// free again.
TEST_F(PersistentAllocatorTest, ManyThreadsNeverShareABlockAndLoseNothing) {
  open_pool(8 << 20);
  heap_t heap = fresh_heap();
  const std::uint64_t granules = pool_->size() / 16;
  std::vector<std::atomic<std::uint64_t>> owned((granules + 63) / 64);
  std::atomic<bool> failed{false};
  auto claim = [&](std::uint64_t off, std::size_t n, bool take) {
    for (std::uint64_t g = off / 16; g < (off + n) / 16; ++g) {
      const std::uint64_t bit = std::uint64_t{1} << (g % 64);
      const std::uint64_t old = take ? owned[g / 64].fetch_or(bit) : owned[g / 64].fetch_and(~bit);
      if (((old & bit) != 0) != !take) failed = true;
    }
  };
  struct stamped {
    std::uint64_t off;
    std::uint64_t stamp;
  };
  std::mutex exchange_mutex;
  std::vector<stamped> exchange;

  constexpr int threads = 4;
  constexpr int ops = 20000;
  auto worker = [&](int t) {
    std::mt19937 rng(static_cast<unsigned>(t));
    std::vector<stamped> mine;
    for (int i = 0; i < ops && !failed; ++i) {
      if (mine.size() < 200 && rng() % 3 != 0) {
        const std::size_t bytes = rng() % 500 == 0 ? 40000 + rng() % 100000 : 1 + rng() % 3000;
        auto b = heap.allocate(bytes);
        if (!b) continue;  // no space: others hold the rest
        const std::size_t usable = heap.usable_size(*b);
        claim(b->offset(), usable, true);
        const std::uint64_t stamp = (std::uint64_t(t) << 32) | static_cast<std::uint32_t>(i);
        P::write_range(pool_->get(*b), &stamp, sizeof stamp, flit::volatile_);
        mine.push_back({b->offset(), stamp});
      } else if (!mine.empty()) {
        const std::size_t k = rng() % mine.size();
        stamped s = mine[k];
        mine[k] = mine.back();
        mine.pop_back();
        if (rng() % 4 == 0) {  // give it to another thread to free
          std::lock_guard lock(exchange_mutex);
          exchange.push_back(s);
          continue;
        }
        std::uint64_t seen;
        std::memcpy(&seen, pool_->get(pptr<>(s.off)), sizeof seen);
        if (seen != s.stamp) failed = true;
        claim(s.off, heap.usable_size(pptr<>(s.off)), false);
        heap.free(pptr<>(s.off));
      }
      if (i % 64 == 0) {
        std::lock_guard lock(exchange_mutex);
        for (const stamped& s : exchange) mine.push_back(s);
        exchange.clear();
      }
    }
    for (const stamped& s : mine) {
      claim(s.off, heap.usable_size(pptr<>(s.off)), false);
      heap.free(pptr<>(s.off));
    }
  };
  std::vector<std::thread> pool_threads;
  for (int t = 0; t < threads; ++t) pool_threads.emplace_back(worker, t);
  for (std::thread& th : pool_threads) th.join();
  std::thread([&] {
    for (const stamped& s : exchange) {
      claim(s.off, heap.usable_size(pptr<>(s.off)), false);
      heap.free(pptr<>(s.off));
    }
  }).join();
  EXPECT_FALSE(failed) << "a block was handed out twice or overwritten";
  EXPECT_EQ(heap.stats().in_use_bytes, 0u);
  const auto s = heap.stats();
  EXPECT_EQ(s.free_chunks, s.chunks) << "exited threads' caches came back: nothing lost";
  std::thread([&] { EXPECT_TRUE(heap.allocate(s.capacity_bytes).has_value()); }).join();
}

// ---- huge pages (pool::huge_page_hint) -------------------------------------------

constexpr std::uint64_t kHugePage = std::uint64_t{2} << 20;

// What /proc/self/smaps says of the mapping that starts at `base`: its resident bytes, and
// how many of them huge page-table entries map.
struct mapped_pages {
  bool found = false;
  std::uint64_t resident = 0;
  std::uint64_t huge = 0;
};
mapped_pages pages_of(const void* base) {
  std::ifstream smaps("/proc/self/smaps");
  mapped_pages m;
  bool in = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2) {  // a mapping's first line
      if (in) break;
      in = begin == reinterpret_cast<std::uintptr_t>(base);
      m.found = m.found || in;
      continue;
    }
    if (!in) continue;
    std::uint64_t kib = 0;
    if (std::sscanf(line.c_str(), "Rss: %lu kB", &kib) == 1) m.resident = kib << 10;
    if (std::sscanf(line.c_str(), "ShmemPmdMapped: %lu kB", &kib) == 1) m.huge += kib << 10;
    if (std::sscanf(line.c_str(), "FilePmdMapped: %lu kB", &kib) == 1) m.huge += kib << 10;
  }
  return m;
}

// Whether this kernel collapses a tmpfs file's pages into a huge page on request: asked of a
// file of its own in `dir`, not of a pool.
bool kernel_collapses_tmpfs(const std::filesystem::path& dir) {
  const std::string file = (dir / "probe").string();
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = false;
  if (::ftruncate(fd, static_cast<off_t>(2 * kHugePage)) == 0) {
    // A 2 MiB-aligned window of a larger reservation.
    void* room = ::mmap(nullptr, 3 * kHugePage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (room != MAP_FAILED) {
      auto at = (reinterpret_cast<std::uintptr_t>(room) + kHugePage - 1) / kHugePage * kHugePage;
      void* p = ::mmap(reinterpret_cast<void*>(at), kHugePage, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_FIXED, fd, 0);
      if (p != MAP_FAILED) {
        std::memset(p, 1, 4096);
        ok = ::madvise(p, kHugePage, 25 /* MADV_COLLAPSE */) == 0;
      }
      ::munmap(room, 3 * kHugePage);
    }
  }
  ::close(fd);
  ::unlink(file.c_str());
  return ok;
}

TEST_F(PersistentAllocatorTest, ThePartOfAPoolFileInUseIsBackedByHugePages) {
  if (!kernel_collapses_tmpfs(dir_.path())) {
    GTEST_SKIP() << "this kernel does not collapse tmpfs pages into huge pages (Linux 6.1 "
                    "or later, shmem_enabled not deny)";
  }
  constexpr std::uint64_t kPool = 64 << 20;
  open_pool(kPool);
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(pool_->base()) % kHugePage, 0u)
      << "libpmem2 maps a pool this size at a 2 MiB boundary";
  // About 10 MiB of small blocks, each filled with its own bytes.
  std::vector<std::pair<pptr<>, std::size_t>> blocks;
  std::uint64_t used_end = 0;
  const alloc::pool* live = &*pool_;
  auto fill = [&](pptr<> b, std::size_t n) {
    std::memset(live->get(b), static_cast<int>(b.offset() / 64 % 251), n);
  };
  auto intact = [&](pptr<> b, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(live->get(b));
    return std::all_of(p, p + n, [&](unsigned char c) { return c == b.offset() / 64 % 251; });
  };
  {
    std::optional<alloc::pool> moved;
    heap_t heap = fresh_heap();
    // The pool object moves while the heap uses it (as pool_memory's does), and the old one
    // is gone: what the heap keeps of it must stay put.
    moved.emplace(std::move(*pool_));
    pool_.reset();
    live = &*moved;
    for (int i = 0; i < 80000; ++i) {
      const std::size_t bytes = 128;
      auto b = heap.allocate(bytes);
      ASSERT_TRUE(b.has_value()) << b.error().to_string();
      fill(*b, bytes);
      blocks.push_back({*b, bytes});
      used_end = std::max(used_end, b->offset() + bytes);
    }
    ASSERT_GE(used_end, 4 * kHugePage);
    EXPECT_GE(live->TEST_await_huge_pages(), used_end / kHugePage * kHugePage);
    const mapped_pages m = pages_of(live->base());
    ASSERT_TRUE(m.found);
    EXPECT_GE(m.huge, used_end / kHugePage * kHugePage)
        << "every whole 2 MiB region below the last block in use is one huge page";
    EXPECT_LE(m.resident, (used_end / kHugePage + 2) * kHugePage)
        << "regions beyond the one after the last block in use stay unbacked: resident "
           "memory follows the use of the pool, not its size";
    for (auto [b, n] : blocks) ASSERT_TRUE(intact(b, n)) << "offset " << b.offset();
  }
  // Reopened, the regions the recovered blocks are in are backed again.
  auto reopened = alloc::pool::open(dir_.file("heap.pool"), layout_for<P>());
  ASSERT_TRUE(reopened.has_value()) << reopened.error().to_string();
  pool_.emplace(std::move(reopened).value());
  live = &*pool_;
  heap_t heap(*pool_);
  for (auto [b, n] : blocks) ASSERT_TRUE(heap.mark_live(b, n));
  ASSERT_TRUE(heap.finish_recovery());
  EXPECT_GE(pool_->TEST_await_huge_pages(), used_end / kHugePage * kHugePage);
  const mapped_pages m = pages_of(pool_->base());
  EXPECT_GE(m.huge, used_end / kHugePage * kHugePage);
  EXPECT_LE(m.resident, (used_end / kHugePage + 2) * kHugePage);
  for (auto [b, n] : blocks) ASSERT_TRUE(intact(b, n)) << "offset " << b.offset();
}

}  // namespace
