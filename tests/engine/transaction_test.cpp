// Transactions (flintkv/transaction.hpp): random transactions against std::map, conflicts
// (read-write, write-write, phantoms) refused with Busy and nothing applied, a bank of
// accounts under concurrent transfers, a serializability checker run on concurrent
// histories (and shown to catch the variant without validation), and bad input.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine_support.hpp"
#include "flintkv/internal/transaction.hpp"
#include "reference_iterator.hpp"
#include "serializability.hpp"

namespace {

using namespace flintkv_test;
namespace ser = flintkv_test::serializability;
using internal::TEST_commit_version;
using internal::TEST_snapshot_version;

template <class Config>
class TransactionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = open_in<Config>(memory_);
    ASSERT_TRUE(db_);
  }
  auto* engine() { return engine_of<Config>(db_.get()); }
  static std::uint64_t last_write_version() {
    return internal::engine_for<Config>::TEST_last_write_version();
  }

  region memory_{64 << 20};
  std::unique_ptr<DB> db_;
};
TYPED_TEST_SUITE(TransactionTest, concurrency_configs);

std::optional<std::string> get(DB& db, const std::string& key, const Snapshot* at = nullptr) {
  std::string v;
  ReadOptions o;
  o.snapshot = at;
  Status s = db.Get(key, &v, o);
  EXPECT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
  return s.ok() ? std::optional(v) : std::nullopt;
}

std::optional<std::string> get(Transaction& t, const std::string& key) {
  std::string v;
  Status s = t.Get(key, &v);
  EXPECT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
  return s.ok() ? std::optional(v) : std::nullopt;
}

kv_map contents(DB& db, const Snapshot* at = nullptr) {
  kv_map out;
  ReadOptions o;
  o.snapshot = at;
  auto it = db.NewIterator(o);
  for (it->SeekToFirst(); it->Valid(); it->Next()) out.emplace(it->key(), it->value());
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return out;
}

// ---- the model test --------------------------------------------------------------------

// Random transactions (gets, puts, deletes, iterator moves with bounds) committed, rolled
// back or dropped, with plain writes between them, single-threaded: every read of a
// transaction equals the model's view (the committed map plus its own writes), a committed
// transaction's writes all appear, others none, and a snapshot taken before a commit sees
// none of it.
TYPED_TEST(TransactionTest, RandomTransactionsMatchStdMap) {
  DB& db = *this->db_;
  std::mt19937_64 rng(1414);
  const auto random_key = [&] { return "key" + std::to_string(rng() % 60); };
  const auto random_bound = [&]() -> std::optional<std::string> {
    if (rng() % 3 == 0) return std::nullopt;
    return "key" + std::to_string(rng() % 70);
  };
  kv_map committed;
  int value_seq = 0;
  for (int round = 0; round < 400; ++round) {
    // Plain writes between transactions.
    for (int i = static_cast<int>(rng() % 3); i > 0; --i) {
      const std::string k = random_key();
      if (rng() % 4 == 0) {
        ASSERT_TRUE(db.Delete(k).ok());
        committed.erase(k);
      } else {
        const std::string v = "plain" + std::to_string(value_seq++);
        ASSERT_TRUE(db.Put(k, v).ok());
        committed[k] = v;
      }
    }
    auto txn = db.BeginTransaction();
    kv_map view = committed;
    const int ops = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < ops; ++i) {
      const int op = static_cast<int>(rng() % 100);
      if (op < 30) {
        const std::string k = random_key();
        auto it = view.find(k);
        ASSERT_EQ(get(*txn, k), it == view.end() ? std::nullopt : std::optional(it->second))
            << "round " << round << " key " << k;
      } else if (op < 55) {
        const std::string k = random_key();
        const std::string v = std::string(rng() % 20, 'v') + std::to_string(value_seq++);
        ASSERT_TRUE(txn->Put(k, v).ok());
        view[k] = v;
      } else if (op < 70) {
        const std::string k = random_key();
        ASSERT_TRUE(txn->Delete(k).ok());
        view.erase(k);
      } else {
        ReadOptions bounds;
        bounds.lower_bound = random_bound();
        bounds.upper_bound = random_bound();
        auto it = txn->NewIterator(bounds);
        reference_iterator ref(view, bounds);
        for (int move = 0; move < 12; ++move) {
          const int m = static_cast<int>(rng() % 6);
          if ((m == 4 || m == 5) && !ref.valid()) continue;
          const std::string target = random_key();
          switch (m) {
            case 0: it->SeekToFirst(); ref.seek_to_first(); break;
            case 1: it->SeekToLast(); ref.seek_to_last(); break;
            case 2: it->Seek(target); ref.seek(target); break;
            case 3: it->SeekForPrev(target); ref.seek_for_prev(target); break;
            case 4: it->Next(); ref.next(); break;
            case 5: it->Prev(); ref.prev(); break;
          }
          ASSERT_TRUE(it->status().ok()) << it->status().ToString();
          ASSERT_EQ(it->Valid(), ref.valid()) << "round " << round << " move " << m;
          if (ref.valid()) {
            ASSERT_EQ(it->key(), ref.key());
            ASSERT_EQ(it->value(), ref.value());
          }
        }
      }
    }
    const int end = static_cast<int>(rng() % 10);
    const Snapshot* before = db.GetSnapshot();
    ASSERT_NE(before, nullptr);
    if (end < 7) {
      ASSERT_TRUE(txn->Commit().ok());
      committed = view;
    } else if (end < 9) {
      ASSERT_TRUE(txn->Rollback().ok());
    } else {
      txn.reset();  // dropped: rolled back
    }
    if (round % 10 == 0 || end >= 7) {
      ASSERT_EQ(contents(db), committed) << "round " << round;
    }
    db.ReleaseSnapshot(before);
  }
  ASSERT_EQ(contents(db), committed);
  EXPECT_EQ(db.GetStats().snapshots, 0u);  // every transaction released its snapshot
}

