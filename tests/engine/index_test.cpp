// The volatile index (index.hpp) on its own: the sorted list with its tree, point table and
// back links.
//  - IndexTest: entries inserted and removed at random against std::set: find() and lookup()
//    answer for every key, and check() (prev() is the list predecessor, every entry is in
//    the point table and the tree) holds through growth and through tables full of erased
//    slots. check() catches a broken back link and an entry missing from the table; a
//    search walks on past an entry the tree lacks.
//  - IndexTest.AnEntryGivesBackTheNewestVersionItWasGiven: the packed newest version.
//  - IndexTest.ThePointTableShrinksWhenMostEntriesAreRemoved: its DRAM comes back.
//  - IndexTest.ThePointTableGrowsIntoTheSpareWritersPrepared: growth takes the table that
//    prepare_insert() made beforehand.
//  - IndexTest.ThePointTableHelperMakesTheLargeSpares: spares of a megabyte and more come
//    from the table's helper thread, and growth takes them even when they land late.
//  - IndexTest.AGrownPointTableDrainsTheOldOneAFewSlotsAtATime: lookups through the table
//    alone find every key while the old table drains into the grown one.
//  - IndexTest.ALocateForAnUpdateFindsTheSameNeighboursEitherWay: through the point table
//    or, for a writer expecting a new key, by a search alone.
//  - IndexTest.FindFallsBackToTheSearch: an entry the point table does not hold, or holds
//    removed, is still found by the search (the table is an accelerator, never the truth).
//  - IndexConcurrencyTest: readers look up a fixed set of keys while the writer inserts and
//    removes others, so the table grows (draining the old one), shrinks and is rebuilt under
//    them; every lookup of a fixed key finds its entry, and AddressSanitizer sees no
//    replaced table read after it is freed.
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
#include "allocators/node_allocator.hpp"
#include "flintkv/internal/index.hpp"

namespace {

using flintkv::internal::entry_node_tag;
using flintkv::internal::inode;
using flintkv::internal::key_index;

// An index whose entries live in malloc'd memory, all freed at the end (removed entries
// too: readers may stand on them, as they may in the engine until the epochs free them).
class test_index {
 public:
  test_index() : head_(std::malloc(inode::size_for(0))), list_(head_, 0, dram_, epochs_) {}
  ~test_index() {
    for (void* m : memory_) std::free(m);
    std::free(head_);
  }

  key_index& list() { return list_; }
  alloc::epoch_domain& epochs() { return epochs_; }

  // Inserts `key` (not in the index), its newest version's node at `pnode` (a delete if
  // `tombstone`). REQUIRES: the one writer.
  inode* insert(const std::string& key, std::uint64_t pnode = 64, bool tombstone = false) {
    inode* pred = nullptr;
    inode* after = nullptr;
    list_.locate(key, &pred, &after);
    void* m = std::malloc(inode::size_for(key.size()));
    memory_.push_back(m);
    inode* n = inode::make(m, key, {1, pnode, 0, tombstone});
    list_.insert(n, pred);
    return n;
  }
  // An entry for `key`, linked nowhere (freed with the index).
  inode* detached(const std::string& key) {
    void* m = std::malloc(inode::size_for(key.size()));
    memory_.push_back(m);
    return inode::make(m, key, {1, 64, 0, false});
  }
  // Appends `key` (larger than every key so far) as recovery does.
  inode* append(const std::string& key, std::uint64_t pnode = 64, bool tombstone = false) {
    void* m = std::malloc(inode::size_for(key.size()));
    memory_.push_back(m);
    inode* n = inode::make(m, key, {1, pnode, 0, tombstone});
    list_.append(n);
    return n;
  }

 private:
  alloc::node_allocator dram_;  // the tree's nodes
  alloc::epoch_domain epochs_;
  void* head_;
  key_index list_;
  std::vector<void*> memory_;
};

std::string key_of(std::uint64_t i) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "key%016llu", static_cast<unsigned long long>(i));
  return buf;
}

