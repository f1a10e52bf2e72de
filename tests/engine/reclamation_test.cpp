// Reclamation (reclamation.hpp): the versions no reader can see are dropped, and only those.
//  - ReclamationModelTest: long overwrite/delete sequences against std::map while snapshots
//    and iterators are held and released at random moments, with a reclamation pass after
//    every (or every third) combining pass: every held reader reads exactly its state, and
//    once every reader is gone the store holds one version per live key and the pool's use
//    is exactly that of a store written fresh with the same content.
//  - ReclamationTest: a held reader keeps exactly the versions it can see, and versions
//    older than every reader are dropped; updates among puts of new keys (located by a
//    search alone) keep one entry per key; deletes give back every byte; closing drops every
//    obsolete version; a small pool full of reclaimable versions keeps taking writes, one
//    full of pinned versions says NoSpace until they go.
//  - SnapshotRegistryTest: iterators take slots of their own until every slot is taken,
//    then the registry's map; concurrent readers never share a slot, and every leave counts.
//  - ReclamationConcurrencyTest: writers overwrite and delete a few keys while readers hold
//    snapshots and iterators, with reclamation after every combining pass; the values are
//    encoded (key, writer, generation, checksum) so a reader that reached a reclaimed (and
//    reused) node would see the wrong key or a bad checksum; Gets without a snapshot, which
//    only the epoch grace period protects, copy large values while their nodes' versions
//    become obsolete.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine_support.hpp"
#include "flintkv/internal/reclamation.hpp"