// A snapshot taken before a commit sees none of the transaction; one after, all of it.
TYPED_TEST(TransactionTest, CommitIsOneVersion) {
  DB& db = *this->db_;
  ASSERT_TRUE(db.Put("a", "1").ok());
  auto txn = db.BeginTransaction();
  ASSERT_TRUE(txn->Put("a", "2").ok());
  ASSERT_TRUE(txn->Put("b", "2").ok());
  ASSERT_TRUE(txn->Delete("c").ok());
  const Snapshot* before = db.GetSnapshot();
  ASSERT_EQ(get(db, "a"), "1");  // nothing is visible before Commit
  ASSERT_TRUE(txn->Commit().ok());
  const std::uint64_t version = TEST_commit_version(*txn);
  EXPECT_EQ(version, before->version() + 1);
  EXPECT_EQ(contents(db, before), (kv_map{{"a", "1"}}));
  EXPECT_EQ(contents(db), (kv_map{{"a", "2"}, {"b", "2"}}));
  db.ReleaseSnapshot(before);
}

// The transaction's iterator sees its writes as they are when it moves, its deletes hide
// keys of the snapshot, and writes made after it began by others are not seen (and, as it
// passed over one of them, make its commit a conflict).
TYPED_TEST(TransactionTest, IteratorMergesOwnWrites) {
  DB& db = *this->db_;
  for (const char* k : {"b", "d", "f"}) ASSERT_TRUE(db.Put(k, std::string("db-") + k).ok());
  auto txn = db.BeginTransaction();
  ASSERT_TRUE(db.Put("c", "later").ok());  // after the snapshot: not seen
  ASSERT_TRUE(txn->Delete("d").ok());
  ASSERT_TRUE(txn->Put("e", "txn-e").ok());
  auto it = txn->NewIterator();
  it->SeekToFirst();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "b");
  ASSERT_TRUE(txn->Put("ba", "txn-ba").ok());  // written while the iterator stands on b
  it->Next();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "ba");
  it->Next();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "e");
  EXPECT_EQ(it->value(), "txn-e");
  it->Next();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "f");
  it->Prev();
  it->Prev();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "ba");
  it->Next();
  ASSERT_TRUE(txn->Delete("e").ok());  // standing on e: it moves on from e
  it->Prev();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "ba");
  EXPECT_TRUE(it->Refresh().IsNotSupported()) << "a transaction's view is its snapshot";
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "ba");
  const Status s = txn->Commit();
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_NE(s.message().find("key 'c' in the range"), std::string::npos) << s.message();
}