// An entry packs its newest version into two words (the value size split around the
// version and the node offset): what publish() is given, newest() and visible_at() give
// back, at the largest version, offset and value size too, tombstone or not.
TEST(IndexTest, AnEntryGivesBackTheNewestVersionItWasGiven) {
  using flintkv::internal::version_ref;
  constexpr std::uint64_t kTop = flintkv::internal::kPayloadMask;
  const std::string key = "0123456789abcdef";
  alignas(16) unsigned char memory[inode::size_for(16)];
  static_assert(sizeof memory == 80);
  const version_ref first{7, 4096, 64, false};
  inode* e = inode::make(memory, key, first);
  EXPECT_EQ(e->key(), key);
  EXPECT_EQ(e->tail_pnode(), 4096u);
  std::mt19937_64 rng(12);
  std::vector<version_ref> cases = {{1, 64, 0, true},
                                    {kTop, kTop, flintkv::kMaxValueSize, false},
                                    {kTop, kTop, flintkv::kMaxValueSize, true},
                                    {kTop - 1, 128, 0xffff, false},
                                    {5, kTop - 63, 0x10000, true}};
  for (int i = 0; i < 1000; ++i) {
    cases.push_back({rng() & kTop, rng() & kTop,
                     static_cast<std::uint32_t>(rng() % (flintkv::kMaxValueSize + 1)),
                     (rng() & 1) != 0});
  }
  flintkv::internal::vrec not_a_chain{};
  for (const version_ref& v : cases) {
    e->publish(v, nullptr);
    flintkv::internal::vrec* chain = &not_a_chain;
    const version_ref got = e->newest(&chain);
    EXPECT_EQ(got.version, v.version);
    EXPECT_EQ(got.pnode, v.pnode);
    EXPECT_EQ(got.value_size, v.value_size) << v.version << " " << v.pnode;
    EXPECT_EQ(got.tombstone, v.tombstone);
    EXPECT_EQ(chain, nullptr);
    const auto seen = e->visible_at(v.version);
    ASSERT_TRUE(seen.has_value());
    EXPECT_EQ(seen->value_size, v.value_size);
  }
  EXPECT_EQ(e->key(), key) << "the state does not overlap the key";
  EXPECT_EQ(e->tail_pnode(), 4096u);
}

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
  key_index& list = index.list();
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
      index.insert(k);
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
  key_index& list = index.list();
  auto pinned = index.epochs().pin();
  std::vector<inode*> entries;
  for (std::uint64_t i = 0; i < 8000; ++i) {
    entries.push_back(index.insert(key_of(i)));
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

// Writers make the point table's next table before they take the combiner lock
// (prepare_insert), once the table nears its grow point; growing then takes that spare
// instead of mapping (and waiting for the kernel to zero) a table under the lock.
TEST(IndexTest, ThePointTableGrowsIntoTheSpareWritersPrepared) {
  test_index index;
  key_index& list = index.list();
  auto pinned = index.epochs().pin();
  int growths = 0, into_spare = 0;
  for (std::uint64_t i = 0; i < 20000; ++i) {
    list.prepare_insert();
    const auto [table, spare] = list.TEST_point_tables();
    index.insert(key_of(i * 7919 % 20000));
    const auto [grown, left] = list.TEST_point_tables();
    if (table != nullptr && grown != table) {
      ++growths;
      if (grown == spare) ++into_spare;
      EXPECT_EQ(left, nullptr) << "the spare was taken at " << i;
    }
  }
  EXPECT_GE(growths, 5);
  EXPECT_EQ(into_spare, growths);
  EXPECT_EQ(list.check(), "");
}

// A spare of a megabyte or more is made by the table's helper thread, which a writer's
// prepare_insert() only wakes, so that no put waits for the kernel to map and zero it.
// Growing takes it even if it comes at the grow point itself: growth waits for the helper
// then rather than map a second table under the lock.
TEST(IndexTest, ThePointTableHelperMakesTheLargeSpares) {
  test_index index;
  key_index& list = index.list();
  auto pinned = index.epochs().pin();
  constexpr std::uint64_t kKeys = 200000;  // the last growths need spares of 1 to 4 MiB
  int growths = 0, into_spare = 0;
  for (std::uint64_t i = 0; i < kKeys; ++i) {
    list.prepare_insert();
    if (i % 2 == 0) list.TEST_await_point_helper();  // half the spares are ready early
    const auto [table, spare] = list.TEST_point_tables();
    index.insert(key_of(i * 7919 % kKeys));
    const auto [grown, left] = list.TEST_point_tables();
    if (table != nullptr && grown != table) {
      ++growths;
      // The helper's spare may land only in the growth, so compare with the sizes: a table
      // it took is the spare it was given, not one mapped under the lock.
      if (spare == nullptr || grown == spare) ++into_spare;
      EXPECT_EQ(left, nullptr) << "the spare was taken at " << i;
    }
  }
  const auto [by_helper, by_writers] = list.TEST_point_spares_made();
  EXPECT_GE(by_helper, 2u) << "the spares of 1 MiB and more";
  EXPECT_GE(by_writers, 5u) << "the small spares";
  EXPECT_EQ(by_helper + by_writers, static_cast<std::size_t>(growths))
      << "every growth took a spare";
  EXPECT_EQ(into_spare, growths);
  for (std::uint64_t i = 0; i < kKeys; i += 997) {
    const inode* n = list.lookup(key_of(i));
    ASSERT_NE(n, nullptr) << key_of(i);
    EXPECT_EQ(n->key(), key_of(i));
  }
  EXPECT_EQ(list.check(), "");
}

// Growing does not move every slot at once: the grown table takes the inserts and the old
// one drains into it a few slots per write, while lookups through the table alone find
// every key in one or the other. Erasing keys meanwhile, and storing newest words of keys
// moved or not, keep both tables consistent (check(): each slot's newest word is its
// entry's newest version).
TEST(IndexTest, AGrownPointTableDrainsTheOldOneAFewSlotsAtATime) {
  test_index index;
  key_index& list = index.list();
  auto pinned = index.epochs().pin();
  constexpr std::uint64_t kKeys = 60000;
  std::vector<inode*> entries(kKeys, nullptr);
  std::set<std::uint64_t> live;
  int drains_seen = 0, growths = 0;
  std::size_t most_draining = 0;
  for (std::uint64_t i = 0; i < kKeys; ++i) {
    const std::uint64_t k = i * 7919 % kKeys;
    const auto [table, spare] = list.TEST_point_tables();
    entries[k] = index.insert(key_of(k));
    live.insert(k);
    if (list.TEST_point_tables().first != table && table != nullptr) ++growths;
    const std::size_t draining = list.TEST_point_draining_entries();
    most_draining = std::max(most_draining, draining);
    if (draining == 0) continue;
    ++drains_seen;
    // While a table drains: every fifth key leaves, every third gets a new version (its
    // newest word stored wherever its slot is), and every live key is found through the
    // table alone.
    if (i % 5 == 0) {
      const std::uint64_t gone = *live.begin();
      list.remove(entries[gone]);
      live.erase(gone);
    }
    if (i % 3 == 0) {
      inode* e = entries[*live.rbegin()];
      e->publish({i + 2, 64 * (i + 2), 8, false}, nullptr);
      list.set_newest(e);
    }
    if (drains_seen % 50 == 1) {
      for (std::uint64_t key : live) {
        ASSERT_EQ(list.lookup(key_of(key)), entries[key])
            << key_of(key) << " after insert " << i << ", " << draining << " entries draining";
      }
      ASSERT_EQ(list.check(), "") << "after insert " << i;
    }
  }
  EXPECT_GE(growths, 8);
  EXPECT_GT(drains_seen, 1000) << "inserts made while an old table drained";
  EXPECT_GT(most_draining, 1000u) << "a growth left most slots to drain";
  EXPECT_EQ(list.check(), "");
}

// Recovery's build places the slots a few entries behind the requests for their lines:
// sizes below, at and above that distance, and a large one.
// (The last size makes the point table on a thread of its own, beside the tree.)
TEST(IndexTest, BulkBuildFillsThePointTableAndBackLinks) {
  for (const std::uint64_t keys : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{15},
                                   std::uint64_t{16}, std::uint64_t{17}, std::uint64_t{5000},
                                   std::uint64_t{key_index::kParallelBuild} + 1}) {
    test_index index;
    key_index& list = index.list();
    for (std::uint64_t i = 0; i < keys; ++i) index.append(key_of(i * 3));
    list.finish_build();
    auto pinned = index.epochs().pin();
    EXPECT_EQ(list.check(), "") << keys << " keys";
    for (std::uint64_t i = 0; i < 3 * keys + 3; ++i) {
      const inode* n = list.lookup(key_of(i));
      ASSERT_EQ(n != nullptr, i % 3 == 0 && i < 3 * keys) << key_of(i) << " of " << keys;
      if (n != nullptr) {
        EXPECT_EQ(n->key(), key_of(i));
      }
    }
  }
}