namespace {

using namespace flintkv_test;
using kv_map = std::map<std::string, std::string>;

template <class Config>
std::uint64_t last_version() {
  return internal::engine_for<Config>::TEST_last_write_version();
}

// Every key of `state`, read with Get at `snapshot` (nullptr: now), and every key of
// `universe` that is not in it, NotFound.
::testing::AssertionResult reads_match(DB& db, const Snapshot* snapshot, const kv_map& state,
                                       const std::vector<std::string>& universe) {
  ReadOptions at;
  at.snapshot = snapshot;
  for (const std::string& k : universe) {
    std::string got;
    Status s = db.Get(k, &got, at);
    auto it = state.find(k);
    if (it == state.end()) {
      if (!s.IsNotFound()) {
        return ::testing::AssertionFailure() << k << ": expected NotFound, got " << s.ToString()
                                             << " '" << got << "'";
      }
    } else if (!s.ok()) {
      return ::testing::AssertionFailure() << k << ": " << s.ToString();
    } else if (got != it->second) {
      return ::testing::AssertionFailure() << k << ": expected '" << it->second << "', got '"
                                           << got << "'";
    }
  }
  return ::testing::AssertionSuccess();
}

// A full scan from SeekToFirst gives exactly `state`, in order.
::testing::AssertionResult scan_matches(Iterator& it, const kv_map& state) {
  auto e = state.begin();
  for (it.SeekToFirst(); it.Valid(); it.Next(), ++e) {
    if (e == state.end()) {
      return ::testing::AssertionFailure() << "extra key '" << it.key() << "'";
    }
    if (it.key() != e->first || it.value() != e->second) {
      return ::testing::AssertionFailure() << "at '" << e->first << "'='" << e->second
                                           << "': got '" << it.key() << "'='" << it.value()
                                           << "'";
    }
  }
  if (!it.status().ok()) return ::testing::AssertionFailure() << it.status().ToString();
  if (e != state.end()) return ::testing::AssertionFailure() << "missing key '" << e->first << "'";
  return ::testing::AssertionSuccess();
}

// The pool's use of a store written fresh, in configuration Config, with exactly `state`.
template <class Config>
std::uint64_t fresh_pool_used(std::size_t region_bytes, const kv_map& state) {
  region r(region_bytes);
  auto db = open_in<Config>(r);
  if (!db) return 0;
  for (const auto& [k, v] : state) EXPECT_TRUE(db->Put(k, v).ok());
  return db->GetStats().pool_used;
}

// After every reader is gone and TEST_reclaim(): one version per live key, none for the
// others, nothing obsolete.
template <class Config>
void expect_fully_reclaimed(DB& db, const kv_map& state, const std::vector<std::string>& universe) {
  auto* e = engine_of<Config>(&db);
  ASSERT_NE(e, nullptr);
  const Stats st = db.GetStats();
  EXPECT_EQ(st.snapshots, 0u);
  EXPECT_EQ(st.live_keys, state.size());
  EXPECT_EQ(st.keys, state.size()) << "deleted keys are removed from the index";
  EXPECT_EQ(st.versions, state.size());
  EXPECT_EQ(st.obsolete_versions, 0u);
  EXPECT_EQ(e->TEST_check_index(), "");
  for (const std::string& k : universe) {
    const std::vector<std::uint64_t> versions = e->TEST_versions(k);
    if (state.count(k) != 0) {
      ASSERT_EQ(versions.size(), 1u) << k;
      auto newest = e->TEST_read(k);
      ASSERT_TRUE(newest.has_value()) << k;
      EXPECT_EQ(versions[0], newest->second) << k;
    } else {
      EXPECT_TRUE(versions.empty()) << k << " holds " << versions.size() << " versions";
    }
  }
}

// ---- the model test ----------------------------------------------------------------------

template <class Config>
class ReclamationModelTest : public ::testing::Test {
 protected:
  static constexpr std::size_t kRegion = 32 << 20;
  region memory_{kRegion};
};
TYPED_TEST_SUITE(ReclamationModelTest, model_configs);

constexpr int kModelKeys = 12;

std::string model_key(int i) {
  std::string k = i < 10 ? "k0" : "k";  // appended: operator+ here trips a GCC 12
  k += std::to_string(i);                // -Wrestrict false positive
  return k;
}

std::vector<std::string> model_universe() {
  std::vector<std::string> keys;
  for (int i = 0; i < kModelKeys; ++i) keys.push_back(model_key(i));
  return keys;
}

// Values of many sizes (several size classes of the pool), each naming the operation.
std::string model_value(std::mt19937_64& rng, int round, int op) {
  const std::size_t n = rng() % 16 == 0 ? 600 + rng() % 1500 : rng() % 120;
  return std::to_string(round) + "." + std::to_string(op) + ":" +
         std::string(n, static_cast<char>('a' + rng() % 26));
}

// A snapshot, or an iterator, held with the state it must read.
struct held_snapshot {
  const Snapshot* snapshot;
  kv_map state;
};
struct held_iterator {
  std::unique_ptr<Iterator> it;
  kv_map state;
  std::optional<std::string> at;  // the key the iterator stands on; nullopt: not Valid
};

// The iterator stands where the model says.
::testing::AssertionResult positioned(const held_iterator& h) {
  if (h.it->Valid() != h.at.has_value()) {
    return ::testing::AssertionFailure()
           << "Valid() is " << h.it->Valid() << ", expected " << h.at.has_value()
           << (h.it->Valid() ? " at '" + std::string(h.it->key()) + "'" : std::string());
  }
  if (!h.at) return ::testing::AssertionSuccess();
  if (h.it->key() != *h.at || h.it->value() != h.state.at(*h.at)) {
    return ::testing::AssertionFailure() << "expected '" << *h.at << "'='" << h.state.at(*h.at)
                                         << "', got '" << h.it->key() << "'='"
                                         << h.it->value() << "'";
  }
  return ::testing::AssertionSuccess();
}

std::optional<std::string> key_of(const kv_map& m, kv_map::const_iterator it) {
  if (it == m.end()) return std::nullopt;
  return it->first;
}

TYPED_TEST(ReclamationModelTest, HeldReadersReadTheirStateAndTheRestIsReclaimed) {
  auto db = open_in<TypeParam>(this->memory_);
  ASSERT_TRUE(db);
  auto* engine = engine_of<TypeParam>(db.get());
  ASSERT_NE(engine, nullptr);
  const std::vector<std::string> universe = model_universe();
  std::mt19937_64 rng(20261129);
  kv_map now;
  std::vector<held_snapshot> snapshots;
  std::vector<held_iterator> iterators;
  std::vector<std::uint64_t> used_after_round;
  constexpr int kRounds = 3;
  constexpr int kOps = 3000;
  constexpr unsigned kReclaimEvery[kRounds] = {1, 3, 1};

  for (int round = 0; round < kRounds; ++round) {
    engine->TEST_reclaim_every(kReclaimEvery[round]);
    for (int op = 0; op < kOps; ++op) {
      SCOPED_TRACE("round " + std::to_string(round) + ", op " + std::to_string(op));
      // Keys come and go (deleted keys leave the index): its point table and back links
      // follow them.
      if (op % 50 == 0) {
        ASSERT_EQ(engine->TEST_check_index(), "");
      }
      const int what = static_cast<int>(rng() % 100);
      if (what < 45) {
        const std::string k = universe[rng() % universe.size()];
        const std::string v = model_value(rng, round, op);
        ASSERT_TRUE(db->Put(k, v).ok());
        now[k] = v;
      } else if (what < 65) {
        const std::string k = universe[rng() % universe.size()];
        ASSERT_TRUE(db->Delete(k).ok());
        now.erase(k);
      } else if (what < 70) {
        WriteBatch batch;
        kv_map after = now;
        for (int n = 2 + static_cast<int>(rng() % 3); n > 0; --n) {
          const std::string k = universe[rng() % universe.size()];
          if (rng() % 3 == 0) {
            batch.Delete(k);
            after.erase(k);
          } else {
            const std::string v = model_value(rng, round, op);
            batch.Put(k, v);
            after[k] = v;
          }
        }
        ASSERT_TRUE(db->Write(batch).ok());
        now = std::move(after);
      } else if (what < 80) {
        // Take a snapshot, or release one (the oldest as often as any other).
        if (snapshots.size() < 4 && rng() % 2 == 0) {
          const Snapshot* s = db->GetSnapshot();
          ASSERT_NE(s, nullptr);
          snapshots.push_back({s, now});
        } else if (!snapshots.empty()) {
          const std::size_t j = rng() % snapshots.size();
          db->ReleaseSnapshot(snapshots[j].snapshot);
          snapshots.erase(snapshots.begin() + static_cast<std::ptrdiff_t>(j));
        }
      } else if (what < 87) {
        // Take an iterator (over now, or over a held snapshot), or drop one.
        if (iterators.size() < 3 && rng() % 2 == 0) {
          ReadOptions ro;
          const kv_map* state = &now;
          if (!snapshots.empty() && rng() % 3 == 0) {
            const held_snapshot& s = snapshots[rng() % snapshots.size()];
            ro.snapshot = s.snapshot;
            state = &s.state;
          }
          held_iterator h{db->NewIterator(ro), *state, std::nullopt};
          if (rng() % 2 == 0) {
            h.it->SeekToFirst();
            h.at = key_of(h.state, h.state.begin());
          }
          ASSERT_TRUE(positioned(h));
          iterators.push_back(std::move(h));
        } else if (!iterators.empty()) {
          iterators.erase(iterators.begin() +
                          static_cast<std::ptrdiff_t>(rng() % iterators.size()));
        }
      } else if (what < 96) {
        // Move a held iterator one step on (a partial iteration continued after later
        // writes), or seek it again when it has run off the end.
        if (!iterators.empty()) {
          held_iterator& h = iterators[rng() % iterators.size()];
          if (!h.at) {
            const std::string target = universe[rng() % universe.size()];
            h.it->Seek(target);
            h.at = key_of(h.state, h.state.lower_bound(target));
          } else if (rng() % 4 != 0) {
            h.it->Next();
            h.at = key_of(h.state, h.state.upper_bound(*h.at));
          } else {
            h.it->Prev();
            auto it = h.state.find(*h.at);
            h.at = it == h.state.begin() ? std::nullopt : key_of(h.state, std::prev(it));
          }
          ASSERT_TRUE(positioned(h));
        }
      } else if (what < 99) {
        // A held iterator's full scan, then back where it stood.
        if (!iterators.empty()) {
          held_iterator& h = iterators[rng() % iterators.size()];
          ASSERT_TRUE(scan_matches(*h.it, h.state));
          if (h.at) h.it->Seek(*h.at);
          ASSERT_TRUE(positioned(h));
        }
      } else {
        // Reclaim everything the held readers allow, at once.
        engine->TEST_reclaim();
      }
      // Every held snapshot reads exactly its state, and now reads the model.
      for (const held_snapshot& s : snapshots) {
        ASSERT_TRUE(reads_match(*db, s.snapshot, s.state, universe))
            << "snapshot at version " << s.snapshot->version();
      }
      ASSERT_TRUE(reads_match(*db, nullptr, now, universe));
    }

    // A held iterator, after thousands of writes, scans exactly its state.
    for (held_iterator& h : iterators) {
      ASSERT_TRUE(positioned(h));
      ASSERT_TRUE(scan_matches(*h.it, h.state));
    }
    // Everything released: one version per live key, and the pool holds exactly what a
    // store written fresh with the same content holds.
    iterators.clear();
    for (const held_snapshot& s : snapshots) db->ReleaseSnapshot(s.snapshot);
    snapshots.clear();
    engine->TEST_reclaim();
    SCOPED_TRACE("end of round " + std::to_string(round));
    expect_fully_reclaimed<TypeParam>(*db, now, universe);
    auto it = db->NewIterator();
    ASSERT_TRUE(scan_matches(*it, now));
    it.reset();
    const std::uint64_t used = db->GetStats().pool_used;
    EXPECT_EQ(used, fresh_pool_used<TypeParam>(TestFixture::kRegion, now))
        << "the pool holds more than the live versions";
    used_after_round.push_back(used);
  }
  EXPECT_GT(db->GetStats().reclaimed_versions, 0u);

  // Closing drops every obsolete version: writes whose garbage no pass took yet.
  engine->TEST_reclaim_every(0);
  for (int op = 0; op < 40; ++op) {
    const std::string k = universe[rng() % universe.size()];
    if (op % 5 == 4) {
      ASSERT_TRUE(db->Delete(k).ok());
      now.erase(k);
    } else {
      const std::string v = model_value(rng, kRounds, op);
      ASSERT_TRUE(db->Put(k, v).ok());
      now[k] = v;
    }
  }
  ASSERT_GT(db->GetStats().obsolete_versions, 0u);
  db.reset();
  db = open_in<TypeParam>(this->memory_);
  ASSERT_TRUE(db);
  const Stats st = db->GetStats();
  EXPECT_EQ(st.recovered_versions, now.size());
  EXPECT_EQ(st.versions, now.size());
  EXPECT_EQ(st.keys, now.size());
  ASSERT_TRUE(reads_match(*db, nullptr, now, universe));
  EXPECT_EQ(st.pool_used, fresh_pool_used<TypeParam>(TestFixture::kRegion, now));
}

// ---- single-threaded properties ----------------------------------------------------------

template <class Config>
class ReclamationTest : public ::testing::Test {};
using reclamation_configs =
    ::testing::Types<on_hardware<hashed, manual>, on_hardware<flit::adjacent, automatic>,
                     on_hardware<flit::link_and_persist, manual>>;
TYPED_TEST_SUITE(ReclamationTest, reclamation_configs);

// A snapshot held across many overwrites keeps the version it reads and no other old one;
// releasing it lets that version go too.
TYPED_TEST(ReclamationTest, SnapshotKeepsExactlyTheVersionsItCanSee) {
  region memory(16 << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_TRUE(db);
  auto* engine = engine_of<TypeParam>(db.get());
  ASSERT_NE(engine, nullptr);
  auto put = [&](const std::string& k, int i) {
    EXPECT_TRUE(db->Put(k, k + "-" + std::to_string(i)).ok());
    return last_version<TypeParam>();
  };
  std::uint64_t seen_k = 0;
  for (int i = 1; i <= 10; ++i) seen_k = put("k", i);
  const std::uint64_t seen_still = put("still", 0);     // never written again
  const std::uint64_t seen_gone = put("gone", 0);       // deleted while S is held
  put("later", 0);                                      // deleted and written again...
  ASSERT_TRUE(db->Delete("later").ok());                // ...so S sees it absent
  const std::uint64_t later_deleted = last_version<TypeParam>();
  const Snapshot* s = db->GetSnapshot();
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->version(), last_version<TypeParam>());
  std::uint64_t newest_k = 0, newest_later = 0;
  for (int i = 11; i <= 110; ++i) {
    newest_k = put("k", i);
    if (i % 10 == 0) newest_later = put("later", i);
  }
  ASSERT_TRUE(db->Delete("gone").ok());
  const std::uint64_t gone_deleted = last_version<TypeParam>();

  engine->TEST_reclaim();
  EXPECT_EQ(engine->TEST_versions("k"), (std::vector<std::uint64_t>{newest_k, seen_k}));
  EXPECT_EQ(engine->TEST_versions("still"), (std::vector<std::uint64_t>{seen_still}));
  EXPECT_EQ(engine->TEST_versions("gone"), (std::vector<std::uint64_t>{gone_deleted, seen_gone}));
  // S reads "later" as absent: from its delete, or from no version at or below it at all.
  const std::vector<std::uint64_t> later = engine->TEST_versions("later");
  const bool later_keeps_delete =
      later == std::vector<std::uint64_t>{newest_later, later_deleted};
  EXPECT_TRUE(later == std::vector<std::uint64_t>{newest_later} || later_keeps_delete)
      << later.size() << " versions, the oldest " << later.back();
  ReadOptions at;
  at.snapshot = s;
  std::string v;
  ASSERT_TRUE(db->Get("k", &v, at).ok());
  EXPECT_EQ(v, "k-10");
  ASSERT_TRUE(db->Get("gone", &v, at).ok());
  EXPECT_EQ(v, "gone-0");
  EXPECT_TRUE(db->Get("later", &v, at).IsNotFound());
  // The newest version of each of the 4 keys ("gone"'s is its delete), and the versions S
  // reads of "k" and "gone" (and maybe "later"'s delete).
  EXPECT_EQ(db->GetStats().versions, 4u + 2u + (later_keeps_delete ? 1u : 0u));

  db->ReleaseSnapshot(s);
  engine->TEST_reclaim();
  EXPECT_EQ(engine->TEST_versions("k"), (std::vector<std::uint64_t>{newest_k}));
  EXPECT_EQ(engine->TEST_versions("still"), (std::vector<std::uint64_t>{seen_still}));
  EXPECT_TRUE(engine->TEST_versions("gone").empty());
  EXPECT_EQ(engine->TEST_versions("later"), (std::vector<std::uint64_t>{newest_later}));
  EXPECT_EQ(db->GetStats().versions, 3u);
}

// The same with two snapshots and an iterator (an implicit snapshot) between them: each
// keeps the version it reads.
TYPED_TEST(ReclamationTest, EveryHeldReaderKeepsItsVersionAndOnlyThat) {
  region memory(16 << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_TRUE(db);
  auto* engine = engine_of<TypeParam>(db.get());
  ASSERT_NE(engine, nullptr);
  std::uint64_t newest = 0;
  std::vector<std::uint64_t> seen;  // the versions the readers read, newest first
  std::vector<std::string> seen_values;
  const Snapshot* s1 = nullptr;
  const Snapshot* s2 = nullptr;
  std::unique_ptr<Iterator> it;
  for (int i = 1; i <= 200; ++i) {
    ASSERT_TRUE(db->Put("k", "v" + std::to_string(i)).ok());
    newest = last_version<TypeParam>();
    if (i == 20 || i == 90 || i == 150) {
      seen.insert(seen.begin(), newest);
      seen_values.insert(seen_values.begin(), "v" + std::to_string(i));
    }
    if (i == 20) s1 = db->GetSnapshot();
    if (i == 90) {
      it = db->NewIterator();
      it->SeekToFirst();
    }
    if (i == 150) s2 = db->GetSnapshot();
  }
  engine->TEST_reclaim();
  std::vector<std::uint64_t> expected{newest};
  expected.insert(expected.end(), seen.begin(), seen.end());
  EXPECT_EQ(engine->TEST_versions("k"), expected);
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value(), seen_values[1]);
  std::string v;
  ReadOptions at;
  at.snapshot = s1;
  ASSERT_TRUE(db->Get("k", &v, at).ok());
  EXPECT_EQ(v, seen_values[2]);
  at.snapshot = s2;
  ASSERT_TRUE(db->Get("k", &v, at).ok());
  EXPECT_EQ(v, seen_values[0]);

  // The oldest reader goes first, then the newest, then the one in the middle.
  db->ReleaseSnapshot(s1);
  engine->TEST_reclaim();
  EXPECT_EQ(engine->TEST_versions("k"), (std::vector<std::uint64_t>{newest, seen[0], seen[1]}));
  db->ReleaseSnapshot(s2);
  engine->TEST_reclaim();
  EXPECT_EQ(engine->TEST_versions("k"), (std::vector<std::uint64_t>{newest, seen[1]}));
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value(), seen_values[1]);
  it.reset();
  engine->TEST_reclaim();
  EXPECT_EQ(engine->TEST_versions("k"), (std::vector<std::uint64_t>{newest}));
}

