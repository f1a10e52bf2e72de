// DB::Repair: salvage of a damaged pool into a new one. Each test makes a store with the
// engine, damages its file by hand (pool_edit in engine_support.hpp), repairs it, and checks
// the new pool's contents against what was written, the report, and that the damaged file
// is byte for byte as it was.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine_support.hpp"
#include "support/files.hpp"

namespace {

using namespace flintkv_test;
using namespace flintkv_test::pool_edit;
using test_support::read_file;
using test_support::write_file;

// What a store holds, and every value each key ever had.
struct model {
  std::map<std::string, std::string> live;
  std::map<std::string, std::set<std::string>> written;
  std::set<std::string> deleted;
};

std::string newer_of(int i) { return "newer-" + value_of(i); }

// Keys 0..59 with value_of; every third one overwritten with newer_of; keys 7, 17, ...
// deleted; a batch of keys 60..69 that also deletes key 1; a large value (a block of two
// chunks), a 5000-byte value and an empty one. The file is left as a crash leaves it while a
// snapshot of the empty store is held: every version written is still in the pool (closing
// the store would drop every version but the newest of each key).
model make_store(const std::string& path) {
  model m;
  std::unique_ptr<DB> db;
  EXPECT_TRUE(DB::Open(creating(), path, &db).ok());
  const Snapshot* everything = db->GetSnapshot();
  auto put = [&](const std::string& k, const std::string& v) {
    EXPECT_TRUE(db->Put(k, v).ok());
    m.live[k] = v;
    m.written[k].insert(v);
    m.deleted.erase(k);
  };
  auto del = [&](const std::string& k) {
    EXPECT_TRUE(db->Delete(k).ok());
    m.live.erase(k);
    m.deleted.insert(k);
  };
  for (int i = 0; i < 60; ++i) put(key_of(i), value_of(i));
  for (int i = 0; i < 60; i += 3) put(key_of(i), newer_of(i));
  for (int i = 7; i < 60; i += 10) del(key_of(i));
  WriteBatch batch;
  for (int i = 60; i < 70; ++i) {
    batch.Put(key_of(i), value_of(i));
    m.live[key_of(i)] = value_of(i);
    m.written[key_of(i)].insert(value_of(i));
  }
  batch.Delete(key_of(1));
  m.live.erase(key_of(1));
  m.deleted.insert(key_of(1));
  EXPECT_TRUE(db->Write(batch).ok());
  put("large", std::string(100000, 'L'));
  put("medium", std::string(5000, 'M'));
  put("empty", "");
  const std::vector<char> crashed = read_file(path);  // no write is in flight
  db->ReleaseSnapshot(everything);
  db.reset();
  write_file(path, crashed);
  return m;
}

std::map<std::string, std::string> contents(const std::string& path) {
  std::map<std::string, std::string> out;
  std::unique_ptr<DB> db;
  Status s = DB::Open(Options{}, path, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return out;
  auto it = db->NewIterator();
  for (it->SeekToFirst(); it->Valid(); it->Next()) out[std::string(it->key())] = it->value();
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return out;
}

class RepairTest : public ::testing::Test {
 protected:
  RepairTest() : damaged_("repair-damaged"), target_("repair-new") {}

  // Writes `bytes` as the damaged pool and checks that the damage is real: Check refuses it.
  void damage(const std::vector<char>& bytes) {
    write_file(damaged_.str(), bytes);
    CheckReport ignored;
    EXPECT_FALSE(DB::Check(damaged_.str(), &ignored).ok()) << "the edit damaged nothing";
  }

  // Repairs the damaged pool into the target; checks that it succeeded, changed nothing in
  // the damaged file, and made a pool that passes Check. Returns the new pool's contents.
  std::map<std::string, std::string> repair(RepairReport* report) {
    Options same_size;
    same_size.pool_size = 0;
    const std::vector<char> before = read_file(damaged_.str());
    Status s = DB::Repair(damaged_.str(), target_.str(), same_size, report);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(read_file(damaged_.str()), before) << "repair changed the damaged pool";
    CheckReport check;
    Status c = DB::Check(target_.str(), &check);
    EXPECT_TRUE(c.ok()) << c.ToString();
    EXPECT_EQ(check.live_keys, report->keys_salvaged);
    return contents(target_.str());
  }

  static bool dropped_at(const RepairReport& r, std::size_t offset) {
    return std::any_of(r.dropped.begin(), r.dropped.end(),
                       [&](const RepairReport::Dropped& d) { return d.offset == offset; });
  }
  static bool doubtful(const RepairReport& r, const std::string& key) {
    return std::any_of(r.doubtful.begin(), r.doubtful.end(),
                       [&](const RepairReport::Doubtful& d) { return d.key == key; });
  }
  static bool noted(const RepairReport& r, const std::string& text) {
    return std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) {
      return n.find(text) != std::string::npos;
    });
  }

