// Weak writes (WriteOptions::sync = false), Persist() and the weak window: what a weak write
// costs (beside what a sync put costs) and when it becomes durable, checked on the pv model
// by crashing with nothing but fenced write-backs persisted (the crash campaigns,
// crash_test.cpp "weak", cover every other crash point).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine_support.hpp"
#include "pv_interface/model.hpp"
#include "support/policies.hpp"

namespace {

using namespace flintkv_test;

using model_manual = engine_config<flit_test::on_model<hashed>, manual>;
using model_automatic = engine_config<flit_test::on_model<hashed>, automatic>;

WriteOptions weak() {
  WriteOptions o;
  o.sync = false;
  return o;
}

// An engine over a pv model's region, and what a crash would leave of it.
template <class Config>
class on_model_store {
 public:
  explicit on_model_store(Options options = {}) : model_(kRegion), active_(model_) {
    options.create_if_missing = true;
    options_ = options;
    open();
  }
  ~on_model_store() { db.reset(); }

  DB& operator*() { return *db; }
  DB* operator->() { return db.get(); }

  // The store a power failure now would leave: only fenced write-backs persisted. The
  // running engine is closed without its close's writes (the image is taken first), and
  // the image recovered by a new one.
  void crash_and_recover() { ASSERT_TRUE(crash_and_reopen().ok()); }

  // The same, with `damage` applied to the image first (a bad medium): what the open said.
  Status crash_and_reopen(const std::function<void(std::vector<std::byte>&)>& damage = {}) {
    std::vector<std::byte> image = model_.crash(pv::writeback::none);
    db.reset();
    if (damage) damage(image);
    model_.load_image(image);
    return internal::open_region<Config>({model_.base(), model_.size()}, options_, &db);
  }

  // key -> value of every live key.
  std::map<std::string, std::string> contents() {
    std::map<std::string, std::string> out;
    if (db == nullptr) {
      ADD_FAILURE() << "no store: the open after the crash failed";
      return out;
    }
    auto it = db->NewIterator();
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      out[std::string(it->key())] = std::string(it->value());
    }
    EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    return out;
  }

  std::unique_ptr<DB> db;

