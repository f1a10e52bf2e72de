// The tests every structure passes in every configuration (type-parameterized suites; each
// structure's test file instantiates them):
//  - ModelTest: random operations against std::map, on the pv model, one thread; and a
//    clean shutdown and restart that recovers the same contents.
//  - StressTest: real threads, with no model active (the policy's pwb and pfence do
//    nothing then, everything else runs as on hardware), nodes reclaimed and reused through
//    the pool's epoch domain; then final-state checks: each key's presence is the net
//    effect of the successful inserts and removes of it, no key twice, order and shape
//    invariants (TEST_Validate), values as written. And a pool that fills up.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "support.hpp"

namespace structures_test {

// ---- model tests --------------------------------------------------------------------------

template <class Config>
class ModelTest : public ::testing::Test {
 protected:
  using S = typename Config::structure;
  using memory = typename Config::memory;

  void SetUp() override {
    on_.emplace(model_);
    memory_.emplace(unwrap(memory::create(region(), pool_label)));
  }
  std::span<std::byte> region() { return {model_.base(), model_.size()}; }

  // Random operations on keys [0, keys), each checked against std::map.
  void run_random(S& s, std::map<std::uint64_t, std::uint64_t>& ref, int ops, std::uint64_t keys,
                  std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < ops; ++i) {
      const std::uint64_t key = rng() % keys;
      switch (rng() % 3) {
        case 0: {
          const std::uint64_t value = rng() >> 1;
          ASSERT_EQ(s.insert(key, value), ref.emplace(key, value).second) << "insert " << key << ", op " << i;
          break;
        }
        case 1:
          ASSERT_EQ(s.remove(key), ref.erase(key) == 1) << "remove " << key << ", op " << i;
          break;
        default: {
          auto it = ref.find(key);
          ASSERT_EQ(s.find(key), it == ref.end() ? std::nullopt : std::optional(it->second))
              << "find " << key << ", op " << i;
        }
      }
    }
  }

  static std::vector<std::pair<std::uint64_t, std::uint64_t>> sorted(const S& s) {
    auto c = contents(s);
    std::sort(c.begin(), c.end());
    return c;
  }

  pv::model model_{8 << 20};
  std::optional<pv::scoped_activation> on_;
  std::optional<memory> memory_;
};
TYPED_TEST_SUITE_P(ModelTest);

TYPED_TEST_P(ModelTest, MatchesStdMapUnderRandomOperations) {
  auto s = create<typename TestFixture::S>(*this->memory_, 16);
  std::map<std::uint64_t, std::uint64_t> ref;
  this->run_random(*s, ref, 3000, 150, 42);
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> expected(ref.begin(), ref.end());
  EXPECT_EQ(this->sorted(*s), expected);
  EXPECT_EQ(s->TEST_Validate(), std::nullopt);
}

TYPED_TEST_P(ModelTest, IteratesInKeyOrderExceptTheHashTable) {
  auto s = create<typename TestFixture::S>(*this->memory_, 16);
  for (std::uint64_t k : {50u, 3u, 99u, 0u, 7u, 64u}) ASSERT_TRUE(s->insert(k, k + 1));
  ASSERT_TRUE(s->remove(7));
  auto c = contents(*s);
  EXPECT_EQ(c.size(), 5u);
  if (TestFixture::S::name != std::string_view("hash_table")) {
    EXPECT_TRUE(std::is_sorted(c.begin(), c.end()));
  }
}

TYPED_TEST_P(ModelTest, ExtremeKeysAndRepeatedOperations) {
  using S = typename TestFixture::S;
  auto s = create<S>(*this->memory_, 16);
  std::uint64_t top = ~std::uint64_t{0};
  if constexpr (requires { S::max_key; }) top = S::max_key;
  EXPECT_FALSE(s->remove(0));
  EXPECT_TRUE(s->insert(0, 1));
  EXPECT_FALSE(s->insert(0, 2)) << "a present key is not replaced";
  EXPECT_EQ(s->find(0), std::optional<std::uint64_t>(1));
  EXPECT_TRUE(s->insert(top, 3));
  EXPECT_EQ(s->find(top), std::optional<std::uint64_t>(3));
  EXPECT_TRUE(s->remove(0));
  EXPECT_FALSE(s->remove(0));
  EXPECT_FALSE(s->contains(0));
  EXPECT_TRUE(s->contains(top));
  EXPECT_TRUE(s->insert(0, 4)) << "a removed key can come back";
  EXPECT_EQ(s->find(0), std::optional<std::uint64_t>(4));
  EXPECT_EQ(s->TEST_Validate(), std::nullopt);
}

TYPED_TEST_P(ModelTest, RecoversTheSameContentsAfterACleanShutdown) {
  using S = typename TestFixture::S;
  auto s = create<S>(*this->memory_, 16);
  this->memory_->set_root(s->root());
  std::map<std::uint64_t, std::uint64_t> ref;
  this->run_random(*s, ref, 1500, 100, 7);
  s.reset();
  this->memory_.reset();
  this->model_.persist_all();
  this->model_.load_image(this->model_.crash(pv::writeback::none));
  this->memory_.emplace(unwrap(TestFixture::memory::open(this->region(), pool_label)));
  std::size_t live = 0;
  auto mark = this->memory_->live_marker();
  auto r = recover<S>(*this->memory_, this->memory_->root(), [&](std::uint64_t offset, std::size_t bytes) {
    mark(offset, bytes);  // throws for an offset that is not an allocated block
    ++live;
  });
  this->memory_->finish_recovery();
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> expected(ref.begin(), ref.end());
  EXPECT_EQ(this->sorted(*r), expected);
  EXPECT_GE(live, ref.size()) << "every key's node is reported live";
  EXPECT_EQ(r->TEST_Validate(), std::nullopt);
  this->run_random(*r, ref, 500, 100, 8);  // and it keeps working
  EXPECT_EQ(r->TEST_Validate(), std::nullopt);
}