  temp_pool_path damaged_, target_;
};

TEST_F(RepairTest, AnIntactPoolGivesExactlyItsContents) {
  const model m = make_store(damaged_.str());
  RepairReport r;
  EXPECT_EQ(repair(&r), m.live);
  EXPECT_TRUE(r.header_intact && r.root_intact && r.list_intact);
  EXPECT_EQ(r.list_break, "");
  EXPECT_EQ(r.keys_salvaged, m.live.size());
  EXPECT_EQ(r.keys_deleted, m.deleted.size());
  EXPECT_EQ(r.keys_from_scan, 0u);
  EXPECT_EQ(r.versions_from_scan, 0u);
  EXPECT_EQ(r.chunks_scanned, 0u) << "an intact list needs no scan";
  EXPECT_EQ(r.uncommitted, 0u);
  EXPECT_TRUE(r.dropped.empty());
  EXPECT_TRUE(r.doubtful.empty());
  EXPECT_TRUE(r.notes.empty()) << r.notes.front();
  EXPECT_EQ(r.damaged_size, kMinPoolSize);
  EXPECT_EQ(r.new_pool_size, r.damaged_size) << "by default, the damaged pool's size";
  // Every version: 60 puts, 20 overwrites, 6 deletes, the batch's 11, three more puts.
  EXPECT_EQ(r.versions_examined, 60u + 20u + 6u + 11u + 3u);
}

TEST_F(RepairTest, ThePoolSizeComesFromTheOptions) {
  make_store(damaged_.str());
  Options options;
  options.pool_size = 16u << 20;
  RepairReport r;
  ASSERT_TRUE(DB::Repair(damaged_.str(), target_.str(), options, &r).ok());
  EXPECT_EQ(r.new_pool_size, 16u << 20);
  EXPECT_EQ(std::filesystem::file_size(target_.str()), 16u << 20);
}

TEST_F(RepairTest, WritesThatDidNotCompleteAreNotSalvaged) {
  model m = make_store(damaged_.str());
  std::vector<char> bytes = read_file(damaged_.str());
  // A put whose attach did not finish: its node is linked but has no version.
  const std::size_t unfinished = node_with(bytes, key_of(2), value_of(2));
  store(bytes, version_word_at(unfinished),
        in::uncommitted_word(in::in_node({unfinished}, in::word_field::version)));
  m.live.erase(key_of(2));
  write_file(damaged_.str(), bytes);
  RepairReport r;
  EXPECT_EQ(repair(&r), m.live);
  EXPECT_EQ(r.uncommitted, 1u);
  EXPECT_TRUE(r.list_intact);
}

// batch_mode active: the versions above commit_version belong to a batch that did not
// finish. Under the list and under the scan (the head damaged) alike.
TEST_F(RepairTest, AnUnfinishedBatchIsNotSalvaged) {
  temp_pool_path scratch("repair-batch");
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(creating(), damaged_.str(), &db).ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(db->Put(key_of(i), value_of(i)).ok());  // 1..10
  db.reset();
  std::vector<char> bytes = read_file(damaged_.str());
  store(bytes, kRoot + 2 * W, in::version_word(7, in::in_root(in::word_field::commit_version)).bits);
  store(bytes, kRoot + 3 * W, in::kBatchActive.bits);
  std::map<std::string, std::string> expected;
  for (int i = 0; i < 7; ++i) expected[key_of(i)] = value_of(i);
  for (bool head_damaged : {false, true}) {
    std::vector<char> edited = bytes;
    if (head_damaged) edited[kRoot + W + 2] ^= 0x04;
    write_file(damaged_.str(), edited);
    std::filesystem::remove(target_.str());
    RepairReport r;
    EXPECT_EQ(repair(&r), expected) << "head damaged: " << head_damaged;
    EXPECT_EQ(r.uncommitted, 3u);
    EXPECT_EQ(r.list_intact, !head_damaged);
    EXPECT_TRUE(noted(r, "a batch was being attached"));
  }
}