// ---- conflicts -------------------------------------------------------------------------

TYPED_TEST(TransactionTest, ReadThenConcurrentWriteIsBusy) {
  DB& db = *this->db_;
  ASSERT_TRUE(db.Put("a", "1").ok());
  auto txn = db.BeginTransaction();
  ASSERT_EQ(get(*txn, "a"), "1");
  ASSERT_TRUE(txn->Put("b", "from-txn").ok());
  ASSERT_TRUE(db.Put("a", "2").ok());
  const Status s = txn->Commit();
  ASSERT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_NE(s.message().find("key 'a', which it read"), std::string::npos) << s.message();
  EXPECT_EQ(get(db, "b"), std::nullopt);  // nothing applied
  EXPECT_EQ(get(db, "a"), "2");
  EXPECT_EQ(TEST_commit_version(*txn), 0u);
}

// A key that was absent when read and was written since is a conflict too.
TYPED_TEST(TransactionTest, ReadOfMissingKeyThenInsertIsBusy) {
  DB& db = *this->db_;
  auto txn = db.BeginTransaction();
  ASSERT_EQ(get(*txn, "a"), std::nullopt);
  ASSERT_TRUE(txn->Put("b", "x").ok());
  ASSERT_TRUE(db.Put("a", "1").ok());
  ASSERT_TRUE(db.Delete("a").ok());  // absent again, but a version newer than the snapshot
  EXPECT_TRUE(txn->Commit().IsBusy());
  EXPECT_EQ(get(db, "b"), std::nullopt);
}

TYPED_TEST(TransactionTest, WriteWriteIsBusy) {
  DB& db = *this->db_;
  auto first = db.BeginTransaction();
  auto second = db.BeginTransaction();
  ASSERT_TRUE(first->Put("a", "first").ok());
  ASSERT_TRUE(second->Put("a", "second").ok());
  ASSERT_TRUE(second->Put("z", "second").ok());
  ASSERT_TRUE(first->Commit().ok());
  const Status s = second->Commit();
  ASSERT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_NE(s.message().find("key 'a', which it writes"), std::string::npos) << s.message();
  EXPECT_EQ(contents(db), (kv_map{{"a", "first"}}));
  // The freed prepared nodes and DRAM are reused: the store stays consistent.
  EXPECT_EQ(this->engine()->TEST_check_index(), "");
}

// Another writer inserts a key into a range the transaction scanned: a phantom, refused.
TYPED_TEST(TransactionTest, PhantomInScannedRangeIsBusy) {
  DB& db = *this->db_;
  for (const char* k : {"k1", "k3", "k5"}) ASSERT_TRUE(db.Put(k, "v").ok());
  for (const bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "backward" : "forward");
    auto txn = db.BeginTransaction();
    ReadOptions bounds;
    bounds.lower_bound = "k0";
    bounds.upper_bound = "k4";
    auto it = txn->NewIterator(bounds);
    int seen = 0;
    if (backward) {
      for (it->SeekToLast(); it->Valid(); it->Prev()) ++seen;
    } else {
      for (it->SeekToFirst(); it->Valid(); it->Next()) ++seen;
    }
    ASSERT_EQ(seen, backward ? 3 : 2);  // the forward round's phantom is in the store now
    ASSERT_TRUE(txn->Put("count", std::to_string(seen)).ok());
    const std::string phantom = backward ? "k0a" : "k2";
    ASSERT_TRUE(db.Put(phantom, "new").ok());
    const Status s = txn->Commit();
    ASSERT_TRUE(s.IsBusy()) << s.ToString();
    EXPECT_NE(s.message().find("in the range ['k0', 'k4')"), std::string::npos) << s.message();
    EXPECT_EQ(get(db, "count"), std::nullopt);
  }
}