// Refresh moves an iterator to the newest version: it registers that one before it lets
// the old one go, so reclamation keeps the version it reads now and drops the one it read
// before; an iterator over a snapshot keeps reading the snapshot.
TYPED_TEST(ReclamationTest, ARefreshedIteratorReadsTheNewestStateAndLetsItsOldVersionGo) {
  region memory(16 << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_TRUE(db);
  auto* engine = engine_of<TypeParam>(db.get());
  ASSERT_NE(engine, nullptr);
  auto put = [&](int i) {
    EXPECT_TRUE(db->Put("k", "v" + std::to_string(i)).ok());
    return last_version<TypeParam>();
  };
  for (int i = 1; i < 10; ++i) put(i);
  const std::uint64_t first_read = put(10);
  std::unique_ptr<Iterator> it = db->NewIterator();
  it->SeekToFirst();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value(), "v10");
  for (int i = 11; i < 20; ++i) put(i);
  const std::uint64_t refreshed_at = put(20);
  engine->TEST_reclaim();
  EXPECT_EQ(engine->TEST_versions("k"), (std::vector<std::uint64_t>{refreshed_at, first_read}));

  ASSERT_TRUE(it->Refresh().ok());
  EXPECT_FALSE(it->Valid()) << "a refreshed iterator stands nowhere until it seeks";
  EXPECT_TRUE(it->status().ok());
  std::uint64_t newest = 0;
  for (int i = 21; i <= 30; ++i) newest = put(i);
  engine->TEST_reclaim();
  EXPECT_EQ(engine->TEST_versions("k"), (std::vector<std::uint64_t>{newest, refreshed_at}))
      << "the version read before the refresh goes, the one read since stays";
  it->Seek("k");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "k");
  EXPECT_EQ(it->value(), "v20");
  it->Next();
  EXPECT_FALSE(it->Valid());
  it.reset();
  engine->TEST_reclaim();
  EXPECT_EQ(engine->TEST_versions("k"), (std::vector<std::uint64_t>{newest}));

  const Snapshot* snap = db->GetSnapshot();
  ASSERT_NE(snap, nullptr);
  ReadOptions at;
  at.snapshot = snap;
  std::unique_ptr<Iterator> over_snapshot = db->NewIterator(at);
  put(31);
  over_snapshot->SeekToFirst();
  EXPECT_TRUE(over_snapshot->Refresh().IsNotSupported());
  ASSERT_TRUE(over_snapshot->Valid()) << "a refused refresh leaves the iterator where it was";
  EXPECT_EQ(over_snapshot->value(), "v30");
  over_snapshot->SeekToFirst();
  ASSERT_TRUE(over_snapshot->Valid());
  EXPECT_EQ(over_snapshot->value(), "v30");
  over_snapshot.reset();
  db->ReleaseSnapshot(snap);
}

