// persist<T>: every operation under every counter placement and backend behaves as the
// atomic it wraps, from one thread and from several.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "support/policies.hpp"

namespace {

using namespace flit_test;

template <class Policy>
class PersistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backend_runs_here<Policy>()) GTEST_SKIP() << "flush instruction not on this CPU";
    activation_.emplace(model_);
  }
  void TearDown() override { Policy::operation_completion(); }

  pv::model model_{1 << 16};
  std::optional<pv::scoped_activation> activation_;
};
TYPED_TEST_SUITE(PersistTest, all_policies);

TYPED_TEST(PersistTest, LoadsWhatWasStoredOnEveryPath) {
  using P = TypeParam;
  in_region<flit::persist<word, P>> w(this->model_);
  EXPECT_EQ(w->load(), nullptr);
  w->store(value(1));
  EXPECT_EQ(w->load(), value(1));
  EXPECT_EQ(w->load(flit::volatile_), value(1));
  EXPECT_EQ(w->load(flit::persisted, flit::private_), value(1));
  w->store(value(2), flit::volatile_);
  EXPECT_EQ(w->load(flit::persisted), value(2));
  w->store(value(3), flit::persisted, flit::private_);
  EXPECT_EQ(w->load(), value(3));
  w->store(value(4), flit::volatile_, flit::private_);
  EXPECT_EQ(w->load(flit::volatile_, flit::private_), value(4));
  *w = value(5);
  word read = *w;
  EXPECT_EQ(read, value(5));
  EXPECT_EQ(&(*w)->payload, &value(5)->payload);
}

TYPED_TEST(PersistTest, CompareExchangeSucceedsOnlyOnExpected) {
  using P = TypeParam;
  in_region<flit::persist<word, P>> w(this->model_);
  w->store(value(1));
  word expected = value(2);
  EXPECT_FALSE(w->compare_exchange(expected, value(3)));
  EXPECT_EQ(expected, value(1)) << "a failed CAS reports what it saw";
  EXPECT_EQ(w->load(), value(1));
  EXPECT_TRUE(w->compare_exchange(expected, value(3)));
  EXPECT_EQ(w->load(), value(3));
  expected = value(3);
  EXPECT_TRUE(w->compare_exchange(expected, value(4), flit::volatile_));
  EXPECT_EQ(w->load(), value(4));
  expected = value(9);
  EXPECT_FALSE(w->compare_exchange(expected, value(5), flit::volatile_));
  EXPECT_EQ(expected, value(4));
}

TYPED_TEST(PersistTest, ExchangeReturnsThePreviousValue) {
  using P = TypeParam;
  in_region<flit::persist<word, P>> w(this->model_);
  w->store(value(1));
  EXPECT_EQ(w->exchange(value(2)), value(1));
  EXPECT_EQ(w->exchange(value(3), flit::volatile_), value(2));
  EXPECT_EQ(w->load(), value(3));
}

TYPED_TEST(PersistTest, FetchAddOnIntegers) {
  using P = TypeParam;
  if constexpr (counts_integers<P>) {
    in_region<flit::persist<std::uint64_t, P>> n(this->model_);
    EXPECT_EQ(n->fetch_add(5), 0u);
    EXPECT_EQ(n->fetch_add(7, flit::volatile_), 5u);
    EXPECT_EQ(n->load(), 12u);
    EXPECT_EQ(n->fetch_add(static_cast<std::uint64_t>(-2)), 12u);
    EXPECT_EQ(n->load(), 10u);
    in_region<flit::persist<std::uint32_t, P>> small(this->model_, 64);
    small->store(0xffffffffu);
    EXPECT_EQ(small->fetch_add(1), 0xffffffffu);
    EXPECT_EQ(small->load(), 0u) << "wraps as the word's own type";
  } else {
    GTEST_SKIP() << "link_and_persist keeps a flag inside the word: no full-range integers";
  }
}

TYPED_TEST(PersistTest, DefaultModeComesFromTheDeclaration) {
  using P = TypeParam;
  in_region<flit::persist<word, P, flit::volatile_t>> w(this->model_);
  flit::stats_scope scope;
  w->store(value(1));
  EXPECT_EQ(w->load(), value(1));
  EXPECT_EQ(scope.delta().pwb, 0u) << "a volatile-declared word takes v-instructions";
  EXPECT_EQ(scope.delta().pfence, 0u);
}

