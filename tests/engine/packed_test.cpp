// Packed nodes (packed.hpp): the format of the planned packed tier, on its own.
//  - PackedTest.LookupsAnswerAsAMapDoes: keys of several shapes (the benchmarks' 16-byte
//    decimal keys, short keys that are prefixes of others, long keys with long common
//    prefixes, empty values and values of two-byte sizes), one in five an erasure, built into
//    nodes of several block sizes: every record reads back as the map has it (value or
//    erasure), find answers yes, erasure or no as the map does, lower_bound gives the map's
//    position for keys, keys between them and keys around the node's prefix, and each node
//    names its successor.
//  - PackedTest.ABuilderFillsItsBlock: a node is refused a record only when that record does
//    not fit what the builder says it holds, and never holds more than kPackedMaxKeys.
//  - PackedTest.ARecordCostsWhatItDidAndAnErasureAnEmptyValues: the benchmarks' 16-byte key
//    with a 64-byte value takes 73 bytes beside the node's prefix, as before erasures were
//    records; an erasure takes what a record of an empty value does.
//  - PackedTest.ARecordOfTheLargestKeyAndValueTakesANodeOfItsOwn: and reads back.
//  - PackedTest.EverySingleBitFlipIsReportedOrHarmless: for every bit of a node holding
//    values and erasures, flipped, each read answers as before or reports damage: no wrong
//    value, no key reported missing, no value taken for an erasure or the reverse, no wrong
//    position. The same judge catches a reader that skips the checks.
//  - PackedTest.ANodeReadAtAnotherOffsetIsReported: the checks are seeded with the node's place.
//  - PackedTest.ReadsStayInsideTheBlock: nodes of random bytes with a valid shape word, read
//    without checks, never make a read leave their block (run under AddressSanitizer, the
//    block is a heap allocation of exactly its size).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "flintkv/internal/packed.hpp"

namespace {

namespace in = flintkv::internal;
using flintkv::automatic;
using flintkv::manual;

template <class Placement, class Mode>
struct config {
  using policy = flit::policy<Placement, flit::detected>;
  using mode = Mode;
};
using hashed = flit::hashed<(1u << 20)>;

// A 64-byte aligned block, zeroed, of `bytes` rounded up to a multiple of 64 (aligned_alloc's
// rule; of exactly `bytes` when it is one, so that AddressSanitizer sees a read past it).
struct block {
  explicit block(std::size_t bytes)
      : bytes(bytes),
        data(static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)),
             &std::free) {
    std::memset(data.get(), 0, bytes);
  }
  std::size_t bytes;
  std::unique_ptr<unsigned char, decltype(&std::free)> data;
};

template <class Config>
struct built {
  using policy = typename Config::policy;
  using view = in::packed_view<policy, typename Config::mode>;
  std::vector<block> blocks;
  std::vector<in::node_offset> places;
  std::vector<std::string> skipped;  // keys whose record fits no empty node

  in::packed_node<policy>* node(std::size_t i) {
    return reinterpret_cast<in::packed_node<policy>*>(blocks[i].data.get());
  }
  std::optional<view> open(std::size_t i, bool verify = true) {
    return view::open(node(i), places[i], blocks[i].bytes, verify);
  }
};

// Each node at its own place: 64 KiB apart, from 1 MiB.
in::node_offset place_of(std::size_t i) { return {(std::size_t{1} << 20) + (i << 16)}; }

// Keys with their records: a value, or nullopt for an erasure.
using records = std::map<std::string, std::optional<std::string>>;

std::string_view value_of(const std::optional<std::string>& v) {
  return v ? std::string_view(*v) : std::string_view();
}
in::packed_kind kind_of(const std::optional<std::string>& v) {
  return v ? in::packed_kind::value : in::packed_kind::erasure;
}
// Whether record `r` of a node with prefix `prefix` is key `key` with the record `want`.
bool same_record(std::string_view prefix, const in::packed_record& r, std::string_view key,
                 const std::optional<std::string>& want) {
  return std::string(prefix) + std::string(r.suffix) == key && r.kind == kind_of(want) &&
         r.value == value_of(want);
}

