// Packed runs (packed_run.hpp) and the packed tier (packed_tier.hpp), on their own, in a pool.
//  - PackedRunTest.BatchesAnswerAsAMapDoes: random sorted batches of puts and erasures (small
//    and large values, keys that split nodes and keys that empty them) against std::map,
//    every key read after each batch, cursors seeking and stepping as the map's iterators
//    do, and the whole run in order now and then; the run is
//    recovered from the pool part-way (a new allocator, its blocks marked live) and goes on.
//  - PackedRunTest.ErasureRecordsAnswerAsAMapDoes: batches whose erasures are recorded or
//    removals, against a map of each key's record: find reports erasure records (through a
//    key filter too), get answers as a map of values, cursors stop on erasure records, and
//    recovery keeps them.
//  - PackedRunTest.SeeksBeforeAsAMapDoes: seek_before and seek_to_last against a map of each
//    key's record (erasure records too) for probes of every kind (keys held and not, between
//    keys, prefixes, "", before the first and past the last), next() after them, and a walk
//    back from the last key by seek_before of each key; an empty run, first and last. A
//    seek_before that answers the last key at most the probe fails it (and
//    BatchesAnswerAsAMapDoes, which walks back too), as does one that does not go back to
//    the node before a node's first record.
//  - PackedRunTest.ErasingEveryKeyGivesEveryBlockBack: nothing leaks, across a recovery;
//    clear() gives every block back at once.
//  - PackedRunTest.DamageIsReportedNotRead: a flipped byte in a record, a header or the head
//    word is Corruption for the get that meets it and for recovery.
//  - PackedRunTest.NoSpaceLeavesEachKeyOldOrNew: a batch larger than the pool ends in NoSpace
//    with every key holding its value before or after the batch, and the run usable.
//  - PackedRunTest.CursorCarriesOnAcrossBatches: a cursor moved between batches that change
//    keys behind it, at it and ahead of it (two batches per move, so freed blocks are taken
//    again) steps to the first key above its own that the run holds now, alone and with an
//    epoch domain. CursorCarriesOnAfterSeekBefore: the same, the cursor put by seek_before
//    before each move's batches.
//  - PackedRunReaders.GetsAndScansBesideBatches: two reader threads get and scan (forward,
//    and backward by seek_before), pinned per call, while a writer applies batches: every
//    read is OK and of a value its key had.
//    Freeing unlinked nodes without the epoch domain fails it (read values of other keys).
//  - KeyFilterTest.FalsePositivesAreFew: the filter small runs keep; BatchesAnswerAsAMapDoes
//    and ErasureRecordsAnswerAsAMapDoes also run filtered runs, remade and grown.
//  - PackedRunTest.AGrownFilterPassesEveryKeyAndFewOthers: the grown filter (the tier's large
//    run's) passes every key a run that batches grow holds, and few others; one never made
//    anew as the run outgrows it fails it.
//  - PackedTierTest.AnswersAsAMapDoes, CursorCarriesOnAcrossFlushesAndMerges and
//    PackedTierReaders.GetsAndScansBesideFlushesAndMerges: the same checks of the packed tier
//    (packed_tier.hpp), flushed and merged. A tier cursor that does not seek again after a
//    merge fails the cursor test.
//  - PackedTierTest.SeeksBeforeAsAMapDoes and CursorCarriesOnAfterSeekBefore: the run's
//    backward checks on the tier, with ranges of erased keys over older runs' values, after
//    merges (the large run alone), and a tier whose every key is erased. Each of these fails
//    both: a newest erasure that answers; the oldest run's record of a key answering; only
//    the newest run going below an erased key. A next() after seek_before that takes the
//    forward path fails SeeksBeforeAsAMapDoes.
//  - PackedTierReaders.SeekBeforeBesideMergesAnswersNoKeyTheTierDidNotHold: a reader's
//    seek_before beside merges that empty the small runs while it walks down a newer run's
//    erasures; a positioning that does not start again when the tier changed under it fails
//    it (it answers an erased key with an older run's value).
//  - PackedTierTest.AFlushWithErasuresLeavesOlderRunsAlone: a flush's erasures are records
//    of its own small run: the large run's head and every older run's index stay as they
//    were, while gets and scans answer as a map; a merge leaves no erasure record in the
//    large run.
//  - PackedTierCampaign: the tier as a crashtest::kv_subject (overwrites and erasures put a
//    key in several runs) under the crash harness; its state is a cursor's walk, and a get
//    of every key must agree with it. Each of these fails all four campaigns: emptying the
//    small runs newest first; a merge that leaves a newest erasure's key in the large run; a
//    get that passes over an erasure record; a cursor that shows an erased key's older value.
//  - PackedRunCampaign: the run as a map (crashtest::map_subject: one key per batch) under the
//    crash harness, in both durability modes and every persistent placement: every image
//    recovers to a state the history allows, its blocks marked live without conflict.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "crashtest/gtest.hpp"
#include "crashtest/harness.hpp"
#include "flintkv/internal/packed_run.hpp"
#include "flintkv/internal/packed_tier.hpp"
#include "support/policies.hpp"

namespace {

namespace in = flintkv::internal;
using flintkv::automatic;
using flintkv::manual;
using flintkv::Status;

template <class Policy>
alloc::pool_layout layout() {
  return {"packed-run-test", alloc::layout_fingerprint<Policy>()};
}

template <class Policy>
struct run_root {
  flit::persist<in::stored_offset, Policy> head;
  in::packed_tier_root<Policy> tier;
};
constexpr in::word_place kHeadPlace{in::kRootHolder, in::word_field::packed_next};

// A pool over an anonymous mapping, its allocator and a run in it, that can be recovered.
template <class Policy, class Mode>
struct fixture {
  using run_type = in::packed_run<Policy, Mode>;
  using tier_type = in::packed_tier<Policy, Mode>;
  // With `shared`, the run has an epoch domain (readers beside its batches); with
  // `filter_bits`, a key filter of that many bits a key, kept as `upkeep` says.
  explicit fixture(std::size_t bytes, std::size_t node_bytes, bool shared = false,
                   unsigned filter_bits = 0,
                   typename run_type::filter_upkeep upkeep = run_type::filter_upkeep::remade)
      : bytes(bytes), node_bytes(node_bytes), filter_bits(filter_bits), upkeep(upkeep) {
    if (shared) epochs = std::make_unique<alloc::epoch_domain>();
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap");
    region = static_cast<std::byte*>(p);
    auto created = alloc::pool::create_in<Policy>({region, bytes}, layout<Policy>());
    if (!created) throw std::runtime_error(created.error().to_string());
    pool.emplace(std::move(created).value());
    heap = std::make_unique<alloc::persistent_allocator<Policy>>(*pool);
    EXPECT_TRUE(heap->finish_recovery());
    run_type::make_empty(&root()->head, kHeadPlace);
    in::durable<Policy, Mode>::fence();
    run = std::make_unique<run_type>(*pool, *heap, &root()->head, kHeadPlace, node_bytes,
                                     epochs.get(), filter_bits, upkeep);
    EXPECT_TRUE(run->recover(false).ok());
    tier_type::make_empty(*pool, &root()->tier, node_bytes);
    in::durable<Policy, Mode>::fence();
    tier = std::make_unique<tier_type>(*pool, *heap, &root()->tier, node_bytes, epochs.get());
    EXPECT_TRUE(tier->recover(false).ok());
  }
  ~fixture() {
    run.reset();
    tier.reset();
    drain();
    epochs.reset();
    heap.reset();
    pool.reset();
    munmap(region, bytes);
  }
  run_root<Policy>* root() { return pool->template root_as<run_root<Policy>>(); }
  // Reclaims whatever the domain holds (no thread pinned), before its heap goes.
  void drain() {
    for (int i = 0; epochs && epochs->pending() != 0 && i < 8; ++i) epochs->collect();
    if (epochs) {
      EXPECT_EQ(epochs->pending(), 0u);
    }
  }
  // What a restart does: a new allocator, the run's and the tier's blocks marked live.
  Status recover() {
    run.reset();
    tier.reset();
    drain();
    heap = std::make_unique<alloc::persistent_allocator<Policy>>(*pool);
    run = std::make_unique<run_type>(*pool, *heap, &root()->head, kHeadPlace, node_bytes,
                                     epochs.get(), filter_bits, upkeep);
    tier = std::make_unique<tier_type>(*pool, *heap, &root()->tier, node_bytes, epochs.get());
    Status s = run->recover(true);
    if (Status t = tier->recover(true); s.ok()) s = t;
    if (s.ok()) {
      EXPECT_TRUE(heap->finish_recovery());
    }
    return s;
  }

  std::size_t bytes, node_bytes;
  unsigned filter_bits;
  typename run_type::filter_upkeep upkeep;
  std::byte* region = nullptr;
  std::optional<alloc::pool> pool;
  std::unique_ptr<alloc::persistent_allocator<Policy>> heap;
  std::unique_ptr<alloc::epoch_domain> epochs;  // declared after the heap: destroyed first
  std::unique_ptr<run_type> run;
  std::unique_ptr<tier_type> tier;  // in the same pool: each test uses the run or the tier
};

template <class Policy, class Mode>
struct config {
  using policy = Policy;
  using mode = Mode;
};
using hw_hashed = flit::policy<flit::hashed<(1u << 20)>, flit::detected>;
using hw_adjacent = flit::policy<flit::adjacent, flit::detected>;

std::string key_of(std::uint64_t k) {
  char b[32];
  std::snprintf(b, sizeof b, "key%08llu", static_cast<unsigned long long>(k));
  return b;
}

template <class Config>
class PackedRunTest : public ::testing::Test {
 protected:
  using fx = fixture<typename Config::policy, typename Config::mode>;
  using change = typename fx::run_type::change;

  // The whole run in order is the map, and every key the map has reads back.
  static void expect_same(const fx& f, const std::map<std::string, std::string>& m) {
    std::map<std::string, std::string> all;
    ASSERT_TRUE(f.run->for_each([&](std::string_view k, std::string_view v) {
                       EXPECT_TRUE(all.empty() || all.rbegin()->first < k);
                       all.emplace(k, v);
                     }).ok());
    ASSERT_EQ(all, m);
    std::string value;
    for (const auto& [k, v] : m) {
      ASSERT_TRUE(f.run->get(k, &value).ok()) << k;
      ASSERT_EQ(value, v);
    }
  }
  static std::vector<change> changes_of(const std::map<std::string, std::optional<std::string>>& b) {
    std::vector<change> out;
    for (const auto& [k, v] : b) out.push_back({k, v ? std::string_view(*v) : std::string_view(), !v});
    return out;
  }
};
using configs = ::testing::Types<config<hw_hashed, manual>, config<hw_adjacent, manual>,
                                 config<hw_hashed, automatic>>;
TYPED_TEST_SUITE(PackedRunTest, configs);

// A random batch: up to `most` keys of [0, keys), a third erased, the rest with values of
// up to 100 bytes and now and then one of 3000 to 73000.
std::map<std::string, std::optional<std::string>> random_batch(std::mt19937_64& rng,
                                                               std::size_t most,
                                                               std::uint64_t keys) {
  std::map<std::string, std::optional<std::string>> b;
  const std::size_t n = 1 + rng() % most;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string k = key_of(rng() % keys);
    if (rng() % 3 == 0) {
      b[k] = std::nullopt;
    } else {
      const std::size_t size = rng() % 55 == 0 ? 3000 + rng() % 70000 : rng() % 100;
      b[k] = std::string(size, static_cast<char>('a' + rng() % 26));
    }
  }
  return b;
}

