// Writers and readers at once, with real threads. Writers encode (key, writer, generation,
// checksum) in each value so that readers can prove what they saw is consistent, in the
// style of LevelDB's skiplist test.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine_support.hpp"

namespace {

using namespace flintkv_test;

constexpr int kKeys = 64;
constexpr int kGroups = 8;  // keys written only by batches, three at a time

std::string key_name(int k) { return "key" + std::to_string(k); }
std::string group_key(int g, int member) {
  return "group" + std::to_string(g) + "-" + std::to_string(member);
}

std::uint32_t checksum(std::string_view s) {
  std::uint32_t h = 2166136261u;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h;
}

// "<key>|<writer>|<generation>|<checksum of the rest>"
std::string encode(std::string_view key, int writer, std::uint64_t gen) {
  std::string body = std::string(key) + "|" + std::to_string(writer) + "|" + std::to_string(gen);
  return body + "|" + std::to_string(checksum(body));
}

struct decoded {
  std::string key;
  int writer = -1;
  std::uint64_t gen = 0;
};

::testing::AssertionResult decode(std::string_view value, decoded* out) {
  auto last = value.rfind('|');
  if (last == std::string_view::npos) return ::testing::AssertionFailure() << "torn value";
  std::string_view body = value.substr(0, last);
  if (std::to_string(checksum(body)) != value.substr(last + 1)) {
    return ::testing::AssertionFailure() << "bad checksum in " << value;
  }
  // Parsed without exceptions: a broken variant may hand back any bytes.
  auto a = body.find('|'), b = body.rfind('|');
  if (a == std::string_view::npos || a == b) return ::testing::AssertionFailure() << "no fields";
  out->key = std::string(body.substr(0, a));
  const std::string_view writer = body.substr(a + 1, b - a - 1), gen = body.substr(b + 1);
  auto parse = [](std::string_view field, auto* to) {
    return std::from_chars(field.data(), field.data() + field.size(), *to).ec == std::errc{};
  };
  if (!parse(writer, &out->writer) || !parse(gen, &out->gen)) {
    return ::testing::AssertionFailure() << "bad fields in " << value;
  }
  return ::testing::AssertionSuccess();
}

template <class Config>
class ConcurrencyTest : public ::testing::Test {
 protected:
  region memory_{64 << 20};
};
TYPED_TEST_SUITE(ConcurrencyTest, concurrency_configs);

TYPED_TEST(ConcurrencyTest, ReadersSeeConsistentSnapshotsWhileWritersRun) {
  Options options;
  options.thread_slots = 2;  // fewer slots than writers: threads must wait for one
  auto db = open_in<TypeParam>(this->memory_, options);
  ASSERT_TRUE(db);
  constexpr int kWriters = 3;
  constexpr int kWrites = 1500;
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};

