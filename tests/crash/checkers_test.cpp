// The checkers on hand-made histories: what they accept and what they reject.
#include "crashtest/checkers.hpp"

#include "crashtest/harness.hpp"  // sequence_state

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
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
  // Weak durability: a weak put, a weak delete, and a persist.
  std::size_t weak_put(unsigned t, std::uint64_t key, std::uint64_t value, op_status s,
                       std::uint64_t version = 0) {
    operation o{op_kind::put, key, value};
    o.weak = true;
    return add(t, o, s, {.version = version});
  }
  std::size_t weak_del(unsigned t, std::uint64_t key, op_status s, std::uint64_t version = 0) {
    operation o{op_kind::del, key};
    o.weak = true;
    return add(t, o, s, {.version = version});
  }
  std::size_t persist(unsigned t, op_status s) { return add(t, {op_kind::persist}, s); }
  std::size_t set_op(unsigned t, op_kind k, std::uint64_t key, op_status s, bool found = false,
                     std::uint64_t value = 0) {
    return add(t, {k, key, k == op_kind::insert ? (value ? value : 100 + key) : 0}, s,
               {.found = found, .value = value});
  }
  // Queues and stacks: add (enqueue / push) `value`; take (dequeue / pop), which returned
  // `value` (0: found nothing) if completed.
  std::size_t add_op(unsigned t, op_kind k, std::uint64_t value, op_status s) {
    return add(t, {k, 0, value}, s);
  }
  std::size_t take_op(unsigned t, op_kind k, op_status s, std::uint64_t value = 0) {
    return add(t, {k}, s, {.found = value != 0, .value = value});
  }
  // A recovered queue (front first) or stack (top first).
  std::vector<std::string> queue(std::vector<std::uint64_t> values) const {
    return check_queue(w, h, sequence_state(values));
  }
  std::vector<std::string> stack(std::vector<std::uint64_t> values) const {
    return check_stack(w, h, sequence_state(values));
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

// ---- key-value, weak durability ----------------------------------------------------------

TEST(KvCheckerTest, AWeakWriteMayBeLostUntilAPersistCoversIt) {
  history_builder b;
  b.put(0, 1, 0xa1, done, 1);
  b.weak_put(0, 1, 0xa2, done, 2);
  b.weak_del(0, 2, done, 3);
  b.get(0, 1, true, 0xa2, 2);  // read, and lost all the same: allowed for a weak write
  EXPECT_TRUE(b.kv({{1, 0xa1, 1}}).empty());
  EXPECT_TRUE(b.kv({{1, 0xa2, 2}}).empty());
  b.persist(0, done);
  auto lost = b.kv({{1, 0xa1, 1}});
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_NE(lost[0].find("completed persist"), std::string::npos) << lost[0];
  EXPECT_TRUE(b.kv({{1, 0xa2, 2}}).empty());
}

TEST(KvCheckerTest, APendingPersistCoversNothing) {
  history_builder b;
  b.weak_put(0, 1, 0xa1, done, 1);
  b.persist(0, pending);
  EXPECT_TRUE(b.kv({}).empty());
}

TEST(KvCheckerTest, WeakDurabilityKeepsAPrefixOfTheVersionOrder) {
  history_builder b(2);
  b.weak_put(0, 1, 0xa1, done, 1);
  b.weak_put(1, 2, 0xb1, done, 2);
  b.weak_put(0, 3, 0xa2, done, 3);
  // Any prefix: none, the first, the first two, all three.
  EXPECT_TRUE(b.kv({}).empty());
  EXPECT_TRUE(b.kv({{1, 0xa1, 1}}).empty());
  EXPECT_TRUE(b.kv({{1, 0xa1, 1}, {2, 0xb1, 2}}).empty());
  EXPECT_TRUE(b.kv({{1, 0xa1, 1}, {2, 0xb1, 2}, {3, 0xa2, 3}}).empty());
  // A later write without an earlier one.
  auto gap = b.kv({{2, 0xb1, 2}});
  ASSERT_EQ(gap.size(), 1u);
  EXPECT_NE(gap[0].find("prefix"), std::string::npos) << gap[0];
  EXPECT_FALSE(b.kv({{1, 0xa1, 1}, {3, 0xa2, 3}}).empty());
}

TEST(KvCheckerTest, ASyncWriteMakesEveryEarlierWeakWriteRequired) {
  history_builder b(2);
  b.weak_put(0, 1, 0xa1, done, 1);
  b.weak_del(0, 2, done, 2);
  b.put(1, 3, 0xb1, done, 3);
  EXPECT_TRUE(b.kv({{1, 0xa1, 1}, {3, 0xb1, 3}}).empty());
  EXPECT_FALSE(b.kv({{3, 0xb1, 3}}).empty());
  // The weak delete of key 2 is required as well: the key must stay absent.
  EXPECT_TRUE(b.kv({{1, 0xa1, 1}, {3, 0xb1, 3}}).empty());
}

TEST(KvCheckerTest, APendingSyncWriteThatSurvivedRequiresTheWeakWritesBeforeIt) {
  history_builder b;
  b.weak_put(0, 1, 0xa1, done, 1);
  b.put(0, 2, 0xa2, pending);
  EXPECT_TRUE(b.kv({}).empty());
  EXPECT_TRUE(b.kv({{1, 0xa1, 1}}).empty());
  EXPECT_TRUE(b.kv({{1, 0xa1, 1}, {2, 0xa2, 2}}).empty());
  EXPECT_FALSE(b.kv({{2, 0xa2, 2}}).empty());
}

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

// ---- queues ------------------------------------------------------------------------------

bool any_contains(const std::vector<std::string>& problems, const std::string& text) {
  return std::any_of(problems.begin(), problems.end(),
                     [&](const std::string& p) { return p.find(text) != std::string::npos; });
}

constexpr auto enq = op_kind::enqueue;
constexpr auto deq = op_kind::dequeue;

TEST(QueueCheckerTest, AcceptsTheCompletedHistoryInFifoOrder) {
  history_builder b;
  b.add_op(0, enq, 0xa1, done);
  b.add_op(0, enq, 0xa2, done);
  b.add_op(0, enq, 0xa3, done);
  b.take_op(0, deq, done, 0xa1);
  EXPECT_TRUE(b.queue({0xa2, 0xa3}).empty());
}

TEST(QueueCheckerTest, RejectsALostCompletedEnqueue) {
  history_builder b;
  b.add_op(0, enq, 0xa1, done);
  b.add_op(0, enq, 0xa2, done);
  auto p = b.queue({0xa1});
  ASSERT_EQ(p.size(), 1u) << p[0];
  EXPECT_NE(p[0].find("lost"), std::string::npos) << p[0];
}

TEST(QueueCheckerTest, RejectsADuplicatedValue) {
  history_builder b;
  b.add_op(0, enq, 0xa1, done);
  b.add_op(0, enq, 0xa2, done);
  b.take_op(0, deq, done, 0xa1);
  EXPECT_TRUE(any_contains(b.queue({0xa1, 0xa2}), "returned it")) << "dequeued yet still there";
  EXPECT_TRUE(any_contains(b.queue({0xa2, 0xa2}), "twice")) << "in the queue twice";
  history_builder twice;
  twice.add_op(0, enq, 0xa1, done);
  twice.take_op(0, deq, done, 0xa1);
  twice.take_op(0, deq, done, 0xa1);
  EXPECT_TRUE(any_contains(twice.queue({}), "returned twice"));
}

TEST(QueueCheckerTest, RejectsInventedValues) {
  history_builder b;
  b.add_op(0, enq, 0xa1, done);
  EXPECT_TRUE(any_contains(b.queue({0xa1, 0xbad}), "no invoked enqueue"));
  b.take_op(0, deq, done, 0xbee);
  EXPECT_TRUE(any_contains(b.queue({0xa1}), "no invoked enqueue"));
}

TEST(QueueCheckerTest, RejectsValuesOutOfFifoOrder) {
  history_builder b;
  b.add_op(0, enq, 0xa1, done);
  b.add_op(0, enq, 0xa2, done);
  EXPECT_TRUE(any_contains(b.queue({0xa2, 0xa1}), "order"));
  // A later value gone while an earlier one stays: not FIFO.
  history_builder c;
  c.add_op(0, enq, 0xa1, done);
  c.add_op(0, enq, 0xa2, done);
  c.take_op(0, deq, done, 0xa2);
  EXPECT_TRUE(any_contains(c.queue({0xa1}), "order"));
}

TEST(QueueCheckerTest, ConcurrentEnqueuesMayBeOrderedEitherWay) {
  history_builder b(2);
  std::size_t x = b.begin(0, {enq, 0, 0xa1});
  std::size_t y = b.begin(1, {enq, 0, 0xb1});
  b.finish(0, x, {});
  b.finish(1, y, {});
  EXPECT_TRUE(b.queue({0xa1, 0xb1}).empty());
  EXPECT_TRUE(b.queue({0xb1, 0xa1}).empty());
}

TEST(QueueCheckerTest, PendingOperationsEitherWay) {
  history_builder b(2);
  b.add_op(0, enq, 0xa1, done);
  b.add_op(0, enq, 0xa2, done);
  b.add_op(0, enq, 0xa3, pending);
  b.take_op(1, deq, pending);
  EXPECT_TRUE(b.queue({0xa1, 0xa2}).empty()) << "neither took effect";
  EXPECT_TRUE(b.queue({0xa1, 0xa2, 0xa3}).empty()) << "the enqueue took effect";
  EXPECT_TRUE(b.queue({0xa2, 0xa3}).empty()) << "both took effect";
  EXPECT_TRUE(b.queue({0xa2}).empty()) << "the dequeue took effect";
  EXPECT_FALSE(b.queue({0xa1}).empty()) << "one pending dequeue takes one value, the front";
  EXPECT_FALSE(b.queue({0xa3}).empty()) << "two values gone, one pending dequeue";
}

TEST(QueueCheckerTest, ADequeuedPendingEnqueueTookEffect) {
  history_builder b(2);
  b.add_op(0, enq, 0xa1, pending);
  b.take_op(1, deq, done, 0xa1);
  EXPECT_TRUE(b.queue({}).empty());
  EXPECT_FALSE(b.queue({0xa1}).empty());
}

TEST(QueueCheckerTest, MessagesUseTheSubjectsNames) {
  history_builder b;
  b.w.names.set(enq, "offer");
  b.add_op(0, enq, 0xa1, done);
  auto p = b.queue({});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("(offer value 0xa1)"), std::string::npos) << p[0];
  EXPECT_EQ(p[0].find("enqueue"), std::string::npos) << p[0];
}