// Applies batch `b` to map `m`, and expects `store` (a run or a tier, which took it) to read
// each of its keys as `m` does.
template <class Store>
void expect_batch_read(const Store& store, const std::map<std::string, std::optional<std::string>>& b,
                       std::map<std::string, std::string>* m) {
  for (const auto& [k, v] : b) {
    if (v) {
      (*m)[k] = *v;
    } else {
      m->erase(k);
    }
    std::string got;
    const Status s = store.get(k, &got);
    if (v) {
      ASSERT_TRUE(s.ok()) << k << ": " << s.ToString();
      ASSERT_EQ(got, *v);
    } else {
      ASSERT_TRUE(s.IsNotFound()) << k << ": " << s.ToString();
    }
  }
}

// Seeks a cursor of `store` to keys of [0, keys), between keys and past the ends, 20 times,
// and steps it as m's iterators step.
template <class Cursor, class Store>
void expect_seeks_as_map(const Store& store, const std::map<std::string, std::string>& m,
                         std::mt19937_64& rng, std::uint64_t keys) {
  Cursor cur(store, true);
  for (int seek = 0; seek < 20; ++seek) {
    std::string probe = key_of(rng() % (keys + 100));
    if (seek % 3 == 0) probe += '!';
    if (seek == 0) probe = "";
    ASSERT_TRUE(cur.seek(probe).ok());
    auto it = m.lower_bound(probe);
    for (int step = 0; step < 30 && it != m.end(); ++step, ++it) {
      ASSERT_TRUE(cur.valid()) << probe << " step " << step;
      ASSERT_EQ(cur.key(), it->first);
      ASSERT_EQ(cur.value(), it->second);
      ASSERT_TRUE(cur.next().ok());
    }
    if (it == m.end()) {
      EXPECT_FALSE(cur.valid());
    }
  }
}

// What an entry of a model says a cursor reads there: a map of values (a tier's, a run's
// without erasure records) holds strings; a map of a run's records, nullopt for an erasure.
std::string_view value_in(const std::string& v) { return v; }
std::string_view value_in(const std::optional<std::string>& v) {
  return v ? std::string_view(*v) : std::string_view();
}
bool erased_in(const std::string&) { return false; }
bool erased_in(const std::optional<std::string>& v) { return !v; }

// Expects `cur` at m's entry `it` (not valid for m.end()): its key, its value, and its kind
// if the cursor reports erasure records.
template <class Cursor, class Map>
void expect_at(const Cursor& cur, const Map& m, typename Map::const_iterator it,
               const std::string& context) {
  if (it == m.end()) {
    ASSERT_FALSE(cur.valid()) << context << ": at " << cur.key() << ", past the last";
    return;
  }
  ASSERT_TRUE(cur.valid()) << context << ": not valid where " << it->first << " was due";
  ASSERT_EQ(cur.key(), it->first) << context;
  ASSERT_EQ(cur.value(), value_in(it->second)) << context;
  if constexpr (requires { cur.erased(); }) {
    ASSERT_EQ(cur.erased(), erased_in(it->second)) << context;
  }
}

// Positions a cursor of `store` backward as m's iterators go (m holds what the cursor stops
// on): seek_before of "", of keys of [0, keys) and past them, of keys of m, of keys between
// two, of prefixes of keys, before the first key and past the last, each followed by next()
// steps through m's successors; then seek_to_last, and a walk from the last key to the first
// by seek_before of the cursor's own key, now and then a step forward and back again.
template <class Cursor, class Store, class Map>
void expect_seeks_before_as_map(const Store& store, const Map& m, std::mt19937_64& rng,
                                std::uint64_t keys) {
  Cursor cur(store, true);
  // m's last entry below `probe`, or m.end().
  const auto before = [&](const std::string& probe) {
    const auto it = m.lower_bound(probe);
    return it == m.begin() ? m.end() : std::prev(it);
  };
  for (int seek = 0; seek < 40; ++seek) {
    std::string probe;
    switch (seek % 8) {
      case 0:  // below every key
        probe = seek == 0 ? "" : "a";
        break;
      case 1:  // above every key
        probe = "z";
        break;
      case 2:  // a prefix of a key: below it and above the keys before it
        probe = key_of(rng() % keys).substr(0, 3 + rng() % 8);
        break;
      case 3:  // between a key and the next
        probe = key_of(rng() % (keys + 100)) + '!';
        break;
      case 4:  // a key the store holds
        if (!m.empty()) {
          probe = std::next(m.begin(), static_cast<std::ptrdiff_t>(rng() % m.size()))->first;
          break;
        }
        [[fallthrough]];
      default:
        probe = key_of(rng() % (keys + 100));
    }
    ASSERT_TRUE(cur.seek_before(probe).ok()) << probe;
    auto it = before(probe);
    ASSERT_NO_FATAL_FAILURE(expect_at(cur, m, it, "seek_before(" + probe + ")"));
    for (int step = 1; step <= 5 && it != m.end(); ++step) {
      ASSERT_TRUE(cur.next().ok());
      ++it;
      ASSERT_NO_FATAL_FAILURE(
          expect_at(cur, m, it, "seek_before(" + probe + "), next " + std::to_string(step)));
    }
  }
  ASSERT_TRUE(cur.seek_to_last().ok());
  auto it = m.empty() ? m.end() : std::prev(m.end());
  ASSERT_NO_FATAL_FAILURE(expect_at(cur, m, it, "seek_to_last"));
  std::size_t walked = 0;
  for (; it != m.end(); ++walked) {
    if (rng() % 16 == 0) {  // forward to the next key, and back
      ASSERT_TRUE(cur.next().ok());
      ASSERT_NO_FATAL_FAILURE(expect_at(cur, m, std::next(it), "next after " + it->first));
      ASSERT_TRUE((cur.valid() ? cur.seek_before(cur.key()) : cur.seek_to_last()).ok());
      ASSERT_NO_FATAL_FAILURE(expect_at(cur, m, it, "back to " + it->first));
    }
    ASSERT_TRUE(cur.seek_before(cur.key()).ok());
    const std::string from = it->first;
    it = it == m.begin() ? m.end() : std::prev(it);
    ASSERT_NO_FATAL_FAILURE(expect_at(cur, m, it, "walking back from " + from));
  }
  EXPECT_EQ(walked, m.size());
}

TYPED_TEST(PackedRunTest, BatchesAnswerAsAMapDoes) {
  using fx = typename TestFixture::fx;
  using upkeep = typename fx::run_type::filter_upkeep;
  // (node bytes, key filter bits, its upkeep): a filtered run answers as an unfiltered one.
  for (const auto& [node_bytes, filter_bits, kept] :
       {std::tuple<std::size_t, unsigned, upkeep>{256, 0, upkeep::remade},
        {4096, 0, upkeep::remade},
        {256, 10, upkeep::remade},
        {256, 10, upkeep::grown}}) {
    SCOPED_TRACE("nodes of " + std::to_string(node_bytes) + ", filter bits " +
                 std::to_string(filter_bits) + (kept == upkeep::grown ? ", grown" : ""));
    fx f(256 << 20, node_bytes, false, filter_bits, kept);
    std::map<std::string, std::string> m;
    std::mt19937_64 rng(node_bytes + filter_bits);
    for (int batch = 0; batch < 150; ++batch) {
      const auto b = random_batch(rng, batch % 10 == 0 ? 2000 : 60, 5000);
      ASSERT_TRUE(f.run->apply(TestFixture::changes_of(b)).ok());
      expect_batch_read(*f.run, b, &m);
      if (batch % 25 == 24) {
        TestFixture::expect_same(f, m);
        expect_seeks_before_as_map<typename fx::run_type::cursor>(*f.run, m, rng, 5000);
      }
      expect_seeks_as_map<typename fx::run_type::cursor>(*f.run, m, rng, 5000);
      if (batch % 50 == 49) {
        ASSERT_TRUE(f.recover().ok());
        TestFixture::expect_same(f, m);
      }
    }
    EXPECT_GT(f.run->nodes(), 1u);
  }
}

// Random batches whose erasures are recorded (kept as erasure records) or removals, at
// random, against a map of each key's record (nullopt: an erasure), in runs with and without
// a key filter: after each batch, find reports each of its keys' records (an erasure too,
// past the filter) and get answers as a map of values; now and then a cursor walks every
// record in order, erasures among them, and for_each every value; the run is recovered
// part-way (its erasure records checked and kept).
TYPED_TEST(PackedRunTest, ErasureRecordsAnswerAsAMapDoes) {
  using fx = typename TestFixture::fx;
  using run_type = typename fx::run_type;
  using change = typename TestFixture::change;
  using upkeep = typename run_type::filter_upkeep;
  for (const auto& [filter_bits, kept] :
       {std::pair<unsigned, upkeep>{0, upkeep::remade}, {10, upkeep::remade}, {10, upkeep::grown}}) {
    SCOPED_TRACE("filter bits " + std::to_string(filter_bits) +
                 (kept == upkeep::grown ? ", grown" : ""));
    fx f(64 << 20, 256, false, filter_bits, kept);
    std::map<std::string, std::optional<std::string>> m;
    std::mt19937_64 rng(23 + filter_bits);
    const auto expect_walk = [&] {
      typename run_type::cursor cur(*f.run, true);
      auto it = m.begin();
      Status s = cur.seek_to_first();
      for (; s.ok() && cur.valid(); s = cur.next(), ++it) {
        ASSERT_NE(it, m.end()) << cur.key();
        ASSERT_EQ(cur.key(), it->first);
        ASSERT_EQ(cur.erased(), !it->second) << it->first;
        ASSERT_EQ(cur.value(), it->second.value_or(""));
      }
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_EQ(it, m.end());
      std::map<std::string, std::string> values, expected;
      ASSERT_TRUE(f.run->for_each([&](std::string_view k, std::string_view v) {
                         values.emplace(k, v);
                       }).ok());
      for (const auto& [k, v] : m) {
        if (v) expected.emplace(k, *v);
      }
      ASSERT_EQ(values, expected);
    };
    std::size_t erasure_records = 0;
    for (int batch = 0; batch < 120; ++batch) {
      const auto b = random_batch(rng, batch % 10 == 0 ? 1000 : 60, 3000);
      std::vector<change> changes;
      for (const auto& [k, v] : b) {
        const bool record = !v && rng() % 2 == 0;
        changes.push_back({k, v ? std::string_view(*v) : std::string_view(), !v,
                           record ? run_type::erase_as::record : run_type::erase_as::removal});
        if (v || record) {
          m[k] = v;
        } else {
          m.erase(k);
        }
      }
      ASSERT_TRUE(f.run->apply(changes).ok());
      for (const auto& [k, unused] : b) {
        const auto it = m.find(k);
        std::string value;
        in::packed_kind kind;
        const Status found = f.run->find(k, &value, &kind);
        const Status got = f.run->get(k, &value);
        if (it == m.end()) {
          ASSERT_TRUE(found.IsNotFound()) << k << ": " << found.ToString();
          ASSERT_TRUE(got.IsNotFound()) << k << ": " << got.ToString();
        } else if (!it->second) {
          ASSERT_TRUE(found.ok()) << k << ": " << found.ToString();
          ASSERT_EQ(kind, in::packed_kind::erasure) << k;
          ASSERT_TRUE(got.IsNotFound()) << k << ": " << got.ToString();
          ++erasure_records;
        } else {
          ASSERT_TRUE(found.ok()) << k << ": " << found.ToString();
          ASSERT_EQ(kind, in::packed_kind::value) << k;
          ASSERT_TRUE(got.ok()) << k << ": " << got.ToString();
          ASSERT_EQ(value, *it->second);
        }
      }
      if (batch % 20 == 19) expect_walk();
      if (batch % 40 == 39) {
        ASSERT_TRUE(f.recover().ok());
        expect_walk();
      }
    }
    EXPECT_GT(erasure_records, 1000u);
  }
}