  // Every write and the version it got, to check last-writer-wins at the end.
  struct write_record {
    std::string key, value;
    std::uint64_t version;
  };
  std::mutex log_mutex;
  std::vector<write_record> log;

  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      std::uint64_t last_version = 0;
      for (std::uint64_t gen = 1; gen <= kWrites; ++gen) {
        if (gen % 10 == 0) {
          // A batch: the three members of a group get the same generation.
          int g = static_cast<int>((gen / 10 + static_cast<std::uint64_t>(w)) % kGroups);
          WriteBatch batch;
          for (int m = 0; m < 3; ++m) batch.Put(group_key(g, m), encode("group", w, gen));
          if (!db->Write(batch).ok()) ++failures;
        } else {
          std::string k = key_name(static_cast<int>((gen * 7 + static_cast<std::uint64_t>(w)) % kKeys));
          std::string v = encode(k, w, gen);
          if (!db->Put(k, v).ok()) ++failures;
          std::uint64_t version = internal::engine_for<TypeParam>::TEST_last_write_version();
          if (version <= last_version) ++failures;  // a writer's versions strictly increase
          last_version = version;
          std::lock_guard lock(log_mutex);
          log.push_back({k, v, version});
        }
      }
    });
  }

  auto reader = [&] {
    std::map<std::pair<int, int>, std::uint64_t> newest_seen;  // (writer, key) -> generation
    while (!done.load()) {
      const Snapshot* snap = db->GetSnapshot();
      ReadOptions at;
      at.snapshot = snap;
      // Keys: well-formed values of the right key; per writer, generations never go back.
      for (int k = 0; k < kKeys; ++k) {
        std::string v;
        Status s = db->Get(key_name(k), &v, at);
        if (s.IsNotFound()) continue;
        decoded d;
        if (!s.ok() || !decode(v, &d) || d.key != key_name(k)) {
          ++failures;
          continue;
        }
        std::uint64_t& newest = newest_seen[{d.writer, k}];
        if (d.gen < newest) ++failures;
        newest = d.gen;
      }
      // Batches: all members of a group carry one generation in any snapshot.
      for (int g = 0; g < kGroups; ++g) {
        std::string first;
        bool present = db->Get(group_key(g, 0), &first, at).ok();
        for (int m = 1; m < 3; ++m) {
          std::string v;
          bool here = db->Get(group_key(g, m), &v, at).ok();
          if (here != present || (here && v != first)) ++failures;
        }
      }
      // An iterator over the same snapshot sees exactly what Get sees there.
      auto it = db->NewIterator(at);
      std::string previous;
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        std::string k(it->key()), v;
        if (!previous.empty() && !(previous < k)) ++failures;
        previous = k;
        if (!db->Get(k, &v, at).ok() || v != it->value()) ++failures;
      }
      db->ReleaseSnapshot(snap);
    }
  };
  std::thread r1(reader), r2(reader);
  for (auto& t : writers) t.join();
  done = true;
  r1.join();
  r2.join();
  EXPECT_EQ(failures.load(), 0);

  // Last writer wins: each key holds the value of its highest-versioned write.
  std::map<std::string, write_record> newest;
  for (auto& rec : log) {
    auto [it, fresh] = newest.try_emplace(rec.key, rec);
    if (!fresh && rec.version > it->second.version) it->second = rec;
  }
  for (auto& [k, rec] : newest) {
    std::string v;
    ASSERT_TRUE(db->Get(k, &v).ok());
    EXPECT_EQ(v, rec.value) << k;
  }
  std::map<std::uint64_t, int> versions;
  for (auto& rec : log) EXPECT_EQ(++versions[rec.version], 1) << "versions are unique";
}

// Iterators walk back along the entries' level-0 back links while writers insert keys, delete
// them and reclamation removes their entries (a pass after every combining pass). Over one
// snapshot, the keys read backwards from the end, and backwards and forwards from a seek, are
// exactly the keys read forwards, with the same values.
TYPED_TEST(ConcurrencyTest, BackwardIterationAgreesWithForwardWhileEntriesComeAndGo) {
  auto db = open_in<TypeParam>(this->memory_);
  ASSERT_TRUE(db);
  auto* engine = engine_of<TypeParam>(db.get());
  ASSERT_NE(engine, nullptr);
  engine->TEST_reclaim_every(1);
  constexpr int kWriters = 2;
  constexpr int kWrites = 4000;
  std::atomic<int> writers_left{kWriters};
  std::atomic<int> failures{0};
  std::atomic<std::uint64_t> scans{0};

  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(w) + 7);
      for (int i = 0; i < kWrites; ++i) {
        const std::string k = key_name(static_cast<int>(rng() % kKeys));
        const Status s = rng() % 3 == 0 ? db->Delete(k) : db->Put(k, encode(k, w, i));
        if (!s.ok()) ++failures;
      }
      --writers_left;
    });
  }
  auto reader = [&] {
    std::mt19937_64 rng(99);
    while (writers_left.load() > 0 || scans.load() < 4) {
      const Snapshot* snap = db->GetSnapshot();
      ReadOptions at;
      at.snapshot = snap;
      std::vector<std::pair<std::string, std::string>> forward, backward;
      auto it = db->NewIterator(at);
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        forward.emplace_back(std::string(it->key()), std::string(it->value()));
      }
      for (it->SeekToLast(); it->Valid(); it->Prev()) {
        backward.emplace_back(std::string(it->key()), std::string(it->value()));
      }
      std::reverse(backward.begin(), backward.end());
      if (backward != forward) ++failures;
      if (!forward.empty()) {
        // From a seek to a key of the snapshot: Prev then Next return to it.
        const std::size_t i = rng() % forward.size();
        it->Seek(forward[i].first);
        if (!it->Valid() || it->key() != forward[i].first) ++failures;
        it->Prev();
        if (i == 0 ? it->Valid() : (!it->Valid() || it->key() != forward[i - 1].first)) {
          ++failures;
        }
        if (i > 0) {
          it->Next();
          if (!it->Valid() || it->key() != forward[i].first) ++failures;
        }
      }
      if (!it->status().ok()) ++failures;
      it.reset();
      db->ReleaseSnapshot(snap);
      ++scans;
    }
  };
  std::thread r1(reader), r2(reader);
  for (auto& t : threads) t.join();
  r1.join();
  r2.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(engine->TEST_check_index(), "");
}