TEST_F(RepairTest, ADamagedValueDropsOnlyItsNodeAndKeepsTheOlderVersion) {
  model m = make_store(damaged_.str());
  std::vector<char> bytes = read_file(damaged_.str());
  const std::size_t node = node_with(bytes, key_of(30), newer_of(30));
  bytes[node + 3 * W + key_of(30).size() + 4] ^= 0x20;  // a byte of its value
  damage(bytes);
  RepairReport r;
  m.live[key_of(30)] = value_of(30);  // the older version is what is left
  EXPECT_EQ(repair(&r), m.live);
  EXPECT_FALSE(r.list_intact);
  EXPECT_NE(r.list_break.find("offset " + std::to_string(node)), std::string::npos)
      << r.list_break;
  EXPECT_EQ(r.list_covered_to, key_of(29));
  ASSERT_EQ(r.dropped.size(), 1u);
  EXPECT_EQ(r.dropped[0].offset, node);
  EXPECT_EQ(r.dropped[0].key, key_of(30));
  EXPECT_FALSE(r.dropped[0].key_verified);
  EXPECT_NE(r.dropped[0].reason.find("checksum"), std::string::npos);
  EXPECT_TRUE(doubtful(r, key_of(30)));
  EXPECT_GT(r.keys_from_scan, 0u);
  EXPECT_GT(r.chunks_scanned, 0u);
}

TEST_F(RepairTest, ADamagedVersionWordIsReportedWithItsKey) {
  model m = make_store(damaged_.str());
  std::vector<char> bytes = read_file(damaged_.str());
  const std::size_t node = node_with(bytes, key_of(42), newer_of(42));
  bytes[version_word_at(node) + 6] ^= 0x01;  // a check bit
  damage(bytes);
  RepairReport r;
  m.live[key_of(42)] = value_of(42);
  EXPECT_EQ(repair(&r), m.live);
  ASSERT_EQ(r.dropped.size(), 1u);
  EXPECT_EQ(r.dropped[0].offset, node);
  EXPECT_TRUE(r.dropped[0].key_verified) << "the checksum covers the key";
  EXPECT_EQ(r.dropped[0].key, key_of(42));
  EXPECT_TRUE(doubtful(r, key_of(42)));
}

TEST_F(RepairTest, ADamagedSuccessorOffsetLosesNothing) {
  const model m = make_store(damaged_.str());
  std::vector<char> bytes = read_file(damaged_.str());
  const std::size_t node = node_with(bytes, key_of(25), value_of(25));
  bytes[next_word(node) + 3] ^= 0x10;
  damage(bytes);
  RepairReport r;
  EXPECT_EQ(repair(&r), m.live) << "every node is intact: the scan finds the rest";
  EXPECT_FALSE(r.list_intact);
  EXPECT_NE(r.list_break.find("offset " + std::to_string(node)), std::string::npos);
  EXPECT_NE(r.list_break.find("successor"), std::string::npos) << r.list_break;
  EXPECT_EQ(r.list_covered_to, key_of(25));
  EXPECT_TRUE(r.dropped.empty());
  EXPECT_TRUE(r.doubtful.empty());
  EXPECT_GT(r.versions_from_scan, 0u);
}

// A successor offset that passes its own check but points elsewhere (here: back to the
// first node, a cycle): the walk stops at the order check.
TEST_F(RepairTest, ASuccessorThatMakesACycleLosesNothing) {
  const model m = make_store(damaged_.str());
  std::vector<char> bytes = read_file(damaged_.str());
  const std::size_t from = node_with(bytes, key_of(50), value_of(50));
  store(bytes, next_word(from),
        in::offset_word({node_with(bytes, key_of(0), newer_of(0))},
                        in::in_node({from}, in::word_field::next))
            .bits);
  damage(bytes);
  RepairReport r;
  EXPECT_EQ(repair(&r), m.live);
  EXPECT_NE(r.list_break.find("out of order"), std::string::npos) << r.list_break;
}

