// The checkers on hand-made histories: what they accept and what they reject.
#include "crashtest/checkers.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using namespace crashtest;

// Builds a one-workload history operation by operation, with logical time advancing.
class history_builder {
 public:
  explicit history_builder(unsigned threads = 1) {
    w.threads.resize(threads);
    h.threads.resize(threads);
  }

  // Adds an operation of thread t; returns its index. Completed operations take [now, now+1].
  std::size_t add(unsigned t, operation o, op_status status, op_outcome result = {}) {
    result.status = status;
    if (status != op_status::not_invoked) result.invoke_ts = clock_++;
    if (status == op_status::completed) result.complete_ts = clock_++;
    w.threads[t].push_back(o);
    h.threads[t].push_back(result);
    return w.threads[t].size() - 1;
  }
  std::size_t put(unsigned t, std::uint64_t key, std::uint64_t value, op_status s,
                  std::uint64_t version = 0) {
    return add(t, {op_kind::put, key, value}, s, {.version = version});
  }
  std::size_t del(unsigned t, std::uint64_t key, op_status s, std::uint64_t version = 0) {
    return add(t, {op_kind::del, key}, s, {.version = version});
  }
  std::size_t get(unsigned t, std::uint64_t key, bool found, std::uint64_t value,
                  std::uint64_t version = 0) {
    return add(t, {op_kind::get, key}, op_status::completed,
               {.found = found, .value = value, .version = version});
  }
  std::size_t batch(unsigned t, std::vector<kv_write> entries, op_status s,
                    std::uint64_t version = 0) {
    operation o{op_kind::batch};
    o.batch_first = static_cast<std::uint32_t>(w.batch_entries.size());
    o.batch_size = static_cast<std::uint32_t>(entries.size());
    w.batch_entries.insert(w.batch_entries.end(), entries.begin(), entries.end());
    return add(t, o, s, {.version = version});
  }
  std::size_t set_op(unsigned t, op_kind k, std::uint64_t key, op_status s, bool found = false,
                     std::uint64_t value = 0) {
    return add(t, {k, key, k == op_kind::insert ? (value ? value : 100 + key) : 0}, s,
               {.found = found, .value = value});
  }
  // Starts an operation now that completes later: returns its slot to finish().
  std::size_t begin(unsigned t, operation o) { return add(t, o, op_status::pending); }
  void finish(unsigned t, std::size_t i, op_outcome result) {
    result.status = op_status::completed;
    result.invoke_ts = h.threads[t][i].invoke_ts;
    result.complete_ts = clock_++;
    h.threads[t][i] = result;
  }

  std::vector<std::string> kv(std::vector<kv_entry> state) const { return check_kv(w, h, state); }
  std::vector<std::string> set(std::vector<std::uint64_t> keys, bool ordered = true) const {
    std::vector<kv_entry> state;
    for (auto k : keys) state.push_back({k, 0, 0});
    return check_map(w, h, state, {.values = false, .ordered = ordered});
  }

  workload w;
  history h;

 private:
  std::uint64_t clock_ = 1;
};

constexpr auto done = op_status::completed;
constexpr auto pending = op_status::pending;

// ---- key-value ---------------------------------------------------------------------------

TEST(KvCheckerTest, AcceptsEveryCompletedWrite) {
  history_builder b;
  b.put(0, 1, 0xa1, done, 1);
  b.put(0, 2, 0xa2, done, 2);
  b.put(0, 1, 0xa3, done, 3);
  b.del(0, 2, done, 4);
  EXPECT_TRUE(b.kv({{1, 0xa3, 3}}).empty());
}

TEST(KvCheckerTest, RejectsALostCompletedPut) {
  history_builder b;
  b.put(0, 1, 0xa1, done, 1);
  b.put(0, 1, 0xa2, done, 2);
  auto older = b.kv({{1, 0xa1, 1}});
  ASSERT_EQ(older.size(), 1u);
  EXPECT_NE(older[0].find("older than"), std::string::npos) << older[0];
  auto absent = b.kv({});
  ASSERT_EQ(absent.size(), 1u);
  EXPECT_NE(absent[0].find("absent"), std::string::npos) << absent[0];
}

TEST(KvCheckerTest, RejectsAResurrectedDeletedKey) {
  history_builder b;
  b.put(0, 1, 0xa1, done, 1);
  b.del(0, 1, done, 2);
  EXPECT_TRUE(b.kv({}).empty());
  EXPECT_FALSE(b.kv({{1, 0xa1, 1}}).empty());
}

TEST(KvCheckerTest, PendingWritesMayOrMayNotSurvive) {
  history_builder b;
  b.put(0, 1, 0xa1, done, 1);
  b.put(0, 1, 0xa2, pending);
  EXPECT_TRUE(b.kv({{1, 0xa1, 1}}).empty());
  EXPECT_TRUE(b.kv({{1, 0xa2, 2}}).empty());
  EXPECT_FALSE(b.kv({}).empty());
}

