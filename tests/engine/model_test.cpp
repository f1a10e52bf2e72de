// The engine against std::map: long random sequences of put, delete, batch, get and
// iteration (both directions, with bounds and snapshots) give identical results, in each
// durability mode and counter placement.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine_support.hpp"
#include "reference_iterator.hpp"

namespace {

using namespace flintkv_test;

template <class Config>
class ModelTest : public ::testing::Test {
 protected:
  region memory_{64 << 20};
};
TYPED_TEST_SUITE(ModelTest, model_configs);

std::string random_key(std::mt19937_64& rng) { return "key" + std::to_string(rng() % 300); }
std::string random_value(std::mt19937_64& rng, int i) {
  return std::string(rng() % 40, static_cast<char>('a' + rng() % 26)) + std::to_string(i);
}

TYPED_TEST(ModelTest, RandomOperationsMatchStdMap) {
  auto db = open_in<TypeParam>(this->memory_);
  ASSERT_TRUE(db);
  std::mt19937_64 rng(20261121);
  kv_map now;
  std::vector<std::pair<const Snapshot*, kv_map>> snapshots;
  for (int i = 0; i < 6000; ++i) {
    const int op = static_cast<int>(rng() % 100);
    if (op < 35) {
      std::string k = random_key(rng), v = random_value(rng, i);
      ASSERT_TRUE(db->Put(k, v).ok());
      now[k] = v;
    } else if (op < 48) {
      std::string k = random_key(rng);
      ASSERT_TRUE(db->Delete(k).ok());
      now.erase(k);
    } else if (op < 56) {
      WriteBatch batch;
      kv_map after = now;
      for (int n = 1 + static_cast<int>(rng() % 8); n > 0; --n) {
        std::string k = random_key(rng);
        if (rng() % 3 == 0) {
          batch.Delete(k);
          after.erase(k);
        } else {
          std::string v = random_value(rng, i);
          batch.Put(k, v);
          after[k] = v;
        }
      }
      ASSERT_TRUE(db->Write(batch).ok());
      now = std::move(after);
    } else if (op < 76) {
      const kv_map* view = &now;
      ReadOptions ro;
      if (!snapshots.empty() && rng() % 2 == 0) {
        auto& s = snapshots[rng() % snapshots.size()];
        ro.snapshot = s.first;
        view = &s.second;
      }
      std::string k = random_key(rng), got;
      Status s = db->Get(k, &got, ro);
      auto it = view->find(k);
      if (it == view->end()) {
        ASSERT_TRUE(s.IsNotFound()) << k << ": " << s.ToString();
      } else {
        ASSERT_TRUE(s.ok()) << k << ": " << s.ToString();
        ASSERT_EQ(got, it->second) << k;
      }
    } else if (op < 80) {
      if (snapshots.size() < 4) {
        snapshots.emplace_back(db->GetSnapshot(), now);
      } else {
        std::size_t j = rng() % snapshots.size();
        db->ReleaseSnapshot(snapshots[j].first);
        snapshots.erase(snapshots.begin() + static_cast<std::ptrdiff_t>(j));
      }
    } else {
      // A random walk with an iterator.
      ReadOptions ro;
      const kv_map* view = &now;
      if (!snapshots.empty() && rng() % 2 == 0) {
        auto& s = snapshots[rng() % snapshots.size()];
        ro.snapshot = s.first;
        view = &s.second;
      }
      if (rng() % 3 == 0) ro.lower_bound = random_key(rng);
      if (rng() % 3 == 0) ro.upper_bound = random_key(rng);
      auto it = db->NewIterator(ro);
      reference_iterator ref(*view, ro);
      for (int step = 0; step < 30; ++step) {
        const int move = static_cast<int>(rng() % 10);
        std::string t = random_key(rng);
        if (!ref.valid() || move < 2) {
          switch (rng() % 4) {
            case 0: it->SeekToFirst(); ref.seek_to_first(); break;
            case 1: it->SeekToLast(); ref.seek_to_last(); break;
            case 2: it->Seek(t); ref.seek(t); break;
            case 3: it->SeekForPrev(t); ref.seek_for_prev(t); break;
          }
        } else if (move < 6) {
          it->Next();
          ref.next();
        } else {
          it->Prev();
          ref.prev();
        }
        ASSERT_EQ(it->Valid(), ref.valid()) << "step " << step << " of op " << i;
        if (ref.valid()) {
          ASSERT_EQ(it->key(), ref.key());
          ASSERT_EQ(it->value(), ref.value());
        }
        ASSERT_TRUE(it->status().ok());
      }
    }
  }
  for (auto& s : snapshots) db->ReleaseSnapshot(s.first);
  Stats stats = db->GetStats();
  EXPECT_EQ(stats.live_keys, now.size());
}

// Keys and values a Seek and its Nexts read differently from `view`, over Seeks to random
// keys (some below every key, some between keys) with up to 40 Nexts each, with and
// without bounds.
int scans_differing(DB& db, const kv_map& view, const ReadOptions& base, std::mt19937_64& rng) {
  int differing = 0;
  for (int scan = 0; scan < 60; ++scan) {
    ReadOptions ro = base;
    if (scan % 4 == 1) ro.upper_bound = "key" + std::to_string(rng() % 900);
    if (scan % 4 == 2) ro.lower_bound = "key" + std::to_string(rng() % 900);
    auto it = db.NewIterator(ro);
    reference_iterator ref(view, ro);
    const std::string target = scan % 10 == 0 ? std::string() : "key" + std::to_string(rng() % 900);
    it->Seek(target);
    ref.seek(target);
    for (int step = 0; step <= 40; ++step) {
      if (it->Valid() != ref.valid()) {
        ++differing;
        break;
      }
      if (!ref.valid()) break;
      differing += it->key() != ref.key() || it->value() != ref.value();
      it->Next();
      ref.next();
    }
    differing += !it->status().ok();
  }
  return differing;
}

// Scans of a store whose keys have one version each (read through their tree tags, without
// their entries: iterator.hpp, land_by_tag) and of one whose keys were overwritten and
// deleted since, at the newest version and at a snapshot from before, before and after a
// reopen. Returns the keys and values read differently from the model.
template <class Config>
int scans_after_updates(const region& memory, bool skip_update_marks) {
  int differing = 0;
  std::mt19937_64 rng(20261126);
  kv_map now;
  auto update_some = [&](DB& db, int round) {
    for (int i = 0; i < 900; i += 1 + static_cast<int>(rng() % 3)) {
      const std::string k = "key" + std::to_string(i);
      if (rng() % 4 == 0) {
        if (!db.Delete(k).ok()) ++differing;
        now.erase(k);
      } else {
        const std::string v = "v" + std::to_string(round) + "-" + std::to_string(i);
        if (!db.Put(k, v).ok()) ++differing;
        now[k] = v;
      }
    }
  };
  {
    auto db = open_in<Config>(memory);
    if (!db) return 1;
    engine_of<Config>(db.get())->TEST_skip_update_marks(skip_update_marks);
    for (int i = 0; i < 900; i += 2) {
      const std::string k = "key" + std::to_string(i), v = "first-" + std::to_string(i);
      if (!db->Put(k, v).ok()) ++differing;
      now[k] = v;
    }
    differing += scans_differing(*db, now, {}, rng);
    const Snapshot* before = db->GetSnapshot();
    const kv_map at_snapshot = now;
    update_some(*db, 1);
    differing += scans_differing(*db, now, {}, rng);
    ReadOptions old;
    old.snapshot = before;
    differing += scans_differing(*db, at_snapshot, old, rng);
    db->ReleaseSnapshot(before);
  }
  auto db = open_in<Config>(memory);
  if (!db) return 1;
  engine_of<Config>(db.get())->TEST_skip_update_marks(skip_update_marks);
  differing += scans_differing(*db, now, {}, rng);
  update_some(*db, 2);
  differing += scans_differing(*db, now, {}, rng);
  return differing;
}

TYPED_TEST(ModelTest, ScansReadTheNewestVersionsAfterUpdatesAndReopens) {
  EXPECT_EQ(scans_after_updates<TypeParam>(this->memory_, false), 0);
}

// The check above has teeth: with updates left unmarked, scans take each updated key's
// tag for its newest node and read the value it first had.
TYPED_TEST(ModelTest, AScanThatTrustsAStaleTagIsCaught) {
  EXPECT_GT(scans_after_updates<TypeParam>(this->memory_, true), 0);
}

TYPED_TEST(ModelTest, ReopenRecoversTheSameContent) {
  kv_map expected;
  {
    auto db = open_in<TypeParam>(this->memory_);
    ASSERT_TRUE(db);
    std::mt19937_64 rng(7);
    for (int i = 0; i < 3000; ++i) {
      std::string k = random_key(rng);
      if (rng() % 4 == 0) {
        ASSERT_TRUE(db->Delete(k).ok());
        expected.erase(k);
      } else {
        std::string v = random_value(rng, i);
        ASSERT_TRUE(db->Put(k, v).ok());
        expected[k] = v;
      }
    }
  }
  auto db = open_in<TypeParam>(this->memory_);
  ASSERT_TRUE(db);
  auto it = db->NewIterator();
  auto e = expected.begin();
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++e) {
    ASSERT_NE(e, expected.end());
    EXPECT_EQ(it->key(), e->first);
    EXPECT_EQ(it->value(), e->second);
  }
  EXPECT_EQ(e, expected.end());
  Stats stats = db->GetStats();
  EXPECT_EQ(stats.live_keys, expected.size());
  EXPECT_EQ(stats.recovered_versions, expected.size())
      << "closing the store drops every version no reader can see: only live keys remain";
  ASSERT_TRUE(db->Put("after-reopen", "x").ok());
  std::string v;
  ASSERT_TRUE(db->Get("after-reopen", &v).ok());
  EXPECT_EQ(v, "x");
}

}  // namespace