// A scan that stopped early covers only what it passed: an insert after the key that
// stopped it, or outside its bounds, does not refuse the commit.
TYPED_TEST(TransactionTest, WriteOutsideScannedRangeCommits) {
  DB& db = *this->db_;
  for (const char* k : {"k1", "k3", "k5"}) ASSERT_TRUE(db.Put(k, "v").ok());
  auto txn = db.BeginTransaction();
  auto it = txn->NewIterator();
  it->Seek("k1");
  ASSERT_TRUE(it->Valid());
  it->Next();  // passes over (k1, k3]
  ASSERT_TRUE(it->Valid());
  ASSERT_EQ(it->key(), "k3");
  ASSERT_TRUE(txn->Put("seen", "k1 k3").ok());
  ASSERT_TRUE(db.Put("k4", "new").ok());   // after k3: not passed over
  ASSERT_TRUE(db.Put("k0", "new").ok());   // before the seek target
  EXPECT_TRUE(txn->Commit().ok());
  // But inserting within the passed range is a conflict.
  auto again = db.BeginTransaction();
  auto it2 = again->NewIterator();
  it2->Seek("k1");
  it2->Next();
  ASSERT_TRUE(again->Put("seen", "again").ok());
  ASSERT_TRUE(db.Put("k2", "new").ok());
  EXPECT_TRUE(again->Commit().IsBusy());
}

TYPED_TEST(TransactionTest, DisjointTransactionsBothCommit) {
  DB& db = *this->db_;
  ASSERT_TRUE(db.Put("a", "1").ok());
  ASSERT_TRUE(db.Put("b", "1").ok());
  auto first = db.BeginTransaction();
  auto second = db.BeginTransaction();
  ASSERT_EQ(get(*first, "a"), "1");
  ASSERT_EQ(get(*second, "b"), "1");
  ASSERT_TRUE(first->Put("a", "2").ok());
  ASSERT_TRUE(second->Put("b", "2").ok());
  ASSERT_TRUE(db.Put("c", "plain").ok());  // a plain write of another key
  ASSERT_TRUE(first->Commit().ok());
  ASSERT_TRUE(second->Commit().ok());
  EXPECT_LT(TEST_commit_version(*first), TEST_commit_version(*second));
  EXPECT_EQ(contents(db), (kv_map{{"a", "2"}, {"b", "2"}, {"c", "plain"}}));
}

// A transaction that wrote nothing commits whatever changed since its snapshot: its reads
// are those of one snapshot, which is where it sits in the serial order.
TYPED_TEST(TransactionTest, ReadOnlyTransactionCommitsDespiteLaterWrites) {
  DB& db = *this->db_;
  ASSERT_TRUE(db.Put("a", "1").ok());
  auto txn = db.BeginTransaction();
  ASSERT_EQ(get(*txn, "a"), "1");
  ASSERT_TRUE(db.Put("a", "2").ok());
  ASSERT_EQ(get(*txn, "a"), "1");  // repeatable: the snapshot
  const std::uint64_t visible = db.GetStats().visible_version;
  EXPECT_TRUE(txn->Commit().ok());
  EXPECT_EQ(TEST_commit_version(*txn), 0u);
  EXPECT_EQ(db.GetStats().visible_version, visible);  // nothing attached
}

// ---- concurrency: a bank -----------------------------------------------------------------