 private:
  static constexpr std::size_t kRegion = 4 << 20;
  void open() {
    Status s = internal::open_region<Config>({model_.base(), model_.size()}, options_, &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  pv::model model_;
  pv::scoped_activation active_;
  Options options_;
};

using kv = std::map<std::string, std::string>;

TEST(WeakDurabilityTest, AWeakWriteIsVisibleAtOnceAndLostByACrashBeforePersist) {
  on_model_store<model_manual> store;
  ASSERT_TRUE(store->Put("a", "1").ok());
  ASSERT_TRUE(store->Put("b", "1", weak()).ok());
  ASSERT_TRUE(store->Put("a", "2", weak()).ok());
  ASSERT_TRUE(store->Delete("c", weak()).ok());
  std::string v;
  ASSERT_TRUE(store->Get("a", &v).ok());
  EXPECT_EQ(v, "2");
  EXPECT_EQ(store.contents(), (kv{{"a", "2"}, {"b", "1"}}));
  const Stats s = store->GetStats();
  EXPECT_EQ(s.weak_writes, 3u);
  EXPECT_EQ(s.unpersisted_writes, 3u);
  store.crash_and_recover();
  EXPECT_EQ(store.contents(), (kv{{"a", "1"}}));
}

TEST(WeakDurabilityTest, PersistMakesEveryVisibleWeakWriteDurable) {
  on_model_store<model_manual> store;
  ASSERT_TRUE(store->Put("a", "1").ok());
  WriteBatch batch;
  batch.Put("b", "2");
  batch.Delete("a");
  ASSERT_TRUE(store->Write(batch, weak()).ok());
  ASSERT_TRUE(store->Put("c", "3", weak()).ok());
  ASSERT_TRUE(store->Persist().ok());
  const Stats s = store->GetStats();
  EXPECT_EQ(s.unpersisted_writes, 0u);
  EXPECT_EQ(s.persist_calls, 1u);
  EXPECT_EQ(s.weak_persists, 1u);
  ASSERT_TRUE(store->Put("d", "4", weak()).ok());  // after the Persist: may be lost
  store.crash_and_recover();
  EXPECT_EQ(store.contents(), (kv{{"b", "2"}, {"c", "3"}}));
}

TEST(WeakDurabilityTest, ASyncWriteMakesTheWeakWritesBeforeItDurable) {
  on_model_store<model_manual> store;
  ASSERT_TRUE(store->Put("a", "1", weak()).ok());
  ASSERT_TRUE(store->Delete("a", weak()).ok());
  ASSERT_TRUE(store->Put("b", "2", weak()).ok());
  ASSERT_TRUE(store->Put("c", "3").ok());
  EXPECT_EQ(store->GetStats().unpersisted_writes, 0u);
  store.crash_and_recover();
  EXPECT_EQ(store.contents(), (kv{{"b", "2"}, {"c", "3"}}));
}

TEST(WeakDurabilityTest, ASyncBatchMakesTheWeakWritesBeforeItDurable) {
  on_model_store<model_manual> store;
  ASSERT_TRUE(store->Put("a", "1", weak()).ok());
  WriteBatch batch;
  batch.Put("b", "2");
  batch.Put("c", "3");
  ASSERT_TRUE(store->Write(batch).ok());
  store.crash_and_recover();
  EXPECT_EQ(store.contents(), (kv{{"a", "1"}, {"b", "2"}, {"c", "3"}}));
}

TEST(WeakDurabilityTest, TheCloseMakesWeakWritesDurable) {
  on_model_store<model_manual> store;
  ASSERT_TRUE(store->Put("a", "1", weak()).ok());
  store.db.reset();  // a clean close
  store.crash_and_recover();
  EXPECT_EQ(store.contents(), (kv{{"a", "1"}}));
}

// Flips one bit of the only copy of `text` in `image`.
void flip_bit_in(std::vector<std::byte>& image, std::string_view text) {
  const auto* begin = reinterpret_cast<const char*>(image.data());
  const std::string_view all(begin, image.size());
  const std::size_t at = all.find(text);
  ASSERT_NE(at, std::string_view::npos) << text << " is not in the image";
  ASSERT_EQ(all.find(text, at + 1), std::string_view::npos) << text << " is there twice";
  image[at + text.size() / 2] ^= std::byte{0x10};
}

// Damage to the node of a write that was acknowledged durable is reported by the open, never
// passed as a torn write (which would roll the key back to its older value without a word):
// a crash right after the acknowledgement, with the newest value's bytes damaged, for each
// way a write is acknowledged. Before the root's fenced word was made durable with the pass,
// the open (manual mode) read 'a' as "older value".
template <class Config>
void expect_damage_to_the_newest_write_reported() {
  const std::string older = "older value of a", newest = "newest value of a";
  const std::vector<std::pair<const char*, std::function<void(DB&)>>> acknowledged = {
      {"a sync put", [&](DB& db) { ASSERT_TRUE(db.Put("a", newest).ok()); }},
      {"a sync batch",
       [&](DB& db) {
         WriteBatch b;
         b.Put("a", newest);
         b.Put("b", "2");
         ASSERT_TRUE(db.Write(b).ok());
       }},
      {"a weak put and Persist",
       [&](DB& db) {
         ASSERT_TRUE(db.Put("a", newest, weak()).ok());
         ASSERT_TRUE(db.Persist().ok());
       }},
  };
  for (const auto& [how, write] : acknowledged) {
    SCOPED_TRACE(how);
    on_model_store<Config> store;
    ASSERT_TRUE(store->Put("a", older).ok());
    ASSERT_TRUE(store->Put("c", "3").ok());
    write(*store);
    // Undamaged, the crash keeps the write.
    std::string v;
    ASSERT_TRUE(store.crash_and_reopen().ok());
    ASSERT_TRUE(store->Get("a", &v).ok());
    EXPECT_EQ(v, newest);
    // Damaged, it is reported.
    const Status s = store.crash_and_reopen(
        [&](std::vector<std::byte>& image) { flip_bit_in(image, newest); });
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    if (s.ok()) {
      ASSERT_TRUE(store->Get("a", &v).ok());
      EXPECT_EQ(v, newest) << "an acknowledged write rolled back";
    }
  }
}

TEST(WeakDurabilityTest, DamageToTheNewestAcknowledgedWriteIsReportedNotRolledBack) {
  expect_damage_to_the_newest_write_reported<model_manual>();
}

TEST(WeakDurabilityTest, DamageToTheNewestAcknowledgedWriteIsReportedInAutomaticModeToo) {
  expect_damage_to_the_newest_write_reported<model_automatic>();
}

TEST(WeakDurabilityTest, PersistWithNothingToPersistWritesNothing) {
  on_model_store<model_manual> store;
  ASSERT_TRUE(store->Put("a", "1").ok());
  const Stats before = store->GetStats();
  ASSERT_TRUE(store->Persist().ok());
  const Stats after = store->GetStats();
  EXPECT_EQ(after.pwb, before.pwb);
  EXPECT_EQ(after.pfence, before.pfence);
  EXPECT_EQ(after.weak_persists, 0u);
}

// A weak put fences nothing: its node, version and link wait for Persist, which writes
// back the node's line and the link's and fences twice (the words, then batch_mode with the
// root's fenced word). Each
// key here goes after the one before, at the end of the list: no link replaces a successor
// of the window still unfenced.
TEST(WeakDurabilityTest, AWeakPutCostsNoFenceAndPersistTwo) {
  on_model_store<model_manual> store;
  ASSERT_TRUE(store->Put("a", "1", weak()).ok());  // opens the window (one more fence)
  constexpr int kPuts = 10;
  const Stats before = store->GetStats();
  for (int i = 0; i < kPuts; ++i) {
    ASSERT_TRUE(store->Put("k" + std::to_string(i), "v", weak()).ok());
  }
  const Stats written = store->GetStats();
  EXPECT_EQ(written.pfence - before.pfence, 0u);
  EXPECT_EQ(written.pwb - before.pwb, 0u);
  ASSERT_TRUE(store->Persist().ok());
  const Stats persisted = store->GetStats();
  EXPECT_EQ(persisted.pfence - written.pfence, 2u);
  EXPECT_EQ(persisted.pwb - written.pwb, 2u * (kPuts + 1) + 2);  // the words, the root's two
}

// A sync put, of a new key or of one the store has, writes back its node's lines (with its
// version), its predecessor's link and the root's fenced version, and fences twice (node and
// link together, then the fenced word): the successor it names is right at the first try (a
// wrong one costs a retry), whatever the order of the keys.
TEST(WeakDurabilityTest, ASyncPutCostsTwoFencesAndTwoWriteBacksBeyondItsNode) {
  on_model_store<model_manual> store;
  const std::string value(40, 'v');
  const std::uint64_t node_lines =
      (flintkv::internal::pnode<model_manual::policy>::size_for(6, value.size()) + 63) / 64;
  std::vector<int> order(300);
  for (int i = 0; i < 300; ++i) order[i] = (i * 7919) % 300;  // scattered, each once
  auto key = [](int i) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "k%05d", i);
    return std::string(buf);
  };
  // The first node takes a chunk of the heap for its size class, which writes back and
  // fences the chunk's tag as well; 600 nodes fit in that chunk.
  ASSERT_TRUE(store->Put("first", value).ok());
  // New keys, then updates of 60 of them: fewer than a reclamation batch, so that no
  // reclamation check (which fences) runs in between.
  for (int round = 0; round < 2; ++round) {
    for (int i : std::span(order).first(round == 0 ? order.size() : 60)) {
      const Stats before = store->GetStats();
      ASSERT_TRUE(store->Put(key(i), value).ok());
      const Stats after = store->GetStats();
      ASSERT_EQ(after.pfence - before.pfence, 2u) << key(i) << " in round " << round;
      ASSERT_EQ(after.pwb - before.pwb, node_lines + 2) << key(i) << " in round " << round;
    }
  }
}