template <class Config>
built<Config> build(const records& kv, std::size_t block_bytes) {
  using policy = typename Config::policy;
  built<Config> out;
  in::packed_builder<policy> b(block_bytes);
  std::vector<unsigned char> scratch;
  const auto flush = [&] {
    const std::size_t i = out.blocks.size();
    out.blocks.emplace_back(block_bytes);
    out.places.push_back(place_of(i));
    // Each node names the next place, the last one none (fixed below).
    in::store_packed<policy, typename Config::mode>(out.node(i), place_of(i), b, place_of(i + 1),
                                                    &scratch);
    EXPECT_LE(b.bytes(), block_bytes);
    b.clear();
  };
  for (const auto& [k, v] : kv) {
    if (!b.fits(k, value_of(v)) && b.count() > 0) flush();
    if (!b.fits(k, value_of(v))) {
      out.skipped.push_back(k);
      continue;
    }
    b.add(k, value_of(v), kind_of(v));
  }
  if (b.count() > 0) flush();
  if (!out.blocks.empty()) {
    const std::size_t last = out.blocks.size() - 1;
    in::durable<policy, typename Config::mode>::put(
        out.node(last)->next,
        in::offset_word(in::node_offset{0}, in::in_node(out.places[last], in::word_field::packed_next)));
  }
  Config::policy::pfence();
  return out;
}

std::string decimal_key(std::uint64_t k) {
  char b[32];
  std::snprintf(b, sizeof b, "%016llu", static_cast<unsigned long long>(k));
  return b;
}

// Key set `which` (below), one key in five an erasure.
records key_sets(int which, std::mt19937_64& rng) {
  records kv;
  const auto value = [&](std::size_t max) {
    std::string v(rng() % (max + 1), '\0');
    for (char& c : v) c = static_cast<char>('a' + rng() % 26);
    return v;
  };
  switch (which) {
    case 0:  // the benchmarks' keys and values
      for (int i = 0; i < 3000; ++i) kv[decimal_key(rng() % 100000)] = value(64);
      break;
    case 1:  // short keys over a small alphabet: many are prefixes of others; bytes 0 and 255
      for (int i = 0; i < 3000; ++i) {
        std::string k(1 + rng() % 6, '\0');
        for (char& c : k) c = std::string_view("\x00\x01" "ab" "\xfe\xff", 6)[rng() % 6];
        kv[k] = value(rng() % 8 == 0 ? 300 : 20);
      }
      break;
    case 2: {  // long keys with long common prefixes, and values past 127 bytes
      const std::string stem(700, 'k');
      for (int i = 0; i < 400; ++i) {
        kv[stem.substr(0, rng() % stem.size()) + decimal_key(rng() % 1000)] = value(400);
      }
      break;
    }
  }
  for (auto& [k, v] : kv) {
    if (rng() % 5 == 0) v.reset();
  }
  return kv;
}

// The probes around a key: itself, neighbours below and above, its proper prefixes' ends.
std::vector<std::string> probes_near(const std::string& k) {
  std::vector<std::string> p{k, k + '\0', k + '\xff', k.substr(0, k.size() / 2)};
  if (!k.empty()) {
    std::string below = k, above = k;
    if (below.back() != '\0') --below.back();
    if (above.back() != '\xff') ++above.back();
    p.push_back(below);
    p.push_back(above);
    p.push_back(k.substr(0, k.size() - 1));
  }
  return p;
}

template <class Config>
class PackedTest : public ::testing::Test {};
using configs = ::testing::Types<config<hashed, manual>, config<flit::adjacent, manual>,
                                 config<hashed, automatic>, config<flit::plain, automatic>>;
TYPED_TEST_SUITE(PackedTest, configs);