// Transfers between accounts (each reads two accounts and writes both) from several
// threads, retrying on Busy; audits (transactions scanning every account, and plain
// snapshot and iterator readers) always find the initial total.
TYPED_TEST(TransactionTest, BankTransfersKeepTheTotal) {
  DB& db = *this->db_;
  constexpr int kAccounts = 16, kThreads = 3, kTransfers = 300;
  constexpr long kInitial = 1000;
  const auto account = [](int i) { return "acct" + std::to_string(100 + i); };
  for (int i = 0; i < kAccounts; ++i) ASSERT_TRUE(db.Put(account(i), std::to_string(kInitial)).ok());
  const long total = kInitial * kAccounts;
  std::atomic<int> writers_left{kThreads};
  std::atomic<long> busy{0}, audits{0}, bad{0};
  const auto sum_of = [&](Iterator& it) {
    long sum = 0;
    int n = 0;
    for (it.SeekToFirst(); it.Valid(); it.Next(), ++n) sum += std::stol(std::string(it.value()));
    return n == kAccounts && it.status().ok() ? sum : -1;
  };
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      std::mt19937_64 rng(77 + t);
      for (int i = 0; i < kTransfers; ++i) {
        // The last transfers wait for an audit to have run alongside.
        while (i == kTransfers - 1 && audits.load() == 0) std::this_thread::yield();
        const int a = static_cast<int>(rng() % kAccounts);
        const int b = (a + 1 + static_cast<int>(rng() % (kAccounts - 1))) % kAccounts;
        const long amount = static_cast<long>(rng() % 50);
        const bool audit = i % 10 == 0;
        while (true) {
          auto txn = db.BeginTransaction();
          if (audit) {  // scans every account first: its sum is the total
            auto it = txn->NewIterator();
            if (sum_of(*it) != total) bad.fetch_add(1);
          }
          std::string va, vb;
          if (!txn->Get(account(a), &va).ok() || !txn->Get(account(b), &vb).ok()) {
            bad.fetch_add(1);
            break;
          }
          std::this_thread::yield();  // others may commit in between: conflicts
          if (!txn->Put(account(a), std::to_string(std::stol(va) - amount)).ok() ||
              !txn->Put(account(b), std::to_string(std::stol(vb) + amount)).ok()) {
            bad.fetch_add(1);
            break;
          }
          const Status s = txn->Commit();
          if (s.IsBusy()) {
            busy.fetch_add(1);
            continue;
          }
          if (!s.ok()) bad.fetch_add(1);
          break;
        }
      }
      writers_left.fetch_sub(1);
    });
  }
  threads.emplace_back([&] {  // plain readers: snapshots and iterators
    while (!go.load()) std::this_thread::yield();
    do {
      const Snapshot* snap = db.GetSnapshot();
      long sum = 0;
      for (int i = 0; i < kAccounts; ++i) {
        std::string v;
        ReadOptions o;
        o.snapshot = snap;
        if (!db.Get(account(i), &v, o).ok()) bad.fetch_add(1);
        sum += std::stol(v.empty() ? "0" : v);
      }
      db.ReleaseSnapshot(snap);
      if (sum != total) bad.fetch_add(1);
      auto it = db.NewIterator();
      if (sum_of(*it) != total) bad.fetch_add(1);
      auto txn = db.BeginTransaction();  // a read-only transaction
      auto tit = txn->NewIterator();
      if (sum_of(*tit) != total) bad.fetch_add(1);
      tit.reset();
      if (!txn->Commit().ok()) bad.fetch_add(1);
      audits.fetch_add(1);
    } while (writers_left.load() > 0);
  });
  go.store(true);
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(sum_of(*db.NewIterator()), total);
  EXPECT_GT(audits.load(), 0);
  std::printf("bank: %d transfers committed, %ld refused with Busy, %ld audits\n",
              kThreads * kTransfers, busy.load(), audits.load());
  EXPECT_EQ(db.GetStats().snapshots, 0u);
}

// ---- the serializability checker ----------------------------------------------------------