TEST(WeakDurabilityTest, TheWindowIsClosedWhenItsWordsRunOut) {
  on_model_store<model_manual> store;
  // 8192 noted words, two per put: the window closes on the 4097th put at the latest.
  for (int i = 0; i < 5000; ++i) {
    ASSERT_TRUE(store->Put("k" + std::to_string(i % 50), "v" + std::to_string(i), weak()).ok());
  }
  const Stats s = store->GetStats();
  EXPECT_GE(s.weak_persists, 1u);
  EXPECT_LT(s.unpersisted_writes, 4097u);
  EXPECT_EQ(s.persist_calls, 0u);
}

// Reclamation drops version 1 of 'a' once version 2 is durable, never before: whatever a
// crash leaves holds 'a', and is a prefix of the writes.
TEST(WeakDurabilityTest, ReclamationDropsOnlyWhatADurableVersionMadeObsolete) {
  on_model_store<model_manual> store;
  ASSERT_TRUE(store->Put("a", "1").ok());
  ASSERT_TRUE(store->Put("a", "2", weak()).ok());
  auto* e = engine_of<model_manual>(store.db.get());
  e->TEST_reclaim_every(1);  // a reclamation pass after every combining pass
  constexpr int kPuts = 20;  // passes enough for the readers' mark to settle
  for (int i = 0; i < kPuts; ++i) {
    ASSERT_TRUE(store->Put("b" + std::to_string(i), "1", weak()).ok());
  }
  EXPECT_GT(store->GetStats().reclaimed_versions, 0u);
  store.crash_and_recover();
  const kv got = store.contents();
  ASSERT_EQ(got.count("a"), 1u) << "version 1 of 'a' dropped while version 2 was not durable";
  int b = 0;
  while (b < kPuts && got.count("b" + std::to_string(b)) == 1) ++b;
  EXPECT_EQ(got.size(), 1u + b) << "not a prefix of the writes";
  if (got.at("a") == "1") {
    EXPECT_EQ(b, 0);
  }
}