TYPED_TEST(PackedTest, LookupsAnswerAsAMapDoes) {
  std::mt19937_64 rng(7);
  for (int which = 0; which < 3; ++which) {
    const auto kv = key_sets(which, rng);
    for (std::size_t block_bytes : {std::size_t{256}, std::size_t{1024}, std::size_t{4096}}) {
      SCOPED_TRACE("key set " + std::to_string(which) + ", blocks of " +
                   std::to_string(block_bytes));
      auto nodes = build<TypeParam>(kv, block_bytes);
      records seen;
      for (std::size_t n = 0; n < nodes.blocks.size(); ++n) {
        const auto v = nodes.open(n);
        ASSERT_TRUE(v.has_value());
        std::vector<std::string> keys;
        for (std::size_t i = 0; i < v->size(); ++i) {
          const auto r = v->record(i, true);
          ASSERT_TRUE(r.has_value());
          std::string key = std::string(v->prefix()) + std::string(r->suffix);
          ASSERT_TRUE(same_record(v->prefix(), *r, key, kv.at(key))) << key;
          if (!keys.empty()) {
            ASSERT_LT(keys.back(), key);
          }
          keys.push_back(key);
          seen[key] = kv.at(key);
        }
        for (const auto& k : keys) {
          for (const auto& probe : probes_near(k)) {
            const auto f = v->find(probe, true);
            const auto pos = std::lower_bound(keys.begin(), keys.end(), probe) - keys.begin();
            const bool present = pos < static_cast<long>(keys.size()) && keys[pos] == probe;
            using found = decltype(f.kind);
            ASSERT_EQ(f.kind, !present ? found::no : kv.at(probe) ? found::yes : found::erasure)
                << probe;
            if (present) {
              EXPECT_EQ(f.index, static_cast<std::size_t>(pos));
              EXPECT_EQ(f.value, value_of(kv.at(probe)));
            }
            ASSERT_EQ(v->lower_bound(probe, true), static_cast<std::size_t>(pos)) << probe;
          }
        }
        const auto next = in::packed_next<typename TypeParam::policy, typename TypeParam::mode>(
            nodes.node(n), nodes.places[n]);
        ASSERT_TRUE(next.has_value());
        EXPECT_EQ(next->value, n + 1 == nodes.blocks.size() ? 0 : place_of(n + 1).value);
      }
      // Every key is in some node, or was refused as too large for an empty one.
      for (const auto& k : nodes.skipped) {
        EXPECT_GT(k.size() + value_of(kv.at(k)).size(), block_bytes / 2)
            << "a small record was refused";
        seen[k] = kv.at(k);
      }
      EXPECT_EQ(seen, kv);
    }
  }
}

TYPED_TEST(PackedTest, ABuilderFillsItsBlock) {
  using policy = typename TypeParam::policy;
  // fits says yes exactly when the node with the record would take at most the block: the
  // same records in a builder with room to spare tell what it would take.
  in::packed_builder<policy> b(4096);
  const std::string value(64, 'v');
  std::size_t refused = 0;
  std::vector<std::string> keys;  // the builder keeps views of them
  for (std::uint64_t k = 0; k < 1000; ++k) keys.push_back(decimal_key(k * 37));
  for (const std::string& key : keys) {
    in::packed_builder<policy> roomy(in::kPackedMaxBlock - 1);
    for (std::size_t i = 0; i < b.count(); ++i) roomy.add(b.key(i), b.value(i));
    roomy.add(key, value);
    ASSERT_EQ(b.fits(key, value), roomy.bytes() <= 4096) << key;
    if (!b.fits(key, value)) {
      ++refused;
      b.clear();
    }
    b.add(key, value);
  }
  EXPECT_GT(refused, 0u);
  // The count's limit: 2-byte keys with empty values in the largest block.
  in::packed_builder<policy> many(in::kPackedRecordsWithin);
  std::vector<std::string> two_byte_keys;
  for (int k = 0; k < 2000; ++k) {
    two_byte_keys.push_back({static_cast<char>(k >> 8), static_cast<char>(k & 0xff)});
  }
  for (const std::string& key : two_byte_keys) {
    if (!many.fits(key, "")) break;
    many.add(key, "");
  }
  EXPECT_EQ(many.count(), in::kPackedMaxKeys);
  EXPECT_LE(many.bytes(), in::kPackedRecordsWithin);
}

TYPED_TEST(PackedTest, ARecordCostsWhatItDidAndAnErasureAnEmptyValues) {
  using policy = typename TypeParam::policy;
  std::vector<std::string> keys;  // the builders keep views of them
  for (std::uint64_t k = 0; k < 40; ++k) keys.push_back(decimal_key(k * 7919));
  const std::string value(64, 'v');
  in::packed_builder<policy> puts(4096), empty(4096), erasures(4096);
  for (const std::string& key : keys) {
    puts.add(key, value);
    empty.add(key, "");
    erasures.add(key, "", in::packed_kind::erasure);
  }
  // Per record: an offset and a fingerprint (3), the tag and the value's size (1 each), the
  // suffix, the value and the check (4).
  const std::size_t prefix = puts.prefix_size();
  EXPECT_EQ(puts.bytes(), in::packed_node<policy>::words_size() + 4 + prefix +
                              keys.size() * (3 + 1 + 1 + (16 - prefix) + 64 + 4));
  EXPECT_EQ(erasures.bytes(), empty.bytes());
  // Written, the erasures read back as erasures, found as such.
  block blk(4096);
  std::vector<unsigned char> scratch;
  const in::node_offset at{1 << 20};
  auto* node = reinterpret_cast<in::packed_node<policy>*>(blk.data.get());
  in::store_packed<policy, typename TypeParam::mode>(node, at, erasures, in::node_offset{0},
                                                     &scratch);
  const auto v = in::packed_view<policy, typename TypeParam::mode>::open(node, at, 4096, true);
  ASSERT_TRUE(v.has_value());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto r = v->record(i, true);
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(same_record(v->prefix(), *r, keys[i], std::nullopt)) << keys[i];
    const auto f = v->find(keys[i], true);
    EXPECT_EQ(f.kind, decltype(f.kind)::erasure) << keys[i];
    EXPECT_EQ(f.index, i);
  }
}