TYPED_TEST(PersistTest, ConcurrentCasIncrementsLoseNothing) {
  using P = TypeParam;
  constexpr int threads = 3;
  constexpr int per_thread = 3000;
  if constexpr (counts_integers<P>) {
    in_region<flit::persist<std::uint64_t, P>> n(this->model_);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (int i = 0; i < per_thread; ++i) {
          std::uint64_t seen = n->load();
          while (!n->compare_exchange(seen, seen + 1)) {
          }
          P::operation_completion();
        }
      });
    }
    for (auto& t : pool) t.join();
    EXPECT_EQ(n->load(), std::uint64_t{threads} * per_thread);
  } else {
    // Pointers stepping through an array of slots: the same check on a word with a flag.
    static slot arena[threads * per_thread + 1];
    in_region<flit::persist<word, P>> w(this->model_);
    w->store(&arena[0]);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (int i = 0; i < per_thread; ++i) {
          word seen = w->load();
          while (!w->compare_exchange(seen, seen + 1)) {
          }
          P::operation_completion();
        }
      });
    }
    for (auto& t : pool) t.join();
    EXPECT_EQ(w->load(), &arena[threads * per_thread]);
  }
}

TYPED_TEST(PersistTest, ConcurrentFetchAddAndExchangeLoseNothing) {
  using P = TypeParam;
  constexpr int threads = 3;
  constexpr int per_thread = 3000;
  in_region<flit::persist<word, P>> token(this->model_, 64);
  std::atomic<std::uint64_t> taken_sum{0};
  std::uint64_t final_count = 0;
  {
    // Each thread swaps its own values in; every value swapped out is accounted for once.
    token->store(value(0));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        std::uint64_t local = 0;
        for (int i = 0; i < per_thread; ++i) {
          word out = token->exchange(value(static_cast<std::size_t>(t + 1)));
          local += static_cast<std::uint64_t>(out - value(0));
          P::operation_completion();
        }
        taken_sum += local;
      });
    }
    for (auto& t : pool) t.join();
    std::uint64_t last = static_cast<std::uint64_t>(token->load() - value(0));
    std::uint64_t stored = 0;
    for (int t = 0; t < threads; ++t) stored += std::uint64_t(t + 1) * per_thread;
    EXPECT_EQ(taken_sum.load() + last, stored) << "each exchanged-in value comes out once";
  }
  if constexpr (counts_integers<P>) {
    in_region<flit::persist<std::uint64_t, P>> n(this->model_);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (int i = 0; i < per_thread; ++i) {
          n->fetch_add(1);
          P::operation_completion();
        }
      });
    }
    for (auto& t : pool) t.join();
    final_count = n->load();
    EXPECT_EQ(final_count, std::uint64_t{threads} * per_thread);
  }
}

TEST(PersistLayout, OnlyAdjacentWidensTheWord) {
  using namespace flit;
  static_assert(sizeof(persist<std::uint64_t, policy<test_hashed, clwb>>) == 8);
  static_assert(sizeof(persist<std::uint64_t, policy<plain, clwb>>) == 8);
  static_assert(sizeof(persist<word, policy<link_and_persist, clwb>>) == 8);
  static_assert(sizeof(persist<std::uint64_t, policy<nonpersistent, clwb>>) == 8);
  static_assert(sizeof(persist<std::uint64_t, policy<adjacent, clwb>>) == 16);
  static_assert(sizeof(persist<std::uint32_t, policy<adjacent, clwb>>) == 8);
  static_assert(std::is_standard_layout_v<persist<std::uint64_t, policy<adjacent, clwb>>>);
  // A type with no spare bit cannot be declared under link_and_persist:
  static_assert(!has_spare_bit<std::uint64_t>);
  static_assert(has_spare_bit<word>);
  static_assert(!has_spare_bit<char*>, "char is not aligned: no spare bit in char*");
  SUCCEED();
}

TEST(PersistBackend, DetectedPicksTheBestSupportedInstruction) {
  using flit::flush_instruction;
  flush_instruction best = flit::best_flush_instruction();
  EXPECT_TRUE(flit::cpu_supports(best));
  EXPECT_TRUE(flit::cpu_supports(flush_instruction::clflush)) << "every x86-64 CPU has it";
  if (flit::cpu_supports(flush_instruction::clwb)) {
    EXPECT_EQ(best, flush_instruction::clwb);
  } else if (flit::cpu_supports(flush_instruction::clflushopt)) {
    EXPECT_EQ(best, flush_instruction::clflushopt);
  }
  EXPECT_EQ(flit::detected::name(), flit::to_string(best));
  EXPECT_TRUE(flit::default_backend_supported());
}

}  // namespace
