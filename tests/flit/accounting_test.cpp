// Exact flush accounting, per operation: what each access issues under each placement.
#include <gtest/gtest.h>

#include <optional>

#include "support/policies.hpp"

namespace {

using namespace flit_test;

template <class Policy>
class AccountingTest : public ::testing::Test {
 protected:
  using P = Policy;
  using L = typename Policy::placement;
  static constexpr bool persistent = L::persistent;
  static constexpr bool counters = L::tracks == flit::tracking::counter;
  static constexpr bool flag = L::tracks == flit::tracking::flush_bit;
  static constexpr bool plain = persistent && L::tracks == flit::tracking::none;

  void SetUp() override {
    if (!backend_runs_here<Policy>()) GTEST_SKIP() << "flush instruction not on this CPU";
    activation_.emplace(model_);
    P::operation_completion();  // start from a thread with nothing unfenced
    ASSERT_FALSE(P::has_unfenced());
  }
  void TearDown() override { P::operation_completion(); }

  // pwb and pfence issued by f.
  template <class F>
  static flit::counts cost(F&& f) {
    flit::stats_scope scope;
    f();
    return scope.delta();
  }
  static flit::counts expect(std::uint64_t pwb, std::uint64_t pfence,
                             std::uint64_t tagged = 0) {
    if constexpr (!persistent || !flit::stats_enabled) return {};
    return {pwb, pfence, tagged};
  }