TEST(IndexTest, CheckCatchesABrokenBackLinkAndAnEntryMissingFromThePointTable) {
  test_index index;
  key_index& list = index.list();
  auto pinned = index.epochs().pin();
  inode* a = index.insert("a");
  inode* b = index.insert("b");
  index.insert("c");
  ASSERT_EQ(list.check(), "");
  // An entry whose back link skips its predecessor.
  b->set_prev(list.head());
  EXPECT_NE(list.check().find("'b': prev()"), std::string::npos) << list.check();
  b->set_prev(a);
  ASSERT_EQ(list.check(), "");
  // An entry linked into the list behind the point table's and the tree's backs: the
  // search finds it (walking on from the tree's answer), the table does not, and check()
  // says so. (find trusts the table's miss, which holds every entry it was given.)
  inode* pred = nullptr;
  inode* after = nullptr;
  list.locate("bb", &pred, &after);
  inode* hidden = index.detached("bb");
  hidden->set_next(after);
  pred->set_next(hidden);
  hidden->set_prev(pred);
  after->set_prev(hidden);
  EXPECT_EQ(list.last_below("c"), hidden) << "the search walks on past the tree's answer";
  EXPECT_NE(list.check().find("'bb' is not in the point table"), std::string::npos)
      << list.check();
  pred->set_next(after);
  after->set_prev(pred);
}