// A grown key filter (the tier's large run's) over a run that batches grow from 2,000 keys
// to 120,000, with overwrites and removals among them: after each batch every key the run
// holds passes it, and at the end, and after a recovery, under 3% of keys it never held
// pass (about 1% expected at 10 bits a key). A filter that only took adds, never made anew
// as the run outgrew it, passes most of them.
TYPED_TEST(PackedRunTest, AGrownFilterPassesEveryKeyAndFewOthers) {
  using fx = typename TestFixture::fx;
  using change = typename TestFixture::change;
  fx f(128 << 20, 4096, false, 10, fx::run_type::filter_upkeep::grown);
  std::set<std::uint64_t> held;
  std::mt19937_64 rng(7);
  constexpr std::uint64_t kBatches = 60, kPerBatch = 2000;
  const auto absent_passing = [&] {
    std::uint64_t passed = 0;
    for (std::uint64_t k = 0; k < 100000; ++k) {
      passed += f.run->may_hold(in::key_hash(key_of(2 * kBatches * kPerBatch + k))) ? 1 : 0;
    }
    return static_cast<double>(passed) / 100000;
  };
  const auto expect_held_pass = [&](std::uint64_t batch) {
    for (const std::uint64_t k : held) {
      ASSERT_TRUE(f.run->may_hold(in::key_hash(key_of(k)))) << key_of(k) << " after batch " << batch;
    }
  };
  for (std::uint64_t batch = 0; batch < kBatches; ++batch) {
    // New keys past every key so far, and overwrites and removals of older ones.
    std::map<std::uint64_t, bool> b;  // key, erased
    for (std::uint64_t i = 0; i < kPerBatch; ++i) b[batch * kPerBatch + i] = false;
    for (int i = 0; i < 100 && batch > 0; ++i) b[rng() % (batch * kPerBatch)] = rng() % 2 == 0;
    std::vector<std::string> keys;
    keys.reserve(b.size());
    std::vector<change> changes;
    for (const auto& [k, erased] : b) {
      keys.push_back(key_of(k));
      changes.push_back({keys.back(), erased ? std::string_view() : std::string_view("value"), erased});
      if (erased) {
        held.erase(k);
      } else {
        held.insert(k);
      }
    }
    ASSERT_TRUE(f.run->apply(changes).ok());
    ASSERT_NO_FATAL_FAILURE(expect_held_pass(batch));
  }
  EXPECT_LT(absent_passing(), 0.03);
  ASSERT_TRUE(f.recover().ok());
  ASSERT_NO_FATAL_FAILURE(expect_held_pass(kBatches));
  EXPECT_LT(absent_passing(), 0.03);
}

// Backward positioning against a map of each key's record (nullopt: an erasure record,
// which the cursor stops on as its forward moves do): random batches of puts and erasures
// (recorded or removals) in nodes of 256 bytes (many nodes, so that the record before a
// node's first is the node before's last) and of 4096; expect_seeks_before_as_map on the
// empty run, after every few batches, after a recovery, and once every key is removed.
TYPED_TEST(PackedRunTest, SeeksBeforeAsAMapDoes) {
  using fx = typename TestFixture::fx;
  using run_type = typename fx::run_type;
  using cursor = typename run_type::cursor;
  using change = typename TestFixture::change;
  constexpr std::uint64_t kKeys = 3000;
  for (const std::size_t node_bytes : {std::size_t{256}, std::size_t{4096}}) {
    SCOPED_TRACE("nodes of " + std::to_string(node_bytes));
    fx f(64 << 20, node_bytes);
    std::map<std::string, std::optional<std::string>> m;
    std::mt19937_64 rng(31 + node_bytes);
    expect_seeks_before_as_map<cursor>(*f.run, m, rng, kKeys);
    for (int batch = 0; batch < 60; ++batch) {
      const auto b = random_batch(rng, batch % 10 == 0 ? 1000 : 60, kKeys);
      std::vector<change> changes;
      for (const auto& [k, v] : b) {
        const bool record = !v && rng() % 2 == 0;
        changes.push_back({k, v ? std::string_view(*v) : std::string_view(), !v,
                           record ? run_type::erase_as::record : run_type::erase_as::removal});
        if (v || record) {
          m[k] = v;
        } else {
          m.erase(k);
        }
      }
      ASSERT_TRUE(f.run->apply(changes).ok());
      if (batch % 5 == 4) expect_seeks_before_as_map<cursor>(*f.run, m, rng, kKeys);
      if (batch == 29) {
        ASSERT_TRUE(f.recover().ok());
        expect_seeks_before_as_map<cursor>(*f.run, m, rng, kKeys);
      }
    }
    EXPECT_GT(f.run->nodes(), 1u);
    std::vector<change> removals;
    for (const auto& [k, unused] : m) removals.push_back({k, {}, true});
    ASSERT_TRUE(f.run->apply(removals).ok());
    ASSERT_EQ(f.run->nodes(), 0u);
    m.clear();
    expect_seeks_before_as_map<cursor>(*f.run, m, rng, kKeys);
  }
}

// Keys of 14 to 40 bytes, most of which share their first 16 bytes or more (a tie that the
// 16-byte prefixes of a node's samples cannot order), the others differing within them or
// ending there.
std::string long_key(std::mt19937_64& rng) {
  static const std::string stem = "0123456789abcdefghij";
  std::string k = stem.substr(0, 14 + rng() % 7);
  for (std::size_t tail = rng() % 21; tail > 0; --tail) k += static_cast<char>('a' + rng() % 3);
  return k;
}

// Seeks and seeks before of such keys, in runs of small nodes (a few records each, so that
// samples repeat records) and of 4 KiB ones, after batches and after a recovery (which
// samples the nodes again): a node's samples bound a search only by what their prefixes
// decide.
TYPED_TEST(PackedRunTest, SeeksAmongKeysThatShareLongPrefixesAsAMapDoes) {
  using fx = typename TestFixture::fx;
  using cursor = typename fx::run_type::cursor;
  for (const std::size_t node_bytes : {std::size_t{256}, std::size_t{4096}}) {
    SCOPED_TRACE("nodes of " + std::to_string(node_bytes));
    fx f(64 << 20, node_bytes);
    std::map<std::string, std::string> m;
    std::mt19937_64 rng(77 + node_bytes);
    const auto expect_seeks = [&](const std::string& when) {
      cursor cur(*f.run, true);
      for (int seek = 0; seek < 300; ++seek) {
        const std::string probe =
            seek % 4 == 0 && !m.empty()
                ? std::next(m.begin(), static_cast<std::ptrdiff_t>(rng() % m.size()))->first
                : long_key(rng);
        const std::string context = when + ", probe " + probe;
        ASSERT_TRUE(cur.seek(probe).ok()) << context;
        auto it = m.lower_bound(probe);
        ASSERT_NO_FATAL_FAILURE(expect_at(cur, m, it, "seek: " + context));
        for (int step = 0; step < 3 && it != m.end(); ++step) {
          ASSERT_TRUE(cur.next().ok());
          ASSERT_NO_FATAL_FAILURE(expect_at(cur, m, ++it, "seek, next: " + context));
        }
        ASSERT_TRUE(cur.seek_before(probe).ok()) << context;
        it = m.lower_bound(probe);
        it = it == m.begin() ? m.end() : std::prev(it);
        ASSERT_NO_FATAL_FAILURE(expect_at(cur, m, it, "seek_before: " + context));
      }
    };
    for (int batch = 0; batch < 40; ++batch) {
      std::map<std::string, std::optional<std::string>> b;
      for (std::size_t n = 1 + rng() % 200; n > 0; --n) {
        const std::string k = long_key(rng);
        if (rng() % 4 == 0) {
          b[k] = std::nullopt;
        } else {
          b[k] = std::string(rng() % 60, static_cast<char>('a' + rng() % 26));
        }
      }
      ASSERT_TRUE(f.run->apply(TestFixture::changes_of(b)).ok());
      for (const auto& [k, v] : b) {
        if (v) {
          m[k] = *v;
        } else {
          m.erase(k);
        }
      }
      if (batch % 5 == 4) {
        ASSERT_NO_FATAL_FAILURE(expect_seeks("batch " + std::to_string(batch)));
      }
      if (batch == 20) {
        ASSERT_TRUE(f.recover().ok());
        ASSERT_NO_FATAL_FAILURE(expect_seeks("recovered"));
      }
    }
    EXPECT_GT(f.run->nodes(), 4u);
  }
}

TYPED_TEST(PackedRunTest, ErasingEveryKeyGivesEveryBlockBack) {
  using fx = typename TestFixture::fx;
  fx f(64 << 20, 4096);
  std::map<std::string, std::optional<std::string>> puts, erases;
  for (std::uint64_t k = 0; k < 20000; ++k) {
    puts[key_of(k)] = std::string(64, 'v');
    erases[key_of(k)] = std::nullopt;
  }
  ASSERT_TRUE(f.run->apply(TestFixture::changes_of(puts)).ok());
  EXPECT_GT(f.heap->stats().in_use_bytes, 20000u * 64);
  ASSERT_TRUE(f.recover().ok());
  EXPECT_EQ(f.heap->stats().in_use_bytes, f.run->block_bytes());
  ASSERT_TRUE(f.run->apply(TestFixture::changes_of(erases)).ok());
  EXPECT_EQ(f.run->nodes(), 0u);
  EXPECT_EQ(f.heap->stats().in_use_bytes, 0u);
  ASSERT_TRUE(f.recover().ok());
  EXPECT_EQ(f.heap->stats().in_use_bytes, 0u);
  // clear() does the same at once, and the run takes batches again after it.
  ASSERT_TRUE(f.run->apply(TestFixture::changes_of(puts)).ok());
  EXPECT_GT(f.heap->stats().in_use_bytes, 20000u * 64);
  f.run->clear();
  EXPECT_EQ(f.run->nodes(), 0u);
  EXPECT_EQ(f.heap->stats().in_use_bytes, 0u);
  ASSERT_TRUE(f.recover().ok());
  EXPECT_EQ(f.run->nodes(), 0u);
  EXPECT_EQ(f.heap->stats().in_use_bytes, 0u);
  ASSERT_TRUE(f.run->apply(TestFixture::changes_of(puts)).ok());
  std::string v;
  EXPECT_TRUE(f.run->get(key_of(7), &v).ok());
}