// Where the list is intact, it decides: a node it does not link is no version of the store,
// whatever its version word says. (A crash between a put's version write-back and its link
// write-back leaves such a node; here the list is edited to link around one.)
TEST_F(RepairTest, TheIntactPartOfTheListIsTheAuthority) {
  model m = make_store(damaged_.str());
  std::vector<char> bytes = read_file(damaged_.str());
  const std::size_t older = node_with(bytes, key_of(12), value_of(12));
  const std::size_t from = node_with(bytes, key_of(11), value_of(11));
  store(bytes, next_word(from),
        in::offset_word({older}, in::in_node({from}, in::word_field::next)).bits);
  write_file(damaged_.str(), bytes);
  CheckReport check;
  ASSERT_TRUE(DB::Check(damaged_.str(), &check).ok()) << "an unlinked node is free space";
  m.live[key_of(12)] = value_of(12);
  // Further on, the list breaks, and the heap is scanned.
  bytes[next_word(node_with(bytes, key_of(40), value_of(40))) + 2] ^= 0x01;
  damage(bytes);
  RepairReport r;
  EXPECT_EQ(repair(&r), m.live);
  EXPECT_FALSE(r.list_intact);
  EXPECT_TRUE(r.doubtful.empty());
}

TEST_F(RepairTest, DamagedRootWordsLoseNothing) {
  const model m = make_store(damaged_.str());
  const std::vector<char> good = read_file(damaged_.str());
  for (std::size_t word : {std::size_t{0}, W, 2 * W, 3 * W}) {  // format, head, commit, batch
    std::vector<char> bytes = good;
    bytes[kRoot + word + 1] ^= 0x08;
    damage(bytes);
    std::filesystem::remove(target_.str());
    RepairReport r;
    EXPECT_EQ(repair(&r), m.live) << "root word " << word / W;
    EXPECT_FALSE(r.root_intact);
    EXPECT_TRUE(noted(r, "offset " + std::to_string(kRoot + word))) << word / W;
    EXPECT_EQ(r.list_intact, word != W) << "only a damaged head needs the scan";
  }
  // The whole root page lost.
  std::vector<char> bytes = good;
  std::fill(bytes.begin() + kRoot, bytes.begin() + kRoot + 4096, 0);
  damage(bytes);
  std::filesystem::remove(target_.str());
  RepairReport r;
  EXPECT_EQ(repair(&r), m.live);
  EXPECT_EQ(r.keys_from_scan, m.live.size());
  EXPECT_EQ(r.list_covered_to, "");
}

TEST_F(RepairTest, ADamagedHeaderLosesNothing) {
  const model m = make_store(damaged_.str());
  std::vector<char> bytes = read_file(damaged_.str());
  bytes[30] ^= 0x01;  // the uuid: only the header checksum notices
  std::fill(bytes.begin(), bytes.begin() + 8, 0);  // and the magic
  write_file(damaged_.str(), bytes);
  RepairReport r;
  EXPECT_EQ(repair(&r), m.live);
  EXPECT_FALSE(r.header_intact);
  EXPECT_TRUE(r.list_intact);
  EXPECT_TRUE(noted(r, "header is damaged"));
}

// The chunk table: one 8-byte tag per 64 KiB chunk (kind in the low byte, block size above).
TEST_F(RepairTest, ADamagedChunkTagLosesNothing) {
  const model m = make_store(damaged_.str());
  const std::vector<char> good = read_file(damaged_.str());
  const auto heap = load<std::uint64_t>(good, 176);  // pool_header::heap_offset
  const std::size_t chunk = (node_at(good, 0) - heap) >> alloc::format::chunk_shift;
  const std::size_t tag_at = alloc::format::chunk_table_offset + chunk * 8;
  const auto tag = load<alloc::format::chunk_tag>(good, tag_at);
  ASSERT_EQ(tag.kind(), alloc::format::chunk_kind::small);
  using alloc::format::chunk_kind;
  const std::vector<alloc::format::chunk_tag> bad_tags = {
      alloc::format::chunk_tag::make(chunk_kind::small, tag.argument() / 2),
      alloc::format::chunk_tag::make(chunk_kind::small, tag.argument() * 2),
      alloc::format::chunk_tag::make(chunk_kind::small, 1000),  // no such class
      alloc::format::chunk_tag::make(chunk_kind::large_head, 1),
      alloc::format::chunk_tag{0}};
  for (const auto bad : bad_tags) {
    // Alone: the list is intact and decides; the tag is reported.
    std::vector<char> bytes = good;
    store(bytes, tag_at, bad);
    damage(bytes);
    std::filesystem::remove(target_.str());
    RepairReport r;
    EXPECT_EQ(repair(&r), m.live) << "tag " << bad.bits;
    EXPECT_TRUE(r.list_intact);
    EXPECT_TRUE(noted(r, "chunk " + std::to_string(chunk))) << "tag " << bad.bits;
    // With the head offset damaged too, the scan must find the chunk's nodes without it.
    bytes[kRoot + W + 2] ^= 0x04;
    damage(bytes);
    std::filesystem::remove(target_.str());
    RepairReport scanned;
    EXPECT_EQ(repair(&scanned), m.live) << "tag " << bad.bits;
    EXPECT_FALSE(scanned.list_intact);
    EXPECT_GE(scanned.chunks_scanned_fully, 1u) << "tag " << bad.bits;
  }
}