  pv::model model_{1 << 16};
  std::optional<pv::scoped_activation> activation_;
};
TYPED_TEST_SUITE(AccountingTest, all_policies);

TYPED_TEST(AccountingTest, VInstructionsNeverFlushOrFence) {
  using F = TestFixture;
  in_region<flit::persist<word, TypeParam>> w(this->model_);
  EXPECT_EQ(F::cost([&] { (void)w->load(flit::volatile_); }), F::expect(0, 0));
  EXPECT_EQ(F::cost([&] { w->store(value(1), flit::volatile_); }), F::expect(0, 0));
  EXPECT_EQ(F::cost([&] { w->store(value(2), flit::volatile_, flit::private_); }),
            F::expect(0, 0));
  word e = value(2);
  EXPECT_EQ(F::cost([&] { w->compare_exchange(e, value(3), flit::volatile_); }),
            F::expect(0, 0));
  EXPECT_EQ(F::cost([&] { w->exchange(value(4), flit::volatile_); }), F::expect(0, 0));
  EXPECT_EQ(F::cost([&] { TypeParam::operation_completion(); }), F::expect(0, 0))
      << "nothing unfenced: completion needs no fence";
}

TYPED_TEST(AccountingTest, PLoadOfAnUntaggedLocation) {
  using F = TestFixture;
  in_region<flit::persist<word, TypeParam>> w(this->model_);
  w->store(value(1));
  TypeParam::operation_completion();
  // hashed, adjacent, link_and_persist: the location is not tagged, so no write-back;
  // plain: every p-load writes back.
  auto c = F::cost([&] { (void)w->load(); });
  EXPECT_EQ(c, F::plain ? F::expect(1, 0, 1) : F::expect(0, 0));
  EXPECT_EQ(F::cost([&] { (void)w->load(flit::persisted, flit::private_); }), F::expect(0, 0))
      << "private loads never write back";
}

TYPED_TEST(AccountingTest, SharedPStoreFollowsTheAlgorithm) {
  using F = TestFixture;
  in_region<flit::persist<word, TypeParam>> w(this->model_);
  // From a clean thread: write, pwb, pfence before untagging (plain: readers write back for
  // themselves, so no fence until the operation completes).
  EXPECT_EQ(F::cost([&] { w->store(value(1)); }), F::plain ? F::expect(1, 0) : F::expect(1, 1));
  EXPECT_EQ(F::cost([&] { TypeParam::operation_completion(); }),
            F::plain ? F::expect(0, 1) : F::expect(0, 0));
  // With an unfenced write-back pending (a private p-store), the store first fences it: the
  // paper's pfence; store; pwb; pfence.
  in_region<flit::persist<word, TypeParam>> other(this->model_, 128);
  EXPECT_EQ(F::cost([&] { other->store(value(2), flit::persisted, flit::private_); }),
            F::expect(1, 0));
  EXPECT_EQ(F::cost([&] { w->store(value(3)); }), F::plain ? F::expect(1, 1) : F::expect(1, 2));
  TypeParam::operation_completion();
  // A CAS, an exchange and a fetch-add are stores.
  word e = value(3);
  EXPECT_EQ(F::cost([&] { EXPECT_TRUE(w->compare_exchange(e, value(4))); }),
            F::plain ? F::expect(1, 0) : F::expect(1, 1));
  TypeParam::operation_completion();
  EXPECT_EQ(F::cost([&] { w->exchange(value(5)); }),
            F::plain ? F::expect(1, 0) : F::expect(1, 1));
  TypeParam::operation_completion();
  if constexpr (counts_integers<TypeParam>) {
    in_region<flit::persist<std::uint64_t, TypeParam>> n(this->model_, 192);
    EXPECT_EQ(F::cost([&] { n->fetch_add(1); }), F::plain ? F::expect(1, 0) : F::expect(1, 1));
  }
}

TYPED_TEST(AccountingTest, FailedPCasIsALoad) {
  using F = TestFixture;
  in_region<flit::persist<word, TypeParam>> w(this->model_);
  w->store(value(1));
  TypeParam::operation_completion();
  word e = value(2);
  auto c = F::cost([&] { EXPECT_FALSE(w->compare_exchange(e, value(3))); });
  EXPECT_EQ(c, F::plain ? F::expect(1, 0, 1) : F::expect(0, 0));
}

TYPED_TEST(AccountingTest, PrivatePStoreDefersItsFenceToCompletion) {
  using F = TestFixture;
  in_region<flit::persist<word, TypeParam>> w(this->model_);
  EXPECT_EQ(F::cost([&] { w->store(value(1), flit::persisted, flit::private_); }),
            F::expect(1, 0));
  EXPECT_EQ(F::cost([&] { TypeParam::operation_completion(); }), F::expect(0, 1));
  EXPECT_EQ(F::cost([&] { TypeParam::operation_completion(); }), F::expect(0, 0));
}

TYPED_TEST(AccountingTest, SharedVStoreCompletesEarlierWriteBacksFirst) {
  using F = TestFixture;
  in_region<flit::persist<word, TypeParam>> node(this->model_, 128);
  in_region<flit::persist<word, TypeParam>> link(this->model_);
  node->store(value(1), flit::persisted, flit::private_);
  // Condition 4: the node must be durable before a shared store can publish it, even a
  // v-store. The fence is the private store's, deferred until here.
  EXPECT_EQ(F::cost([&] { link->store(value(2), flit::volatile_); }), F::expect(0, 1));
}

TYPED_TEST(AccountingTest, RangeWritesFlushEachLineOnce) {
  using F = TestFixture;
  char data[200] = {};
  std::byte* dst = this->model_.base() + 64 + 10;  // 200 bytes from offset 74: lines 1..4
  EXPECT_EQ(F::cost([&] { TypeParam::write_range(dst, data, sizeof data, flit::persisted); }),
            F::expect(4, 0));
  EXPECT_EQ(F::cost([&] { TypeParam::write_range(dst, data, sizeof data, flit::volatile_); }),
            F::expect(0, 0));
  EXPECT_EQ(F::cost([&] { TypeParam::flush_range(dst, 1); }), F::expect(1, 0));
  EXPECT_EQ(F::cost([&] { TypeParam::operation_completion(); }), F::expect(0, 1));
}

TYPED_TEST(AccountingTest, TaggedLocationIsWrittenBackByReaders) {
  using F = TestFixture;
  using L = typename TypeParam::placement;
  if constexpr (!F::persistent) {
    GTEST_SKIP() << "nothing is tagged without persistence";
  } else {
    typename TypeParam::template cell<word> c{};
    if constexpr (F::flag) {
      // A store in flight: the word holds its value with the flag up.
      c.word.store(L::mark(c, flit::to_word(value(1))));
    } else {
      L::begin_store(c);  // a store in flight on this location
      c.word.store(flit::to_word(value(1)));
    }
    EXPECT_EQ(F::cost([&] {
                EXPECT_EQ(TypeParam::load(c, flit::persisted, flit::shared), value(1));
              }),
              F::expect(1, 0, 1));
    EXPECT_EQ(F::cost([&] { (void)TypeParam::load(c, flit::volatile_, flit::shared); }),
              F::expect(0, 0));
    EXPECT_EQ(F::cost([&] { TypeParam::operation_completion(); }), F::expect(0, 1));
    if constexpr (F::counters) {
      word v = value(1);
      L::release(c, flit::to_word(v));
      EXPECT_FALSE(L::tagged(c, flit::to_word(v))) << "released: counter back to zero";
    } else if constexpr (F::flag) {
      L::release(c, L::mark(c, flit::to_word(value(1))));
      EXPECT_FALSE(L::tagged(c, c.word.load())) << "flag lowered after the fence";
    }
  }
}

TYPED_TEST(AccountingTest, CountersReturnToZeroAfterEveryStore) {
  using F = TestFixture;
  using L = typename TypeParam::placement;
  if constexpr (!F::counters && !F::flag) {
    GTEST_SKIP() << "no tags in this placement";
  } else {
    typename TypeParam::template cell<word> c{};
    word e = nullptr;
    TypeParam::store(c, value(1), flit::persisted, flit::shared);
    EXPECT_FALSE(L::tagged(c, c.word.load()));
    e = value(1);
    EXPECT_TRUE(TypeParam::compare_exchange(c, e, value(2), flit::persisted));
    EXPECT_FALSE(L::tagged(c, c.word.load()));
    e = value(7);
    EXPECT_FALSE(TypeParam::compare_exchange(c, e, value(3), flit::persisted));
    EXPECT_FALSE(L::tagged(c, c.word.load())) << "a failed CAS leaves no tag";
    TypeParam::exchange(c, value(4), flit::persisted);
    EXPECT_FALSE(L::tagged(c, c.word.load()));
    TypeParam::operation_completion();
    EXPECT_EQ(F::cost([&] { (void)TypeParam::load(c, flit::persisted, flit::shared); }),
              F::expect(0, 0));
  }
}

TEST(Statistics, AllThreadsIncludesThreadsThatExited) {
  using P = flit::policy<test_hashed, flit::detected>;
  static flit::persist<std::uint64_t, P> w;
  flit::counts before = flit::all_threads();
  std::thread([] {
    for (int i = 0; i < 10; ++i) w.store(static_cast<std::uint64_t>(i));
  }).join();
  flit::counts after = flit::all_threads();
  if (flit::stats_enabled) {
    EXPECT_EQ(after.pwb - before.pwb, 10u);
    EXPECT_EQ(after.pfence - before.pfence, 10u);
  } else {
    EXPECT_EQ(after, flit::counts{});
  }
}

}  // namespace