// Versions below the oldest reader are dropped (all but the one it reads), whatever is
// held above it.
TYPED_TEST(ReclamationTest, VersionsOlderThanEveryReaderAreDropped) {
  region memory(16 << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_TRUE(db);
  auto* engine = engine_of<TypeParam>(db.get());
  ASSERT_NE(engine, nullptr);
  for (int i = 1; i <= 50; ++i) ASSERT_TRUE(db->Put("k", "v" + std::to_string(i)).ok());
  const std::uint64_t seen = last_version<TypeParam>();
  const Snapshot* s = db->GetSnapshot();
  for (int i = 51; i <= 60; ++i) ASSERT_TRUE(db->Put("k", "v" + std::to_string(i)).ok());
  engine->TEST_reclaim();
  const std::vector<std::uint64_t> versions = engine->TEST_versions("k");
  ASSERT_FALSE(versions.empty());
  EXPECT_EQ(versions.back(), seen) << "the oldest version kept is the one the snapshot reads";
  EXPECT_GE(db->GetStats().reclaimed_versions, 49u) << "the 49 versions before it are gone";
  EXPECT_EQ(engine->TEST_reclaim(), 0u) << "a second pass finds nothing more";
  db->ReleaseSnapshot(s);
}

// A writer whose last puts were of new keys locates the next key by a search alone (the
// engine's locate guesses so); a put or delete of an existing key among them still finds
// and updates that key's entry: one entry, and once reclaimed one version, per key.
TYPED_TEST(ReclamationTest, UpdatesAmongPutsOfNewKeysKeepOneEntryPerKey) {
  region memory(16 << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_TRUE(db);
  auto* engine = engine_of<TypeParam>(db.get());
  ASSERT_NE(engine, nullptr);
  kv_map now;
  std::vector<std::string> keys;
  for (int i = 0; i < 400; ++i) {
    keys.push_back("key" + std::to_string(1000 + i));
    ASSERT_TRUE(db->Put(keys.back(), "v0").ok());
    now[keys.back()] = "v0";
    if (i % 8 == 7) {  // after eight new keys: an existing one
      const std::string& k = keys[static_cast<std::size_t>(i - 4)];
      if (i % 16 == 7) {
        ASSERT_TRUE(db->Put(k, "v1").ok());
        now[k] = "v1";
      } else {
        ASSERT_TRUE(db->Delete(k).ok());
        now.erase(k);
      }
    }
  }
  EXPECT_EQ(engine->TEST_check_index(), "");
  ASSERT_TRUE(reads_match(*db, nullptr, now, keys));
  engine->TEST_reclaim();
  expect_fully_reclaimed<TypeParam>(*db, now, keys);
}

// Deleting every key and reclaiming gives back every byte: the pool's use is the empty
// store's, the index holds nothing, and so does the store after a reopen.
TYPED_TEST(ReclamationTest, DeletingEveryKeyEmptiesThePool) {
  region memory(16 << 20);
  auto db = open_in<TypeParam>(memory);
  ASSERT_TRUE(db);
  auto* engine = engine_of<TypeParam>(db.get());
  ASSERT_NE(engine, nullptr);
  const std::uint64_t empty_used = db->GetStats().pool_used;
  constexpr int kKeys = 300;
  std::vector<std::string> keys;
  kv_map full;
  for (int i = 0; i < kKeys; ++i) keys.push_back("key" + std::to_string(1000 + i));

  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE("pass " + std::to_string(pass));
    full.clear();
    for (int gen = 0; gen < 3; ++gen) {  // each key overwritten: chains of three
      for (int i = 0; i < kKeys; ++i) {
        const std::string v = std::string(static_cast<std::size_t>(i % 200), 'x') +
                              std::to_string(gen);
        ASSERT_TRUE(db->Put(keys[i], v).ok());
        full[keys[i]] = v;
      }
    }
    ASSERT_TRUE(db->Delete("never-written").ok());  // a delete of a missing key: a tombstone
    const Snapshot* s = db->GetSnapshot();
    auto it = db->NewIterator();
    it->SeekToFirst();
    for (const std::string& k : keys) ASSERT_TRUE(db->Delete(k).ok());
    engine->TEST_reclaim();
    // The readers still see every key.
    ASSERT_TRUE(reads_match(*db, s, full, keys));
    ASSERT_TRUE(scan_matches(*it, full));
    ASSERT_TRUE(reads_match(*db, nullptr, {}, keys));
    db->ReleaseSnapshot(s);
    it.reset();
    engine->TEST_reclaim();
    keys.push_back("never-written");
    expect_fully_reclaimed<TypeParam>(*db, {}, keys);
    keys.pop_back();
    const Stats st = db->GetStats();
    EXPECT_EQ(st.live_keys, 0u);
    EXPECT_EQ(st.pool_used, empty_used) << "deleted keys left bytes in the pool";
    auto scan = db->NewIterator();
    scan->SeekToFirst();
    EXPECT_FALSE(scan->Valid());
  }

  db.reset();
  db = open_in<TypeParam>(memory);
  ASSERT_TRUE(db);
  const Stats st = db->GetStats();
  EXPECT_EQ(st.recovered_versions, 0u);
  EXPECT_EQ(st.keys, 0u);
  EXPECT_EQ(st.pool_used, empty_used);
}

// Closing the store drops every obsolete version, even those no pass took yet: a reopen
// finds one version per live key.
TYPED_TEST(ReclamationTest, ClosingDropsEveryObsoleteVersion) {
  region memory(16 << 20);
  kv_map expected;
  {
    auto db = open_in<TypeParam>(memory);
    ASSERT_TRUE(db);
    for (int gen = 0; gen < 5; ++gen) {
      for (int i = 0; i < 20; ++i) {
        const std::string k = "key" + std::to_string(i);
        if (gen == 4 && i % 3 == 0) {
          ASSERT_TRUE(db->Delete(k).ok());
          expected.erase(k);
        } else {
          const std::string v = "value" + std::to_string(gen * 100 + i);
          ASSERT_TRUE(db->Put(k, v).ok());
          expected[k] = v;
        }
      }
    }
    ASSERT_GT(db->GetStats().obsolete_versions, 0u);
  }
  auto db = open_in<TypeParam>(memory);
  ASSERT_TRUE(db);
  const Stats st = db->GetStats();
  EXPECT_EQ(st.recovered_versions, expected.size());
  EXPECT_EQ(st.keys, expected.size());
  EXPECT_EQ(st.obsolete_versions, 0u);
  auto it = db->NewIterator();
  ASSERT_TRUE(scan_matches(*it, expected));
}

// A pool of the minimum size takes far more overwrites than it holds: every put succeeds
// (no test hook makes reclamation run). Space pinned by snapshots is not reclaimable: the
// pool then says NoSpace, the snapshots still read what they did, and once they are released
// writes succeed again.
TYPED_TEST(ReclamationTest, SmallPoolTakesOverwritesUntilSnapshotsPinIt) {
  region memory(kMinPoolSize);
  auto db = open_in<TypeParam>(memory);
  ASSERT_TRUE(db);
  const std::uint64_t pool_size = db->GetStats().pool_size;
  constexpr int kKeys = 8;
  constexpr std::size_t kValue = 1024;
  kv_map now;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back("key" + std::to_string(i));
  auto value = [&](std::uint64_t n) {
    std::string v = std::to_string(n) + "-";
    v.resize(kValue, static_cast<char>('a' + n % 26));
    return v;
  };
  std::uint64_t n = 0;
  auto overwrite = [&]() -> Status {
    const std::string& k = keys[n % kKeys];
    const std::string v = value(n);
    Status s = db->Put(k, v);
    if (s.ok()) {
      now[k] = v;
      ++n;
    }
    return s;
  };

  // Five times the pool's bytes.
  const std::uint64_t fill = 5 * pool_size / kValue;
  for (std::uint64_t i = 0; i < fill; ++i) {
    Status s = overwrite();
    ASSERT_TRUE(s.ok()) << "put " << i << " of " << fill << ": " << s.ToString();
  }
  ASSERT_TRUE(reads_match(*db, nullptr, now, keys));
  EXPECT_GT(db->GetStats().reclaimed_versions, fill - 2 * pool_size / kValue);

  // A snapshot every kKeys puts: each pins kKeys versions no other reader reads.
  std::vector<held_snapshot> snapshots;
  Status s;
  for (std::uint64_t i = 0; i < 2 * pool_size / kValue; ++i) {
    if (i % kKeys == 0) snapshots.push_back({db->GetSnapshot(), now});
    s = overwrite();
    if (!s.ok()) break;
  }
  ASSERT_TRUE(s.IsNoSpace()) << "the pool never filled: " << s.ToString();
  const Stats full = db->GetStats();
  EXPECT_GT(full.pool_used, pool_size / 2);
  for (const held_snapshot& h : snapshots) {
    ASSERT_TRUE(reads_match(*db, h.snapshot, h.state, keys)) << "snapshot " << h.snapshot->version();
  }
  ASSERT_TRUE(reads_match(*db, nullptr, now, keys));
  EXPECT_TRUE(overwrite().IsNoSpace()) << "still pinned";

  for (const held_snapshot& h : snapshots) db->ReleaseSnapshot(h.snapshot);
  for (std::uint64_t i = 0; i < 2 * pool_size / kValue; ++i) {
    Status again = overwrite();
    ASSERT_TRUE(again.ok()) << "put " << i << " after the release: " << again.ToString();
  }
  ASSERT_TRUE(reads_match(*db, nullptr, now, keys));
}

// ---- the registry -------------------------------------------------------------------------

using flintkv::internal::snapshot_registry;

// An iterator at the visible version takes a slot; once every slot is taken, the map. Both
// kinds are in versions() (each version once) and count(); leaving a slot changes the
// generation and removes the version.
TEST(SnapshotRegistryTest, ReadersTakeSlotsThenTheMapAndLeavingShows) {
  snapshot_registry registry;
  std::atomic<std::uint64_t> visible{7};
  const std::uint64_t snapshot = registry.enter(visible);  // a snapshot: the map
  std::vector<snapshot_registry::registration> readers;
  for (std::uint32_t i = 0; i < snapshot_registry::kSlots; ++i) {
    visible.store(7 + i % 3);
    readers.push_back(registry.enter_reader(visible));
    ASSERT_NE(readers.back().slot, snapshot_registry::kInMap) << "reader " << i;
    EXPECT_EQ(readers.back().version, 7 + i % 3);
  }
  visible.store(20);
  const snapshot_registry::registration extra = registry.enter_reader(visible);
  EXPECT_EQ(extra.slot, snapshot_registry::kInMap) << "every slot is taken";
  EXPECT_EQ(extra.version, 20u);
  EXPECT_EQ(registry.versions(), (std::vector<std::uint64_t>{7, 8, 9, 20}));
  EXPECT_EQ(registry.count(), snapshot_registry::kSlots + 2);

  // The readers at 9 (every third) leave: 9 is no longer registered.
  std::uint64_t generation = registry.generation();
  for (const auto& r : readers) {
    if (r.version != 9) continue;
    registry.leave(r);
    EXPECT_NE(registry.generation(), generation) << "a reader left slot " << r.slot;
    generation = registry.generation();
  }
  EXPECT_EQ(registry.versions(), (std::vector<std::uint64_t>{7, 8, 20}));
  // A freed slot is taken again before the map.
  visible.store(30);
  const snapshot_registry::registration again = registry.enter_reader(visible);
  EXPECT_NE(again.slot, snapshot_registry::kInMap);
  EXPECT_EQ(registry.versions(), (std::vector<std::uint64_t>{7, 8, 20, 30}));

  registry.leave(extra);
  registry.leave(again);
  registry.leave(snapshot);
  for (const auto& r : readers) {
    if (r.version != 9) registry.leave(r);
  }
  EXPECT_TRUE(registry.versions().empty());
  EXPECT_EQ(registry.count(), 0u);
}

// Threads enter many readers each, then wait for one another while holding them all (1.5
// times the slots between them, so the rest must go to the map), then leave: no slot ever
// has two readers, and every leave is counted in the generation.
TEST(SnapshotRegistryTest, ConcurrentReadersNeverShareASlot) {
  constexpr int kThreads = 4;
  constexpr int kHeld = snapshot_registry::kSlots * 3 / 8;
  constexpr int kRounds = 500;
  snapshot_registry registry;
  std::atomic<std::uint64_t> visible{1};
  std::vector<std::atomic<int>> owner(snapshot_registry::kSlots);
  std::atomic<int> shared{0};
  std::atomic<std::uint64_t> slot_leaves{0}, map_entries{0};
  std::barrier all_held(kThreads);
  std::vector<std::thread> threads;
  for (int t = 1; t <= kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<snapshot_registry::registration> held;
      for (int round = 0; round < kRounds; ++round) {
        for (int i = 0; i < kHeld; ++i) {
          held.push_back(registry.enter_reader(visible));
          const auto& r = held.back();
          if (r.slot == snapshot_registry::kInMap) {
            map_entries.fetch_add(1);
          } else if (owner[r.slot].exchange(t) != 0) {
            shared.fetch_add(1);
          }
        }
        visible.fetch_add(1);
        all_held.arrive_and_wait();
        for (const auto& r : held) {
          if (r.slot != snapshot_registry::kInMap) {
            owner[r.slot].store(0);
            slot_leaves.fetch_add(1);
          }
          registry.leave(r);
        }
        held.clear();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(shared.load(), 0) << "two readers held one slot at once";
  // At each wait kThreads * kHeld readers are held, and the slots hold kSlots of them.
  EXPECT_GE(map_entries.load(),
            std::uint64_t{kRounds} * (kThreads * kHeld - snapshot_registry::kSlots));
  // Each slot leave counts once; map versions count when their last reader leaves.
  EXPECT_GE(registry.generation(), slot_leaves.load());
  EXPECT_LE(registry.generation(), slot_leaves.load() + map_entries.load());
  EXPECT_EQ(registry.count(), 0u);
  EXPECT_TRUE(registry.versions().empty());
}

// ---- real threads ------------------------------------------------------------------------

std::uint32_t checksum(std::string_view s) {
  std::uint32_t h = 2166136261u;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h;
}

// "<key>|<writer>|<generation>|<padding>|<checksum of the rest>": the padding makes values
// of several sizes, so that reclaimed blocks are reused by other keys' values.
std::string encode(std::string_view key, int writer, std::uint64_t gen) {
  std::string body = std::string(key) + "|" + std::to_string(writer) + "|" +
                     std::to_string(gen) + "|" + std::string(gen % 97, 'p');
  return body + "|" + std::to_string(checksum(body));
}

struct decoded {
  std::string key;
  int writer = -1;
  std::uint64_t gen = 0;
};

bool decode(std::string_view value, decoded* out) {
  const auto last = value.rfind('|');
  if (last == std::string_view::npos) return false;
  const std::string_view body = value.substr(0, last);
  if (std::to_string(checksum(body)) != value.substr(last + 1)) return false;
  const auto a = body.find('|');
  const auto b = body.find('|', a + 1);
  const auto c = body.find('|', b + 1);
  if (a == std::string_view::npos || b == std::string_view::npos || c == std::string_view::npos) {
    return false;
  }
  out->key = std::string(body.substr(0, a));
  out->writer = std::stoi(std::string(body.substr(a + 1, b - a - 1)));
  out->gen = std::stoull(std::string(body.substr(b + 1, c - b - 1)));
  return true;
}

template <class Config>
class ReclamationConcurrencyTest : public ::testing::Test {
 protected:
  region memory_{32 << 20};
};
TYPED_TEST_SUITE(ReclamationConcurrencyTest, concurrency_configs);

// Records failures from any thread; the first message is kept for the report.
class failure_log {
 public:
  void fail(const std::string& what) {
    if (count_.fetch_add(1) == 0) {
      std::lock_guard lock(mutex_);
      first_ = what;
    }
  }
  int count() const { return count_.load(); }
  std::string first() const {
    std::lock_guard lock(mutex_);
    return first_;
  }

 private:
  std::atomic<int> count_{0};
  mutable std::mutex mutex_;
  std::string first_;
};

TYPED_TEST(ReclamationConcurrencyTest, ReadersNeverSeeAReclaimedVersion) {
  auto db = open_in<TypeParam>(this->memory_);
  ASSERT_TRUE(db);
  auto* engine = engine_of<TypeParam>(db.get());
  ASSERT_NE(engine, nullptr);
  engine->TEST_reclaim_every(1);
  constexpr int kKeys = 8;
  constexpr int kWriters = 2;
  constexpr std::uint64_t kWrites = 15000;
  constexpr int kMinReaderRounds = 50;
  auto key_name = [](int k) { return "key" + std::to_string(k); };
  failure_log failures;
  std::atomic<int> writers_running{kWriters};

  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (std::uint64_t gen = 1; gen <= kWrites; ++gen) {
        const std::string k = key_name(static_cast<int>((gen * 3 + static_cast<std::uint64_t>(w)) % kKeys));
        Status s = gen % 13 == 0 ? db->Delete(k) : db->Put(k, encode(k, w, gen));
        if (!s.ok()) failures.fail("writer: " + s.ToString());
      }
      writers_running.fetch_sub(1);
    });
  }

  auto reader = [&](int id) {
    std::map<std::pair<int, int>, std::uint64_t> newest_seen;  // (writer, key) -> generation
    std::map<std::pair<int, int>, std::uint64_t> newest_now;   // the same, read without a snapshot
    ReadOptions options;
    options.verify_checksums = id == 0;  // reader 1 reads raw bytes: the decoding checks them
    for (int round = 0; round < kMinReaderRounds || writers_running.load() > 0; ++round) {
      // An implicit snapshot, advanced partially now and finished after the other reads.
      auto partial = db->NewIterator(options);
      partial->SeekToFirst();
      std::string partial_last;
      auto step_partial = [&] {
        if (!partial->Valid()) return;
        const std::string k(partial->key());
        decoded d;
        if (!partial_last.empty() && !(partial_last < k)) {
          failures.fail("implicit iterator: '" + k + "' after '" + partial_last + "'");
        }
        if (!decode(partial->value(), &d) || d.key != k) {
          failures.fail("implicit iterator: '" + k + "' holds '" + std::string(partial->value()) + "'");
        }
        partial_last = k;
        partial->Next();
      };
      step_partial();

      const Snapshot* snap = db->GetSnapshot();
      ReadOptions at = options;
      at.snapshot = snap;
      std::map<std::string, std::string> first;  // what Get read at the snapshot
      for (int k = 0; k < kKeys; ++k) {
        std::string v;
        Status s = db->Get(key_name(k), &v, at);
        if (s.IsNotFound()) continue;
        decoded d;
        if (!s.ok() || !decode(v, &d) || d.key != key_name(k)) {
          failures.fail("get " + key_name(k) + ": " + s.ToString() + " '" + v + "'");
          continue;
        }
        std::uint64_t& newest = newest_seen[{d.writer, k}];
        if (d.gen < newest) {
          failures.fail("get " + key_name(k) + ": writer " + std::to_string(d.writer) +
                        " went back from " + std::to_string(newest) + " to " + std::to_string(d.gen));
        }
        newest = d.gen;
        first[key_name(k)] = v;
      }
      step_partial();
      // An iterator over the snapshot: each key at most once, in order, with what Get read.
      {
        auto it = db->NewIterator(at);
        std::string previous;
        std::size_t found = 0;
        for (it->SeekToFirst(); it->Valid(); it->Next()) {
          const std::string k(it->key());
          if (!previous.empty() && !(previous < k)) {
            failures.fail("snapshot iterator: '" + k + "' after '" + previous + "'");
          }
          previous = k;
          auto f = first.find(k);
          if (f == first.end() || f->second != it->value()) {
            failures.fail("snapshot iterator: '" + k + "'='" + std::string(it->value()) +
                          "', Get read '" + (f == first.end() ? "(none)" : f->second) + "'");
          }
          ++found;
        }
        if (!it->status().ok()) failures.fail("snapshot iterator: " + it->status().ToString());
        if (found != first.size()) failures.fail("snapshot iterator missed keys");
      }
      // Gets of the newest state (pinned in the epoch domain, no snapshot), many of them:
      // the version each reads may be made obsolete, and its node reused, while it reads.
      for (int k = 0; k < 4 * kKeys; ++k) {
        const std::string key = key_name(k % kKeys);
        std::string v;
        Status s = db->Get(key, &v, options);
        if (s.IsNotFound()) continue;
        decoded d;
        if (!s.ok() || !decode(v, &d) || d.key != key) {
          failures.fail("get now " + key + ": " + s.ToString() + " '" + v + "'");
          continue;
        }
        std::uint64_t& newest = newest_now[{d.writer, k % kKeys}];
        if (d.gen < newest) {
          failures.fail("get now " + key + ": writer " + std::to_string(d.writer) +
                        " went back from " + std::to_string(newest) + " to " + std::to_string(d.gen));
        }
        newest = d.gen;
      }
      if (round % 16 == id) engine->TEST_reclaim();  // with this reader's snapshot held
      // The same snapshot read again, after many writes and reclamation passes.
      for (int k = 0; k < kKeys; ++k) {
        std::string v;
        Status s = db->Get(key_name(k), &v, at);
        auto f = first.find(key_name(k));
        if (f == first.end() ? !s.IsNotFound() : (!s.ok() || v != f->second)) {
          failures.fail("snapshot read twice: " + key_name(k) + " gave '" +
                        (f == first.end() ? "(none)" : f->second) + "', then " + s.ToString() +
                        " '" + v + "'");
        }
      }
      db->ReleaseSnapshot(snap);
      while (partial->Valid()) step_partial();
      if (!partial->status().ok()) failures.fail("implicit iterator: " + partial->status().ToString());
    }
  };
  threads.emplace_back(reader, 0);
  threads.emplace_back(reader, 1);
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.count(), 0) << "first failure: " << failures.first();

  const Stats during = db->GetStats();
  EXPECT_GT(during.reclaimed_versions, 0u);
  EXPECT_GT(during.reclamation_passes, 0u);
  engine->TEST_reclaim();
  const Stats st = db->GetStats();
  EXPECT_EQ(st.snapshots, 0u);
  EXPECT_EQ(st.versions, st.live_keys);
  EXPECT_EQ(st.keys, st.live_keys);
  for (int k = 0; k < kKeys; ++k) {
    std::string v;
    Status s = db->Get(key_name(k), &v);
    if (s.IsNotFound()) {
      EXPECT_TRUE(engine->TEST_versions(key_name(k)).empty());
      continue;
    }
    decoded d;
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(decode(v, &d)) << v;
    EXPECT_EQ(d.key, key_name(k));
    EXPECT_EQ(engine->TEST_versions(key_name(k)).size(), 1u);
  }
}