// Space: a batch of a few keys into every node of a run of full nodes leaves the run at most
// 5% more nodes than the same keys packed from scratch. Each group of touched nodes a batch
// packs together ends in one part-full node, so the groups must be long: with groups of 8
// nodes (as the run had) it took 8% more, and a store filled in random order kept 85 to
// 92 bytes a key of 16-byte keys and 64-byte values, where the records need 76.
TYPED_TEST(PackedRunTest, ABatchIntoEveryNodeLeavesTheRunNearlyFull) {
  using fx = typename TestFixture::fx;
  fx f(64 << 20, 4096);
  fx packed(64 << 20, 4096);
  std::map<std::string, std::optional<std::string>> even, odd, all;
  for (std::uint64_t k = 0; k < 40000; ++k) {
    even[key_of(2 * k)] = all[key_of(2 * k)] = std::string(64, 'e');
    // An odd key after one even key in 25: about two into each node of about 50 records.
    if (k % 25 == 0) odd[key_of(2 * k + 1)] = all[key_of(2 * k + 1)] = std::string(64, 'o');
  }
  ASSERT_TRUE(f.run->apply(TestFixture::changes_of(even)).ok());
  const std::size_t before = f.run->nodes();
  ASSERT_TRUE(f.run->apply(TestFixture::changes_of(odd)).ok());
  ASSERT_TRUE(packed.run->apply(TestFixture::changes_of(all)).ok());
  const std::size_t least = packed.run->nodes();
  ASSERT_GT(least, before) << "the odd keys are a node's worth or more";
  EXPECT_LE(f.run->nodes(), least + least / 20) << "packed from scratch: " << least;
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : all) m[k] = *v;
  TestFixture::expect_same(f, m);
}

// The bytes of [p, p + n) (page-aligned) the process has touched: its resident pages.
std::size_t resident_bytes(void* p, std::size_t n) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((n + page - 1) / page);
  if (mincore(p, n, in.data()) != 0) throw std::runtime_error("mincore");
  std::size_t touched = 0;
  for (unsigned char c : in) touched += c & 1;
  return touched * page;
}

// A mapped pool's touched pages count in the process's resident memory. With readers, a
// batch over every node of a run gives the old nodes back a slice at a time, so the pages it
// touches beyond the run's own are about a slice's, not a second run's (a batch that gave
// them back at its end grew them by the run's size: 15 MiB here; a run of less than 32 MiB
// slices at kSliceBytes).
TYPED_TEST(PackedRunTest, ABatchOverTheWholeRunHoldsASliceOfOldNodes) {
  using fx = typename TestFixture::fx;
  constexpr std::size_t kSlice = fx::run_type::kSliceBytes;
  fx f(128 << 20, 4096, true);
  std::map<std::string, std::optional<std::string>> first, second;
  std::map<std::string, std::string> m;
  for (std::uint64_t k = 0; k < 200000; ++k) {
    first[key_of(k)] = std::string(64, 'a');
    second[key_of(k)] = m[key_of(k)] = std::string(64, 'b');
  }
  ASSERT_TRUE(f.run->apply(TestFixture::changes_of(first)).ok());
  const std::size_t run_bytes = f.run->block_bytes();
  ASSERT_GT(run_bytes, 4 * kSlice);
  const std::size_t before = resident_bytes(f.region, f.bytes);
  ASSERT_TRUE(f.run->apply(TestFixture::changes_of(second)).ok());
  EXPECT_LT(resident_bytes(f.region, f.bytes) - before, 2 * kSlice) << "of a run of " << run_bytes;
  TestFixture::expect_same(f, m);
}

TYPED_TEST(PackedRunTest, DamageIsReportedNotRead) {
  using fx = typename TestFixture::fx;
  std::map<std::string, std::optional<std::string>> puts;
  for (std::uint64_t k = 0; k < 500; ++k) puts[key_of(k)] = std::string(40, 'v');
  // Each case damages a fresh run: (where, what a get of which key then says).
  for (int what = 0; what < 3; ++what) {
    SCOPED_TRACE("case " + std::to_string(what));
    fx f(16 << 20, 1024);
    ASSERT_TRUE(f.run->apply(TestFixture::changes_of(puts)).ok());
    std::string value;
    const std::string victim = key_of(250);
    ASSERT_TRUE(f.run->get(victim, &value).ok());
    const auto where = f.run->locate(victim);
    ASSERT_TRUE(where.has_value());
    std::byte* const node = f.pool->base() + where->first.value;
    if (what == 0) {  // a byte of the victim's value
      const auto v = in::packed_view<typename TypeParam::policy, typename TypeParam::mode>::open(
          reinterpret_cast<in::packed_node<typename TypeParam::policy>*>(node), where->first,
          where->second, true);
      ASSERT_TRUE(v.has_value());
      const auto found = v->find(victim, true);
      ASSERT_EQ(found.kind, decltype(found.kind)::yes);
      const_cast<char*>(found.value.data())[5] ^= 0x20;
      EXPECT_TRUE(f.run->get(victim, &value).IsCorruption());
      typename fx::run_type::cursor cur(*f.run, true);
      EXPECT_TRUE(cur.seek(victim).IsCorruption());
      EXPECT_FALSE(cur.valid());
      EXPECT_TRUE(cur.seek_before(key_of(251)).IsCorruption());
      EXPECT_FALSE(cur.valid());
    } else if (what == 1) {  // the node's header check
      node[sizeof(in::packed_node<typename TypeParam::policy>)] ^= std::byte{1};
      EXPECT_TRUE(f.run->get(victim, &value).IsCorruption());
    } else {  // the head word
      reinterpret_cast<std::byte*>(&f.root()->head)[2] ^= std::byte{4};
    }
    const Status s = f.recover();
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  }
}

TYPED_TEST(PackedRunTest, NoSpaceLeavesEachKeyOldOrNew) {
  using fx = typename TestFixture::fx;
  // Alone, and with an epoch domain (no reader pinned). With the domain, a batch gives its
  // old nodes back at its end; a batch that runs out of room publishes the run as it stands
  // so far, which gives them back, and tries again (without that, the erasures below fail).
  for (const bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "with an epoch domain" : "alone");
    fx f(8 << 20, 4096, shared);
    std::map<std::string, std::optional<std::string>> first, second;
    for (std::uint64_t k = 0; k < 30000; ++k) {
      first[key_of(k)] = std::string(20, 'a');
      second[key_of(k)] = std::string(300, 'b');
    }
    ASSERT_TRUE(f.run->apply(TestFixture::changes_of(first)).ok());
    const Status s = f.run->apply(TestFixture::changes_of(second));
    ASSERT_TRUE(s.IsNoSpace()) << s.ToString();
    const auto check = [&] {
      std::size_t old_values = 0, new_values = 0;
      ASSERT_TRUE(f.run->for_each([&](std::string_view, std::string_view v) {
                         if (v == std::string(20, 'a')) {
                           ++old_values;
                         } else {
                           EXPECT_EQ(v, std::string(300, 'b'));
                           ++new_values;
                         }
                       }).ok());
      EXPECT_EQ(old_values + new_values, 30000u);
      EXPECT_GT(new_values, 0u);
      EXPECT_GT(old_values, 0u);
    };
    check();
    ASSERT_TRUE(f.recover().ok());
    check();
    // Still usable: erasing half the keys makes room.
    std::map<std::string, std::optional<std::string>> erase;
    for (std::uint64_t k = 0; k < 30000; k += 2) erase[key_of(k)] = std::nullopt;
    ASSERT_TRUE(f.run->apply(TestFixture::changes_of(erase)).ok());
    std::string v;
    EXPECT_TRUE(f.run->get(key_of(1), &v).ok());
    EXPECT_TRUE(f.run->get(key_of(2), &v).IsNotFound());
  }
}

// A cursor of `store` moved between batches (`write`) that change keys behind it, at it and
// ahead of it (two batches per move, so that blocks the first freed are taken by the second)
// steps to the first key above its own that the store holds now. With `backward`, the cursor
// is put before each round's batches by seek_before of a key a little above its own, which
// must find the last key below it, so that the steps after the batches carry on from a
// backward positioning. Returns the map of what the store holds at the end.
template <class Cursor, class Store, class Write>
std::map<std::string, std::string> check_cursor_carries_on(const Store& store, Write write,
                                                           std::uint64_t seed,
                                                           bool backward = false) {
  std::map<std::string, std::string> m;
  std::map<std::string, std::optional<std::string>> first;
  for (std::uint64_t k = 0; k < 3000; k += 2) {
    first[key_of(k)] = "v0-" + key_of(k);
    m[key_of(k)] = "v0-" + key_of(k);
  }
  EXPECT_TRUE(write(first).ok());
  std::mt19937_64 rng(seed);
  Cursor cur(store, true);
  EXPECT_TRUE(cur.seek("").ok());
  std::size_t steps = 0;
  for (int round = 1; cur.valid(); ++round) {
    if (backward) {
      // Below a key 1 to 4 above the cursor's: at the cursor's key, or a key after it.
      const std::string probe =
          key_of(std::stoull(std::string(cur.key().substr(3))) + 1 + rng() % 4);
      EXPECT_TRUE(cur.seek_before(probe).ok());
      const auto it = std::prev(m.lower_bound(probe));
      if (!cur.valid() || cur.key() != it->first || cur.value() != it->second) {
        ADD_FAILURE() << "seek_before(" << probe << ") at "
                      << (cur.valid() ? std::string(cur.key()) : "the end") << ", where "
                      << it->first << " was due";
        return m;
      }
    }
    const std::uint64_t at = std::stoull(std::string(cur.key().substr(3)));
    for (int batch = 0; batch < 2; ++batch) {
      std::map<std::string, std::optional<std::string>> b;
      for (int i = 0; i < 40; ++i) {
        const std::uint64_t k = at + rng() % 200 - std::min<std::uint64_t>(at, 60);
        if (k >= 3000) continue;  // the keys end, so that the cursor reaches the end
        const std::string key = key_of(k);
        if (rng() % 3 == 0) {
          b[key] = std::nullopt;
        } else {
          b[key] = "v" + std::to_string(round) + "-" + std::string(rng() % 60, 'x');
        }
      }
      if (rng() % 2 == 0) b[std::string(cur.key())] = std::nullopt;
      EXPECT_TRUE(write(b).ok());
      for (const auto& [k, v] : b) {
        if (v) {
          m[k] = *v;
        } else {
          m.erase(k);
        }
      }
    }
    // The next key is the first above the cursor's that the store holds now.
    auto it = m.upper_bound(std::string(cur.key()));
    for (int i = 0; i < 1 + round % 4; ++i, ++it) {
      EXPECT_TRUE(cur.next().ok());
      ++steps;
      if (it == m.end()) {
        EXPECT_FALSE(cur.valid());
        break;
      }
      if (!cur.valid()) {
        ADD_FAILURE() << "the cursor ended before " << it->first;
        return m;
      }
      if (cur.key() != it->first || cur.value() != it->second) {
        ADD_FAILURE() << "at " << cur.key() << ", where " << it->first << " was due";
        return m;
      }
    }
  }
  EXPECT_GT(steps, 500u);
  return m;
}

TYPED_TEST(PackedRunTest, CursorCarriesOnAcrossBatches) {
  using fx = typename TestFixture::fx;
  for (const bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "with an epoch domain" : "alone");
    fx f(64 << 20, 256, shared);
    const auto m = check_cursor_carries_on<typename fx::run_type::cursor>(
        *f.run,
        [&](const auto& b) { return f.run->apply(TestFixture::changes_of(b)); },
        shared ? 7 : 8);
    TestFixture::expect_same(f, m);
  }
}

