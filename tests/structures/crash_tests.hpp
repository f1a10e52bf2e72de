// Crash campaigns (the harness of tests/crash) on a structure: single-threaded, and with two
// writers and a reader; the map checker must find no violation. Each structure's test file
// instantiates the suite for every persistent mode under every persistent counter placement
// (support.hpp, persistent_configs): the structures' crash matrix.
//
// The structure lives in a pool laid over the pv model's region (alloc::pool_memory):
// start::fresh creates the pool and the structure and records its root; start::recover
// opens the pool, runs the structure's recovery (which reports the live nodes to the
// allocator), and rebuilds the allocator's free space.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "crashtest/gtest.hpp"
#include "support.hpp"

namespace structures_test {

// A structure as a crashtest::map_subject.
template <class Config>
class subject {
 public:
  using memory = typename Config::memory;
  using S = typename Config::structure;
  static constexpr bool ordered = S::name != std::string_view("hash_table");

  subject(pv::model& m, crashtest::start how) {
    const std::span<std::byte> region(m.base(), m.size());
    if (how == crashtest::start::fresh) {
      memory_.emplace(unwrap(memory::create(region, pool_label)));
      s_ = create<S>(*memory_, 4);  // few buckets: chains of several keys
      memory_->set_root(s_->root());
    } else {
      memory_.emplace(unwrap(memory::open(region, pool_label)));
      s_ = recover<S>(*memory_, memory_->root(), memory_->live_marker());
      memory_->finish_recovery();
    }
  }

  bool insert(std::uint64_t key, std::uint64_t value) { return s_->insert(key, value); }
  bool remove(std::uint64_t key) { return s_->remove(key); }
  std::optional<std::uint64_t> get(std::uint64_t key) { return s_->find(key); }

  std::vector<crashtest::kv_entry> state() const {
    if (auto broken = s_->TEST_Validate()) throw crashtest::invariant_violation(*broken);
    std::vector<crashtest::kv_entry> out;
    s_->for_each([&](std::uint64_t k, std::uint64_t v) { out.push_back({k, v, 0}); });
    return out;
  }

 private:
  std::optional<memory> memory_;
  std::unique_ptr<S> s_;
};

template <class Config>
class CrashTest : public ::testing::Test {
 protected:
  static crashtest::campaign_config config(const std::string& threads, unsigned writers, unsigned readers) {
    using S = typename subject<Config>::S;
    crashtest::campaign_config c;
    c.subject = std::string(S::name);
    c.config = Config::name() + " " + threads;
    c.work = {.writer_threads = writers,
              .reader_threads = readers,
              .ops_per_writer = 60 / writers,
              .ops_per_reader = 60,
              .key_space = 8,
              .put_percent = 50,
              .del_percent = 35};
    c.region_bytes = 512 << 10;  // each image is this large: smaller is faster
    c.points = 40;
    c.random_images = 1;
    if (writers > 1) c.stall_ops = 2;
    return c;
  }
};

TYPED_TEST_SUITE_P(CrashTest);

TYPED_TEST_P(CrashTest, SingleThreadedCampaignHasNoViolation) {
  auto r = crashtest::run_set_campaign<subject<TypeParam>>(this->config("st", 1, 0));
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GT(r.images, r.points) << r.summary;
}

TYPED_TEST_P(CrashTest, ConcurrentCampaignHasNoViolation) {
  auto r = crashtest::run_set_campaign<subject<TypeParam>>(this->config("w2r1", 2, 1));
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GT(r.points, 0u) << r.summary;
}

REGISTER_TYPED_TEST_SUITE_P(CrashTest, SingleThreadedCampaignHasNoViolation, ConcurrentCampaignHasNoViolation);

}  // namespace structures_test
