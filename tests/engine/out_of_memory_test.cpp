// Running out of DRAM is a Status, never an exception across the API: GetSnapshot returns
// nullptr, NewIterator an iterator that is not Valid and whose status() is NoSpace,
// BeginTransaction a transaction whose every call returns NoSpace.
//
// The allocation failure is injected by replacing the global operator new in this test
// binary only (the engine is built exactly as for release): while a failing_allocations
// scope lives on a thread, every operator new on that thread fails.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "allocators/helper_thread.hpp"
#include "engine_support.hpp"
#include "flintkv/internal/no_memory_iterator.hpp"
#include "flintkv/internal/reclamation.hpp"

namespace {

thread_local bool fail_allocations = false;

class failing_allocations {
 public:
  failing_allocations() { fail_allocations = true; }
  ~failing_allocations() { fail_allocations = false; }
  failing_allocations(const failing_allocations&) = delete;
  failing_allocations& operator=(const failing_allocations&) = delete;
};

}  // namespace

void* operator new(std::size_t n) {
  if (!fail_allocations) {
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  }
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return fail_allocations ? nullptr : std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return ::operator new(n, std::nothrow);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

using namespace flintkv_test;

class OutOfMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Options o;
    o.create_if_missing = true;
    o.pool_size = 16 << 20;
    ASSERT_TRUE(DB::Open(o, path_.str(), &db_).ok());
    ASSERT_TRUE(db_->Put("k", "v").ok());
  }

  temp_pool_path path_{"out-of-memory"};
  std::unique_ptr<DB> db_;
};

TEST_F(OutOfMemoryTest, GetSnapshotReturnsNullptr) {
  const Snapshot* snap = nullptr;
  bool threw = false;
  {
    failing_allocations scope;
    try {
      snap = db_->GetSnapshot();
    } catch (const std::bad_alloc&) {
      threw = true;
    }
  }
  EXPECT_FALSE(threw) << "std::bad_alloc crossed the API";
  EXPECT_EQ(snap, nullptr);
  db_->ReleaseSnapshot(nullptr);  // harmless
  // With memory again, snapshots work.
  snap = db_->GetSnapshot();
  ASSERT_NE(snap, nullptr);
  db_->ReleaseSnapshot(snap);
}

TEST_F(OutOfMemoryTest, NewIteratorReturnsAnInvalidIteratorWithNoSpace) {
  ReadOptions bounded;
  bounded.lower_bound = std::string(100, 'a');  // more than a string holds inline
  for (const ReadOptions& options : {ReadOptions{}, bounded}) {
    std::unique_ptr<Iterator> it;
    bool threw = false, valid = true;
    Status status;
    {
      failing_allocations scope;
      try {
        it = db_->NewIterator(options);
        if (it) {
          it->SeekToFirst();
          valid = it->Valid();
          it->Seek("k");
          valid = valid || it->Valid();
          status = it->status();
        }
      } catch (const std::bad_alloc&) {
        threw = true;
      }
    }
    EXPECT_FALSE(threw) << "std::bad_alloc crossed the API";
    ASSERT_NE(it, nullptr);
    EXPECT_FALSE(valid);
    EXPECT_TRUE(status.IsNoSpace()) << status.ToString();
  }
  // With memory again, iterators work.
  auto it = db_->NewIterator();
  it->SeekToFirst();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), "k");
}

// A Refresh that cannot register the newest version (every slot of the registry taken, so
// it needs the map, and no DRAM for it) says NoSpace and leaves the iterator as it was.
TEST_F(OutOfMemoryTest, RefreshOutOfDramKeepsTheIteratorsState) {
  std::vector<std::unique_ptr<Iterator>> held;
  for (std::uint32_t i = 0; i < internal::snapshot_registry::kSlots; ++i) {
    held.push_back(db_->NewIterator());
  }
  ASSERT_TRUE(db_->Put("k", "v2").ok());
  Iterator& it = *held.front();
  it.Seek("k");
  ASSERT_TRUE(it.Valid());
  Status s;
  bool threw = false;
  {
    failing_allocations scope;
    try {
      s = it.Refresh();
    } catch (const std::bad_alloc&) {
      threw = true;
    }
  }
  EXPECT_FALSE(threw) << "std::bad_alloc crossed the API";
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  ASSERT_TRUE(it.Valid()) << "a failed refresh leaves the iterator where it was";
  EXPECT_EQ(it.key(), "k");
  EXPECT_EQ(it.value(), "v");
  it.Seek("k");
  ASSERT_TRUE(it.Valid());
  EXPECT_EQ(it.value(), "v");
  ASSERT_TRUE(it.Refresh().ok());
  EXPECT_FALSE(it.Valid());
  it.Seek("k");
  ASSERT_TRUE(it.Valid());
  EXPECT_EQ(it.value(), "v2");
}