// The same, with the cursor put by seek_before before each round's batches: its next()
// carries on from there across the batches' indexes.
TYPED_TEST(PackedRunTest, CursorCarriesOnAfterSeekBefore) {
  using fx = typename TestFixture::fx;
  for (const bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "with an epoch domain" : "alone");
    fx f(64 << 20, 256, shared);
    const auto m = check_cursor_carries_on<typename fx::run_type::cursor>(
        *f.run,
        [&](const auto& b) { return f.run->apply(TestFixture::changes_of(b)); },
        shared ? 17 : 18, true);
    TestFixture::expect_same(f, m);
  }
}

// Readers beside a writer, on real threads: two readers get keys and scan a store (a run or
// a tier), pinned
// in the run's epoch domain for each call (a scan unpins between moves), while one writer
// applies batches that rewrite and erase keys. The even keys are never erased. Each value
// names its key and the batch that wrote it. Every call is OK (a node freed under a reader
// would read as damage or as another key's); a get finds every even key, with a value of
// its own key, from a batch begun, and never older than one this reader saw for that key;
// a scan sees keys ascending, every even key exactly once, each value its key's. Every other
// scan goes backward (seek_to_last, then seek_before of the cursor's key, each pinned): keys
// descending, every even key exactly once.
// `write(changes)` applies a batch (sorted, no key twice) to the store.
using reader_fixture = fixture<hw_hashed, manual>;
using reader_change = reader_fixture::run_type::change;
template <class Store>
void check_readers_beside_writer(
    reader_fixture& f, const Store& store,
    const std::function<Status(std::span<const reader_change>)>& write) {
  using cursor_type = typename Store::cursor;
  constexpr std::uint64_t kKeys = 4000;
  constexpr int kMinBatches = 200;
  constexpr int kMinScans = 6;  // per reader, finished while the writer was writing
  const auto value_of = [&](std::uint64_t k, int batch) {
    return key_of(k) + "@" + std::to_string(batch) + std::string(batch % 50, 'p');
  };
  std::vector<reader_change> changes;
  std::vector<std::string> values;
  {
    values.reserve(kKeys);
    for (std::uint64_t k = 0; k < kKeys; ++k) values.push_back(value_of(k, 0));
    std::vector<std::string> keys;
    for (std::uint64_t k = 0; k < kKeys; ++k) keys.push_back(key_of(k));
    for (std::uint64_t k = 0; k < kKeys; ++k) changes.push_back({keys[k], values[k]});
    ASSERT_TRUE(write(changes).ok());
  }
  std::atomic<int> begun{0};
  std::atomic<bool> done{false};
  std::atomic<int> scans{0};
  constexpr int kReaders = 2;

  const auto reader = [&](int id, std::string* error) {
    std::mt19937_64 rng(100 + id);
    std::vector<int> seen(kKeys, 0);
    std::string value;
    // What a value says: its key's number and its batch, or nullopt if it is not of `key`.
    const auto check = [&](std::string_view key, std::string_view v) -> std::optional<int> {
      const auto at = v.find('@');
      if (at == std::string_view::npos || v.substr(0, at) != key) return std::nullopt;
      const int batch = std::atoi(std::string(v.substr(at + 1)).c_str());
      if (batch > begun.load() || v.size() != at + 1 + std::to_string(batch).size() + batch % 50) {
        return std::nullopt;
      }
      return batch;
    };
    int finished_scans = 0, scanned = 0;
    while (!done.load()) {
      for (int i = 0; i < 200; ++i) {
        const std::uint64_t k = rng() % kKeys;
        const std::string key = key_of(k);
        auto g = f.epochs->pin();
        const Status s = store.get(key, &value);
        if (s.IsNotFound() && k % 2 == 1) continue;
        if (!s.ok()) return void(*error = key + ": " + s.ToString());
        const auto batch = check(key, value);
        if (!batch) return void(*error = key + " read " + value);
        if (*batch < seen[k]) {
          return void(*error = key + " went back from batch " + std::to_string(seen[k]) + " to " +
                               std::to_string(*batch));
        }
        seen[k] = *batch;
      }
      // Every other scan goes backward: from the last key, each move to the last key below
      // the one before.
      const bool backward = scanned++ % 2 == 1;
      cursor_type cur(store, true);
      std::string last;
      std::int64_t next_even = backward ? kKeys - 2 : 0;  // the even key due next
      // Checks the cursor's key and value; in the pin of the move that reached them.
      const auto visit = [&]() -> std::string {
        const std::string key(cur.key());
        if (!last.empty() && (backward ? key >= last : key <= last)) {
          return "scan: " + key + " after " + last;
        }
        if (!check(key, cur.value())) return "scan: " + key + " read " + std::string(cur.value());
        const auto k = static_cast<std::int64_t>(std::stoull(key.substr(3)));
        if (k % 2 == 0) {
          if (k != next_even) return "scan: " + key + " where " + key_of(next_even) + " was due";
          next_even += backward ? -2 : 2;
        }
        last = key;
        return "";
      };
      Status s;
      for (bool first = true; first || (s.ok() && cur.valid()); first = false) {
        auto g = f.epochs->pin();
        if (backward) {
          s = first ? cur.seek_to_last() : cur.seek_before(cur.key());
        } else {
          s = first ? cur.seek_to_first() : cur.next();
        }
        if (s.ok() && cur.valid()) {
          if (std::string e = visit(); !e.empty()) return void(*error = e);
        }
      }
      if (!s.ok()) return void(*error = "scan: " + s.ToString());
      if (next_even != (backward ? -2 : std::int64_t{kKeys})) {
        return void(*error = "scan ended before the even key " + key_of(next_even));
      }
      // Counted toward the writer's end only if it finished while the writer was writing.
      if (!done.load() && ++finished_scans == kMinScans) scans.fetch_add(1);
    }
  };

  std::vector<std::string> errors(kReaders);
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int id = 0; id < kReaders; ++id) {
    threads.emplace_back([&, id] {
      reader(id, &errors[id]);
      if (!errors[id].empty()) failed.fetch_add(1);
    });
  }
  // The writer goes on until each reader has finished its scans beside it.
  std::mt19937_64 rng(1);
  std::string writer_error;
  int batch = 1;
  for (; batch <= kMinBatches || scans.load() + failed.load() < kReaders; ++batch) {
    std::map<std::uint64_t, std::optional<std::string>> b;
    for (int i = 0; i < 100; ++i) {
      const std::uint64_t k = rng() % kKeys;
      if (k % 2 == 1 && rng() % 3 == 0) {
        b[k] = std::nullopt;
      } else {
        b[k] = value_of(k, batch);
      }
    }
    std::vector<std::string> keys;
    keys.reserve(b.size());
    changes.clear();
    for (const auto& [k, v] : b) {
      keys.push_back(key_of(k));  // zero-padded: the numbers' order is the keys'
      changes.push_back({keys.back(), v ? std::string_view(*v) : std::string_view(), !v});
    }
    begun.store(batch);
    if (const Status s = write(changes); !s.ok()) {
      writer_error = s.ToString();
      break;
    }
  }
  done.store(true);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(writer_error, "");
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  EXPECT_GT(batch, kMinBatches);
}

// With slices of 4 KiB (a few nodes), so that readers also meet the run as a batch left it
// between two nodes, and old nodes given back while the batch goes on.
TEST(PackedRunReaders, GetsAndScansBesideBatches) {
  reader_fixture f(64 << 20, 256, true);
  f.run->set_slice_bytes(4096);
  check_readers_beside_writer(f, *f.run, [&](std::span<const reader_change> c) {
    return f.run->apply(c);
  });
}

// ---- the packed tier ------------------------------------------------------------------------

template <class Config>
class PackedTierTest : public PackedRunTest<Config> {
 protected:
  using tier_type = typename PackedRunTest<Config>::fx::tier_type;
  // The whole tier in order (a cursor's walk) is the map, and every key the map has reads
  // back.
  static void expect_same(const tier_type& tier, const std::map<std::string, std::string>& m) {
    typename tier_type::cursor cur(tier, true);
    auto it = m.begin();
    Status s = cur.seek_to_first();
    for (; s.ok() && cur.valid(); s = cur.next(), ++it) {
      ASSERT_NE(it, m.end()) << cur.key();
      ASSERT_EQ(cur.key(), it->first);
      ASSERT_EQ(cur.value(), it->second);
    }
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(it, m.end());
    std::string value;
    for (const auto& [k, v] : m) {
      ASSERT_TRUE(tier.get(k, &value).ok()) << k;
      ASSERT_EQ(value, v);
    }
  }
};
TYPED_TEST_SUITE(PackedTierTest, configs);

// Random batches of puts and erasures flushed into the tier against std::map, merged now
// and then (and when every slot is taken: the flush is Busy then; the test below reaches
// it): every key of a batch reads back after it; now and then cursors seek and step as the
// map's iterators do, and the whole tier in order and every key read are the map;
// recovered part-way, the heap's bytes in use are what they were (every block found again,
// none leaked).
TYPED_TEST(PackedTierTest, AnswersAsAMapDoes) {
  using fx = typename TestFixture::fx;
  using tier_cursor = typename fx::tier_type::cursor;
  fx f(256 << 20, 256);
  std::map<std::string, std::string> m;
  std::mt19937_64 rng(11);
  std::size_t busy = 0, merges = 0;
  const auto expect_same = [&] { TestFixture::expect_same(*f.tier, m); };
  for (int batch = 0; batch < 300; ++batch) {
    const auto b = random_batch(rng, batch % 10 == 0 ? 1500 : 80, 4000);
    const auto changes = TestFixture::changes_of(b);
    Status s = f.tier->flush(changes);
    if (s.IsBusy()) {
      ASSERT_TRUE(f.tier->full());
      ++busy;
      ASSERT_TRUE(f.tier->merge().ok());
      ++merges;
      ASSERT_EQ(f.tier->small_runs(), 0u);
      s = f.tier->flush(changes);
    }
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (rng() % 15 == 0) {
      ASSERT_TRUE(f.tier->merge().ok());
      ++merges;
    }
    expect_batch_read(*f.tier, b, &m);
    if (batch % 30 == 29) {
      expect_same();
      expect_seeks_as_map<tier_cursor>(*f.tier, m, rng, 4000);
    }
    if (batch % 100 == 99) {
      // Nothing leaked: recovery finds every block the tier holds, and no other.
      const std::uint64_t in_use = f.heap->stats().in_use_bytes;
      ASSERT_TRUE(f.recover().ok());
      EXPECT_EQ(f.heap->stats().in_use_bytes, in_use);
      expect_same();
    }
  }
  EXPECT_GT(merges, busy);
}

// The small runs' levels (PackedTierTest.GathersLevelByLevel...), oldest slot first.
template <class Tier>
std::vector<unsigned> levels_of(const Tier& tier) {
  std::vector<unsigned> levels;
  for (std::size_t i = 0; i < in::kPackedSmallRuns; ++i) {
    if (tier.small(i).nodes() != 0) levels.push_back(tier.level(i));
  }
  return levels;
}