// A transaction whose operations are recorded for the checker.
class recorded {
 public:
  recorded(DB& db, std::string name) : txn_(db.BeginTransaction()) {
    rec_.name = std::move(name);
    rec_.snapshot = TEST_snapshot_version(*txn_);
  }
  std::optional<std::string> get(const std::string& key) {
    auto v = ::get(*txn_, key);
    rec_.read(key, v);
    return v;
  }
  void put(const std::string& key, const std::string& value) {
    ASSERT_TRUE(txn_->Put(key, value).ok());
    rec_.write(key, value);
  }
  void del(const std::string& key) {
    ASSERT_TRUE(txn_->Delete(key).ok());
    rec_.write(key, std::nullopt);
  }
  // Scans [lo, hi) in one direction, at most `limit` keys; records the range it covered.
  ser::kv_list scan(std::optional<std::string> lo, std::optional<std::string> hi,
                    bool backward, std::size_t limit) {
    ReadOptions bounds;
    bounds.lower_bound = lo;
    bounds.upper_bound = hi;
    auto it = txn_->NewIterator(bounds);
    ser::kv_list seen;
    if (backward) {
      it->SeekToLast();
    } else {
      it->SeekToFirst();
    }
    while (it->Valid()) {
      seen.emplace_back(it->key(), it->value());
      if (seen.size() == limit) break;
      if (backward) {
        it->Prev();
      } else {
        it->Next();
      }
    }
    EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    if (seen.size() == limit && !seen.empty()) {  // stopped early: covered up to the last key
      if (backward) {
        lo = seen.back().first;
      } else {
        hi = seen.back().first + '\0';
      }
    }
    rec_.scan(lo, hi, backward, seen);
    return seen;
  }
  Status commit(ser::history& h) {
    const Status s = txn_->Commit();
    if (s.ok()) {
      rec_.version = TEST_commit_version(*txn_);
      h.add(rec_);
    }
    return s;
  }

 private:
  std::unique_ptr<Transaction> txn_;
  ser::transaction rec_;
};

// Threads run random transactions over a few keys (gets, scans, puts, deletes) and plain
// writes; the committed history replays exactly in version order.
TYPED_TEST(TransactionTest, ConcurrentHistoryIsSerializable) {
  DB& db = *this->db_;
  constexpr int kThreads = 3, kTransactions = 400, kKeys = 8;
  ser::history history;
  std::atomic<long> committed{0}, refused{0};
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();  // start together: more conflicts
      std::mt19937_64 rng(900 + t);
      const auto key = [&] { return "k" + std::to_string(rng() % kKeys); };
      for (int i = 0; i < kTransactions; ++i) {
        const std::string name = "T" + std::to_string(t) + "." + std::to_string(i);
        if (rng() % 8 == 0) {  // a plain write, recorded as a transaction of one write
          ser::transaction w;
          w.name = name + "(plain)";
          const std::string k = key();
          if (rng() % 3 == 0) {
            ASSERT_TRUE(db.Delete(k).ok());
            w.write(k, std::nullopt);
          } else {
            ASSERT_TRUE(db.Put(k, name).ok());
            w.write(k, name);
          }
          w.version = TestFixture::last_write_version();
          w.snapshot = w.version - 1;
          history.add(std::move(w));
          continue;
        }
        recorded txn(db, name);
        const int ops = 1 + static_cast<int>(rng() % 5);
        for (int j = 0; j < ops; ++j) {
          if (rng() % 2 == 0) std::this_thread::yield();  // let others in between: conflicts
          const int op = static_cast<int>(rng() % 10);
          if (op < 4) {
            (void)txn.get(key());
          } else if (op < 6) {
            std::optional<std::string> lo, hi;
            if (rng() % 2) lo = key();
            if (rng() % 2) hi = key();
            (void)txn.scan(lo, hi, rng() % 2 == 0, 1 + rng() % 4);
          } else if (op < 9) {
            txn.put(key(), name + "." + std::to_string(j));
          } else {
            txn.del(key());
          }
        }
        const Status s = txn.commit(history);
        if (s.ok()) {
          committed.fetch_add(1);
        } else {
          ASSERT_TRUE(s.IsBusy()) << s.ToString();
          refused.fetch_add(1);
        }
      }
    });
  }
  go.store(true);
  for (auto& th : threads) th.join();
  EXPECT_GT(committed.load(), 0);
  std::printf("history: %ld transactions committed, %ld refused with Busy\n", committed.load(),
              refused.load());
  const std::string report = history.check();
  EXPECT_EQ(report, "");
}