// Seek's one descent (seek_ahead): the first entry at or after the key, and the entries from
// it on in key order.
TEST(IndexTest, SeekAheadGivesTheFirstEntryAtOrAfterTheKeyAndThoseThatFollow) {
  test_index index;
  key_index& list = index.list();
  auto pinned = index.epochs().pin();
  std::vector<inode*> entries;
  for (std::uint64_t i = 0; i < 100; ++i) entries.push_back(index.insert(key_of(i * 2)));
  key_index::ahead out[12];
  std::size_t got = 0;
  EXPECT_EQ(list.seek_ahead(key_of(10), out, 12, &got), entries[5]) << "a key it holds";
  ASSERT_EQ(got, 12u);
  for (std::size_t i = 0; i < got; ++i) EXPECT_EQ(out[i].entry, entries[5 + i]) << i;
  EXPECT_EQ(list.seek_ahead(key_of(11), out, 12, &got), entries[6]) << "a key it lacks";
  EXPECT_EQ(list.seek_ahead(key_of(197), out, 12, &got), entries[99]);
  EXPECT_EQ(got, 1u);
  EXPECT_EQ(list.seek_ahead(key_of(199), out, 12, &got), nullptr) << "past the last key";
  EXPECT_EQ(got, 0u);
}

// The tree's read-ahead gives each entry with its key's size and first bytes and its tag:
// where its newest node was when it went into the tree, by an insert or recovery's build,
// in 64-byte units (0 past 2^38 bytes, and for a delete). A later version leaves the tag as
// it was (a stale hint: update_marks then tells a scan to ask the entry).
TEST(IndexTest, TheTreeTagsEachEntryWithItsNodeWhenItWentIn) {
  constexpr std::uint64_t kFar = std::uint64_t{1} << 40;  // beyond what a tag can name
  constexpr std::uint64_t kDelete = 9;                     // its newest version a delete
  auto pnode_of = [&](std::uint64_t i) { return i == 7 ? kFar : 64 * (i + 1) + 64 * 1024 * i; };
  auto expect_tags = [&](key_index& list, const std::vector<inode*>& entries) {
    key_index::ahead out[12];
    std::size_t got = 0;
    ASSERT_EQ(list.seek_ahead(key_of(0), out, 12, &got), entries[0]);
    ASSERT_EQ(got, 12u);
    for (std::size_t i = 0; i < got; ++i) {
      EXPECT_EQ(out[i].entry, entries[i]) << i;
      EXPECT_EQ(out[i].key_size, key_of(i).size()) << i;
      EXPECT_EQ(out[i].pre, flintkv::internal::btree_layout::prefix_of(key_of(i))) << i;
      EXPECT_EQ(out[i].tag, i == 7 || i == kDelete ? 0u : pnode_of(i) / 64) << i;
      if (i != 7 && i != kDelete) {
        EXPECT_EQ(entry_node_tag::node(out[i].tag), pnode_of(i)) << i;
      }
    }
  };
  {
    test_index index;
    auto pinned = index.epochs().pin();
    std::vector<inode*> entries(20);
    for (std::uint64_t i : {5, 0, 19, 7, 3, 12, 1, 2, 4, 6, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18}) {
      entries[i] = index.insert(key_of(i), pnode_of(i), i == kDelete);
    }
    entries[2]->publish({2, 64 * 4096, 0, false}, nullptr);
    expect_tags(index.list(), entries);
  }
  {
    test_index index;
    std::vector<inode*> entries;
    for (std::uint64_t i = 0; i < 20; ++i) {
      entries.push_back(index.append(key_of(i), pnode_of(i), i == kDelete));
    }
    index.list().finish_build();
    auto pinned = index.epochs().pin();
    expect_tags(index.list(), entries);
  }
}