TEST_F(RepairTest, ATruncatedPoolGivesWhatIsLeftAndNothingWrong) {
  const model m = make_store(damaged_.str());
  std::vector<char> bytes = read_file(damaged_.str());
  const std::size_t cut = node_with(bytes, key_of(40), value_of(40));
  bytes.resize(cut & ~std::size_t{4095});
  write_file(damaged_.str(), bytes);
  RepairReport r;
  const auto got = repair(&r);
  EXPECT_TRUE(noted(r, "truncated"));
  EXPECT_FALSE(r.header_intact);
  EXPECT_FALSE(got.empty());
  for (const auto& [k, v] : got) {
    ASSERT_TRUE(m.written.count(k)) << k;
    EXPECT_TRUE(m.written.at(k).count(v)) << "key " << k << ": a value never written";
  }
}

// Random damage (a flipped bit, a changed byte, a word of garbage) anywhere in the used
// part of the pool: the repair succeeds, and every key it salvages has a value that was
// written for it; a key that lost its newest value is reported, unless the list broke.
TEST_F(RepairTest, RandomDamageNeverGivesAWrongValue) {
  const model m = make_store(damaged_.str());
  const std::vector<char> good = read_file(damaged_.str());
  const auto heap = load<std::uint64_t>(good, 176);
  std::size_t used = good.size();
  while (used > heap && good[used - 1] == 0) --used;
  std::mt19937_64 rng(20261123);
  for (int trial = 0; trial < 24; ++trial) {
    std::vector<char> bytes = good;
    const std::size_t at = (trial % 4 == 0) ? kRoot + rng() % (4 * W)
                                            : heap + rng() % (used - heap - 8);
    switch (trial % 3) {
      case 0: bytes[at] ^= static_cast<char>(1 << (rng() % 8)); break;
      case 1: bytes[at] = static_cast<char>(rng()); break;
      default: store(bytes, at, static_cast<std::uint64_t>(rng())); break;
    }
    write_file(damaged_.str(), bytes);
    std::filesystem::remove(target_.str());
    RepairReport r;
    const auto got = repair(&r);
    SCOPED_TRACE("trial " + std::to_string(trial) + ", offset " + std::to_string(at));
    for (const auto& [k, v] : got) {
      ASSERT_TRUE(m.written.count(k)) << "key never written: " << k;
      EXPECT_TRUE(m.written.at(k).count(v)) << "key " << k << ": a value never written";
      if (m.live.count(k) && v != m.live.at(k) && r.list_intact) {
        EXPECT_TRUE(doubtful(r, k)) << "key " << k << " lost its newest value silently";
      }
    }
    for (const auto& [k, v] : m.live) {
      if (!got.count(k) && r.list_intact) {
        EXPECT_TRUE(doubtful(r, k) || !r.dropped.empty()) << "key " << k << " lost silently";
      }
    }
  }
}

// ---- the packed tier -------------------------------------------------------------------------
//
// A store of format 4 whose packed tier holds records, written through the engine's test hook
// (TEST_tier_write) for keys the list had not written then, so that the tier holds of every
// key a value older than every version the list keeps (the engine's precedence). The list
// then writes over some of them. The repaired store must answer as the engine does: the list
// over the tier, and in the tier, the newest run's record.

using tier_records = std::vector<std::pair<std::string, std::optional<std::string>>>;

std::string tier_key(int i) {
  char k[16];
  std::snprintf(k, sizeof k, "tier-%03d", i);
  return k;
}
std::string tier_value(int i, const std::string& run) {
  return run + "-value-of-" + tier_key(i) + std::string(40 + i % 23, 'v');
}