TYPED_TEST(PackedTest, ARecordOfTheLargestKeyAndValueTakesANodeOfItsOwn) {
  using policy = typename TypeParam::policy;
  const std::string key(flintkv::kMaxKeySize, 'k'), value(flintkv::kMaxValueSize, 'v');
  in::packed_builder<policy> small(4096);
  EXPECT_FALSE(small.fits(key, value));
  const std::size_t bytes = in::packed_builder<policy>::single_record_bytes(key, value);
  ASSERT_LT(bytes, in::kPackedMaxBlock);
  in::packed_builder<policy> b(bytes);
  ASSERT_TRUE(b.fits(key, value));
  b.add(key, value);
  EXPECT_EQ(b.bytes(), bytes);
  // A second record would start past the first 64 KiB, wherever there is room for it.
  in::packed_builder<policy> two(2 * bytes);
  two.add(key, value);
  EXPECT_FALSE(two.fits(key + 'x', "v"));
  block blk(bytes);
  std::vector<unsigned char> scratch;
  const in::node_offset at{1 << 20};
  auto* node = reinterpret_cast<in::packed_node<policy>*>(blk.data.get());
  in::store_packed<policy, typename TypeParam::mode>(node, at, b, in::node_offset{0}, &scratch);
  const auto v = in::packed_view<policy, typename TypeParam::mode>::open(node, at, bytes, true);
  ASSERT_TRUE(v.has_value());
  const auto f = v->find(key, true);
  ASSERT_EQ(f.kind, decltype(f.kind)::yes);
  EXPECT_EQ(f.value, value);
  EXPECT_EQ(v->lower_bound(key, true), 0u);
}

// Reads of a node whose bits may be flipped, judged against the node as written: each answer
// is the true one or a report of damage. Returns the wrong answers found.
template <class Config>
int wrong_answers(built<Config>& nodes, const std::vector<std::string>& keys, const records& kv,
                  const std::vector<std::string>& absent, bool verify) {
  int wrong = 0;
  const auto v = nodes.open(0, verify);
  if (!v) return 0;  // reported
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::optional<std::string>& want = kv.at(keys[i]);
    const auto f = v->find(keys[i], verify);
    using found = decltype(f.kind);
    if (f.kind != found::damaged &&
        (f.kind != (want ? found::yes : found::erasure) || f.index != i ||
         f.value != value_of(want))) {
      ++wrong;
    }
    const auto lb = v->lower_bound(keys[i], verify);
    if (lb && *lb != i) ++wrong;
    if (i < v->size()) {
      const auto r = v->record(i, verify);
      if (r && !same_record(v->prefix(), *r, keys[i], want)) ++wrong;
    }
  }
  if (v->size() != keys.size()) ++wrong;
  for (const auto& a : absent) {
    const auto f = v->find(a, verify);
    if (f.kind != decltype(f.kind)::no && f.kind != decltype(f.kind)::damaged) ++wrong;
    // The position of a key the node lacks: after every key below it.
    const auto lb = v->lower_bound(a, verify);
    const auto want = static_cast<std::size_t>(std::lower_bound(keys.begin(), keys.end(), a) -
                                               keys.begin());
    if (lb && *lb != want) ++wrong;
  }
  return wrong;
}