// ---- stacks ------------------------------------------------------------------------------

constexpr auto push = op_kind::push;
constexpr auto pop = op_kind::pop;

TEST(StackCheckerTest, AcceptsTheCompletedHistoryInLifoOrder) {
  history_builder b;
  b.add_op(0, push, 0xa1, done);
  b.add_op(0, push, 0xa2, done);
  b.add_op(0, push, 0xa3, done);
  b.take_op(0, pop, done, 0xa3);
  EXPECT_TRUE(b.stack({0xa2, 0xa1}).empty());
}

TEST(StackCheckerTest, RejectsALostCompletedPush) {
  history_builder b;
  b.add_op(0, push, 0xa1, done);
  b.add_op(0, push, 0xa2, done);
  EXPECT_TRUE(any_contains(b.stack({0xa2}), "lost"));
  EXPECT_TRUE(any_contains(b.stack({0xa1}), "lost"));
}

TEST(StackCheckerTest, RejectsADuplicatedValue) {
  history_builder b;
  b.add_op(0, push, 0xa1, done);
  b.add_op(0, push, 0xa2, done);
  b.take_op(0, pop, done, 0xa2);
  EXPECT_TRUE(any_contains(b.stack({0xa2, 0xa1}), "returned it"));
  EXPECT_TRUE(any_contains(b.stack({0xa1, 0xa1}), "twice"));
}