// The writers of the tests below: writer w (of `writers`) makes `writes` writes. Two in
// three put one of its own keys, owned(w, k) for k below `per_writer`, and record the
// generation in acknowledged[w * per_writer + k] once the Put returned; the third puts or
// deletes churn(k) for a random k below kKeys. Each counts its failed writes in
// `failures`, and decrements `writers_left` when done.
template <class Owned, class Churn>
std::vector<std::thread> owner_writers(DB& db, int writers, int per_writer, int writes,
                                       std::uint64_t seed, Owned owned, Churn churn,
                                       std::vector<std::atomic<std::uint64_t>>& acknowledged,
                                       std::atomic<int>& writers_left, std::atomic<int>& failures) {
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([=, &db, &acknowledged, &writers_left, &failures] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(w) + seed);
      for (int i = 1; i <= writes; ++i) {
        if (i % 3 == 0) {
          const std::string k = churn(static_cast<int>(rng() % kKeys));
          const Status s = rng() % 2 == 0 ? db.Delete(k) : db.Put(k, encode(k, w, i));
          if (!s.ok()) ++failures;
          continue;
        }
        const int k = static_cast<int>(rng() % per_writer);
        const std::string key = owned(w, k);
        if (!db.Put(key, encode(key, w, i)).ok()) ++failures;
        acknowledged[w * per_writer + k].store(i, std::memory_order_release);
      }
      --writers_left;
    });
  }
  return threads;
}

// Gets at the visible version (no snapshot) while writers overwrite their keys and put and
// delete others, with a reclamation pass after every combining pass, so that blocks are
// freed and reused and point table slots erased and taken again. Each key of the first
// kind has one writer, which records each generation once its Put returned: a Get that
// starts after that must return that generation or a later one. Every value read must be
// well formed and of its key. Returns the failures.
template <class Config>
int gets_during_overwrites(const region& memory, bool skip_newest_words) {
  auto db = open_in<Config>(memory);
  if (!db) return 1;
  auto* engine = engine_of<Config>(db.get());
  if (engine == nullptr) return 1;
  engine->TEST_reclaim_every(1);
  engine->TEST_skip_newest_words(skip_newest_words);
  constexpr int kWriters = 2;
  constexpr int kOwned = 16;  // per writer: keys it alone puts
  constexpr int kWrites = 3000;
  auto owned = [](int w, int k) { return "owned" + std::to_string(w) + "-" + std::to_string(k); };
  auto churn = [](int k) { return "churn" + std::to_string(k); };
  std::vector<std::atomic<std::uint64_t>> acknowledged(kWriters * kOwned);
  std::atomic<int> writers_left{kWriters};
  std::atomic<int> failures{0};

  auto check = [&](const std::string& k, std::uint64_t at_least) {
    std::string v;
    const Status s = db->Get(k, &v);
    if (s.IsNotFound()) {
      if (at_least > 0) ++failures;
      return;
    }
    decoded d;
    if (!s.ok() || !decode(v, &d) || d.key != k || d.gen < at_least) ++failures;
  };
  std::vector<std::thread> threads = owner_writers(*db, kWriters, kOwned, kWrites, 11, owned, churn,
                                                   acknowledged, writers_left, failures);
  auto reader = [&](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    do {
      for (int r = 0; r < 64; ++r) {
        const int w = static_cast<int>(rng() % kWriters), k = static_cast<int>(rng() % kOwned);
        check(owned(w, k), acknowledged[w * kOwned + k].load(std::memory_order_acquire));
        check(churn(static_cast<int>(rng() % kKeys)), 0);
      }
    } while (writers_left.load() > 0);
  };
  std::thread r1(reader, 1), r2(reader, 2);
  for (auto& t : threads) t.join();
  r1.join();
  r2.join();
  // Once every writer is done: every key at its last acknowledged generation.
  for (int w = 0; w < kWriters; ++w) {
    for (int k = 0; k < kOwned; ++k) check(owned(w, k), acknowledged[w * kOwned + k].load());
  }
  if (engine->TEST_check_index() != "") ++failures;
  return failures.load();
}

