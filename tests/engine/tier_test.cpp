// The engine over its packed tier (docs/engine-design.md, "The engine over the packed
// tier"): reads, recovery and the store's format.
//  - EngineTierTest: the tier is written through a test hook (TEST_tier_write), keeping the
//    precedence the engine relies on (the tier holds, of every key, a value older than
//    every version the list keeps). Gets, snapshots and iterators in every direction, with
//    and without bounds, answer as a model that lays the list's keys (values and deletes)
//    over the tier's, before and after the store is opened again.
//  - Merges (EngineTierTest.Merges..., EngineMergeConcurrencyTest): the engine moves keys
//    into the tier itself (the merge thread's step, through TEST_merge); reads, snapshots,
//    iterators held across merges, readers on other threads and live_keys answer as the
//    writes say.
//  - EngineTierFormatTest: a store of format 3 (no tier) is read as it is, upgraded at its
//    first read-write open and left untouched by a read-only one; a damaged tier is
//    reported by Open and Check.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine_support.hpp"
#include "reference_iterator.hpp"
#include "support/files.hpp"

namespace {

using namespace flintkv_test;

using tier_configs =
    ::testing::Types<on_hardware<hashed, manual>, on_hardware<flit::adjacent, automatic>,
                     on_hardware<flit::link_and_persist, manual>>;

template <class Config>
class EngineTierTest : public ::testing::Test {};
TYPED_TEST_SUITE(EngineTierTest, tier_configs);

using records = std::vector<std::pair<std::string, std::optional<std::string>>>;

std::string key_at(std::uint64_t i) {
  std::string k = "key" + std::to_string(1000 + i);
  return i % 7 == 0 ? k + "-longer-than-sixteen-bytes" : k;
}

// What the store should answer: the list's state of each key it has written (a value, or
// nullopt for a delete) over the tier's.
struct model {
  kv_map tier;
  std::map<std::string, std::optional<std::string>> list;

