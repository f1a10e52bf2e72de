// The volatile index (index.hpp) on its own: the skiplist with its point table and back links.
//  - IndexTest: entries inserted and removed at random against std::set: find() and lookup()
//    answer for every key, and check() (prev() is the level-0 predecessor, every entry is in
//    the point table) holds through growth and through tables full of erased slots. check()
//    catches a broken back link and an entry missing from the table.
//  - IndexTest.ThePointTableShrinksWhenMostEntriesAreRemoved: its DRAM comes back.
//  - IndexTest.FindFallsBackToTheSearch: an entry the point table does not hold, or holds
//    removed, is still found by the search (the table is an accelerator, never the truth).
//  - IndexConcurrencyTest: readers look up a fixed set of keys while the writer inserts and
//    removes others, so the table grows, shrinks and is rebuilt under them; every lookup of
//    a fixed key finds its entry, and AddressSanitizer sees no replaced table read after it
//    is freed.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "allocators/epoch.hpp"
#include "flintkv/internal/index.hpp"

namespace {

using flintkv::internal::inode;
using flintkv::internal::kMaxHeight;
using flintkv::internal::skiplist;

// A skiplist whose entries live in malloc'd memory, all freed at the end (removed entries
// too: readers may stand on them, as they may in the engine until the epochs free them).
class test_index {
 public:
  test_index() : head_(std::malloc(inode::size_for(kMaxHeight, 0))), list_(head_, 0, epochs_) {}
  ~test_index() {
    for (void* m : memory_) std::free(m);
    std::free(head_);
  }

  skiplist& list() { return list_; }
  alloc::epoch_domain& epochs() { return epochs_; }

  // Inserts `key` (not in the index). REQUIRES: the one writer.
  inode* insert(const std::string& key, int height) {
    inode* preds[kMaxHeight];
    inode* succs[kMaxHeight];
    list_.locate(key, preds, succs);
    void* m = std::malloc(inode::size_for(height, key.size()));
    memory_.push_back(m);
    inode* n = inode::make(m, height, key, {1, 64, 0, false});
    list_.insert(n, preds);
    return n;
  }
  // Appends `key` (larger than every key so far) as recovery does.
  inode* append(const std::string& key, int height) {
    void* m = std::malloc(inode::size_for(height, key.size()));
    memory_.push_back(m);
    inode* n = inode::make(m, height, key, {1, 64, 0, false});
    list_.append(n);
    return n;
  }

 private:
  alloc::epoch_domain epochs_;
  void* head_;
  skiplist list_;
  std::vector<void*> memory_;
};

std::string key_of(std::uint64_t i) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "key%016llu", static_cast<unsigned long long>(i));
  return buf;
}

int height_for(std::mt19937_64& rng) { return 1 + std::countr_one(rng()) % 12; }

// key_hash takes whole words through the inline instruction and the rest through the bulk
// function: it must stay the key's CRC-32C seeded with its size, at every length and
// alignment (a word read at the wrong offset or a dropped tail byte changes it).
TEST(IndexTest, KeyHashIsTheKeysCrc32cSeededWithItsSize) {
  std::mt19937_64 rng(11);
  std::string buffer(80, '\0');
  for (char& c : buffer) c = static_cast<char>(rng());
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t size = 0; size + offset <= 72; ++size) {
      const std::string_view key(buffer.data() + offset, size);
      EXPECT_EQ(flintkv::internal::key_hash(key),
                flintkv::internal::crc32c(~static_cast<std::uint32_t>(size), key.data(), size))
          << "size " << size << ", offset " << offset;
    }
  }
}

TEST(IndexTest, RandomInsertsAndRemovesKeepFindLookupAndBackLinksRight) {
  test_index index;
  skiplist& list = index.list();
  auto pinned = index.epochs().pin();
  std::mt19937_64 rng(7);
  std::set<std::string> present;
  // Grows to a few thousand keys (several table sizes), then shrinks and grows again, so
  // erased slots pile up and tables are rebuilt.
  for (int step = 0; step < 40000; ++step) {
    const std::uint64_t universe = step < 20000 ? 4000 : 600;
    const std::string k = key_of(rng() % universe);
    const bool grow = step < 10000 || (step >= 20000 && step < 30000) ? rng() % 4 != 0
                                                                       : rng() % 4 == 0;
    inode* found = list.find(k);
    ASSERT_EQ(found != nullptr, present.count(k) != 0) << k << " at step " << step;
    if (found != nullptr) {
      ASSERT_EQ(found->key(), k);
      ASSERT_EQ(list.lookup(k), found) << "a live entry is in the point table";
      if (!grow) {
        list.remove(found);
        present.erase(k);
        ASSERT_EQ(list.find(k), nullptr);
        ASSERT_EQ(list.lookup(k), nullptr);
      }
    } else if (grow) {
      index.insert(k, height_for(rng));
      present.insert(k);
    }
    if (step % 997 == 0) {
      ASSERT_EQ(list.check(), "") << "at step " << step;
    }
  }
  ASSERT_EQ(list.check(), "");
  EXPECT_GT(list.point_table_bytes(), 0u);
}