TYPED_TEST(ConcurrencyTest, GetsReadTheNewestAcknowledgedWriteWhileBlocksAreReused) {
  EXPECT_EQ(gets_during_overwrites<TypeParam>(this->memory_, false), 0);
}

// The check above has teeth: with the point table's newest words left stale on updates,
// Gets return versions older than acknowledged ones, and the index check reports it.
TYPED_TEST(ConcurrencyTest, AStaleNewestWordIsCaught) {
  EXPECT_GT(gets_during_overwrites<TypeParam>(this->memory_, true), 0);
}

// Scans (a Seek and up to 12 Nexts) while writers overwrite their keys and put and delete
// others, with a reclamation pass after every combining pass, so that nodes a tree tag
// names are freed and their blocks reused (unless `hold_first`: a snapshot then keeps
// every owned key's first version). A scan reads most keys through their tags
// where no version followed (iterator.hpp, land_by_tag) and the others through their
// entries. Each owned key (never deleted) has one writer, which records each generation
// once its Put returned: a scan that starts after that must read that generation or a
// later one, and must not pass an owned key without reading it. Every key read must be
// above the one before, and its value well formed and of its key. Returns the failures.
template <class Config>
int scans_during_overwrites(const region& memory, bool skip_update_marks, bool hold_first) {
  auto db = open_in<Config>(memory);
  if (!db) return 1;
  auto* engine = engine_of<Config>(db.get());
  if (engine == nullptr) return 1;
  engine->TEST_reclaim_every(1);
  engine->TEST_skip_update_marks(skip_update_marks);
  constexpr int kWriters = 2;
  constexpr int kOwned = 40;  // per writer: keys it alone puts
  constexpr int kWrites = 3000;
  // Owned keys of both writers interleave in key order with the churned ones.
  auto owned = [](int w, int k) { return "k" + std::to_string(100 + k) + "-owned" + std::to_string(w); };
  auto churn = [](int k) { return "k" + std::to_string(100 + k % 40) + "-churn" + std::to_string(k); };
  std::vector<std::string> owned_sorted;
  std::map<std::string, int> owned_index;
  for (int w = 0; w < kWriters; ++w) {
    for (int k = 0; k < kOwned; ++k) owned_sorted.push_back(owned(w, k));
  }
  std::sort(owned_sorted.begin(), owned_sorted.end());
  for (int w = 0; w < kWriters; ++w) {
    for (int k = 0; k < kOwned; ++k) owned_index[owned(w, k)] = w * kOwned + k;
  }
  std::vector<std::atomic<std::uint64_t>> acknowledged(kWriters * kOwned);
  // Every owned key has its first version before the readers start.
  for (int w = 0; w < kWriters; ++w) {
    for (int k = 0; k < kOwned; ++k) {
      if (!db->Put(owned(w, k), encode(owned(w, k), w, 0)).ok()) return 1;
    }
  }
  const Snapshot* first = hold_first ? db->GetSnapshot() : nullptr;
  std::atomic<int> writers_left{kWriters};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads = owner_writers(*db, kWriters, kOwned, kWrites, 31, owned, churn,
                                                   acknowledged, writers_left, failures);
  auto scan = [&](std::mt19937_64& rng) {
    std::vector<std::uint64_t> at_least(acknowledged.size());
    for (std::size_t i = 0; i < at_least.size(); ++i) {
      at_least[i] = acknowledged[i].load(std::memory_order_acquire);
    }
    const std::string target = owned_sorted[rng() % owned_sorted.size()];
    auto it = db->NewIterator();
    it->Seek(target);
    // The owned keys at or after the target, in order: each must be read, none passed.
    auto expected = std::lower_bound(owned_sorted.begin(), owned_sorted.end(), target);
    std::string prev;
    for (int step = 0; step < 13 && it->Valid(); ++step, it->Next()) {
      // Copies: a scan that trusts a stale tag (the broken variant) may read a node whose
      // block is being reused.
      const std::string key(it->key()), value(it->value());
      decoded d;
      if (step > 0 && key <= prev) ++failures;
      if (!decode(value, &d) || d.key != key) ++failures;
      if (auto o = owned_index.find(key); o != owned_index.end()) {
        if (expected == owned_sorted.end() || *expected != key) ++failures;  // passed one
        if (expected != owned_sorted.end()) ++expected;
        if (d.gen < at_least[static_cast<std::size_t>(o->second)]) ++failures;
      } else if (expected != owned_sorted.end() && *expected < key) {
        ++failures;  // passed an owned key
        ++expected;
      }
      prev = key;
    }
    if (!it->status().ok()) ++failures;
  };
  auto reader = [&](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    do {
      for (int r = 0; r < 16; ++r) scan(rng);
    } while (writers_left.load() > 0);
  };
  std::thread r1(reader, 1), r2(reader, 2);
  for (auto& t : threads) t.join();
  r1.join();
  r2.join();
  std::mt19937_64 rng(3);
  for (int r = 0; r < 64; ++r) scan(rng);  // every key at its last acknowledged generation
  if (first != nullptr) db->ReleaseSnapshot(first);
  return failures.load();
}

