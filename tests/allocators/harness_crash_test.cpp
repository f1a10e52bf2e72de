// The pool, the persistent allocator and epoch reclamation through the crash harness: a
// map whose entries are allocator blocks (pool_map.hpp), crashed at enumerated persistence
// events under every write-back choice, single- and multi-threaded; recovery must restore a
// state the history allows, every linked block live and every other block free.
#include <gtest/gtest.h>

#include "crashtest/gtest.hpp"
#include "pool_map.hpp"

namespace {

using namespace alloc_test;
using crashtest::campaign_config;

template <class Policy>
campaign_config map_config(std::string config, unsigned writers, unsigned readers,
                           std::size_t points) {
  campaign_config c;
  c.subject = "pool_map";
  c.config = std::move(config);
  c.work = {.writer_threads = writers, .reader_threads = readers,
            .ops_per_writer = 240 / writers, .ops_per_reader = 120, .key_space = 16,
            .put_percent = 55, .del_percent = 35};
  c.region_bytes = pool_map<Policy>::region_bytes;
  c.points = points;
  c.stall_ops = writers + readers > 1 ? 2 : 0;
  return c;
}

template <class Placement>
void run_campaign(const std::string& name, unsigned writers, unsigned readers,
                  std::size_t points) {
  using P = on_model<Placement>;
  auto r = crashtest::run_set_campaign<pool_map<P>>(map_config<P>(name, writers, readers, points));
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GT(r.points, 0u) << r.summary;
}

// The campaigns' workloads, run to the end without a crash over the seeds the long suite
// uses (and more): none may run out of space in the region (issue 10, defect 8: blocks
// waiting for reclamation filled it).
TEST(PoolMapTest, WorkloadsOfManySeedsFitTheRegion) {
  using P = on_model<test_hashed>;
  const crashtest::workload_config work = map_config<P>("", 1, 0, 1).work;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const crashtest::workload w =
        crashtest::make_workload(work, crashtest::workload_family::set, seed);
    pv::model m(pool_map<P>::region_bytes);
    pv::scoped_activation active(m);
    pool_map<P> map(m, crashtest::start::fresh);
    try {
      for (const crashtest::operation& o : w.threads[0]) {
        switch (o.kind) {
          case crashtest::op_kind::insert: (void)map.insert(o.key, o.value); break;
          case crashtest::op_kind::remove: (void)map.remove(o.key); break;
          default: (void)map.get(o.key); break;
        }
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "workload seed " << seed << ": " << e.what();
    }
  }
}

TEST(PoolMapCampaign, HashedSingleThreaded) { run_campaign<test_hashed>("hashed st", 1, 0, 200); }
TEST(PoolMapCampaign, AdjacentSingleThreaded) {
  run_campaign<flit::adjacent>("adjacent st", 1, 0, 100);
}
TEST(PoolMapCampaign, LinkAndPersistSingleThreaded) {
  run_campaign<flit::link_and_persist>("link_and_persist st", 1, 0, 100);
}
TEST(PoolMapCampaign, HashedWritersAndReader) {
  run_campaign<test_hashed>("hashed w2r1", 2, 1, 60);
}

}  // namespace