// Gets without a snapshot hold no registration: only the epoch grace period of the
// visible-version marks keeps their version's node from being freed and reused while they
// copy it. Large values of one size (each freed node is the writer's next one) make the
// copy long enough for a missing grace period to show as a torn or foreign value.
TYPED_TEST(ReclamationConcurrencyTest, GetsWithoutSnapshotNeverReadAReusedNode) {
  auto db = open_in<TypeParam>(this->memory_);
  ASSERT_TRUE(db);
  auto* engine = engine_of<TypeParam>(db.get());
  ASSERT_NE(engine, nullptr);
  engine->TEST_reclaim_every(1);
  constexpr int kKeys = 2;
  constexpr std::uint64_t kWrites = 6000;
  constexpr std::size_t kValue = 8 << 10;
  auto key_name = [](int k) { return "big" + std::to_string(k); };
  // encode()d, about kValue bytes.
  auto value_of = [&](const std::string& k, std::uint64_t gen) {
    std::string body = k + "|0|" + std::to_string(gen) + "|";
    body += std::string(kValue - body.size() - 12, static_cast<char>('a' + gen % 26));
    return body + "|" + std::to_string(checksum(body));
  };
  failure_log failures;
  std::atomic<bool> writing{true};
  std::thread writer([&] {
    for (std::uint64_t gen = 1; gen <= kWrites; ++gen) {
      const std::string k = key_name(static_cast<int>(gen % kKeys));
      if (Status s = db->Put(k, value_of(k, gen)); !s.ok()) failures.fail("writer: " + s.ToString());
    }
    writing.store(false);
  });
  auto reader = [&](bool verify) {
    ReadOptions options;
    options.verify_checksums = verify;
    std::uint64_t reads = 0;
    while (writing.load() || reads < 1000) {
      for (int k = 0; k < kKeys; ++k, ++reads) {
        std::string v;
        Status s = db->Get(key_name(k), &v, options);
        if (s.IsNotFound()) continue;
        decoded d;
        if (!s.ok() || !decode(v, &d) || d.key != key_name(k)) {
          failures.fail("get " + key_name(k) + ": " + s.ToString() + " '" + v.substr(0, 40) + "...'");
        }
      }
    }
  };
  std::thread r1(reader, false), r2(reader, true);
  writer.join();
  r1.join();
  r2.join();
  EXPECT_EQ(failures.count(), 0) << "first failure: " << failures.first();
  EXPECT_GT(db->GetStats().reclaimed_versions, kWrites / 2);
}

}  // namespace