// Every entry's tag is current until the combiner marks the entry as updated; a mark stays.
TEST(IndexTest, AnEntryTagIsCurrentUntilItsEntryIsMarked) {
  test_index index;
  key_index& list = index.list();
  auto pinned = index.epochs().pin();
  std::vector<inode*> entries;
  for (std::uint64_t i = 0; i < 64; ++i) entries.push_back(index.insert(key_of(i)));
  for (inode* e : entries) EXPECT_TRUE(list.tag_current(e));
  for (std::size_t i = 0; i < entries.size(); i += 3) {
    list.mark_updated(entries[i]);
    list.mark_updated(entries[i]);  // marking again changes nothing
  }
  std::size_t current = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i % 3 == 0) {
      EXPECT_FALSE(list.tag_current(entries[i])) << i;
    } else {
      current += list.tag_current(entries[i]);  // unless it shares a marked bit
    }
  }
  EXPECT_GE(current, 40u) << "of 42 unmarked entries, in 2^18 bits";
}

// An entry the tree has no DRAM for (insert's fallback, reached through the test hook) is
// still found: searches walk on along the list past the tree's answer, and seek_ahead, which
// trusts the tree only while it holds every entry, searches instead.
TEST(IndexTest, AnEntryTheTreeLacksIsFoundBySearchesAndSeeks) {
  test_index index;
  key_index& list = index.list();
  auto pinned = index.epochs().pin();
  inode* c = index.insert("c");
  inode* b = index.detached("b");
  list.TEST_insert_without_tree(b, list.head());  // before c
  EXPECT_EQ(list.last_below("bb"), b);
  EXPECT_EQ(list.last_below("c"), b);
  EXPECT_EQ(list.find("b"), b);
  key_index::ahead out[12];
  std::size_t got = 0;
  EXPECT_EQ(list.seek_ahead("b", out, 12, &got), b);
  EXPECT_EQ(list.seek_ahead("ab", out, 12, &got), b) << "not c, which the tree would give";
  EXPECT_EQ(list.seek_ahead("bb", out, 12, &got), c);
  EXPECT_EQ(list.check(), "") << "an incomplete tree is allowed";
}