TYPED_TEST(PackedTest, EverySingleBitFlipIsReportedOrHarmless) {
  // One node: keys with a common prefix, an empty value, a value whose size takes two bytes,
  // and erasures (the first key's, so that the prefix comes from one): an empty value and
  // an erasure differ in one bit of the tag.
  records kv;
  for (int i = 0; i < 9; ++i) kv["user:" + decimal_key(i * 3).substr(12)] = std::string(i * 7, 'x');
  kv["user:0001"] = "";
  kv["user:9999"] = std::string(200, 'y');
  for (const char* erased : {"user:0000", "user:0012", "user:0021", "user:5555"}) {
    kv[erased].reset();
  }
  auto nodes = build<TypeParam>(kv, 1024);
  ASSERT_EQ(nodes.blocks.size(), 1u);
  std::vector<std::string> keys, absent;
  for (const auto& [k, v] : kv) {
    keys.push_back(k);
    absent.push_back(k + '!');
  }
  absent.push_back("user:");
  absent.push_back("zzz");
  ASSERT_EQ(wrong_answers(nodes, keys, kv, absent, true), 0);

  const auto view = nodes.open(0);
  // The node's bytes from its start through its last record (the shape says how many).
  std::size_t bytes = 0;
  {
    in::packed_builder<typename TypeParam::policy> b(1024);
    for (const auto& [k, v] : kv) b.add(k, value_of(v), kind_of(v));
    bytes = b.bytes();
  }
  ASSERT_TRUE(view.has_value());
  unsigned char* const data = nodes.blocks[0].data.get();
  int reported_or_harmless = 0, skipping_checks_wrong = 0;
  const auto next_before = in::packed_next<typename TypeParam::policy, typename TypeParam::mode>(
      nodes.node(0), nodes.places[0]);
  for (std::size_t bit = 0; bit < 8 * bytes; ++bit) {
    data[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    const int wrong = wrong_answers(nodes, keys, kv, absent, true);
    EXPECT_EQ(wrong, 0) << "bit " << bit << " of " << 8 * bytes;
    if (wrong == 0) ++reported_or_harmless;
    skipping_checks_wrong += wrong_answers(nodes, keys, kv, absent, false) > 0;
    const auto next = in::packed_next<typename TypeParam::policy, typename TypeParam::mode>(
        nodes.node(0), nodes.places[0]);
    if (next) {
      EXPECT_EQ(next->value, next_before->value) << "bit " << bit;
    }
    data[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
  }
  EXPECT_EQ(static_cast<std::size_t>(reported_or_harmless), 8 * bytes);
  // The judge has teeth: reading without the checks, flipped bits give wrong answers.
  EXPECT_GT(skipping_checks_wrong, 0);
}

TYPED_TEST(PackedTest, ANodeReadAtAnotherOffsetIsReported) {
  std::mt19937_64 rng(11);
  const auto kv = key_sets(0, rng);
  auto nodes = build<TypeParam>(kv, 4096);
  ASSERT_GE(nodes.blocks.size(), 2u);
  using view = typename built<TypeParam>::view;
  EXPECT_TRUE(view::open(nodes.node(0), nodes.places[0], 4096, true).has_value());
  EXPECT_FALSE(view::open(nodes.node(0), nodes.places[1], 4096, true).has_value());
  EXPECT_FALSE(view::open(nodes.node(0), in::node_offset{nodes.places[0].value + 64}, 4096, true)
                   .has_value());
  // A block too small for what the shape says is refused.
  EXPECT_FALSE(view::open(nodes.node(0), nodes.places[0], 128, true).has_value());
}

TYPED_TEST(PackedTest, ReadsStayInsideTheBlock) {
  using policy = typename TypeParam::policy;
  using view = in::packed_view<policy, typename TypeParam::mode>;
  std::mt19937_64 rng(5);
  const in::node_offset at{1 << 20};
  for (int trial = 0; trial < 2000; ++trial) {
    const std::size_t bytes = 64 * (1 + rng() % 16);
    block b(bytes);
    for (std::size_t i = 0; i < bytes; ++i) b.data.get()[i] = static_cast<unsigned char>(rng());
    // A shape word that passes its check, with fields that may say anything.
    const std::uint64_t shape = (rng() % 64) | (rng() % 64) << 10 | (rng() % (bytes + 64)) << 23;
    auto* node = reinterpret_cast<in::packed_node<policy>*>(b.data.get());
    in::durable<policy, typename TypeParam::mode>::put(
        node->shape, in::word63{in::checked_word(shape, in::in_node(at, in::word_field::packed_shape))});
    const auto v = view::open(node, at, bytes, false);
    if (!v) continue;
    ASSERT_LE(v->size(), 64u);
    for (std::size_t i = 0; i < v->size(); ++i) (void)v->record(i, false);
    for (const char* probe : {"", "a", "\xff\xff\xff", "\x01"}) {
      (void)v->find(probe, false);
      (void)v->lower_bound(probe, false);
      (void)v->find(std::string(v->prefix()) + probe, false);
      (void)v->lower_bound(std::string(v->prefix()) + probe, false);
    }
  }
}

}  // namespace