// Flushes without merges: whenever the newest kPackedGather runs are of one level they
// become one run of the next level in the oldest one's slot, so after every flush the
// levels never rise from the oldest slot to the newest, no level has kPackedGather runs,
// and the tier answers as the map (each batch's keys after it; the whole tier, cursors'
// seeks and every key now and then). The slots last until seven runs of each of levels 0
// to 2 and three of level 3 are in front (about 2,000 flushes), then a flush is Busy, and
// a merge leaves the large run answering as the map. A recovery leaves the runs' levels
// unknown: no gather takes them, while the runs flushed after it gather among themselves.
TYPED_TEST(PackedTierTest, GathersLevelByLevelUntilTheSlotsAreTaken) {
  using fx = typename TestFixture::fx;
  using tier_cursor = typename fx::tier_type::cursor;
  constexpr std::uint64_t kKeys = 3000;
  fx f(256 << 20, 256);
  std::map<std::string, std::string> m;
  std::mt19937_64 rng(23);
  std::size_t flushes = 0;
  while (true) {
    const auto b = random_batch(rng, 6, kKeys);
    const Status s = f.tier->flush(TestFixture::changes_of(b));
    if (s.IsBusy()) break;
    ASSERT_TRUE(s.ok()) << s.ToString();
    ++flushes;
    ASSERT_NO_FATAL_FAILURE(expect_batch_read(*f.tier, b, &m));
    const std::vector<unsigned> levels = levels_of(*f.tier);
    ASSERT_EQ(levels.size(), f.tier->small_runs());
    for (std::size_t i = 1; i < levels.size(); ++i) ASSERT_LE(levels[i], levels[i - 1]) << i;
    for (unsigned level = 0; level <= 4; ++level) {
      ASSERT_LT(std::count(levels.begin(), levels.end(), level), in::kPackedGather)
          << "level " << level << " after flush " << flushes;
    }
    if (flushes % 200 == 0) {
      ASSERT_NO_FATAL_FAILURE(TestFixture::expect_same(*f.tier, m));
      expect_seeks_as_map<tier_cursor>(*f.tier, m, rng, kKeys);
    }
  }
  ASSERT_TRUE(f.tier->full());
  EXPECT_EQ(levels_of(*f.tier), (std::vector<unsigned>{3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1,
                                                       1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_GT(flushes, 7u * in::kPackedGather * in::kPackedGather);
  ASSERT_NO_FATAL_FAILURE(TestFixture::expect_same(*f.tier, m));
  ASSERT_TRUE(f.tier->merge().ok());
  ASSERT_EQ(f.tier->small_runs(), 0u);
  ASSERT_NO_FATAL_FAILURE(TestFixture::expect_same(*f.tier, m));

  // Runs found at recovery stay as they are; those flushed after it gather.
  for (int i = 0; i < 3; ++i) {
    const auto b = random_batch(rng, 6, kKeys);
    ASSERT_TRUE(f.tier->flush(TestFixture::changes_of(b)).ok());
    expect_batch_read(*f.tier, b, &m);
  }
  ASSERT_TRUE(f.recover().ok());
  const unsigned unknown = fx::tier_type::kUnknownLevel;
  EXPECT_EQ(levels_of(*f.tier), (std::vector<unsigned>{unknown, unknown, unknown}));
  for (std::size_t i = 0; i < in::kPackedGather; ++i) {
    const auto b = random_batch(rng, 6, kKeys);
    ASSERT_TRUE(f.tier->flush(TestFixture::changes_of(b)).ok());
    ASSERT_NO_FATAL_FAILURE(expect_batch_read(*f.tier, b, &m));
  }
  EXPECT_EQ(levels_of(*f.tier), (std::vector<unsigned>{unknown, unknown, unknown, 1}));
  ASSERT_NO_FATAL_FAILURE(TestFixture::expect_same(*f.tier, m));
  ASSERT_TRUE(f.recover().ok());
  ASSERT_NO_FATAL_FAILURE(TestFixture::expect_same(*f.tier, m));
}

// Backward positioning of the tier against std::map: random batches of puts and erasures
// flushed, merged when every slot is taken and now and then before, and every tenth batch
// the erasure of a range of 60 keys, so that many keys in a row have a newest record that
// is an erasure over older runs' values; expect_seeks_before_as_map on the empty tier,
// every few batches and after each merge (the large run alone). Then a flush that erases
// every key (records in front, but no key), and its merge.
TYPED_TEST(PackedTierTest, SeeksBeforeAsAMapDoes) {
  using fx = typename TestFixture::fx;
  using tier_cursor = typename fx::tier_type::cursor;
  constexpr std::uint64_t kKeys = 4000;
  fx f(256 << 20, 256);
  std::map<std::string, std::string> m;
  std::mt19937_64 rng(41);
  std::size_t merges = 0, checked_with_small_runs = 0;
  const auto flush = [&](const std::map<std::string, std::optional<std::string>>& b) {
    const auto changes = TestFixture::changes_of(b);
    Status s = f.tier->flush(changes);
    if (s.IsBusy()) {
      ASSERT_TRUE(f.tier->merge().ok());
      ++merges;
      expect_seeks_before_as_map<tier_cursor>(*f.tier, m, rng, kKeys);
      s = f.tier->flush(changes);
    }
    ASSERT_TRUE(s.ok()) << s.ToString();
    expect_batch_read(*f.tier, b, &m);
  };
  expect_seeks_before_as_map<tier_cursor>(*f.tier, m, rng, kKeys);
  for (int batch = 0; batch < 120; ++batch) {
    auto b = random_batch(rng, batch % 10 == 0 ? 1500 : 80, kKeys);
    if (batch % 10 == 5) {
      const std::uint64_t from = rng() % kKeys;
      for (std::uint64_t k = from; k < from + 60 && k < kKeys; ++k) b[key_of(k)] = std::nullopt;
    }
    ASSERT_NO_FATAL_FAILURE(flush(b));
    if (rng() % 15 == 0) {
      ASSERT_TRUE(f.tier->merge().ok());
      ++merges;
      expect_seeks_before_as_map<tier_cursor>(*f.tier, m, rng, kKeys);
    }
    if (batch % 4 == 3) {
      checked_with_small_runs += f.tier->small_runs() > 1 ? 1 : 0;
      expect_seeks_before_as_map<tier_cursor>(*f.tier, m, rng, kKeys);
    }
  }
  EXPECT_GT(merges, 2u);
  EXPECT_GT(checked_with_small_runs, 10u);
  std::map<std::string, std::optional<std::string>> erase_all;
  for (const auto& [k, unused] : m) erase_all[k] = std::nullopt;
  ASSERT_NO_FATAL_FAILURE(flush(erase_all));
  ASSERT_TRUE(m.empty());
  ASSERT_GT(f.tier->small_runs(), 0u);
  expect_seeks_before_as_map<tier_cursor>(*f.tier, m, rng, kKeys);
  ASSERT_TRUE(f.tier->merge().ok());
  ASSERT_EQ(f.tier->large().nodes(), 0u);
  expect_seeks_before_as_map<tier_cursor>(*f.tier, m, rng, kKeys);
}

// A flush whose erasures hit keys of the large run and of older small runs writes a small
// run of its own and touches no other: the large run's head word keeps its bytes and every
// older run's index its generation (a batch applied to a run publishes a new one), while
// gets and scans answer as a map, the erased keys NotFound. After a merge, the large run
// holds no erasure record and the tier still answers as the map; and after a recovery.
TYPED_TEST(PackedTierTest, AFlushWithErasuresLeavesOlderRunsAlone) {
  using fx = typename TestFixture::fx;
  using head_word = typename fx::run_type::head_word;
  fx f(64 << 20, 256);
  std::map<std::string, std::string> m;
  std::mt19937_64 rng(17);
  const auto flush = [&](const std::map<std::string, std::optional<std::string>>& b) {
    ASSERT_TRUE(f.tier->flush(TestFixture::changes_of(b)).ok());
    expect_batch_read(*f.tier, b, &m);
  };
  // Keys 0 to 1999 in the large run; two small runs of overwrites in front of it.
  std::map<std::string, std::optional<std::string>> first;
  for (std::uint64_t k = 0; k < 2000; ++k) first[key_of(k)] = "v0-" + key_of(k);
  flush(first);
  ASSERT_TRUE(f.tier->merge().ok());
  for (int round = 1; round <= 2; ++round) {
    std::map<std::string, std::optional<std::string>> b;
    for (int i = 0; i < 300; ++i) b[key_of(rng() % 2000)] = std::string("v") + std::to_string(round);
    flush(b);
  }
  ASSERT_EQ(f.tier->small_runs(), 2u);
  // Erasures of keys in the large run only, in the small runs too, and in no run; and puts.
  std::map<std::string, std::optional<std::string>> erasures;
  for (std::uint64_t k = 0; k < 2100; k += 3) erasures[key_of(k)] = std::nullopt;
  for (std::uint64_t k = 1; k < 2100; k += 13) erasures[key_of(k)] = "v3";
  std::vector<std::string> erased;
  for (const auto& [k, v] : erasures) {
    if (!v) erased.push_back(k);
  }
  const std::uint64_t large_generation = f.tier->large().generation();
  const std::uint64_t small_generations[] = {f.tier->small(0).generation(),
                                             f.tier->small(1).generation()};
  unsigned char large_head[sizeof(head_word)];
  std::memcpy(large_head, &f.root()->tier.large, sizeof large_head);
  flush(erasures);
  EXPECT_EQ(f.tier->small_runs(), 3u);
  EXPECT_EQ(f.tier->large().generation(), large_generation);
  EXPECT_EQ(f.tier->small(0).generation(), small_generations[0]);
  EXPECT_EQ(f.tier->small(1).generation(), small_generations[1]);
  EXPECT_EQ(std::memcmp(large_head, &f.root()->tier.large, sizeof large_head), 0);
  const auto check = [&] {
    TestFixture::expect_same(*f.tier, m);
    expect_seeks_as_map<typename fx::tier_type::cursor>(*f.tier, m, rng, 2100);
    std::string value;
    for (const std::string& k : erased) {
      const Status s = f.tier->get(k, &value);
      ASSERT_TRUE(s.IsNotFound()) << k << ": " << s.ToString();
    }
  };
  check();
  ASSERT_TRUE(f.tier->merge().ok());
  check();
  typename fx::run_type::cursor cur(f.tier->large(), true);
  Status s = cur.seek_to_first();
  for (; s.ok() && cur.valid(); s = cur.next()) ASSERT_FALSE(cur.erased()) << cur.key();
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(f.recover().ok());
  check();
}

// The cursor check above, on a tier: each batch flushed, the tier merged when every slot
// is taken and after one batch in three, so that cursors meet keys moved into the large
// run and small runs emptied between their moves.
TYPED_TEST(PackedTierTest, CursorCarriesOnAcrossFlushesAndMerges) {
  using fx = typename TestFixture::fx;
  for (const bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "with an epoch domain" : "alone");
    fx f(64 << 20, 256, shared);
    std::size_t merges = 0;
    const auto write = [&](const auto& b) {
      const auto changes = TestFixture::changes_of(b);
      Status s = f.tier->flush(changes);
      if (s.IsBusy() || (s.ok() && merges++ % 3 == 0)) {
        if (Status m = f.tier->merge(); !m.ok()) return m;
        if (s.IsBusy()) s = f.tier->flush(changes);
      }
      return s;
    };
    check_cursor_carries_on<typename fx::tier_type::cursor>(*f.tier, write, shared ? 9 : 10);
  }
}

// The same, with the cursor put by seek_before before each round's flushes and merges.
TYPED_TEST(PackedTierTest, CursorCarriesOnAfterSeekBefore) {
  using fx = typename TestFixture::fx;
  for (const bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "with an epoch domain" : "alone");
    fx f(64 << 20, 256, shared);
    std::size_t merges = 0;
    const auto write = [&](const auto& b) {
      const auto changes = TestFixture::changes_of(b);
      Status s = f.tier->flush(changes);
      if (s.IsBusy() || (s.ok() && merges++ % 3 == 0)) {
        if (Status m = f.tier->merge(); !m.ok()) return m;
        if (s.IsBusy()) s = f.tier->flush(changes);
      }
      return s;
    };
    const auto m = check_cursor_carries_on<typename fx::tier_type::cursor>(
        *f.tier, write, shared ? 19 : 20, true);
    TestFixture::expect_same(*f.tier, m);
  }
}

// A tier opened with another node size than it was written with is refused before any run
// is read or any block marked (recovery marks blocks at that size), and a damaged node size
// word is Corruption; opened right, it reads as before.
TYPED_TEST(PackedTierTest, AnotherNodeSizeIsRefused) {
  using fx = typename TestFixture::fx;
  fx f(64 << 20, 256);
  std::mt19937_64 rng(3);
  std::map<std::string, std::string> m;
  const auto b = random_batch(rng, 500, 1000);
  ASSERT_TRUE(f.tier->flush(TestFixture::changes_of(b)).ok());
  ASSERT_TRUE(f.tier->merge().ok());
  expect_batch_read(*f.tier, b, &m);
  const auto open_with = [&](std::size_t node_bytes) {
    f.tier.reset();
    f.heap = std::make_unique<alloc::persistent_allocator<typename TypeParam::policy>>(*f.pool);
    f.tier = std::make_unique<typename fx::tier_type>(*f.pool, *f.heap, &f.root()->tier, node_bytes);
    return f.tier->recover(true);
  };
  const Status other = open_with(4096);
  EXPECT_TRUE(other.IsInvalidArgument()) << other.ToString();
  EXPECT_EQ(f.heap->stats().in_use_bytes, 0u);
  auto* word = reinterpret_cast<unsigned char*>(&f.root()->tier.node_bytes);
  word[1] ^= 1;
  const Status damaged = open_with(256);
  EXPECT_TRUE(damaged.IsCorruption()) << damaged.ToString();
  word[1] ^= 1;
  ASSERT_TRUE(open_with(256).ok());
  ASSERT_TRUE(f.heap->finish_recovery());
  std::string value;
  for (const auto& [k, v] : m) {
    ASSERT_TRUE(f.tier->get(k, &value).ok()) << k;
    EXPECT_EQ(value, v);
  }
}

// The readers' check above, on a tier: the writer flushes each batch, and merges when every
// slot is taken and after one batch in eight, so that readers meet merges moving keys from
// small runs into the large run (in slices of 4 KiB) and emptying them.
TEST(PackedTierReaders, GetsAndScansBesideFlushesAndMerges) {
  reader_fixture f(64 << 20, 256, true);
  f.tier->set_slice_bytes(4096);
  std::mt19937_64 rng(5);
  std::size_t merges = 0;
  check_readers_beside_writer(f, *f.tier, [&](std::span<const reader_change> c) {
    Status s = f.tier->flush(c);
    if (s.IsBusy()) {
      if (s = f.tier->merge(); !s.ok()) return s;
      ++merges;
      s = f.tier->flush(c);
    }
    if (s.ok() && rng() % 8 == 0) {
      s = f.tier->merge();
      ++merges;
    }
    return s;
  });
  EXPECT_GT(merges, 10u);
}

// A backward positioning that meets a merge answers no key the tier did not hold. Each
// round, the writer flushes key j with the value v<round> into one small run, then the
// erasures of j and of 200 keys above it into a newer one, then merges (the older run is
// emptied first). A reader's seek_before past them all walks down the 200 erasures while
// the older run's cursor waits at j; if the runs are emptied during that walk, a
// positioning that does not start again answers j from the older run, though the tier has
// answered j as erased since that round's erasures and until the next round's flush. The
// reader checks each answer against the rounds whose erasures were flushed before it
// began: key a (never erased), or j with a value of a later round.
TEST(PackedTierReaders, SeekBeforeBesideMergesAnswersNoKeyTheTierDidNotHold) {
  reader_fixture f(64 << 20, 256, true);
  using cursor_type = reader_fixture::tier_type::cursor;
  constexpr int kRounds = 2000;
  const std::string a = key_of(0), j = key_of(10), past = key_of(1000);
  std::vector<std::string> erased;
  for (std::uint64_t k = 100; k < 300; ++k) erased.push_back(key_of(k));
  ASSERT_TRUE(f.tier->flush(std::vector<reader_change>{{a, "a"}}).ok());
  ASSERT_TRUE(f.tier->merge().ok());
  std::atomic<int> erasures_flushed{0};  // the last round whose erasures are flushed
  std::atomic<bool> done{false}, failed{false};
  std::string error;  // the reader's, read once it is joined
  std::size_t positionings = 0;
  std::thread reader([&] {
    cursor_type cur(*f.tier, true);
    while (!done.load() && !failed.load()) {
      const int flushed = erasures_flushed.load();
      auto g = f.epochs->pin();
      const Status s = cur.seek_before(past);
      ++positionings;
      if (!s.ok()) {
        error = s.ToString();
      } else if (!cur.valid()) {
        error = "not valid";
      } else if (cur.key() == j) {
        if (std::stoi(std::string(cur.value().substr(1))) <= flushed) {
          error = j + " with " + std::string(cur.value()) + " after round " +
                  std::to_string(flushed) + "'s erasures";
        }
      } else if (cur.key() != a) {
        error = "answered " + std::string(cur.key());
      }
      if (!error.empty()) failed.store(true);
    }
  });
  std::vector<reader_change> erasures{{j, {}, true}};
  for (const std::string& k : erased) erasures.push_back({k, {}, true});
  Status written;  // the writer's: on an error it stops, and the reader with it
  for (int round = 1; round <= kRounds && written.ok() && !failed.load(); ++round) {
    const std::string value = "v" + std::to_string(round);
    written = f.tier->flush(std::vector<reader_change>{{j, value}});
    if (written.ok()) written = f.tier->flush(erasures);
    erasures_flushed.store(round);
    if (written.ok()) written = f.tier->merge();
  }
  done.store(true);
  reader.join();
  EXPECT_TRUE(written.ok()) << written.ToString();
  EXPECT_EQ(error, "");
  EXPECT_GT(positionings, 100u);
}

// A forward positioning that meets a merge answers no key the tier did not hold: the
// mirror of the test above, with the erasures below j. Each round, the writer flushes key j
// with the value v<round> into one small run, then the erasures of j and of 200 keys below
// it into a newer one, then merges (the older run is emptied first). A reader's
// seek_to_first, or seek from below them all, walks up the 200 erasures while the older
// run's cursor waits at j; if the runs are emptied during that walk, a positioning that
// does not start again answers j from the older run, though the tier has answered j as
// erased since that round's erasures and until the next round's flush. The reader checks
// each answer against the rounds whose erasures were flushed before it began: key a (never
// erased, above j), or j with a value of a later round and then, a step on, a.
TEST(PackedTierReaders, SeekBesideMergesAnswersNoKeyTheTierDidNotHold) {
  reader_fixture f(64 << 20, 256, true);
  using cursor_type = reader_fixture::tier_type::cursor;
  constexpr int kRounds = 2000;
  const std::string from = key_of(1), j = key_of(300), a = key_of(1000);
  std::vector<std::string> erased;
  for (std::uint64_t k = 10; k < 210; ++k) erased.push_back(key_of(k));
  ASSERT_TRUE(f.tier->flush(std::vector<reader_change>{{a, "a"}}).ok());
  ASSERT_TRUE(f.tier->merge().ok());
  std::atomic<int> erasures_flushed{0};  // the last round whose erasures are flushed
  std::atomic<bool> done{false}, failed{false};
  std::string error;  // the reader's, read once it is joined
  std::size_t positionings = 0;
  std::thread reader([&] {
    cursor_type cur(*f.tier, true);
    while (!done.load() && !failed.load()) {
      const int flushed = erasures_flushed.load();
      auto g = f.epochs->pin();
      Status s = positionings++ % 2 == 0 ? cur.seek_to_first() : cur.seek(from);
      if (!s.ok()) {
        error = s.ToString();
      } else if (!cur.valid()) {
        error = "not valid";
      } else if (cur.key() == j) {
        if (std::stoi(std::string(cur.value().substr(1))) <= flushed) {
          error = j + " with " + std::string(cur.value()) + " after round " +
                  std::to_string(flushed) + "'s erasures";
        } else if (s = cur.next(); !s.ok()) {
          error = "next: " + s.ToString();
        } else if (!cur.valid() || cur.key() != a) {
          error = "next: answered " + (cur.valid() ? std::string(cur.key()) : "nothing") +
                  " after " + j;
        }
      } else if (cur.key() != a) {
        error = "answered " + std::string(cur.key());
      }
      if (!error.empty()) failed.store(true);
    }
  });
  std::vector<reader_change> erasures;
  for (const std::string& k : erased) erasures.push_back({k, {}, true});
  erasures.push_back({j, {}, true});
  Status written;  // the writer's: on an error it stops, and the reader with it
  for (int round = 1; round <= kRounds && written.ok() && !failed.load(); ++round) {
    const std::string value = "v" + std::to_string(round);
    written = f.tier->flush(std::vector<reader_change>{{j, value}});
    if (written.ok()) written = f.tier->flush(erasures);
    erasures_flushed.store(round);
    if (written.ok()) written = f.tier->merge();
  }
  done.store(true);
  reader.join();
  EXPECT_TRUE(written.ok()) << written.ToString();
  EXPECT_EQ(error, "");
  EXPECT_GT(positionings, 100u);
}

// The key filter alone: every key added passes; of keys not added, under 2% pass at 10
// bits a key (about 1% expected), and the same count fails at 2 bits a key, so the bound
// separates a filter from a bad one.
TEST(KeyFilterTest, FalsePositivesAreFew) {
  const auto rate = [](unsigned bits, const auto& key) {
    constexpr std::uint64_t kKeys = 4096, kAbsent = 200000;
    in::key_filter filter(kKeys, bits);
    for (std::uint64_t k = 0; k < kKeys; ++k) filter.add(in::key_hash(key(3 * k)));
    for (std::uint64_t k = 0; k < kKeys; ++k) {
      EXPECT_TRUE(filter.may_contain(in::key_hash(key(3 * k)))) << key(3 * k);
    }
    std::uint64_t passed = 0;
    for (std::uint64_t k = 0; k < kAbsent; ++k) {
      passed += filter.may_contain(in::key_hash(key(3 * k + 1 + k % 2))) ? 1 : 0;
    }
    return static_cast<double>(passed) / kAbsent;
  };
  // The benchmarks' keys (16 zero-padded digits) and the tests' (a word and 8 digits).
  const auto padded = [](std::uint64_t k) {
    char b[32];
    std::snprintf(b, sizeof b, "%016llu", static_cast<unsigned long long>(k));
    return std::string(b);
  };
  EXPECT_LT(rate(10, padded), 0.02);
  EXPECT_LT(rate(10, key_of), 0.02);
  EXPECT_GT(rate(2, padded), 0.02);
}

// ---- under the crash harness ----------------------------------------------------------------

// What the crash subjects below share: the pool over the model, statuses as the harness
// takes them, and 8-byte keys and values.
template <class Policy>
struct subject_support {
  static constexpr std::size_t region_bytes = alloc::format::chunk_table_offset +
                                              alloc::format::page_size +
                                              16 * alloc::format::chunk_size;
  static alloc::pool open_pool(pv::model& m, crashtest::start how) {
    const std::span<std::byte> region(m.base(), m.size());
    auto p = how == crashtest::start::fresh ? alloc::pool::create_in<Policy>(region, layout<Policy>())
                                            : alloc::pool::open_in(region, layout<Policy>());
    if (!p) throw crashtest::invariant_violation("packed run: " + p.error().to_string());
    return std::move(p).value();
  }
  static void finish(const Status& s) {
    if (s.IsNoSpace()) throw std::bad_alloc();
    if (!s.ok()) throw crashtest::invariant_violation(s.ToString());
  }
  // A fresh start lays out an empty store (make_empty), fenced; then the store (a run or a
  // tier) recovers, marking its blocks live on a restart, and the heap finishes recovery.
  template <class Mode, class Store, class MakeEmpty>
  static void start_store(Store& store, alloc::persistent_allocator<Policy>& heap,
                          crashtest::start how, MakeEmpty make_empty) {
    const bool fresh = how == crashtest::start::fresh;
    if (fresh) {
      make_empty();
      in::durable<Policy, Mode>::fence();
      Policy::operation_completion();
    }
    finish(store.recover(!fresh));
    if (auto s = heap.finish_recovery(); !s) {
      throw crashtest::invariant_violation("packed store: " + s.error().to_string());
    }
  }
  static std::string encode(std::uint64_t x) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(x >> (56 - 8 * i));
    return s;
  }
  static std::uint64_t decode(std::string_view s) {
    if (s.size() != 8) throw crashtest::invariant_violation("packed run: a key or value of " + std::to_string(s.size()) + " bytes");
    std::uint64_t x = 0;
    for (char c : s) x = x << 8 | static_cast<unsigned char>(c);
    return x;
  }
};

