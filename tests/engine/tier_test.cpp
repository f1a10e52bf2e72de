// The engine over its packed tier (docs/engine-design.md, "The engine over the packed
// tier"): reads, recovery and the store's format.
//  - EngineTierTest: the tier is written through a test hook (TEST_tier_write), keeping the
//    precedence the engine relies on (the tier holds, of every key, a value older than
//    every version the list keeps). Gets, snapshots and iterators in every direction, with
//    and without bounds, answer as a model that lays the list's keys (values and deletes)
//    over the tier's, before and after the store is opened again.
//  - EngineTierFormatTest: a store of format 3 (no tier) is read as it is, upgraded at its
//    first read-write open and left untouched by a read-only one; a damaged tier is
//    reported by Open and Check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
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