// Deleting most keys gives the point table's DRAM back: it is rebuilt at the size its
// remaining entries need, and still finds each of them.
TEST(IndexTest, ThePointTableShrinksWhenMostEntriesAreRemoved) {
  test_index index;
  skiplist& list = index.list();
  auto pinned = index.epochs().pin();
  std::mt19937_64 rng(5);
  std::vector<inode*> entries;
  for (std::uint64_t i = 0; i < 8000; ++i) {
    entries.push_back(index.insert(key_of(i), height_for(rng)));
  }
  const std::size_t full = list.point_table_bytes();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i % 500 != 0) list.remove(entries[i]);
  }
  EXPECT_LE(list.point_table_bytes() * 16, full)
      << "16 of 8000 entries left: the table was " << full << " bytes";
  for (std::uint64_t i = 0; i < 8000; i += 500) {
    EXPECT_EQ(list.lookup(key_of(i)), entries[i]) << key_of(i);
  }
  EXPECT_EQ(list.check(), "");
}

TEST(IndexTest, BulkBuildFillsThePointTableAndBackLinks) {
  test_index index;
  skiplist& list = index.list();
  std::mt19937_64 rng(8);
  for (std::uint64_t i = 0; i < 5000; ++i) index.append(key_of(i * 3), height_for(rng));
  list.finish_build();
  auto pinned = index.epochs().pin();
  EXPECT_EQ(list.check(), "");
  for (std::uint64_t i = 0; i < 15000; ++i) {
    const inode* n = list.lookup(key_of(i));
    ASSERT_EQ(n != nullptr, i % 3 == 0) << key_of(i);
    if (n != nullptr) {
      EXPECT_EQ(n->key(), key_of(i));
    }
  }
}

TEST(IndexTest, CheckCatchesABrokenBackLinkAndAnEntryMissingFromThePointTable) {
  test_index index;
  skiplist& list = index.list();
  auto pinned = index.epochs().pin();
  inode* a = index.insert("a", 1);
  inode* b = index.insert("b", 2);
  index.insert("c", 1);
  ASSERT_EQ(list.check(), "");
  // An entry whose back link skips its predecessor.
  b->set_prev(list.head());
  EXPECT_NE(list.check().find("'b': prev()"), std::string::npos) << list.check();
  b->set_prev(a);
  ASSERT_EQ(list.check(), "");
  // An entry linked into the skiplist behind the point table's back: the search finds it,
  // the table does not, and check() says so.
  inode* preds[kMaxHeight];
  inode* succs[kMaxHeight];
  list.locate("bb", preds, succs);
  void* m = std::malloc(inode::size_for(1, 2));
  inode* hidden = inode::make(m, 1, "bb", {1, 64, 0, false});
  hidden->next(0).store(succs[0]);
  preds[0]->next(0).store(hidden);
  hidden->set_prev(preds[0]);
  succs[0]->set_prev(hidden);
  EXPECT_EQ(list.find("bb"), hidden) << "find falls back to the search";
  EXPECT_NE(list.check().find("'bb' is not in the point table"), std::string::npos)
      << list.check();
  preds[0]->next(0).store(succs[0]);
  succs[0]->set_prev(preds[0]);
  std::free(m);
}

TEST(IndexTest, FindFallsBackToTheSearchForARemovedTableEntry) {
  test_index index;
  skiplist& list = index.list();
  auto pinned = index.epochs().pin();
  inode* old = index.insert("k", 1);
  // A reader that took `old` from the table just before its removal must not trust it:
  // marked removed, the table lookup gives nothing and find() searches.
  old->removed.store(true);
  EXPECT_EQ(list.lookup("k"), nullptr);
  EXPECT_EQ(list.find("k"), old) << "the search still reaches it (it was never unlinked here)";
  old->removed.store(false);
  EXPECT_EQ(list.lookup("k"), old);
}

TEST(IndexConcurrencyTest, LookupsOfStableKeysSucceedWhileTheTableGrowsAndIsRebuilt) {
  test_index index;
  skiplist& list = index.list();
  constexpr int kStable = 64;
  std::vector<inode*> stable;
  {
    auto pinned = index.epochs().pin();
    std::mt19937_64 rng(9);
    for (int i = 0; i < kStable; ++i) {
      stable.push_back(index.insert(key_of(static_cast<std::uint64_t>(i) * 1000003),
                                    height_for(rng)));
    }
  }
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> misses{0}, lookups{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      while (!stop.load(std::memory_order_relaxed)) {
        auto pinned = index.epochs().pin();
        const int i = static_cast<int>(rng() % kStable);
        if (list.find(key_of(static_cast<std::uint64_t>(i) * 1000003)) != stable[i]) {
          misses.fetch_add(1);
        }
        lookups.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  // The writer: thousands of other keys come and go, growing the table several times,
  // rebuilding it over erased slots, and shrinking it as the others leave (64 stable keys
  // are below 1/16 of the grown table); each replaced table is retired through the epochs.
  std::mt19937_64 rng(10);
  std::vector<inode*> others;
  for (int round = 0; round < 6; ++round) {
    // Each round starts once the readers have looked up more since the last one.
    const std::uint64_t seen = lookups.load();
    while (lookups.load() < seen + 100) std::this_thread::yield();
    for (int i = 0; i < 3000; ++i) {
      auto pinned = index.epochs().pin();
      const std::string k = "other" + std::to_string(round) + "." + std::to_string(i);
      others.push_back(index.insert(k, height_for(rng)));
    }
    for (inode* n : others) {
      auto pinned = index.epochs().pin();
      list.remove(n);
    }
    others.clear();
    index.epochs().collect();
  }
  stop.store(true);
  for (auto& r : readers) r.join();
  EXPECT_EQ(misses.load(), 0u) << "of " << lookups.load() << " lookups";
  EXPECT_GT(lookups.load(), 0u);
  auto pinned = index.epochs().pin();
  EXPECT_EQ(list.check(), "");
}

}  // namespace