// The checker has teeth: with validation switched off, two interleaved transactions that
// validation would refuse both commit, and the checker reports the violation with its
// cycle. The same interleavings with validation on: the second commit is Busy and the
// history is serializable. Two interleavings, each in one thread (deterministic): a lost
// update, and write skew through a phantom.
TYPED_TEST(TransactionTest, CheckerCatchesCommitsWithoutValidation) {
  // Returns the checker's report on the history of `scenario` run on a fresh store.
  const auto run = [](bool skip, auto&& scenario) {
    region memory(32 << 20);
    auto db = open_in<TypeParam>(memory);
    engine_of<TypeParam>(db.get())->TEST_skip_validation(skip);
    ser::history history;
    scenario(*db, history, skip);
    return history.check();
  };
  const auto lost_update = [](DB& db, ser::history& history, bool skip) {
    ASSERT_TRUE(db.Put("a", "0").ok());
    ser::transaction init;
    init.name = "init";
    init.write("a", "0");
    init.version = TestFixture::last_write_version();
    history.add(init);
    recorded t1(db, "T1"), t2(db, "T2");
    ASSERT_EQ(t1.get("a"), "0");
    ASSERT_EQ(t2.get("a"), "0");
    t1.put("a", "1 from T1");
    t2.put("a", "1 from T2");
    ASSERT_TRUE(t1.commit(history).ok());
    EXPECT_EQ(t2.commit(history).ok(), skip);
  };
  // Both scan the empty range [p, q) (one forward, one backward) and insert into it.
  const auto phantom = [](DB& db, ser::history& history, bool skip) {
    recorded t3(db, "T3"), t4(db, "T4");
    ASSERT_TRUE(t3.scan("p", "q", false, 10).empty());
    ASSERT_TRUE(t4.scan("p", "q", true, 10).empty());
    t3.put("p1", "T3");
    t4.put("p2", "T4");
    ASSERT_TRUE(t3.commit(history).ok());
    EXPECT_EQ(t4.commit(history).ok(), skip);
  };
  std::string report = run(true, lost_update);
  EXPECT_NE(report.find("T2 (snapshot 1, version 3): read of 'a' returned '0'; in the serial "
                        "order it is '1 from T1'"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("shortest cycle (2 transactions): T1 (snapshot 1, version 2) -ww 'a'-> "
                        "T2 (snapshot 1, version 3) -rw 'a'-> T1"),
            std::string::npos)
      << report;
  report = run(true, phantom);
  EXPECT_NE(report.find("scan of ['p', 'q') backward saw {}"), std::string::npos) << report;
  EXPECT_NE(report.find("-rw 'p2'-> T4"), std::string::npos) << report;
  EXPECT_NE(report.find("-rw 'p1'-> T3"), std::string::npos) << report;
  EXPECT_EQ(run(false, lost_update), "");
  EXPECT_EQ(run(false, phantom), "");
}

// ---- bad input -----------------------------------------------------------------------------

TYPED_TEST(TransactionTest, CallsAfterTheEndAreInvalid) {
  DB& db = *this->db_;
  for (const bool commit : {true, false}) {
    const std::string x = commit ? "x-committed" : "x-rolled-back";
    auto txn = db.BeginTransaction();
    ASSERT_TRUE(txn->Put(x, "1").ok());
    ASSERT_TRUE((commit ? txn->Commit() : txn->Rollback()).ok());
    const std::string expected =
        commit ? "transaction already committed" : "transaction already rolled back";
    std::string v;
    for (const Status& s : {txn->Get(x, &v), txn->Put("y", "1"), txn->Delete(x),
                            txn->Commit(), txn->Rollback()}) {
      EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
      EXPECT_EQ(s.message(), expected);
    }
    auto it = txn->NewIterator();
    it->SeekToFirst();
    EXPECT_FALSE(it->Valid());
    EXPECT_TRUE(it->status().IsInvalidArgument());
    EXPECT_EQ(get(db, "y"), std::nullopt);
    EXPECT_EQ(get(db, x), commit ? std::optional<std::string>("1") : std::nullopt);
  }
  // A failed commit ends the transaction too.
  auto a = db.BeginTransaction();
  ASSERT_TRUE(a->Put("x", "a").ok());
  ASSERT_TRUE(db.Put("x", "plain").ok());
  ASSERT_TRUE(a->Commit().IsBusy());
  const Status s = a->Put("x", "again");
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_EQ(s.message(), "transaction already ended: its Commit failed");
}

// Iterators that outlive their transaction: not Valid, InvalidArgument, and they hold
// nothing of the DB (under ASan, a use of freed memory would be reported), even after
// the DB is gone.
TYPED_TEST(TransactionTest, IteratorsOutlivingTheirTransaction) {
  std::unique_ptr<DB> db = std::move(this->db_);
  ASSERT_TRUE(db->Put("a", "1").ok());
  std::vector<std::unique_ptr<Iterator>> orphans;
  {
    auto txn = db->BeginTransaction();
    ASSERT_TRUE(txn->Put("b", "2").ok());
    orphans.push_back(txn->NewIterator());
    orphans.back()->SeekToFirst();
    ASSERT_TRUE(orphans.back()->Valid());
    EXPECT_EQ(orphans.back()->key(), "a");
    orphans.push_back(txn->NewIterator());  // never positioned
    EXPECT_EQ(db->GetStats().snapshots, 3u);  // the transaction's and one per iterator
    ASSERT_TRUE(txn->Commit().ok());
    EXPECT_EQ(db->GetStats().snapshots, 0u);  // the iterators let go at the end
    EXPECT_FALSE(orphans[0]->Valid());
    EXPECT_TRUE(orphans[0]->status().IsInvalidArgument());
  }  // the transaction is destroyed
  auto dropped = db->BeginTransaction();
  orphans.push_back(dropped->NewIterator());
  dropped.reset();  // rolled back by its destructor
  EXPECT_EQ(db->GetStats().snapshots, 0u);
  db.reset();
  for (auto& it : orphans) {
    it->SeekToFirst();
    it->SeekToLast();
    it->Seek("a");
    it->SeekForPrev("z");
    EXPECT_FALSE(it->Valid());
    EXPECT_TRUE(it->status().IsInvalidArgument()) << it->status().ToString();
  }
}

TYPED_TEST(TransactionTest, OversizedKeysAndValuesAreRefusedAtPut) {
  DB& db = *this->db_;
  auto txn = db.BeginTransaction();
  const std::string big_key(kMaxKeySize + 1, 'k');
  const std::string big_value(kMaxValueSize + 1, 'v');
  Status s = txn->Put(big_key, "v");
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("the limit is " + std::to_string(kMaxKeySize)), std::string::npos);
  s = txn->Put("k", big_value);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("the limit is " + std::to_string(kMaxValueSize)), std::string::npos);
  EXPECT_TRUE(txn->Put("", "v").IsInvalidArgument());
  EXPECT_TRUE(txn->Delete(big_key).IsInvalidArgument());
  std::string v;
  EXPECT_TRUE(txn->Get(big_key, &v).IsInvalidArgument());
  EXPECT_TRUE(txn->Get("k", &v).IsNotFound());  // nothing of the refused Put was buffered
  ASSERT_TRUE(txn->Put("ok", "v").ok());
  ASSERT_TRUE(txn->Commit().ok());
  EXPECT_EQ(contents(db), (kv_map{{"ok", "v"}}));
}

TEST(TransactionReadOnlyTest, ReadsWorkAndWritesAreRefused) {
  temp_pool_path path("txn-read-only");
  {
    Options o;
    o.create_if_missing = true;
    o.pool_size = 16 << 20;
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(o, path.str(), &db).ok());
    ASSERT_TRUE(db->Put("a", "1").ok());
  }
  Options o;
  o.read_only = true;
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(o, path.str(), &db).ok());
  auto txn = db->BeginTransaction();
  EXPECT_EQ(get(*txn, "a"), "1");
  const Status s = txn->Put("b", "2");
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("read-only"), std::string::npos) << s.message();
  EXPECT_TRUE(txn->Delete("a").IsInvalidArgument());
  auto it = txn->NewIterator();
  it->SeekToFirst();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "a");
  EXPECT_TRUE(txn->Commit().ok());  // it wrote nothing
}

}  // namespace