// What a tiered store holds: the tier's answers (before the list), the list's writes (a
// value, or nullopt for a delete), and the store's contents (the list over the tier).
struct tiered_model {
  std::map<std::string, std::string> tier;
  std::map<std::string, std::optional<std::string>> list;
  std::map<std::string, std::string> large;  // the large run's records: the values only it gave
  std::map<std::string, std::string> live() const {
    std::map<std::string, std::string> out = tier;
    for (const auto& [k, v] : list) {
      if (v) {
        out[k] = *v;
      } else {
        out.erase(k);
      }
    }
    return out;
  }
};

// Tier keys 0..199 merged into the large run (several 4 KiB nodes); then two small runs:
// the older with newer values (0..4), erasures (5..7, and 300, which no run holds) and new
// keys (210..214); the newer with an erasure over the older's value (0), a value over the
// older's erasure (5) and a newer value (210). Then the list: keys 0..39 of key_of, a value
// over a large run's value (tier 10) and over a small run's (tier 211), deletes over a large
// run's value (tier 11) and over a small run's (tier 1). The file is as the store's close
// left it.
tiered_model make_tiered_store(const std::string& path) {
  tiered_model m;
  std::unique_ptr<DB> db;
  EXPECT_TRUE(DB::Open(creating(), path, &db).ok());
  auto* engine = engine_of<in::default_config>(db.get());
  auto tier_write = [&](const tier_records& records, bool merge) {
    EXPECT_TRUE(engine->TEST_tier_write(records, merge).ok());
    for (const auto& [k, v] : records) {
      if (v) {
        m.tier[k] = *v;
      } else {
        m.tier.erase(k);
      }
    }
  };
  tier_records large;
  for (int i = 0; i < 200; ++i) {
    large.emplace_back(tier_key(i), tier_value(i, "large"));
    m.large[tier_key(i)] = tier_value(i, "large");
  }
  tier_write(large, true);
  tier_records older;
  for (int i = 0; i < 5; ++i) older.emplace_back(tier_key(i), tier_value(i, "older"));
  for (int i = 5; i < 8; ++i) older.emplace_back(tier_key(i), std::nullopt);
  for (int i = 210; i < 215; ++i) older.emplace_back(tier_key(i), tier_value(i, "older"));
  older.emplace_back(tier_key(300), std::nullopt);
  tier_write(older, false);
  tier_write({{tier_key(0), std::nullopt},
              {tier_key(5), tier_value(5, "newer")},
              {tier_key(210), tier_value(210, "newer")}},
             false);
  auto put = [&](const std::string& k, const std::string& v) {
    EXPECT_TRUE(db->Put(k, v).ok());
    m.list[k] = v;
  };
  auto del = [&](const std::string& k) {
    EXPECT_TRUE(db->Delete(k).ok());
    m.list[k] = std::nullopt;
  };
  for (int i = 0; i < 40; ++i) put(key_of(i), value_of(i));
  put(tier_key(10), "list-value-over-the-large-run");
  put(tier_key(211), "list-value-over-a-small-run");
  del(tier_key(11));
  del(tier_key(1));
  db.reset();
  return m;
}

// Keys the tier answers in `m`: not written by the list, with a value in the tier.
std::size_t tier_answered(const tiered_model& m) {
  std::size_t n = 0;
  for (const auto& [k, v] : m.tier) n += m.list.count(k) == 0;
  return n;
}

TEST_F(RepairTest, KeysOnlyThePackedTierHoldsAreSalvaged) {
  const tiered_model m = make_tiered_store(damaged_.str());
  ASSERT_EQ(contents(damaged_.str()), m.live()) << "the model is the engine's own answer";
  RepairReport r;
  EXPECT_EQ(repair(&r), m.live());
  EXPECT_TRUE(r.root_intact && r.list_intact);
  EXPECT_TRUE(r.notes.empty()) << r.notes.front();
  EXPECT_EQ(r.keys_salvaged, m.live().size());
  EXPECT_EQ(r.keys_from_tier, tier_answered(m));
  EXPECT_EQ(r.keys_from_scan, 0u);
  // The large run's 200 records, the older small run's 14, the newer's 3.
  EXPECT_EQ(r.tier_records, 200u + 14u + 3u);
  // Deletes: the list's two; the tier's erasures that answer (0, 6, 7, 300; 5 has a newer
  // value and 1 a list delete).
  EXPECT_EQ(r.keys_deleted, 2u + 4u);
}