// With no heap at all, the iterators come from a reserve of kReserve, which their
// destruction returns.
TEST_F(OutOfMemoryTest, TheReserveOfIteratorsIsReturned) {
  constexpr std::size_t n = internal::no_memory_iterator::kReserve;
  std::vector<std::unique_ptr<Iterator>> held;
  held.reserve(n + 1);
  for (int round = 0; round < 2; ++round) {
    {
      failing_allocations scope;
      for (std::size_t i = 0; i <= n; ++i) held.push_back(db_->NewIterator());
    }
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_NE(held[i], nullptr) << "round " << round << ", iterator " << i;
      EXPECT_TRUE(held[i]->status().IsNoSpace());
    }
    EXPECT_EQ(held[n], nullptr) << "the reserve holds " << n;
    held.clear();
  }
}

TEST_F(OutOfMemoryTest, BeginTransactionReturnsATransactionThatSaysNoSpace) {
  std::unique_ptr<Transaction> txn;
  bool threw = false;
  Status statuses[6];
  {
    failing_allocations scope;
    try {
      txn = db_->BeginTransaction();
      if (txn) {
        std::string v;
        statuses[0] = txn->Get("k", &v);
        statuses[1] = txn->Put("k", "w");
        statuses[2] = txn->Delete("k");
        statuses[3] = txn->Commit();
        statuses[4] = txn->Rollback();
        statuses[5] = txn->NewIterator()->status();
      }
    } catch (const std::bad_alloc&) {
      threw = true;
    }
  }
  EXPECT_FALSE(threw) << "std::bad_alloc crossed the API";
  ASSERT_NE(txn, nullptr);
  for (const Status& s : statuses) EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  txn.reset();
  EXPECT_EQ(db_->GetStats().snapshots, 0u);
  std::string v;
  ASSERT_TRUE(db_->Get("k", &v).ok());
  EXPECT_EQ(v, "v");
}

// A transaction set up with memory whose calls then find none: NoSpace, nothing applied,
// and its Commit ends it all the same.
TEST_F(OutOfMemoryTest, TransactionCallsWithoutMemory) {
  auto txn = db_->BeginTransaction();
  ASSERT_TRUE(txn->Put("a", "1").ok());
  Status put, commit;
  bool threw = false;
  const std::string long_key(100, 'b');  // more than a string holds inline
  {
    failing_allocations scope;
    try {
      put = txn->Put(long_key, "2");
      commit = txn->Commit();
    } catch (const std::bad_alloc&) {
      threw = true;
    }
  }
  EXPECT_FALSE(threw) << "std::bad_alloc crossed the API";
  EXPECT_TRUE(put.IsNoSpace()) << put.ToString();
  EXPECT_TRUE(commit.IsNoSpace()) << commit.ToString();
  EXPECT_TRUE(txn->Put("a", "3").IsInvalidArgument());  // the failed Commit ended it
  std::string v;
  EXPECT_TRUE(db_->Get("a", &v).IsNotFound());
  EXPECT_EQ(db_->GetStats().snapshots, 0u);
}

// A helper whose thread cannot be started for want of DRAM (std::thread allocates its state)
// says so, as it does when the system refuses the thread: the caller then does the job, and
// nothing escapes ask(), which is noexcept (recovery's point-table build relies on both).
TEST(HelperThreadOutOfMemoryTest, AHelperThatCannotStartLeavesTheJobToTheCaller) {
  std::atomic<int> runs{0};
  alloc::helper_thread helper([&] { runs.fetch_add(1); });
  bool asked = true;
  {
    failing_allocations no_memory;
    asked = helper.ask();
  }
  EXPECT_FALSE(asked);
  helper.await();  // returns at once: no thread
  EXPECT_EQ(runs.load(), 0);
}

}  // namespace