REGISTER_TYPED_TEST_SUITE_P(ModelTest, MatchesStdMapUnderRandomOperations, IteratesInKeyOrderExceptTheHashTable,
                            ExtremeKeysAndRepeatedOperations, RecoversTheSameContentsAfterACleanShutdown);

// ---- stress tests -------------------------------------------------------------------------

template <class Config>
class StressTest : public ::testing::Test {
 protected:
  using S = typename Config::structure;
  using memory = typename Config::memory;
  static constexpr std::size_t region_bytes = 64 << 20;

  void SetUp() override { memory_.emplace(unwrap(memory::create({region_.get(), region_bytes}, pool_label))); }

  struct aligned_delete {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<std::byte[], aligned_delete> region_{
      static_cast<std::byte*>(::operator new[](region_bytes, std::align_val_t{64}))};
  std::optional<memory> memory_;  // after region_: destroyed first
};
TYPED_TEST_SUITE_P(StressTest);

// The value every writer stores with a key, so that readers can check what they find.
constexpr std::uint64_t value_of(std::uint64_t key) { return key * 7 + 1; }

TYPED_TEST_P(StressTest, EachKeyEndsAsTheNetEffectOfItsSuccessfulUpdates) {
  using S = typename TestFixture::S;
  constexpr int threads = 4;
  constexpr int ops_per_thread = 12000;
  const std::uint64_t keys = S::name == std::string_view("list") ? 128 : 1024;
  const std::uint64_t stable_base = 1u << 20;  // keys inserted first and never removed
  constexpr std::uint64_t stable_keys = 64;

  auto s = create<S>(*this->memory_, 256);
  for (std::uint64_t k = 0; k < stable_keys; ++k) ASSERT_TRUE(s->insert(stable_base + k, value_of(stable_base + k)));

  std::vector<std::atomic<int>> net(keys);
  std::atomic<int> wrong_value{0}, stable_missing{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      for (int i = 0; i < ops_per_thread; ++i) {
        const std::uint64_t key = rng() % keys;
        switch (rng() % 4) {
          case 0:
          case 1:
            if (s->insert(key, value_of(key))) net[key].fetch_add(1);
            break;
          case 2:
            if (s->remove(key)) net[key].fetch_sub(1);
            break;
          default: {
            if (auto v = s->find(key); v && *v != value_of(key)) wrong_value.fetch_add(1);
            const std::uint64_t sk = stable_base + rng() % stable_keys;
            if (s->find(sk) != std::optional(value_of(sk))) stable_missing.fetch_add(1);
          }
        }
      }
    });
  }
  for (auto& t : pool) t.join();

  EXPECT_EQ(wrong_value.load(), 0) << "a find returned a value no writer stored";
  EXPECT_EQ(stable_missing.load(), 0) << "a key that was never removed was not found";
  std::size_t present = 0;
  for (std::uint64_t k = 0; k < keys; ++k) {
    const int n = net[k].load();
    ASSERT_TRUE(n == 0 || n == 1) << "key " << k << ": successful inserts minus removes = " << n;
    EXPECT_EQ(s->contains(k), n == 1) << "key " << k;
    present += static_cast<std::size_t>(n);
  }
  auto c = contents(*s);
  EXPECT_EQ(c.size(), present + stable_keys) << "no key twice, none lost";
  for (auto [k, v] : c) EXPECT_EQ(v, value_of(k));
  EXPECT_EQ(s->TEST_Validate(), std::nullopt);
}

TYPED_TEST_P(StressTest, InsertIntoAFullPoolThrowsAndChangesNothing) {
  using S = typename TestFixture::S;
  this->memory_.reset();
  // A pool of a few 64 KiB chunks (one per node size class in use), soon full.
  this->memory_.emplace(unwrap(TestFixture::memory::create({this->region_.get(), 320 << 10}, pool_label)));
  auto s = create<S>(*this->memory_, 16);
  // Distinct keys: for the list in decreasing order (each insert at the front, so the test
  // is not quadratic), for the others in no particular order (an odd multiplier permutes
  // 64-bit integers), which keeps the BST shallow.
  auto key_at = [](std::uint64_t i) {
    return S::name == std::string_view("list") ? 1'000'000 - i : (i * 0x9e3779b97f4a7c15ULL) >> 8;
  };
  std::uint64_t i = 0;
  try {
    for (; i < 1'000'000; ++i) ASSERT_TRUE(s->insert(key_at(i), i));
    FAIL() << "a million keys fit in a pool of 320 KiB";
  } catch (const structures::out_of_space&) {
  }
  EXPECT_FALSE(s->contains(key_at(i))) << "the insert that found the pool full left no trace";
  const auto c = contents(*s);
  EXPECT_EQ(c.size(), i);
  for (auto [k, v] : c) ASSERT_EQ(k, key_at(v)) << "key " << k << " holds the value of another";
  for (std::uint64_t j = 0; j < i; j += 97) ASSERT_EQ(s->find(key_at(j)), std::optional(j)) << j;
  EXPECT_EQ(s->TEST_Validate(), std::nullopt);
}

REGISTER_TYPED_TEST_SUITE_P(StressTest, EachKeyEndsAsTheNetEffectOfItsSuccessfulUpdates,
                            InsertIntoAFullPoolThrowsAndChangesNothing);

}  // namespace structures_test