  kv_map view() const {
    kv_map out = tier;
    for (const auto& [k, v] : list) {
      if (v) {
        out[k] = *v;
      } else {
        out.erase(k);
      }
    }
    return out;
  }
};

// Writes a random batch of tier records for keys the list never wrote (values, and erasures
// of keys the tier may hold), into the engine and the model.
template <class Config>
void write_tier(DB& db, model* m, std::mt19937_64& rng, std::uint64_t universe, bool merge) {
  std::map<std::string, std::optional<std::string>> batch;
  const int n = 1 + static_cast<int>(rng() % 60);
  for (int i = 0; i < n; ++i) {
    const std::string k = key_at(rng() % universe);
    if (m->list.count(k) != 0) continue;
    if (rng() % 5 == 0) {
      batch[k] = std::nullopt;
    } else {
      batch[k] = "tier-" + k + "-" + std::to_string(rng() % 1000) + std::string(rng() % 90, 't');
    }
  }
  records r(batch.begin(), batch.end());
  ASSERT_TRUE(engine_of<Config>(&db)->TEST_tier_write(r, merge).ok());
  for (const auto& [k, v] : batch) {
    if (v) {
      m->tier[k] = *v;
    } else {
      m->tier.erase(k);
    }
  }
}

// Random puts and deletes through the list, into the engine and the model.
void write_list(DB& db, model* m, std::mt19937_64& rng, std::uint64_t universe, int n) {
  for (int i = 0; i < n; ++i) {
    const std::string k = key_at(rng() % universe);
    if (rng() % 4 == 0) {
      ASSERT_TRUE(db.Delete(k).ok());
      m->list[k] = std::nullopt;
    } else {
      const std::string v = "list-" + k + "-" + std::to_string(rng() % 1000);
      ASSERT_TRUE(db.Put(k, v).ok());
      m->list[k] = v;
    }
  }
}

// Every key of the universe by Get, and random walks of iterators (seeks of every kind,
// Next and Prev mixed, bounds), against `view`, at `snapshot` (nullptr: now).
::testing::AssertionResult reads_match(DB& db, const kv_map& view, const Snapshot* snapshot,
                                       std::mt19937_64& rng, std::uint64_t universe) {
  ReadOptions at;
  at.snapshot = snapshot;
  for (std::uint64_t i = 0; i < universe; ++i) {
    const std::string k = key_at(i);
    std::string got;
    const Status s = db.Get(k, &got, at);
    const auto it = view.find(k);
    if (it == view.end() ? !s.IsNotFound() : !s.ok() || got != it->second) {
      return ::testing::AssertionFailure()
             << "Get " << k << ": " << s.ToString() << " '" << got << "', expected "
             << (it == view.end() ? std::string("NotFound") : "'" + it->second + "'");
    }
  }
  auto random_key = [&] {
    const std::uint64_t i = rng() % (universe + 2);
    return i == universe ? std::string("a") : i == universe + 1 ? std::string("z") : key_at(i);
  };
  for (int walk = 0; walk < 40; ++walk) {
    ReadOptions ro = at;
    if (walk % 3 == 1) ro.lower_bound = random_key();
    if (walk % 4 == 2) ro.upper_bound = random_key();
    auto it = db.NewIterator(ro);
    reference_iterator ref(view, ro);
    for (int step = 0; step < 40; ++step) {
      const std::string t = random_key();
      const int move = static_cast<int>(rng() % 10);
      const char* name = "";
      if (!ref.valid() || move < 2) {
        switch (rng() % 4) {
          case 0: it->SeekToFirst(); ref.seek_to_first(); name = "SeekToFirst"; break;
          case 1: it->SeekToLast(); ref.seek_to_last(); name = "SeekToLast"; break;
          case 2: it->Seek(t); ref.seek(t); name = "Seek"; break;
          case 3: it->SeekForPrev(t); ref.seek_for_prev(t); name = "SeekForPrev"; break;
        }
      } else if (move < 6) {
        it->Next();
        ref.next();
        name = "Next";
      } else {
        it->Prev();
        ref.prev();
        name = "Prev";
      }
      if (!it->status().ok()) return ::testing::AssertionFailure() << it->status().ToString();
      if (it->Valid() != ref.valid() ||
          (ref.valid() && (it->key() != ref.key() || it->value() != ref.value()))) {
        return ::testing::AssertionFailure()
               << "walk " << walk << " step " << step << " (" << name << " " << t << "): got "
               << (it->Valid() ? std::string(it->key()) : "end") << ", expected "
               << (ref.valid() ? ref.key() : "end");
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Keys in the tier alone, in both, with a list delete over a tier value, and written by
// neither, read in every way, now and at snapshots among the list's writes, before and
// after the store is opened again.
TYPED_TEST(EngineTierTest, ReadsAnswerAsTheListOverTheTier) {
  constexpr std::uint64_t kUniverse = 400;
  region memory(64u << 20);
  std::mt19937_64 rng(20261128);
  model m;
  std::vector<std::pair<const Snapshot*, kv_map>> snapshots;
  {
    auto db = open_in<TypeParam>(memory);
    ASSERT_NE(db, nullptr);
    for (int round = 0; round < 6; ++round) {
      // The tier first (its keys are older than the list's), flushed and merged at times.
      for (int flush = 0; flush < 3; ++flush) {
        write_tier<TypeParam>(*db, &m, rng, kUniverse, round % 2 == 1 && flush == 2);
      }
      // Snapshots taken before and among the list's writes. They go before the tier is
      // written again: the engine moves into the tier only what every registered reader
      // reads there anyway, which a test writing the tier directly does not keep.
      snapshots.emplace_back(db->GetSnapshot(), m.view());
      write_list(*db, &m, rng, kUniverse, 20);
      snapshots.emplace_back(db->GetSnapshot(), m.view());
      write_list(*db, &m, rng, kUniverse, 20);
      ASSERT_TRUE(reads_match(*db, m.view(), nullptr, rng, kUniverse)) << "round " << round;
      for (const auto& [s, view] : snapshots) {
        ASSERT_TRUE(reads_match(*db, view, s, rng, kUniverse)) << "round " << round;
        db->ReleaseSnapshot(s);
      }
      snapshots.clear();
    }
  }
  auto db = open_in<TypeParam>(memory);
  ASSERT_NE(db, nullptr);
  EXPECT_TRUE(reads_match(*db, m.view(), nullptr, rng, kUniverse)) << "after reopening";
}

// An iterator made while the tier was empty meets the records the tier takes after it
// (a tier grows between two moves once the engine merges into it).
TYPED_TEST(EngineTierTest, AnIteratorMeetsRecordsTheTierTookAfterItsSeek) {
  region memory(32u << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_NE(db, nullptr);
  for (std::uint64_t i = 0; i < 40; i += 2) ASSERT_TRUE(db->Put(key_at(i), "list").ok());
  auto it = db->NewIterator(ReadOptions{});
  it->Seek(key_at(10));
  ASSERT_TRUE(it->Valid());
  records odd;
  for (std::uint64_t i = 1; i < 40; i += 2) odd.emplace_back(key_at(i), "tier");
  std::sort(odd.begin(), odd.end());
  ASSERT_TRUE(engine_of<TypeParam>(db.get())->TEST_tier_write(odd).ok());
  std::vector<std::string> seen;
  for (it->Next(); it->Valid(); it->Next()) seen.emplace_back(it->key());
  std::vector<std::string> expected;
  for (std::uint64_t i = 0; i < 40; ++i) {
    if (key_at(i) > key_at(10)) expected.push_back(key_at(i));
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(seen, expected);
}

// A refreshed iterator reads the list's writes since it was made over the tier's records:
// a put over a tier key answers, a delete hides the tier's key, and a new key shows, in
// both directions; an iterator made at the same time and not refreshed reads none of them.
TYPED_TEST(EngineTierTest, ARefreshedIteratorReadsTheListsNewWritesOverTheTier) {
  region memory(32u << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_NE(db, nullptr);
  std::map<std::string, std::string> before;
  for (std::uint64_t i = 0; i < 40; i += 2) {
    ASSERT_TRUE(db->Put(key_at(i), "list").ok());
    before[key_at(i)] = "list";
  }
  records odd;
  for (std::uint64_t i = 1; i < 40; i += 2) {
    odd.emplace_back(key_at(i), "tier");
    before[key_at(i)] = "tier";
  }
  std::sort(odd.begin(), odd.end());
  ASSERT_TRUE(engine_of<TypeParam>(db.get())->TEST_tier_write(odd).ok());
  auto it = db->NewIterator(ReadOptions{});
  auto kept = db->NewIterator(ReadOptions{});
  it->Seek(key_at(10));
  ASSERT_TRUE(it->Valid());
  it->Next();
  ASSERT_TRUE(it->Valid());

  std::map<std::string, std::string> after = before;
  ASSERT_TRUE(db->Put(key_at(11), "new").ok());
  after[key_at(11)] = "new";
  ASSERT_TRUE(db->Delete(key_at(13)).ok());
  after.erase(key_at(13));
  ASSERT_TRUE(db->Delete(key_at(12)).ok());
  after.erase(key_at(12));
  ASSERT_TRUE(db->Put(key_at(41), "list").ok());
  after[key_at(41)] = "list";

  ASSERT_TRUE(it->Refresh().ok());
  EXPECT_FALSE(it->Valid());
  auto scan = [](Iterator& i) {
    std::map<std::string, std::string> seen;
    for (i.SeekToFirst(); i.Valid(); i.Next()) seen[std::string(i.key())] = i.value();
    return seen;
  };
  EXPECT_EQ(scan(*it), after);
  EXPECT_EQ(scan(*kept), before);
  std::vector<std::string> backward, expected_backward;
  for (it->SeekToLast(); it->Valid(); it->Prev()) backward.emplace_back(it->key());
  for (auto e = after.rbegin(); e != after.rend(); ++e) expected_backward.push_back(e->first);
  EXPECT_EQ(backward, expected_backward);
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
}

// A snapshot older than every version the list has of a key reads the tier's value of it.
TYPED_TEST(EngineTierTest, ASnapshotOlderThanTheListReadsTheTier) {
  region memory(32u << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(engine_of<TypeParam>(db.get())->TEST_tier_write({{"k", "old"}}, true).ok());
  const Snapshot* before = db->GetSnapshot();
  ASSERT_TRUE(db->Put("k", "new").ok());
  ReadOptions then;
  then.snapshot = before;
  std::string got;
  ASSERT_TRUE(db->Get("k", &got, then).ok());
  EXPECT_EQ(got, "old");
  ASSERT_TRUE(db->Get("k", &got).ok());
  EXPECT_EQ(got, "new");
  auto it = db->NewIterator(then);
  it->SeekToFirst();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value(), "old");
  it.reset();
  ASSERT_TRUE(db->Delete("k").ok());
  EXPECT_TRUE(db->Get("k", &got).IsNotFound()) << "a delete in the list hides the tier's value";
  ASSERT_TRUE(db->Get("k", &got, then).ok());
  EXPECT_EQ(got, "old");
  db->ReleaseSnapshot(before);
}

// ---- merges: the engine moves keys into the tier ------------------------------------------

// One merge through the test hook, as the merge thread makes them.
template <class Config>
std::size_t merge(DB& db, std::size_t limit, std::uint64_t lag = 0) {
  std::size_t moved = 0;
  const Status s = engine_of<Config>(&db)->TEST_merge(limit, &moved, lag);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return moved;
}

// Writes through the list, merges of every size among them (reclamation too, so that
// deletes of keys the tier holds move as erasure records), snapshots and an iterator held
// across merges: every read answers as the writes say, now, at each snapshot, along the
// iterator's walk, and after the store is opened again; live_keys counts the keys of both
// tiers.
TYPED_TEST(EngineTierTest, MergesKeepEveryReadAsItWas) {
  constexpr std::uint64_t kUniverse = 300;
  region memory(64u << 20);
  std::mt19937_64 rng(20261128);
  model m;  // every write goes through the list: m.list is the store
  std::size_t moved = 0;
  {
    auto db = open_in<TypeParam>(memory);
    ASSERT_NE(db, nullptr);
    for (int round = 0; round < 12; ++round) {
      write_list(*db, &m, rng, kUniverse, 80);
      const kv_map at_snapshot = m.view();
      const Snapshot* snapshot = db->GetSnapshot();
      const kv_map at_iterator = m.view();
      auto it = db->NewIterator(ReadOptions{});
      reference_iterator ref(at_iterator, ReadOptions{});
      const std::string from = key_at(rng() % kUniverse);
      it->Seek(from);
      ref.seek(from);
      write_list(*db, &m, rng, kUniverse, 40);
      if (round % 3 == 2) engine_of<TypeParam>(db.get())->TEST_reclaim();
      moved += merge<TypeParam>(*db, 1 + rng() % 400, round % 4 == 3 ? 20 : 0);
      if (round % 5 == 4) {
        // The small runs into the large run, as the merge thread does once writes pause.
        ASSERT_TRUE(engine_of<TypeParam>(db.get())->TEST_merge_tier().ok());
      }
      // The iterator carries on from keys a merge may have moved, at its own version.
      for (int step = 0; step < 30 && ref.valid(); ++step) {
        ASSERT_TRUE(it->Valid()) << "round " << round << " step " << step;
        ASSERT_EQ(it->key(), ref.key()) << "round " << round << " step " << step;
        ASSERT_EQ(it->value(), ref.value());
        if (step % 5 == 4) {
          it->Prev();
          ref.prev();
        } else {
          it->Next();
          ref.next();
        }
      }
      ASSERT_TRUE(it->status().ok()) << it->status().ToString();
      it.reset();
      ASSERT_TRUE(reads_match(*db, m.view(), nullptr, rng, kUniverse)) << "round " << round;
      ASSERT_TRUE(reads_match(*db, at_snapshot, snapshot, rng, kUniverse)) << "round " << round;
      db->ReleaseSnapshot(snapshot);
      EXPECT_EQ(db->GetStats().live_keys, m.view().size()) << "round " << round;
    }
    // With no reader left, a merge takes every key the last writes left in the list.
    engine_of<TypeParam>(db.get())->TEST_reclaim();
    moved += merge<TypeParam>(*db, 100000);
    ASSERT_TRUE(reads_match(*db, m.view(), nullptr, rng, kUniverse));
    const Stats stats = db->GetStats();
    EXPECT_EQ(stats.merged_keys, moved);
    EXPECT_GT(moved, kUniverse / 2);
    EXPECT_LT(stats.keys, kUniverse / 4) << "the list keeps few keys once they are merged";
    EXPECT_EQ(stats.live_keys, m.view().size());
  }
  auto db = open_in<TypeParam>(memory);
  ASSERT_NE(db, nullptr);
  EXPECT_TRUE(reads_match(*db, m.view(), nullptr, rng, kUniverse)) << "after reopening";
  EXPECT_EQ(db->GetStats().live_keys, m.view().size()) << "after reopening";
  // Writes after the reopen: new versions over the tier's keys, and deletes of them.
  write_list(*db, &m, rng, kUniverse, 100);
  EXPECT_EQ(db->GetStats().live_keys, m.view().size());
  merge<TypeParam>(*db, 100000);
  EXPECT_TRUE(reads_match(*db, m.view(), nullptr, rng, kUniverse));
}

// An iterator whose key a merge moved (with every key after it) finds its place again by
// key, forward and backward, whether it was reading the list alone or both tiers.
TYPED_TEST(EngineTierTest, AnIteratorCarriesOnOverKeysAMergeMoved) {
  region memory(32u << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_NE(db, nullptr);
  kv_map expected;
  for (std::uint64_t i = 0; i < 120; ++i) {
    ASSERT_TRUE(db->Put(key_at(i), "v" + std::to_string(i)).ok());
    expected[key_at(i)] = "v" + std::to_string(i);
  }
  for (int pass = 0; pass < 2; ++pass) {  // pass 0: the list alone; 1: both tiers
    auto it = db->NewIterator(ReadOptions{});
    reference_iterator ref(expected, ReadOptions{});
    it->SeekToFirst();
    ref.seek_to_first();
    for (int i = 0; i < 40; ++i) {
      it->Next();
      ref.next();
    }
    // Writes the iterator does not see, then every key moved.
    for (std::uint64_t i = 0; i < 120; i += 3) ASSERT_TRUE(db->Put(key_at(i), "later").ok());
    ASSERT_EQ(it->key(), ref.key());
    engine_of<TypeParam>(db.get())->TEST_reclaim();
    merge<TypeParam>(*db, 100000);
    // Its value was never asked for: read now, after the merge moved the key and freed the
    // node it stood on, it comes from the tier.
    ASSERT_EQ(it->value(), ref.value());
    ASSERT_TRUE(it->status().ok()) << it->status().ToString();
    for (int i = 0; i < 10; ++i) {
      it->Prev();
      ref.prev();
      ASSERT_TRUE(it->Valid());
      ASSERT_EQ(it->key(), ref.key());
      ASSERT_EQ(it->value(), ref.value());
    }
    while (ref.valid()) {
      ASSERT_TRUE(it->Valid());
      ASSERT_EQ(it->key(), ref.key());
      ASSERT_EQ(it->value(), ref.value()) << "the iterator reads at its own version";
      it->Next();
      ref.next();
    }
    EXPECT_FALSE(it->Valid());
    EXPECT_TRUE(it->status().ok());
    it.reset();
    for (std::uint64_t i = 0; i < 120; i += 3) expected[key_at(i)] = "later";
  }
}

// An iterator that the tier answered, whose value was not asked for, meets merges that
// rewrite the node its value lay in and free it, and a run of other keys written into the
// freed blocks: value() then reads the key again at the iterator's version and answers
// what it held (read from the old node, it is another key's bytes).
TYPED_TEST(EngineTierTest, ATierValueAskedForAfterItsNodeWasRewrittenIsTheKeys) {
  region memory(32u << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_NE(db, nullptr);
  auto* e = engine_of<TypeParam>(db.get());
  const auto tier_write = [&](std::uint64_t from, std::uint64_t to, const std::string& tag) {
    records r;
    for (std::uint64_t i = from; i < to; i += 2) {
      r.emplace_back(key_at(i), tag + key_at(i) + std::string(40, 'v'));
    }
    std::sort(r.begin(), r.end());
    ASSERT_TRUE(e->TEST_tier_write(r, true).ok());  // merged into the large run
  };
  tier_write(0, 800, "first-");
  std::vector<std::unique_ptr<Iterator>> its;
  std::vector<std::string> keys;
  for (std::uint64_t i = 100; i < 700; i += 100) {
    its.push_back(db->NewIterator(ReadOptions{}));
    its.back()->Seek(key_at(i));
    ASSERT_TRUE(its.back()->Valid());
    keys.emplace_back(its.back()->key());
  }
  tier_write(1, 800, "second-");  // a key between each two: every node rewritten
  e->TEST_free_retired();
  tier_write(2000, 3600, "other-");  // into the blocks the rewrite freed
  for (std::size_t i = 0; i < its.size(); ++i) {
    EXPECT_EQ(its[i]->value(), "first-" + keys[i] + std::string(40, 'v')) << keys[i];
    EXPECT_TRUE(its[i]->status().ok()) << its[i]->status().ToString();
  }
}

// Writes keys 0 .. n-1 twice, then reclaims, so that each keeps its newest version alone and
// a merge can move every one. Returns what the store holds.
template <class Config>
kv_map movable_keys(DB& db, std::uint64_t n) {
  kv_map written;
  for (std::uint64_t i = 0; i < n; ++i) {
    EXPECT_TRUE(db.Put(key_at(i), "older").ok());
    EXPECT_TRUE(db.Put(key_at(i), "v" + std::to_string(i)).ok());
    written[key_at(i)] = "v" + std::to_string(i);
  }
  engine_of<Config>(&db)->TEST_reclaim();
  return written;
}

// An iterator that moves while a merge removes keys from the list (inside the merge, by
// the test hook) lands on an entry that leaves right after. Its next move, still inside
// the same merge, once that entry was freed, finds its place again by key instead of
// stepping from it, and its value comes from the tier: the same answers, nothing read from
// freed memory (the sanitizer build reports a read of a freed entry).
TYPED_TEST(EngineTierTest, AnIteratorMovingDuringAMergesUnlinksReadsNoEntryThatLeft) {
  constexpr std::uint64_t kKeys = 10;
  region memory(32u << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_NE(db, nullptr);
  kv_map expected = movable_keys<TypeParam>(*db, kKeys);
  auto* e = engine_of<TypeParam>(db.get());
  auto it = db->NewIterator(ReadOptions{});
  reference_iterator ref(expected, ReadOptions{});
  std::vector<std::size_t> calls;
  e->TEST_in_merge_unlinks([&](std::size_t n) {
    calls.push_back(n);
    if (n == 0) {  // every key is still in the list
      it->Seek(key_at(3));
      ref.seek(key_at(3));
      ASSERT_TRUE(it->Valid());
      ASSERT_EQ(it->key(), ref.key());
    } else if (n == kKeys) {  // every key left the list; the entries are freed
      e->TEST_free_retired();
      ASSERT_EQ(it->value(), ref.value()) << "read from the tier";
      for (int step = 0; step < 3; ++step) {
        it->Next();
        ref.next();
        ASSERT_TRUE(it->Valid());
        ASSERT_EQ(it->key(), ref.key());
        ASSERT_EQ(it->value(), ref.value());
      }
      it->Prev();
      ref.prev();
      ASSERT_TRUE(it->Valid());
      ASSERT_EQ(it->key(), ref.key());
      ASSERT_EQ(it->value(), ref.value());
    }
  });
  EXPECT_EQ(merge<TypeParam>(*db, 100000), kKeys);
  e->TEST_in_merge_unlinks(nullptr);
  ASSERT_EQ(calls.size(), kKeys + 1);
  EXPECT_EQ(calls.back(), kKeys);
  // After the merge: on to the end, and back to the start.
  while (ref.valid()) {
    ASSERT_TRUE(it->Valid());
    ASSERT_EQ(it->key(), ref.key());
    ASSERT_EQ(it->value(), ref.value());
    it->Next();
    ref.next();
  }
  EXPECT_FALSE(it->Valid());
  it->SeekToFirst();
  ref.seek_to_first();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), ref.key());
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
}

// A merge unlinks its keys from the list in steps, each under the combiner lock, and a
// writer that needs the lock during the unlinks takes it between two steps: its put
// returns before the merge ends, and nothing the merge moves or the put writes is lost.
// (Unlinked under one hold of the lock, the put would wait for the whole merge: the hook
// between the steps would wait for it in vain, and no step would be seen.)
TYPED_TEST(EngineTierTest, AWriterWaitingDuringAMergesUnlinksGoesBetweenSteps) {
  const std::uint64_t keys = 2 * internal::engine_for<TypeParam>::TEST_unlink_step() + 10;  // 3 steps
  region memory(64u << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_NE(db, nullptr);
  kv_map expected = movable_keys<TypeParam>(*db, keys);
  auto* e = engine_of<TypeParam>(db.get());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::thread writer;
  std::atomic<bool> put_returned{false};
  bool waited_in_slot = false;
  e->TEST_in_merge_unlinks([&](std::size_t n) {
    if (n != 0) return;  // first step, the lock held: the writer has to wait for it
    writer = std::thread([&] {
      EXPECT_TRUE(db->Put("new", "value").ok());
      put_returned.store(true, std::memory_order_release);
    });
    while (!e->TEST_advertised() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    waited_in_slot = e->TEST_advertised();
  });
  std::size_t between = 0;
  bool returned_between = false;
  e->TEST_between_unlink_steps([&] {
    if (between++ != 0) return;
    while (!put_returned.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    returned_between = put_returned.load(std::memory_order_acquire);
  });
  EXPECT_EQ(merge<TypeParam>(*db, 100000), keys);
  e->TEST_in_merge_unlinks(nullptr);
  e->TEST_between_unlink_steps(nullptr);
  ASSERT_TRUE(writer.joinable());
  writer.join();
  EXPECT_TRUE(waited_in_slot) << "the writer did not wait for the lock";
  EXPECT_EQ(between, 2u) << "three steps, two gaps";
  EXPECT_TRUE(returned_between) << "the put waited for the whole merge";
  expected["new"] = "value";
  reference_iterator ref(expected, ReadOptions{});
  auto it = db->NewIterator(ReadOptions{});
  std::size_t seen = 0;
  for (it->SeekToFirst(), ref.seek_to_first(); ref.valid(); it->Next(), ref.next(), ++seen) {
    ASSERT_TRUE(it->Valid());
    ASSERT_EQ(it->key(), ref.key());
    ASSERT_EQ(it->value(), ref.value());
  }
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  EXPECT_EQ(seen, keys + 1);
  EXPECT_EQ(db->GetStats().live_keys, keys + 1);
}

// An iterator over both tiers stands on a delete in the list only to step past it (it hides
// the tier's key). Inside that move (by the test hook) a reclamation pass removes the
// deleted key, which frees its node at once, and a write of the same size takes the block.
// The iterator reads nothing of a delete's node, so it answers as the store did when it was
// made, not with Corruption (it used to check that node against its checksum).
TYPED_TEST(EngineTierTest, AnIteratorPassingADeleteReadsNotItsNodeThatReclamationFrees) {
  region memory(32u << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_NE(db, nullptr);
  auto* e = engine_of<TypeParam>(db.get());
  ASSERT_TRUE(e->TEST_tier_write({{key_at(1), "t1"}, {key_at(5), "t5"}}).ok());
  ASSERT_TRUE(db->Put(key_at(2), "v2").ok());
  const Snapshot* before_delete = db->GetSnapshot();
  ASSERT_TRUE(db->Delete(key_at(2)).ok());
  ASSERT_TRUE(db->Put(key_at(3), "v3").ok());
  e->TEST_reclaim();  // the mark passes the delete; the snapshot keeps the key's value
  const kv_map expected{{key_at(1), "t1"}, {key_at(3), "v3"}, {key_at(5), "t5"}};
  auto it = db->NewIterator(ReadOptions{});
  bool released = false;
  e->TEST_on_verify([&](std::string_view key, bool tombstone) {
    if (released || key != key_at(2)) return;
    EXPECT_TRUE(tombstone);
    released = true;
    db->ReleaseSnapshot(before_delete);
    e->TEST_reclaim();                           // the key leaves; its node is freed
    ASSERT_TRUE(db->Put(key_at(4), "").ok());    // a node of the delete's size
  });
  kv_map seen;
  for (it->SeekToFirst(); it->Valid(); it->Next()) seen[std::string(it->key())] = it->value();
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  EXPECT_EQ(seen, expected);
  seen.clear();
  for (it->SeekToLast(); it->Valid(); it->Prev()) seen[std::string(it->key())] = it->value();
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  EXPECT_EQ(seen, expected);
  e->TEST_on_verify(nullptr);
  if (!released) db->ReleaseSnapshot(before_delete);
  it.reset();
  e->TEST_reclaim();
  EXPECT_EQ(e->TEST_versions(key_at(2)), std::vector<std::uint64_t>{}) << "the key left";
}

// Keys deleted, and their entries removed by reclamation, after a merge chose them and
// before it claimed them (inside the merge, by the test hook): the merge moves the others
// alone, and the deleted keys stay deleted. The merge stays pinned until its claim, so the
// entries it chose are not freed before the claim reads them (the sanitizer build reports
// a read of a freed entry).
TYPED_TEST(EngineTierTest, AMergeClaimsNoKeyDeletedAndRemovedAfterItChoseIt) {
  constexpr std::uint64_t kKeys = 10;
  region memory(32u << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_NE(db, nullptr);
  kv_map expected = movable_keys<TypeParam>(*db, kKeys);
  auto* e = engine_of<TypeParam>(db.get());
  int calls = 0;
  e->TEST_before_merge_claims([&] {
    ++calls;
    for (std::uint64_t i = 0; i < kKeys; i += 2) {
      ASSERT_TRUE(db->Delete(key_at(i)).ok());
      expected.erase(key_at(i));
    }
    e->TEST_reclaim();  // removes the deleted keys' entries, as far as pins let it
    e->TEST_free_retired();  // and frees them, as far as pins let it
  });
  std::size_t moved = 0;
  ASSERT_TRUE(e->TEST_merge(100, &moved).ok());
  e->TEST_before_merge_claims(nullptr);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(moved, kKeys / 2) << "the keys not deleted";
  EXPECT_EQ(e->TEST_check_index(), "");
  std::mt19937_64 rng(5);
  EXPECT_TRUE(reads_match(*db, expected, nullptr, rng, kKeys));
  EXPECT_EQ(db->GetStats().live_keys, kKeys / 2);
}

// The concurrency tests' values: the key, then the write's sequence number.
std::string value_of_write(std::uint64_t key, std::uint64_t seq) {
  return key_at(key) + ":" + std::to_string(seq);
}

// What a concurrency test's threads share: the failures they met (the first one kept), and
// a merging thread that merges while the writer writes, then until five merges moved keys
// (once the writes stop, every key becomes movable), so that the readers always meet some.
struct merge_race {
  std::atomic<bool> written{false}, done{false};
  std::atomic<std::uint64_t> failures{0}, merges{0};
  std::string first_failure;
  std::mutex failure_mutex;

  void fail(const std::string& what) {
    std::lock_guard lock(failure_mutex);
    if (failures.fetch_add(1) == 0) first_failure = what;
  }
  // Merges until the writes are done, then until five merges moved keys (at most 100,000
  // tries). Once the writes are done it reclaims before each try: a key with older versions
  // moves only once they are gone, and no write's combining pass reclaims any more, so on
  // a loaded machine, where few merges moved keys while the writer ran, every later try
  // moved nothing.
  template <class Engine>
  std::thread merger(Engine* e) {
    return std::thread([this, e] {
      for (std::uint64_t n = 0; !written.load() || (merges.load() < 5 && n < 100000); ++n) {
        if (written.load()) e->TEST_reclaim();
        std::size_t moved = 0;
        if (Status s = e->TEST_merge(64, &moved); !s.ok()) fail("merge: " + s.ToString());
        merges.fetch_add(moved > 0 ? 1 : 0);
      }
      done.store(true);
    });
  }
};

// Readers and a writer beside a merging thread, on real threads: every key is written first
// and never deleted, so each scan meets every key exactly once, in order, and every Get
// finds it; each value read is one its key had, never older than one the same reader read
// before.
TEST(EngineMergeConcurrencyTest, ReadersBesideMergesMeetEveryKeyOnceWithValuesItHad) {
  constexpr std::uint64_t kKeys = 600;
  constexpr std::uint64_t kWrites = 30000;
  region memory(256u << 20);
  auto db = open_in<on_hardware<hashed, manual>>(memory);
  ASSERT_NE(db, nullptr);
  auto seq_of = [](std::string_view key, std::string_view v) -> std::int64_t {
    if (v.size() <= key.size() + 1 || v.substr(0, key.size()) != key || v[key.size()] != ':') {
      return -1;
    }
    return std::stoll(std::string(v.substr(key.size() + 1)));
  };
  for (std::uint64_t k = 0; k < kKeys; ++k) {
    ASSERT_TRUE(db->Put(key_at(k), value_of_write(k, 0)).ok());
  }
  merge_race race;
  std::atomic<std::uint64_t> scans{0};
  auto fail = [&](const std::string& what) { race.fail(what); };
  std::thread writer([&] {
    std::mt19937_64 rng(1);
    for (std::uint64_t i = 1; i <= kWrites; ++i) {
      const std::uint64_t k = rng() % kKeys;
      if (!db->Put(key_at(k), value_of_write(k, i)).ok()) fail("put failed");
    }
    race.written.store(true);
  });
  std::thread merger = race.merger(engine_of<on_hardware<hashed, manual>>(db.get()));
  auto reader = [&](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::int64_t> seen(kKeys, -1);
    while (!race.done.load()) {
      for (int g = 0; g < 50; ++g) {
        const std::uint64_t k = rng() % kKeys;
        std::string got;
        const Status s = db->Get(key_at(k), &got);
        const std::int64_t seq = s.ok() ? seq_of(key_at(k), got) : -1;
        if (seq < 0) fail("Get " + key_at(k) + ": " + s.ToString() + " '" + got + "'");
        if (seq < seen[k]) fail("Get " + key_at(k) + " went back to " + got);
        seen[k] = std::max(seen[k], seq);
      }
      auto it = db->NewIterator(ReadOptions{});
      std::uint64_t n = 0;
      std::string last;
      for (it->SeekToFirst(); it->Valid(); it->Next(), ++n) {
        const std::string key(it->key());
        if (n > 0 && key <= last) fail("scan: " + key + " after " + last);
        if (seq_of(key, it->value()) < 0) fail("scan: " + key + " = " + std::string(it->value()));
        last = key;
      }
      if (!it->status().ok()) fail("scan: " + it->status().ToString());
      if (n != kKeys) fail("scan met " + std::to_string(n) + " keys of " + std::to_string(kKeys));
      scans.fetch_add(1);
    }
  };
  std::thread r1(reader, 2), r2(reader, 3);
  writer.join();
  merger.join();
  r1.join();
  r2.join();
  EXPECT_EQ(race.failures.load(), 0u) << race.first_failure;
  EXPECT_GT(scans.load(), 0u);
  EXPECT_GE(race.merges.load(), 5u) << "merges that moved keys beside the readers";
  EXPECT_EQ(db->GetStats().live_keys, kKeys);
}

// Scans both ways beside a writer that deletes and writes again, reclamation after every
// pass and a merging thread, on real threads. The even keys are written first and never
// deleted; the odd ones come and go. Every walk (a Seek or SeekForPrev and up to 40 steps,
// or a whole scan either way) meets keys in order, each value one its key had, and the
// even keys it passes each once, none left out: the kept keys it meets are consecutive,
// starting from the first at or past its start. Moves from entries that a merge moved or
// reclamation removed, in both directions and over deletes that hide the tier's keys.
TEST(EngineMergeConcurrencyTest, ScansBothWaysBesideDeletesMeetEveryKeptKeyOnce) {
  using config = on_hardware<hashed, manual>;
  constexpr std::uint64_t kKeys = 600;
  constexpr std::uint64_t kWrites = 30000;
  region memory(256u << 20);
  auto db = open_in<config>(memory);
  ASSERT_NE(db, nullptr);
  auto* e = engine_of<config>(db.get());
  e->TEST_reclaim_every(1);
  for (std::uint64_t k = 0; k < kKeys; ++k) {
    ASSERT_TRUE(db->Put(key_at(k), value_of_write(k, 0)).ok());
  }
  // key_at keeps the order of its argument: a key's index from its digits.
  auto index_of = [](std::string_view key) {
    return static_cast<std::int64_t>(std::stoll(std::string(key.substr(3, 4)))) - 1000;
  };
  merge_race race;
  std::atomic<std::uint64_t> walks{0};
  auto fail = [&](const std::string& what) { race.fail(what); };
  std::thread writer([&] {
    std::mt19937_64 rng(11);
    for (std::uint64_t i = 1; i <= kWrites; ++i) {
      const std::uint64_t k = rng() % kKeys;
      const Status s = k % 2 == 1 && rng() % 2 == 0 ? db->Delete(key_at(k))
                                                     : db->Put(key_at(k), value_of_write(k, i));
      if (!s.ok()) fail("write: " + s.ToString());
    }
    race.written.store(true);
  });
  std::thread merger = race.merger(e);
  auto reader = [&](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    while (!race.done.load()) {
      auto it = db->NewIterator(ReadOptions{});
      const int kind = static_cast<int>(rng() % 6);
      const bool forward = kind % 2 == 0;
      const std::uint64_t start = rng() % kKeys;
      // The kept key the walk must meet first: the first even index at or past the start.
      std::int64_t expect;
      if (kind == 4) {
        it->SeekToFirst();
        expect = 0;
      } else if (kind == 5) {
        it->SeekToLast();
        expect = kKeys - 2;
      } else if (forward) {
        it->Seek(key_at(start));
        expect = static_cast<std::int64_t>(start + start % 2);
      } else {
        it->SeekForPrev(key_at(start));
        expect = static_cast<std::int64_t>(start - start % 2);
      }
      const bool whole = kind >= 4;
      const bool up = kind != 5 && forward;
      std::string last;
      for (int step = 0; it->Valid() && (whole || step < 40); ++step) {
        const std::string key(it->key());
        const std::string where = std::string(up ? "forward" : "backward") + " walk from " +
                                  (whole ? "the end" : key_at(start)) + ", step " +
                                  std::to_string(step) + ": ";
        if (step > 0 && (up ? key <= last : key >= last)) fail(where + key + " after " + last);
        const std::string_view v = it->value();
        if (v.size() <= key.size() || v.substr(0, key.size()) != key) {
          fail(where + key + " = '" + std::string(v) + "'");
        }
        const std::int64_t i = index_of(key);
        if (i % 2 == 0) {
          if (i != expect) {
            fail(where + "met kept key " + key + ", expected " + key_at(expect));
          }
          expect = up ? i + 2 : i - 2;
        }
        last = key;
        if (up) {
          it->Next();
        } else {
          it->Prev();
        }
      }
      if (!it->status().ok()) fail("walk: " + it->status().ToString());
      if (whole && (up ? expect != static_cast<std::int64_t>(kKeys) : expect != -2)) {
        fail(std::string(up ? "forward" : "backward") + " scan ended before " +
             key_at(static_cast<std::uint64_t>(expect)));
      }
      walks.fetch_add(1);
    }
  };
  std::thread r1(reader, 12), r2(reader, 13);
  writer.join();
  merger.join();
  r1.join();
  r2.join();
  e->TEST_reclaim_every(0);
  EXPECT_EQ(race.failures.load(), 0u) << race.first_failure;
  EXPECT_GT(walks.load(), 0u);
  EXPECT_GE(race.merges.load(), 5u) << "merges that moved keys beside the readers";
}

// A merge that fails says why: Stats::merge_error holds its status (merge_errors counts it)
// until a merge succeeds, and no key is lost meanwhile. Keys B (first in key order), then A
// (values of a tier node's block size), then (after a snapshot that holds A's first
// versions as A is written again) keys with large values and then small ones until writes
// find no room: a merge of B's keys, the only ones it may move, has no room for the tier's
// nodes. Every key is checked by reads_match over all the keys put. A merge
// that then finds nothing it may move (every version within its lag) succeeds, as the
// merge thread's do once the list holds no key to move, and the error goes.
TYPED_TEST(EngineTierTest, AFailedMergeSaysWhyInStatsUntilOneSucceeds) {
  constexpr std::uint64_t kA = 200, kB = 400;
  region memory(4u << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_NE(db, nullptr);
  kv_map expected;
  std::uint64_t written = 0;  // keys key_at(0 .. written-1), in the order they are put
  const auto put = [&](std::uint64_t i, const std::string& value) {
    const Status s = db->Put(key_at(i), value);
    if (s.ok()) expected[key_at(i)] = value;
    return s;
  };
  // B first in key order, where the merge's walk starts.
  const std::string value(64, 'v'), large(4000, 'l');
  for (; written < kB; ++written) ASSERT_TRUE(put(written, value).ok());
  for (; written < kB + kA; ++written) ASSERT_TRUE(put(written, large).ok());
  const Snapshot* snapshot = db->GetSnapshot();
  for (std::uint64_t i = kB; i < kB + kA; ++i) ASSERT_TRUE(put(i, large + "2").ok());
  for (const std::string* fill : {&large, &value}) {
    Status full;
    while (full.ok() && written < 1000000) full = put(written++, *fill);
    ASSERT_TRUE(full.IsNoSpace()) << full.ToString();
  }
  EXPECT_EQ(db->GetStats().merge_error, "");

  auto* e = engine_of<TypeParam>(db.get());
  std::size_t moved = 0;
  const Status failed = e->TEST_merge(kB, &moved);
  ASSERT_TRUE(failed.IsNoSpace()) << failed.ToString();
  Stats stats = db->GetStats();
  EXPECT_EQ(stats.merge_errors, 1u);
  EXPECT_EQ(stats.merge_error, failed.ToString());
  EXPECT_TRUE(stats.merge_error.starts_with("NoSpace: ")) << stats.merge_error;
  std::mt19937_64 rng(5);
  EXPECT_TRUE(reads_match(*db, expected, nullptr, rng, written)) << "after the failed merge";

  ASSERT_TRUE(e->TEST_merge(kB, &moved, UINT64_MAX).ok());
  EXPECT_EQ(moved, 0u);
  stats = db->GetStats();
  EXPECT_EQ(stats.merge_errors, 1u);
  EXPECT_EQ(stats.merge_error, "") << "a merge succeeded";
  EXPECT_TRUE(reads_match(*db, expected, nullptr, rng, written)) << "after the merge";
  db->ReleaseSnapshot(snapshot);
}

// The merge thread (Options::merge_interval) moves every key once writes pause, and the
// store reads as it was written, then and after it is opened again. The wait is for a state
// (every key moved), bounded, not for a time.
TEST(EngineMergeThreadTest, MovesEveryKeyOnceWritesPause) {
  constexpr std::uint64_t kKeys = 3000;
  region memory(64u << 20);
  kv_map expected;
  {
    Options options;
    options.merge_interval = std::chrono::milliseconds(1);
    auto db = open_in<on_hardware<hashed, manual>>(memory, options);
    ASSERT_NE(db, nullptr);
    for (std::uint64_t i = 0; i < kKeys; ++i) {
      ASSERT_TRUE(db->Put(key_at(i), "v" + std::to_string(i)).ok());
      expected[key_at(i)] = "v" + std::to_string(i);
    }
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (Stats s = db->GetStats(); (s.keys != 0 || s.merged_keys != kKeys) &&
                                   std::chrono::steady_clock::now() < limit;
         s = db->GetStats()) {
      std::this_thread::yield();
    }
    const Stats stats = db->GetStats();
    EXPECT_EQ(stats.keys, 0u) << "keys left in the list";
    EXPECT_EQ(stats.merged_keys, kKeys);
    EXPECT_EQ(stats.merge_errors, 0u);
    EXPECT_EQ(stats.live_keys, kKeys);
    std::mt19937_64 rng(7);
    EXPECT_TRUE(reads_match(*db, expected, nullptr, rng, kKeys));
  }
  auto db = open_in<on_hardware<hashed, manual>>(memory);
  ASSERT_NE(db, nullptr);
  std::mt19937_64 rng(8);
  EXPECT_TRUE(reads_match(*db, expected, nullptr, rng, kKeys)) << "after reopening";
  EXPECT_EQ(db->GetStats().live_keys, kKeys);
}

// The threads of this process named `name` (/proc/self/task/*/comm).
std::size_t threads_named(const std::string& name) {
  std::size_t n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) ++n;
  }
  return n;
}

// The engine's threads carry names, so that top, perf and a debugger tell them apart from
// the application's, and they are gone once the store is closed.
TEST(EngineMergeThreadTest, TheEnginesThreadsAreNamed) {
  region memory(64u << 20);
  ASSERT_EQ(threads_named("flintkv-merge"), 0u);
  ASSERT_EQ(threads_named("flintkv-persist"), 0u);
  {
    Options options;
    options.merge_interval = std::chrono::milliseconds(1);
    options.persist_interval = std::chrono::milliseconds(1);
    auto db = open_in<on_hardware<hashed, manual>>(memory, options);
    ASSERT_NE(db, nullptr);
    // Each thread names itself as it starts: the wait is for that state, bounded.
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while ((threads_named("flintkv-merge") == 0 || threads_named("flintkv-persist") == 0) &&
           std::chrono::steady_clock::now() < limit) {
      std::this_thread::yield();
    }
    EXPECT_EQ(threads_named("flintkv-merge"), 1u);
    EXPECT_EQ(threads_named("flintkv-persist"), 1u);
  }
  EXPECT_EQ(threads_named("flintkv-merge"), 0u);
  EXPECT_EQ(threads_named("flintkv-persist"), 0u);
}

// The values of the fills below: "v" and the key's number.
std::string value_at(std::uint64_t i) {
  std::string v = "v";
  v += std::to_string(i);
  return v;
}

// A store whose merge thread runs every millisecond, and the keys of a fill past the bound.
struct merging_store {
  using config = on_hardware<hashed, manual>;
  static constexpr std::uint64_t bound = flintkv::internal::engine_for<config>::TEST_list_bound();
  static constexpr std::uint64_t keys = bound + 2000;
  static Options every_millisecond() {
    Options options;
    options.merge_interval = std::chrono::milliseconds(1);
    return options;
  }
  region memory{256u << 20};
  std::unique_ptr<DB> db = open_in<config>(memory, every_millisecond());
};

// Back-pressure: a writer that finds the list over its bound while merges move keys waits
// for the merge thread, and goes on once the thread has moved keys. The merge thread is
// held (TEST_hold_merges) so that the writer meets the bound first, deterministically; the
// waits are for states (a write waiting, every write done), bounded, not for times.
TEST(EngineMergeThreadTest, AWriterOverTheListsBoundWaitsForTheMerges) {
  merging_store store;
  auto& db = store.db;
  const std::uint64_t bound = merging_store::bound, keys = merging_store::keys;
  ASSERT_NE(db, nullptr);
  auto* e = engine_of<merging_store::config>(db.get());
  e->TEST_hold_merges(true);
  std::atomic<std::uint64_t> written{0};
  std::thread writer([&] {
    for (std::uint64_t i = 0; i < keys; ++i) {
      ASSERT_TRUE(db->Put(key_at(i), value_at(i)).ok());
      written.store(i + 1, std::memory_order_release);
    }
  });
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (db->GetStats().write_stalls == 0 && written.load(std::memory_order_acquire) < keys &&
         std::chrono::steady_clock::now() < limit) {
    std::this_thread::yield();
  }
  // The writer waits with the list one key over the bound: no merge ran.
  EXPECT_EQ(db->GetStats().write_stalls, 1u);
  EXPECT_EQ(written.load(std::memory_order_acquire), bound + 1);
  EXPECT_EQ(db->GetStats().keys, bound + 1);
  e->TEST_hold_merges(false);
  writer.join();
  // The writer went on once a merge ran (one that moved keys, or one that moved none and
  // so let writers go); then the thread moves every key.
  for (Stats s = db->GetStats(); (s.keys != 0 || s.merged_keys != keys) &&
                                 std::chrono::steady_clock::now() < limit;
       s = db->GetStats()) {
    std::this_thread::yield();
  }
  const Stats stats = db->GetStats();
  EXPECT_GE(stats.write_stalls, 1u);
  EXPECT_EQ(stats.merged_keys, keys);
  kv_map expected;
  for (std::uint64_t i = 0; i < keys; ++i) expected[key_at(i)] = value_at(i);
  std::mt19937_64 rng(9);
  EXPECT_TRUE(reads_match(*db, expected, nullptr, rng, 20000));
}

// Writers do not wait for merges that cannot move keys: with a snapshot of the empty store
// held, no key may leave the list, and a fill past the bound completes (a writer that
// waited regardless would wait for ever), the list holding every key.
TEST(EngineMergeThreadTest, WritersDoNotWaitForMergesThatMoveNothing) {
  merging_store store;
  auto& db = store.db;
  const std::uint64_t keys = merging_store::keys;
  ASSERT_NE(db, nullptr);
  const Snapshot* snapshot = db->GetSnapshot();
  for (std::uint64_t i = 0; i < keys; ++i) {
    ASSERT_TRUE(db->Put(key_at(i), value_at(i)).ok());
  }
  const Stats stats = db->GetStats();
  EXPECT_EQ(stats.keys, keys);
  EXPECT_EQ(stats.merged_keys, 0u);
  db->ReleaseSnapshot(snapshot);
}

// Options for a merge thread that never runs of its own accord in a test: only
// WaitForMerges (or a writer over the list's bound) starts its passes.
Options merges_on_request() {
  Options options;
  options.merge_interval = std::chrono::hours(1);
  return options;
}

// WaitForMerges starts the merge thread's passes without waiting for its interval and
// returns once every key has moved and the tier is one run; a second call, after more
// writes, waits for a pass of its own. (Without the call's wake-up, the thread would wait
// an hour: the test would time out.)
TEST(EngineWaitForMergesTest, ReturnsOnceEveryKeyMovedAndTheTierIsOneRun) {
  using config = on_hardware<hashed, manual>;
  region memory(64u << 20);
  auto db = open_in<config>(memory, merges_on_request());
  ASSERT_NE(db, nullptr);
  kv_map expected;
  std::uint64_t keys = 0;
  for (const std::uint64_t more : {3000u, 5000u}) {
    for (const std::uint64_t end = keys + more; keys < end; ++keys) {
      ASSERT_TRUE(db->Put(key_at(keys), value_at(keys)).ok());
      expected[key_at(keys)] = value_at(keys);
    }
    ASSERT_TRUE(db->WaitForMerges().ok());
    const Stats stats = db->GetStats();
    EXPECT_EQ(stats.keys, 0u) << "keys left in the list";
    EXPECT_EQ(stats.merged_keys, keys);
    EXPECT_EQ(stats.merge_errors, 0u);
    EXPECT_EQ(engine_of<config>(db.get())->TEST_tier_small_runs(), 0u);
    std::mt19937_64 rng(keys);
    EXPECT_TRUE(reads_match(*db, expected, nullptr, rng, keys));
  }
}

// Without a merge thread (merge_interval zero, the default) there is nothing to wait for:
// WaitForMerges returns OK and the keys stay in the list.
TEST(EngineWaitForMergesTest, IsOKAtOnceWithoutAMergeThread) {
  region memory(64u << 20);
  auto db = open_in<on_hardware<hashed, manual>>(memory);
  ASSERT_NE(db, nullptr);
  for (std::uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(db->Put(key_at(i), value_at(i)).ok());
  EXPECT_TRUE(db->WaitForMerges().ok());
  EXPECT_EQ(db->GetStats().keys, 100u);
  EXPECT_EQ(db->GetStats().merges, 0u);
}

// A snapshot that holds every key's version keeps the keys in the list: a pass that may
// move none of them is settled, and WaitForMerges returns (it does not wait for keys that
// cannot move). Once the snapshot is released, a second call sees them all moved.
TEST(EngineWaitForMergesTest, DoesNotWaitForKeysASnapshotHolds) {
  region memory(64u << 20);
  auto db = open_in<on_hardware<hashed, manual>>(memory, merges_on_request());
  ASSERT_NE(db, nullptr);
  const Snapshot* snapshot = db->GetSnapshot();
  for (std::uint64_t i = 0; i < 1000; ++i) ASSERT_TRUE(db->Put(key_at(i), value_at(i)).ok());
  ASSERT_TRUE(db->WaitForMerges().ok());
  EXPECT_EQ(db->GetStats().keys, 1000u);
  EXPECT_EQ(db->GetStats().merged_keys, 0u);
  db->ReleaseSnapshot(snapshot);
  ASSERT_TRUE(db->WaitForMerges().ok());
  EXPECT_EQ(db->GetStats().keys, 0u);
  EXPECT_EQ(db->GetStats().merged_keys, 1000u);
}

// A pass that fails (here: the pool too full for the tier's nodes) ends the wait with its
// error, the one Stats::merge_error says, and no key is lost.
TEST(EngineWaitForMergesTest, ReturnsTheErrorOfAFailedPass) {
  region memory(4u << 20);
  auto db = open_in<on_hardware<hashed, manual>>(memory, merges_on_request());
  ASSERT_NE(db, nullptr);
  kv_map expected;
  std::uint64_t written = 0;
  const auto put = [&](std::uint64_t i, const std::string& value) {
    const Status s = db->Put(key_at(i), value);
    if (s.ok()) expected[key_at(i)] = value;
    return s;
  };
  // As AFailedMergeSaysWhyInStatsUntilOneSucceeds fills its pool: only the first keys may
  // move, and the pool has no room for their tier nodes.
  constexpr std::uint64_t kA = 200, kB = 400;
  const std::string value(64, 'v'), large(4000, 'l');
  for (; written < kB; ++written) ASSERT_TRUE(put(written, value).ok());
  for (; written < kB + kA; ++written) ASSERT_TRUE(put(written, large).ok());
  const Snapshot* snapshot = db->GetSnapshot();
  for (std::uint64_t i = kB; i < kB + kA; ++i) ASSERT_TRUE(put(i, large + "2").ok());
  for (const std::string* fill : {&large, &value}) {
    Status full;
    while (full.ok() && written < 1000000) full = put(written++, *fill);
    ASSERT_TRUE(full.IsNoSpace()) << full.ToString();
  }
  const Status s = db->WaitForMerges();
  ASSERT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_EQ(s.ToString(), db->GetStats().merge_error);
  std::mt19937_64 rng(6);
  EXPECT_TRUE(reads_match(*db, expected, nullptr, rng, written));
  db->ReleaseSnapshot(snapshot);
}

// ---- the format ------------------------------------------------------------------------

using namespace pool_edit;
using test_support::read_file;
using test_support::write_file;

// Rewrites a store of this build as format 3 wrote it: the format word, and no tier word.
void make_format_3(const std::string& path) {
  std::vector<char> bytes = read_file(path);
  store(bytes, kRoot, in::kFormatV3);
  store(bytes, kRoot + 6 * W, std::uint64_t{0});
  write_file(path, bytes);
}

TEST(EngineTierFormatTest, AStoreOfFormat3IsReadAndUpgradedAtItsFirstWritableOpen) {
  temp_pool_path path("format-3");
  fill(path.str(), 20);
  make_format_3(path.str());
  const std::vector<char> v3 = read_file(path.str());
  {
    CheckReport report;
    const Status s = DB::Check(path.str(), &report);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(report.live_keys, 20u);
    Options ro;
    ro.read_only = true;
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(ro, path.str(), &db).ok());
    std::string got;
    ASSERT_TRUE(db->Get(key_of(3), &got).ok());
    EXPECT_EQ(got, value_of(3));
    auto it = db->NewIterator(ReadOptions{});
    int n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
    EXPECT_EQ(n, 20);
  }
  EXPECT_EQ(read_file(path.str()), v3) << "a read-only open and a check change nothing";
  {
    std::unique_ptr<DB> db;
    const Status s = DB::Open(Options{}, path.str(), &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(db->Put(key_of(100), value_of(100)).ok());
  }
  const std::vector<char> v4 = read_file(path.str());
  EXPECT_EQ(load<std::uint64_t>(v4, kRoot) & ((std::uint64_t{1} << 63) - 1), in::kFormat);
  EXPECT_NE(load<std::uint64_t>(v4, kRoot + 6 * W), 0u) << "the upgrade wrote the tier word";
  CheckReport report;
  ASSERT_TRUE(DB::Check(path.str(), &report).ok());
  EXPECT_EQ(report.live_keys, 21u);
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options{}, path.str(), &db).ok());
  for (int i = 0; i < 20; ++i) {
    std::string got;
    ASSERT_TRUE(db->Get(key_of(i), &got).ok()) << i;
    EXPECT_EQ(got, value_of(i));
  }
}

// A tier record whose bytes changed is reported by Check and Open, naming the pool, and the
// file is left as it was.
TEST(EngineTierFormatTest, ADamagedTierIsReportedByOpenAndCheck) {
  temp_pool_path path("damaged-tier");
  const std::string value = "a-value-only-the-tier-holds-0123456789";
  {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(creating(), path.str(), &db).ok());
    auto* e = engine_of<in::default_config>(db.get());
    ASSERT_TRUE(e->TEST_tier_write({{"tier-key-1", value}, {"tier-key-2", value + "2"}}, true).ok());
    std::string got;
    ASSERT_TRUE(db->Get("tier-key-1", &got).ok());
    EXPECT_EQ(got, value);
  }
  CheckReport report;
  ASSERT_TRUE(DB::Check(path.str(), &report).ok());
  std::vector<char> bytes = read_file(path.str());
  auto at = std::search(bytes.begin(), bytes.end(), value.begin(), value.end());
  ASSERT_NE(at, bytes.end());
  at[5] ^= 0x10;
  write_file(path.str(), bytes);
  const Status checked = DB::Check(path.str(), &report);
  EXPECT_TRUE(checked.IsCorruption()) << checked.ToString();
  EXPECT_NE(checked.message().find(path.str()), std::string::npos) << checked.ToString();
  std::unique_ptr<DB> db;
  const Status opened = DB::Open(Options{}, path.str(), &db);
  EXPECT_TRUE(opened.IsCorruption()) << opened.ToString();
  EXPECT_EQ(read_file(path.str()), bytes) << "a refused open changes nothing";
}

}  // namespace