TYPED_TEST(ConcurrencyTest, ScansReadTheNewestAcknowledgedWriteWhileBlocksAreReused) {
  EXPECT_EQ(scans_during_overwrites<TypeParam>(this->memory_, false, false), 0);
}

// The check above has teeth: with updates left unmarked, scans trust stale tags and read
// versions older than acknowledged ones, the scans after the writers have finished among
// them. A snapshot keeps the first versions, which the tags name: without it, reclamation
// often reuses a stale tag's block for a node that node_by_tag's checks refuse, and the
// outcome would depend on timing.
TYPED_TEST(ConcurrencyTest, AScanThatTrustsAStaleTagIsCaughtUnderConcurrency) {
  EXPECT_GT(scans_during_overwrites<TypeParam>(this->memory_, true, true), 0);
}

TYPED_TEST(ConcurrencyTest, ManyMoreThreadsThanSlots) {
  Options options;
  options.thread_slots = 1;
  auto db = open_in<TypeParam>(this->memory_, options);
  ASSERT_TRUE(db);
  std::vector<std::thread> threads;
  for (int t = 0; t < 12; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        std::string k = "t";  // "t<t>-<i>", appended: operator+ here trips a GCC 12
        k += std::to_string(t);  // -Wrestrict false positive
        k += '-';
        k += std::to_string(i);
        EXPECT_TRUE(db->Put(k, k).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < 12; ++t) {
    for (int i = 0; i < 100; ++i) {
      std::string k = "t" + std::to_string(t) + "-" + std::to_string(i), v;
      ASSERT_TRUE(db->Get(k, &v).ok()) << k;
      EXPECT_EQ(v, k);
    }
  }
  EXPECT_EQ(db->GetStats().live_keys, 1200u);
}

}  // namespace