// The run as a crashtest::map_subject: insert-if-absent and remove are batches of one key,
// in nodes of 128 bytes (a few keys each), so that keys split nodes and empty them.
template <class Policy, class Mode>
class run_map : subject_support<Policy> {
  using base = subject_support<Policy>;
  using base::decode, base::encode, base::finish;

 public:
  using base::region_bytes;
  run_map(pv::model& m, crashtest::start how)
      : pool_(base::open_pool(m, how)),
        heap_(pool_),
        run_(pool_, heap_, &pool_.root_as<run_root<Policy>>()->head, kHeadPlace, 128) {
    base::template start_store<Mode>(run_, heap_, how, [&] {
      in::packed_run<Policy, Mode>::make_empty(&pool_.root_as<run_root<Policy>>()->head,
                                               kHeadPlace);
    });
  }

  bool insert(std::uint64_t key, std::uint64_t value) {
    if (get(key)) return false;
    const std::string k = encode(key), v = encode(value);
    const change c{k, v, false};
    finish(run_.apply({&c, 1}));
    return true;
  }
  bool remove(std::uint64_t key) {
    if (!get(key)) return false;
    const std::string k = encode(key);
    const change c{k, {}, true};
    finish(run_.apply({&c, 1}));
    return true;
  }
  std::optional<std::uint64_t> get(std::uint64_t key) {
    std::string v;
    const Status s = run_.get(encode(key), &v);
    Policy::operation_completion();
    if (s.IsNotFound()) return std::nullopt;
    finish(s);
    return decode(v);
  }
  std::vector<crashtest::kv_entry> state() const {
    std::vector<crashtest::kv_entry> out;
    finish(run_.for_each([&](std::string_view k, std::string_view v) {
      out.push_back({decode(k), decode(v), 0});
    }));
    return out;
  }