// The list broken at a key the tier also holds: the key's only list version is lost, and
// the tier's older value is kept (doubtful); the keys past the break come from the scan,
// and still answer over the tier (a value, and a delete, over the tier's values).
TEST_F(RepairTest, ABrokenListStillAnswersOverThePackedTier) {
  const tiered_model m = make_tiered_store(damaged_.str());
  std::vector<char> bytes = read_file(damaged_.str());
  const std::size_t node = node_with(bytes, tier_key(10), "list-value-over-the-large-run");
  bytes[node + 5 * W + tier_key(10).size() + 3] ^= 0x20;  // a byte of its value
  damage(bytes);
  std::map<std::string, std::string> expected = m.live();
  expected[tier_key(10)] = m.tier.at(tier_key(10));
  RepairReport r;
  EXPECT_EQ(repair(&r), expected);
  EXPECT_FALSE(r.list_intact);
  EXPECT_TRUE(dropped_at(r, node));
  EXPECT_TRUE(doubtful(r, tier_key(10)));
  EXPECT_GT(r.keys_from_scan, 0u) << "tier 211 comes from the scan";
  EXPECT_EQ(r.keys_from_tier, tier_answered(m) + 1);
}

// A byte of a value in the large run's middle node: that run's keys from the damaged record
// on are lost (but those a small run or the list answers), with a note; nothing else is.
TEST_F(RepairTest, ADamagedTierNodeLosesOnlyItsRunFromTheDamageOn) {
  const tiered_model m = make_tiered_store(damaged_.str());
  std::vector<char> bytes = read_file(damaged_.str());
  const int hit = 100;
  // Every copy of the value: the small run that the merge emptied left one in a free block.
  const std::string value = tier_value(hit, "large");
  int copies = 0;
  for (auto at = bytes.begin();
       (at = std::search(at, bytes.end(), value.begin(), value.end())) != bytes.end();
       at += static_cast<std::ptrdiff_t>(value.size())) {
    at[value.size() / 2] ^= 0x04;
    ++copies;
  }
  ASSERT_GT(copies, 0);
  damage(bytes);
  std::map<std::string, std::string> expected = m.live();
  for (const auto& [k, v] : m.large) {
    const bool only_the_large_run = m.list.count(k) == 0 && m.tier.count(k) != 0 &&
                                    m.tier.at(k) == v;
    if (k >= tier_key(hit) && only_the_large_run) expected.erase(k);
  }
  ASSERT_LT(expected.size(), m.live().size());
  RepairReport r;
  EXPECT_EQ(repair(&r), expected);
  EXPECT_TRUE(r.list_intact);
  EXPECT_TRUE(noted(r, "large run")) << (r.notes.empty() ? "" : r.notes.front());
  EXPECT_TRUE(noted(r, "after key '" + tier_key(hit - 1) + "'"))
      << (r.notes.empty() ? "" : r.notes.front());
  EXPECT_EQ(r.notes.size(), 1u);
}

// A damaged tier word: a note, and the list salvaged whole; the keys only the tier held are
// lost. A store of format 3 has no tier: no note.
TEST_F(RepairTest, ADamagedTierWordLosesOnlyTheTier) {
  const tiered_model m = make_tiered_store(damaged_.str());
  std::vector<char> bytes = read_file(damaged_.str());
  bytes[kRoot + 6 * W + 2] ^= 0x01;
  damage(bytes);
  std::map<std::string, std::string> list_only;
  for (const auto& [k, v] : m.list) {
    if (v) list_only[k] = *v;
  }
  RepairReport r;
  EXPECT_EQ(repair(&r), list_only);
  EXPECT_FALSE(r.root_intact);
  EXPECT_TRUE(r.list_intact);
  EXPECT_TRUE(noted(r, "offset " + std::to_string(kRoot + 6 * W)));
  EXPECT_EQ(r.tier_records, 0u);

  temp_pool_path v3("repair-format-3");
  fill(v3.str(), 20);
  std::vector<char> old = read_file(v3.str());
  store(old, kRoot, in::kFormatV3);
  store(old, kRoot + 6 * W, std::uint64_t{0});
  write_file(damaged_.str(), old);
  std::filesystem::remove(target_.str());
  RepairReport r3;
  EXPECT_EQ(repair(&r3).size(), 20u);
  EXPECT_TRUE(r3.root_intact);
  EXPECT_TRUE(r3.notes.empty()) << r3.notes.front();
}