TEST(StackCheckerTest, RejectsValuesOutOfLifoOrder) {
  history_builder b;
  b.add_op(0, push, 0xa1, done);
  b.add_op(0, push, 0xa2, done);
  EXPECT_TRUE(b.stack({0xa2, 0xa1}).empty());
  EXPECT_TRUE(any_contains(b.stack({0xa1, 0xa2}), "order")) << "the older value on top";
  // A pop returned a value below one still there.
  history_builder c;
  c.add_op(0, push, 0xa1, done);
  c.add_op(0, push, 0xa2, done);
  c.take_op(0, pop, done, 0xa1);
  EXPECT_TRUE(any_contains(c.stack({0xa2}), "order"));
}

TEST(StackCheckerTest, PendingOperationsEitherWay) {
  history_builder b(2);
  b.add_op(0, push, 0xa1, done);
  b.add_op(0, push, 0xa2, done);
  b.add_op(0, push, 0xa3, pending);
  b.take_op(1, pop, pending);
  EXPECT_TRUE(b.stack({0xa2, 0xa1}).empty()) << "neither took effect";
  EXPECT_TRUE(b.stack({0xa3, 0xa2, 0xa1}).empty()) << "the push took effect";
  EXPECT_TRUE(b.stack({0xa1}).empty()) << "the pop took the top";
  EXPECT_TRUE(b.stack({0xa2, 0xa1}).empty()) << "push then pop";
  EXPECT_FALSE(b.stack({0xa2}).empty()) << "the pop took a value from below the top";
  EXPECT_FALSE(b.stack({0xa3}).empty()) << "two values gone, one pending pop";
}

TEST(WorkloadTest, QueueAndStackWorkloadsAddUniqueValuesAndTakeWithoutKeys) {
  workload_config c{.writer_threads = 2, .reader_threads = 1, .ops_per_writer = 40,
                    .ops_per_reader = 10, .put_percent = 60};
  for (auto [family, add, take] : {std::tuple{workload_family::queue, enq, deq},
                                   std::tuple{workload_family::stack, push, pop}}) {
    workload w = make_workload(c, family, 3);
    std::vector<std::uint64_t> values;
    std::size_t takes = 0;
    for (unsigned t = 0; t < 3; ++t) {
      for (const operation& o : w.threads[t]) {
        ASSERT_TRUE(o.kind == add || o.kind == take);
        EXPECT_EQ(o.key, 0u);
        if (t == 2) {
          EXPECT_EQ(o.kind, take) << "readers only take";
        }
        if (o.kind == add) values.push_back(o.value);
        takes += o.kind == take;
      }
    }
    std::sort(values.begin(), values.end());
    EXPECT_EQ(std::adjacent_find(values.begin(), values.end()), values.end());
    EXPECT_EQ(std::count(values.begin(), values.end(), 0u), 0);
    EXPECT_GT(values.size(), 20u);
    EXPECT_GT(takes, 10u);
  }
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
      if (t == 2) {
        EXPECT_EQ(x.kind, op_kind::get) << "readers only read";
      }
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