// A key removed by reclamation is unlinked from its predecessor key's oldest node. When that
// key is new in the weak window, its node is not durably linked yet: the unlink must not be
// the only thing standing between the durable list and the freed blocks (which the next
// write reuses). Found by the crash-long suite (manual/adjacent/weak2).
TEST(WeakDurabilityTest, AKeyRemovedAfterANewWeakKeyLeavesNoFreedBlockInTheDurableList) {
  on_model_store<model_manual> store;
  ASSERT_TRUE(store->Put("k2", "2").ok());
  ASSERT_TRUE(store->Put("k4", "4").ok());
  ASSERT_TRUE(store->Delete("k4").ok());  // k4 goes once the delete is at the watermark
  auto* e = engine_of<model_manual>(store.db.get());
  e->TEST_reclaim_every(1);
  ASSERT_TRUE(store->Put("k3", "3", weak()).ok());  // k4's predecessor: new, in the window
  for (int i = 0; i < 20; ++i) {  // passes enough for the mark to settle and k4 to go
    ASSERT_TRUE(store->Put("k1", std::to_string(i), weak()).ok());  // reuses freed blocks
  }
  EXPECT_GT(store->GetStats().reclaimed_versions, 0u);
  store.crash_and_recover();  // a Corruption fails the open
  const kv got = store.contents();
  // A prefix: k2, then k3 and k1's values in the order they were written.
  ASSERT_EQ(got.count("k2"), 1u);
  EXPECT_EQ(got.count("k4"), 0u);
  if (got.count("k3") == 0) {
    EXPECT_EQ(got.count("k1"), 0u);
  }
}

TEST(WeakDurabilityTest, TheIntervalPersistsInTheBackground) {
  Options o;
  o.persist_interval = std::chrono::milliseconds(1);
  on_model_store<model_manual> store(o);
  ASSERT_TRUE(store->Put("a", "1", weak()).ok());
  // Waits for the background thread (bounded: a test that never sees it fails).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (store->GetStats().weak_persists == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(store->GetStats().weak_persists, 1u);
  EXPECT_EQ(store->GetStats().persist_calls, 0u);
  store.crash_and_recover();
  EXPECT_EQ(store.contents(), (kv{{"a", "1"}}));
}

// In automatic mode every store is durable before the next one: a weak write is a sync one.
TEST(WeakDurabilityTest, InAutomaticModeAWeakWriteIsDurableOnReturn) {
  on_model_store<model_automatic> store;
  ASSERT_TRUE(store->Put("a", "1", weak()).ok());
  EXPECT_EQ(store->GetStats().unpersisted_writes, 0u);
  store.crash_and_recover();
  EXPECT_EQ(store.contents(), (kv{{"a", "1"}}));
}

TEST(WeakDurabilityTest, PersistOnAReadOnlyStoreIsOk) {
  temp_pool_path path("weak-read-only");
  {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(pool_edit::creating(), path.str(), &db).ok());
    ASSERT_TRUE(db->Put("a", "1", weak()).ok());
  }
  Options o;
  o.read_only = true;
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(o, path.str(), &db).ok());
  EXPECT_TRUE(db->Persist().ok());
  EXPECT_TRUE(db->Put("b", "2", weak()).IsInvalidArgument());
  std::string v;
  ASSERT_TRUE(db->Get("a", &v).ok());
  EXPECT_EQ(v, "1");
}

std::string key_for(int thread, int k) {
  std::string key = "t";
  key += std::to_string(thread);
  key += '-';
  key += std::to_string(k);
  return key;
}

// Writers of weak and sync writes at once, and threads calling Persist: every write is
// visible on return, and the store holds the last write of each key after a Persist.
TEST(WeakDurabilityTest, WeakAndSyncWritersAndPersistsRunTogether) {
  region memory(64 << 20);
  auto db = open_in<internal::default_config>(memory);
  constexpr int kThreads = 4, kPuts = 2000;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      WriteOptions o;
      for (int i = 0; i < kPuts; ++i) {
        o.sync = (i + t) % 3 == 0;
        const std::string key = key_for(t, i % 37);
        const std::string value = std::to_string(i);
        if (!db->Put(key, value, o).ok()) failures.fetch_add(1);
        std::string read;
        if (!db->Get(key, &read).ok() || read != value) failures.fetch_add(1);
        if (i % 100 == 99 && !db->Persist().ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_TRUE(db->Persist().ok());
  EXPECT_EQ(db->GetStats().unpersisted_writes, 0u);
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < 37; ++k) {
      int last = -1;
      for (int i = 0; i < kPuts; ++i) {
        if (i % 37 == k) last = i;
      }
      std::string v;
      ASSERT_TRUE(db->Get(key_for(t, k), &v).ok());
      EXPECT_EQ(v, std::to_string(last));
    }
  }
}

}  // namespace