// ---- refusals -------------------------------------------------------------------------------

TEST_F(RepairTest, AnExistingTargetIsRefused) {
  make_store(damaged_.str());
  write_file(target_.str(), {'x'});
  const std::vector<char> before = read_file(damaged_.str());
  RepairReport r;
  Status s = DB::Repair(damaged_.str(), target_.str(), Options{}, &r);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find(target_.str()), std::string::npos);
  EXPECT_EQ(read_file(target_.str()), std::vector<char>{'x'});
  s = DB::Repair(damaged_.str(), damaged_.str(), Options{}, &r);
  EXPECT_TRUE(s.IsInvalidArgument()) << "the damaged pool is never its own target";
  EXPECT_EQ(read_file(damaged_.str()), before);
}

TEST_F(RepairTest, ATargetInAMissingOrUnwritableDirectoryIsAClearError) {
  make_store(damaged_.str());
  const std::string missing = "/dev/shm/flintkv-no-such-dir-" + std::to_string(::getpid()) +
                              "/new.pool";
  RepairReport r;
  Status s = DB::Repair(damaged_.str(), missing, Options{}, &r);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find(missing), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("does not exist"), std::string::npos) << s.ToString();
  // /proc takes no new files, not even from root.
  s = DB::Repair(damaged_.str(), "/proc/flintkv-new.pool", Options{}, &r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/proc/flintkv-new.pool"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists("/proc/flintkv-new.pool"));
}

TEST_F(RepairTest, ATargetInADirectoryWithoutWritePermissionIsAClearError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root may write into any directory";
  make_store(damaged_.str());
  const std::string dir = "/dev/shm/flintkv-read-only-" + std::to_string(::getpid());
  std::filesystem::create_directory(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_read |
                                        std::filesystem::perms::owner_exec);
  RepairReport r;
  Status s = DB::Repair(damaged_.str(), dir + "/new.pool", Options{}, &r);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("not writable"), std::string::npos) << s.ToString();
  std::filesystem::remove_all(dir);
}

TEST_F(RepairTest, WhatIsNotAPoolIsRefused) {
  RepairReport r;
  EXPECT_TRUE(DB::Repair(damaged_.str(), target_.str(), Options{}, &r).IsNotFound());
  EXPECT_TRUE(DB::Repair("", target_.str(), Options{}, &r).IsInvalidArgument());
  write_file(damaged_.str(), {});
  EXPECT_TRUE(DB::Repair(damaged_.str(), target_.str(), Options{}, &r).IsInvalidArgument());
  std::vector<char> noise(kMinPoolSize);
  std::mt19937_64 rng(3);
  for (char& c : noise) c = static_cast<char>(rng());
  write_file(damaged_.str(), noise);
  Status s = DB::Repair(damaged_.str(), target_.str(), Options{}, &r);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  noise.resize(5000);
  write_file(damaged_.str(), noise);
  EXPECT_TRUE(DB::Repair(damaged_.str(), target_.str(), Options{}, &r).IsCorruption());
  EXPECT_FALSE(std::filesystem::exists(target_.str())) << "no new pool from a refusal";
}

TEST_F(RepairTest, AnOpenPoolIsBusy) {
  make_store(damaged_.str());
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options{}, damaged_.str(), &db).ok());
  RepairReport r;
  EXPECT_TRUE(DB::Repair(damaged_.str(), target_.str(), Options{}, &r).IsBusy());
  db.reset();
  EXPECT_TRUE(DB::Repair(damaged_.str(), target_.str(), Options{}, &r).ok());
}

TEST_F(RepairTest, SalvageThatDoesNotFitIsNoSpaceAndLeavesNoPool) {
  {
    Options big = creating();
    big.pool_size = 32u << 20;
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(big, damaged_.str(), &db).ok());
    for (int i = 0; i < 120; ++i) {
      ASSERT_TRUE(db->Put(key_of(i), std::string(100000, static_cast<char>('a' + i % 26))).ok());
    }
  }
  Options small;
  small.pool_size = kMinPoolSize;
  RepairReport r;
  Status s = DB::Repair(damaged_.str(), target_.str(), small, &r);
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_NE(s.message().find(target_.str()), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(target_.str()));
  small.pool_size = 1000;
  EXPECT_TRUE(DB::Repair(damaged_.str(), target_.str(), small, &r).IsInvalidArgument());
}

}  // namespace