TEST(KvCheckerTest, APendingDeleteMayRemoveTheKey) {
  history_builder b;
  b.put(0, 1, 0xa1, done, 1);
  b.del(0, 1, pending);
  EXPECT_TRUE(b.kv({}).empty());
  EXPECT_TRUE(b.kv({{1, 0xa1, 1}}).empty());
}

TEST(KvCheckerTest, RejectsInventedValuesAndKeys) {
  history_builder b;
  b.put(0, 1, 0xa1, done, 1);
  EXPECT_FALSE(b.kv({{1, 0xbad, 1}}).empty());
  EXPECT_FALSE(b.kv({{1, 0xa1, 1}, {7, 0xa1, 2}}).empty()) << "a key nobody wrote";
  EXPECT_FALSE(b.kv({{1, 0xa1, 1}, {1, 0xa1, 1}}).empty()) << "a key reported twice";
}

TEST(KvCheckerTest, RejectsAWrongVersion) {
  history_builder b;
  b.put(0, 1, 0xa1, done, 1);
  b.put(0, 2, 0xa2, done, 2);
  EXPECT_FALSE(b.kv({{1, 0xa1, 5}, {2, 0xa2, 2}}).empty());
}

TEST(KvCheckerTest, RejectsAPendingWriteRecoveredWithAnotherOperationsVersion) {
  history_builder b;
  b.put(0, 1, 0xa1, done, 1);
  b.put(0, 2, 0xa2, pending);
  EXPECT_FALSE(b.kv({{1, 0xa1, 1}, {2, 0xa2, 1}}).empty());
}

TEST(KvCheckerTest, AValueACompletedGetReturnedMustSurvive) {
  history_builder b(2);
  b.put(0, 1, 0xa1, done, 1);
  b.put(0, 1, 0xa2, pending);   // thread 0 crashed inside this put...
  b.get(1, 1, true, 0xa2, 2);   // ...after thread 1 read its value
  EXPECT_TRUE(b.kv({{1, 0xa2, 2}}).empty());
  auto lost = b.kv({{1, 0xa1, 1}});
  ASSERT_FALSE(lost.empty());
  EXPECT_NE(lost[0].find("completed get returned"), std::string::npos) << lost[0];
}

TEST(KvCheckerTest, AReadValueWithoutVersionIsNotOvertakenByAnOlderWrite) {
  history_builder b(2);
  b.put(0, 1, 0xa1, done, 1);
  b.put(0, 1, 0xa2, pending);
  b.get(1, 1, true, 0xa2);  // the store reports no version for reads
  EXPECT_TRUE(b.kv({{1, 0xa2, 2}}).empty());
  EXPECT_FALSE(b.kv({{1, 0xa1, 1}}).empty());
  EXPECT_FALSE(b.kv({}).empty());
}

TEST(KvCheckerTest, BatchesSurviveWholeOrNotAtAll) {
  history_builder b;
  b.put(0, 1, 0xa1, done, 1);
  b.put(0, 2, 0xa2, done, 2);
  b.batch(0, {{1, 0xb1, false}, {2, 0xb2, false}, {3, 0, true}}, pending);
  EXPECT_TRUE(b.kv({{1, 0xa1, 1}, {2, 0xa2, 2}}).empty()) << "none of it";
  EXPECT_TRUE(b.kv({{1, 0xb1, 3}, {2, 0xb2, 3}}).empty()) << "all of it";
  auto half = b.kv({{1, 0xb1, 3}, {2, 0xa2, 2}});
  ASSERT_EQ(half.size(), 1u);
  EXPECT_NE(half[0].find("batch survived"), std::string::npos) << half[0];
  EXPECT_FALSE(b.kv({{1, 0xb1, 3}, {2, 0xb2, 4}}).empty()) << "one batch, two versions";
}

TEST(KvCheckerTest, ACompletedBatchMustSurviveWhole) {
  history_builder b;
  b.batch(0, {{1, 0xb1, false}, {2, 0xb2, false}}, done, 1);
  EXPECT_TRUE(b.kv({{1, 0xb1, 1}, {2, 0xb2, 1}}).empty());
  EXPECT_FALSE(b.kv({{1, 0xb1, 1}}).empty());
}

TEST(KvCheckerTest, ReportsACompletedWriteWithoutVersion) {
  history_builder b;
  b.put(0, 1, 0xa1, done, 0);
  auto p = b.kv({{1, 0xa1, 1}});
  ASSERT_FALSE(p.empty());
  EXPECT_NE(p[0].find("no version"), std::string::npos) << p[0];
}