 private:
  using change = typename in::packed_run<Policy, Mode>::change;

  alloc::pool pool_;
  alloc::persistent_allocator<Policy> heap_;
  in::packed_run<Policy, Mode> run_;
};

// The tier as a crashtest::kv_subject: every put and delete is a flush of one key (each put
// a small run of its own), in nodes of 128 bytes, with its version kept beside its value;
// the tier is merged when every slot is taken and after every fifth flush. Overwrites and
// erasures put a key in several runs at once, so that a crash inside a merge or inside the
// emptying of small runs shows which run's record wins.
template <class Policy, class Mode>
class tier_kv : subject_support<Policy> {
  using base = subject_support<Policy>;
  using base::decode, base::encode, base::finish;
  using tier_type = in::packed_tier<Policy, Mode>;

 public:
  using base::region_bytes;
  tier_kv(pv::model& m, crashtest::start how)
      : pool_(base::open_pool(m, how)),
        heap_(pool_),
        tier_(pool_, heap_, &pool_.root_as<run_root<Policy>>()->tier, 128) {
    base::template start_store<Mode>(tier_, heap_, how, [&] {
      tier_type::make_empty(pool_, &pool_.root_as<run_root<Policy>>()->tier, 128);
    });
  }

  std::uint64_t put(std::uint64_t key, std::uint64_t value) {
    const std::string k = encode(key), v = encode(value) + encode(++version_);
    flush({k, v, false});
    return version_;
  }
  std::uint64_t del(std::uint64_t key) {
    const std::string k = encode(key);
    flush({k, {}, true});
    return ++version_;
  }
  crashtest::kv_read get(std::uint64_t key) {
    std::string v;
    const Status s = tier_.get(encode(key), &v);
    Policy::operation_completion();
    if (s.IsNotFound()) return {};
    finish(s);
    return read(v);
  }
  // The tier's keys by a cursor's walk; a get of each key a campaign may use must answer as
  // the walk does (the harness checks gets only as evidence of writes), so that a get that
  // passes over an erasure record fails the campaign too.
  std::vector<crashtest::kv_entry> state() const {
    std::vector<crashtest::kv_entry> out;
    typename tier_type::cursor cur(tier_, true);
    Status s = cur.seek_to_first();
    for (; s.ok() && cur.valid(); s = cur.next()) {
      const crashtest::kv_read r = read(cur.value());
      out.push_back({decode(cur.key()), r.value, r.version});
    }
    finish(s);
    std::string v;
    for (std::uint64_t key = 1; key <= kProbedKeys; ++key) {
      s = tier_.get(encode(key), &v);
      if (!s.IsNotFound()) finish(s);
      const auto walked = std::find_if(out.begin(), out.end(), [&](const crashtest::kv_entry& e) {
        return e.key == key;
      });
      const bool agree = s.ok() ? walked != out.end() && read(v).value == walked->value &&
                                      read(v).version == walked->version
                                : walked == out.end();
      if (!agree) {
        throw crashtest::invariant_violation("packed tier: a get of key " + std::to_string(key) +
                                             " answers otherwise than a scan");
      }
    }
    return out;
  }
  // Keys 1 to kProbedKeys: every campaign's key space (tier_crash_campaign).
  static constexpr std::uint64_t kProbedKeys = 16;

 private:
  static crashtest::kv_read read(std::string_view v) {
    if (v.size() != 16) throw crashtest::invariant_violation("packed tier: a value of " + std::to_string(v.size()) + " bytes");
    return {true, decode(v.substr(0, 8)), decode(v.substr(8))};
  }
  void flush(const typename tier_type::change& c) {
    Status s = tier_.flush({&c, 1});
    if (s.IsBusy()) {
      finish(tier_.merge());
      s = tier_.flush({&c, 1});
    }
    finish(s);
    // Every 70th flush merges, so that gathers of level 0 runs, and one of level 1 runs
    // (the 64th flush), come first.
    if (++flushes_ % 70 == 0) finish(tier_.merge());
  }

  alloc::pool pool_;
  alloc::persistent_allocator<Policy> heap_;
  tier_type tier_;
  std::uint64_t version_ = 0;  // one history per campaign run: versions from 1
  std::uint64_t flushes_ = 0;
};

// A single-threaded campaign of 120 operations at 150 crash points, and its result checked.
crashtest::campaign_config campaign_of(const std::string& subject, const std::string& name,
                                       crashtest::workload_config work, std::size_t region_bytes) {
  crashtest::campaign_config c;
  c.subject = subject;
  c.config = name;
  c.work = work;
  c.region_bytes = region_bytes;
  c.points = 150;
  return c;
}
void expect_passed(const crashtest::campaign_result& r) {
  EXPECT_EQ(r.failed, 0u) << r.summary;
  EXPECT_GT(r.points, 0u) << r.summary;
}

template <class Placement, class Mode>
void run_crash_campaign(const std::string& name) {
  using subject = run_map<flit_test::on_model<Placement>, Mode>;
  expect_passed(crashtest::run_set_campaign<subject>(campaign_of(
      "packed_run", name,
      {.writer_threads = 1, .reader_threads = 0, .ops_per_writer = 120, .ops_per_reader = 0,
       .key_space = 24, .put_percent = 60, .del_percent = 30},
      subject::region_bytes)));
}
template <class Placement, class Mode>
void tier_crash_campaign(const std::string& name) {
  using subject = tier_kv<flit_test::on_model<Placement>, Mode>;
  constexpr std::uint64_t kKeySpace = 12;
  static_assert(kKeySpace <= subject::kProbedKeys);
  expect_passed(crashtest::run_kv_campaign<subject>(campaign_of(
      "packed_tier", name,
      {.writer_threads = 1, .reader_threads = 0, .ops_per_writer = 120, .ops_per_reader = 0,
       .key_space = kKeySpace, .put_percent = 60, .del_percent = 25, .batch_percent = 0},
      subject::region_bytes)));
}

TEST(PackedRunCampaign, ManualHashed) { run_crash_campaign<flit_test::test_hashed, manual>("manual hashed"); }
TEST(PackedRunCampaign, ManualAdjacent) { run_crash_campaign<flit::adjacent, manual>("manual adjacent"); }
TEST(PackedRunCampaign, ManualLinkAndPersist) {
  run_crash_campaign<flit::link_and_persist, manual>("manual link_and_persist");
}
TEST(PackedRunCampaign, AutomaticHashed) {
  run_crash_campaign<flit_test::test_hashed, automatic>("automatic hashed");
}
TEST(PackedRunCampaign, AutomaticPlain) { run_crash_campaign<flit::plain, automatic>("automatic plain"); }

TEST(PackedTierCampaign, ManualHashed) { tier_crash_campaign<flit_test::test_hashed, manual>("manual hashed"); }
TEST(PackedTierCampaign, ManualAdjacent) { tier_crash_campaign<flit::adjacent, manual>("manual adjacent"); }
TEST(PackedTierCampaign, AutomaticHashed) {
  tier_crash_campaign<flit_test::test_hashed, automatic>("automatic hashed");
}
TEST(PackedTierCampaign, AutomaticPlain) { tier_crash_campaign<flit::plain, automatic>("automatic plain"); }

}  // namespace