// An entry the point table has no DRAM for (insert's fallback, through the test hook) is
// still found: once the table lacks an entry, its misses are not sure, and find searches.
// Before that, a miss of a key the index lacks is answered without a search.
TEST(IndexTest, AnEntryThePointTableLacksIsFoundBySearches) {
  test_index index;
  key_index& list = index.list();
  auto pinned = index.epochs().pin();
  index.insert("a");
  inode* c = index.insert("c");
  EXPECT_EQ(list.find("b"), nullptr);
  inode* b = index.detached("b");
  list.TEST_insert_without_table(b, list.find("a"));
  EXPECT_EQ(list.lookup("b"), nullptr) << "the table lacks it";
  EXPECT_EQ(list.find("b"), b) << "the table's miss is no longer sure";
  EXPECT_EQ(list.find("c"), c);
  EXPECT_EQ(list.find("bb"), nullptr);
  EXPECT_EQ(list.check(), "") << "a table that lacks an entry is allowed";
}

// A writer locates a key either way: through the point table (which answers an existing
// key's entry and its predecessor) or, expecting the key to be new, by a search alone. Both
// give the same neighbours, and an existing key's entry is `after` in the search's answer.
TEST(IndexTest, ALocateForAnUpdateFindsTheSameNeighboursEitherWay) {
  test_index index;
  key_index& list = index.list();
  auto pinned = index.epochs().pin();
  inode* a = index.insert("a");
  inode* c = index.insert("c");
  inode* e = index.insert("e");
  using way = key_index::locate_way;
  for (way w : {way::table_first, way::search_only}) {
    SCOPED_TRACE(w == way::search_only ? "by the search alone" : "through the table");
    inode* pred = nullptr;
    inode* after = nullptr;
    key_index::tree_place where;
    inode* found = list.locate_for_update("c", w, &pred, &after, &where);
    EXPECT_EQ(found, w == way::search_only ? nullptr : c)
        << "only the table's way names the entry";
    EXPECT_EQ(pred, a);
    EXPECT_EQ(after, c) << "the key's own entry";
    found = list.locate_for_update("d", w, &pred, &after, &where);
    EXPECT_EQ(found, nullptr);
    EXPECT_EQ(pred, c);
    EXPECT_EQ(after, e);
    found = list.locate_for_update("f", w, &pred, &after, &where);
    EXPECT_EQ(found, nullptr);
    EXPECT_EQ(pred, e);
    EXPECT_EQ(after, nullptr);
  }
}

TEST(IndexTest, FindFallsBackToTheSearchForARemovedTableEntry) {
  test_index index;
  key_index& list = index.list();
  auto pinned = index.epochs().pin();
  inode* old = index.insert("k");
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
  key_index& list = index.list();
  constexpr int kStable = 64;
  std::vector<inode*> stable;
  {
    auto pinned = index.epochs().pin();
    for (int i = 0; i < kStable; ++i) {
      stable.push_back(index.insert(key_of(static_cast<std::uint64_t>(i) * 1000003)));
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
  // The writer: thousands of other keys come and go, growing the table several times (the
  // last growths into spares from the table's helper thread, each old table draining while
  // the readers probe both), rebuilding it over erased slots, and shrinking it as the others
  // leave (64 stable keys are below 1/16 of the grown table); each replaced table is
  // retired through the epochs.
  std::vector<inode*> others;
  for (int round = 0; round < 6; ++round) {
    // Each round starts once the readers have looked up more since the last one.
    const std::uint64_t seen = lookups.load();
    while (lookups.load() < seen + 100) std::this_thread::yield();
    for (int i = 0; i < 40000; ++i) {
      auto pinned = index.epochs().pin();
      list.prepare_insert();
      const std::string k = "other" + std::to_string(round) + "." + std::to_string(i);
      others.push_back(index.insert(k));
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