// ---- sets --------------------------------------------------------------------------------

TEST(SetCheckerTest, CompletedInsertsPresentCompletedRemovesAbsent) {
  history_builder b;
  b.set_op(0, op_kind::insert, 1, done, true);
  b.set_op(0, op_kind::insert, 2, done, true);
  b.set_op(0, op_kind::remove, 1, done, true);
  EXPECT_TRUE(b.set({2}).empty());
  EXPECT_FALSE(b.set({1, 2}).empty());
  EXPECT_FALSE(b.set({}).empty());
}

TEST(SetCheckerTest, PendingOperationsEitherWay) {
  history_builder b;
  b.set_op(0, op_kind::insert, 1, done, true);
  b.set_op(0, op_kind::remove, 1, pending);
  EXPECT_TRUE(b.set({1}).empty());
  EXPECT_TRUE(b.set({}).empty());
}

TEST(SetCheckerTest, ConcurrentOperationsMayBeOrderedEitherWay) {
  history_builder b(2);
  std::size_t ins = b.begin(0, {op_kind::insert, 1, 101});
  std::size_t rem = b.begin(1, {op_kind::remove, 1});
  b.finish(0, ins, {.found = true});
  b.finish(1, rem, {.found = true});
  EXPECT_TRUE(b.set({}).empty());
  EXPECT_TRUE(b.set({1}).empty());
}

TEST(SetCheckerTest, ACompletedContainsPinsTheState) {
  history_builder b(2);
  b.set_op(0, op_kind::insert, 1, pending);
  b.set_op(1, op_kind::contains, 1, done, true);
  EXPECT_TRUE(b.set({1}).empty());
  EXPECT_FALSE(b.set({}).empty()) << "a completed contains returned the pending insert";
}

TEST(SetCheckerTest, RejectsInventedDuplicateAndUnorderedKeys) {
  history_builder b;
  b.set_op(0, op_kind::insert, 1, done, true);
  b.set_op(0, op_kind::insert, 2, done, true);
  EXPECT_FALSE(b.set({1, 2, 9}).empty());
  EXPECT_FALSE(b.set({1, 1, 2}).empty());
  EXPECT_FALSE(b.set({2, 1}).empty());
  EXPECT_TRUE(b.set({2, 1}, false).empty());
}

TEST(MapCheckerTest, ValuesMustComeFromTheLastInsert) {
  history_builder b;
  b.set_op(0, op_kind::insert, 1, done, true, 0x11);
  b.set_op(0, op_kind::remove, 1, done, true);
  b.set_op(0, op_kind::insert, 1, done, true, 0x12);
  auto check = [&](std::uint64_t v) {
    return check_map(b.w, b.h, {{1, v, 0}}, {.values = true, .ordered = true});
  };
  EXPECT_TRUE(check(0x12).empty());
  EXPECT_FALSE(check(0x11).empty());
  EXPECT_FALSE(check(0x99).empty());
}

TEST(WorkloadTest, SameSeedSameWorkloadAndUniqueValues) {
  workload_config c{.writer_threads = 2, .reader_threads = 1, .ops_per_writer = 50,
                    .ops_per_reader = 20, .key_space = 6};
  workload a = make_workload(c, workload_family::kv, 7);
  workload b = make_workload(c, workload_family::kv, 7);
  ASSERT_EQ(a.threads.size(), 3u);
  std::vector<std::uint64_t> values;
  for (unsigned t = 0; t < 3; ++t) {
    ASSERT_EQ(a.threads[t].size(), c.ops_of(t));
    for (std::size_t i = 0; i < a.threads[t].size(); ++i) {
      const operation& x = a.threads[t][i];
      EXPECT_EQ(x.kind, b.threads[t][i].kind);
      EXPECT_EQ(x.key, b.threads[t][i].key);
      if (t == 2) EXPECT_EQ(x.kind, op_kind::get) << "readers only read";
      if (x.kind == op_kind::put) values.push_back(x.value);
      if (x.kind == op_kind::batch) {
        for (std::uint32_t e = 0; e < x.batch_size; ++e) {
          const kv_write& k = a.batch_entries[x.batch_first + e];
          if (!k.del) values.push_back(k.value);
          for (std::uint32_t f = 0; f < e; ++f) {
            EXPECT_NE(a.batch_entries[x.batch_first + f].key, k.key) << "distinct batch keys";
          }
        }
      } else {
        EXPECT_GE(x.key, 1u);
        EXPECT_LE(x.key, c.key_space);
      }
    }
  }
  std::sort(values.begin(), values.end());
  EXPECT_EQ(std::adjacent_find(values.begin(), values.end()), values.end());
  EXPECT_FALSE(values.empty());
}

}  // namespace
