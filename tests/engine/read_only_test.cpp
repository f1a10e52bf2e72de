// Options::read_only: a read-only DB reads everything, refuses writes, and leaves the file as
// it was (recovery included: it repairs nothing and initialises nothing); read-only opens
// coexist, and exclude a writer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine_support.hpp"
#include "support/files.hpp"

namespace {

using namespace flintkv_test;

using test_support::read_file;
using test_support::write_file;

using P = internal::default_config::policy;

Options creating() {
  Options o;
  o.create_if_missing = true;
  o.pool_size = 16 << 20;
  return o;
}

Options read_only() {
  Options o;
  o.read_only = true;
  return o;
}

std::map<std::string, std::string> scan(DB& db, const ReadOptions& options = {}) {
  std::map<std::string, std::string> out;
  auto it = db.NewIterator(options);
  for (it->SeekToFirst(); it->Valid(); it->Next()) out[std::string(it->key())] = it->value();
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return out;
}

class ReadOnlyTest : public ::testing::Test {
 protected:
  // A store with puts, overwrites, deletes and a batch; `expected` is what it holds.
  void fill() {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(creating(), path_.str(), &db).ok());
    for (int i = 0; i < 50; ++i) {
      const std::string k = "key" + std::to_string(i);
      ASSERT_TRUE(db->Put(k, "v" + std::to_string(i)).ok());
      expected_[k] = "v" + std::to_string(i);
    }
    ASSERT_TRUE(db->Put("key7", "newer").ok());
    expected_["key7"] = "newer";
    ASSERT_TRUE(db->Delete("key8").ok());
    expected_.erase("key8");
    WriteBatch batch;
    batch.Put("batch-a", "1");
    batch.Put("batch-b", "2");
    batch.Delete("key9");
    ASSERT_TRUE(db->Write(batch).ok());
    expected_["batch-a"] = "1";
    expected_["batch-b"] = "2";
    expected_.erase("key9");
  }

  temp_pool_path path_{"read-only"};
  std::map<std::string, std::string> expected_;
};

TEST_F(ReadOnlyTest, ReadsEverythingAndRefusesWrites) {
  fill();
  const std::vector<char> before = read_file(path_.str());
  {
    std::unique_ptr<DB> db;
    Status s = DB::Open(read_only(), path_.str(), &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(scan(*db), expected_);
    std::string v;
    for (const auto& [k, value] : expected_) {
      ASSERT_TRUE(db->Get(k, &v).ok()) << k;
      EXPECT_EQ(v, value);
    }
    EXPECT_TRUE(db->Get("key8", &v).IsNotFound());
    const Snapshot* snap = db->GetSnapshot();
    ASSERT_NE(snap, nullptr);
    ReadOptions at;
    at.snapshot = snap;
    EXPECT_EQ(scan(*db, at), expected_);
    db->ReleaseSnapshot(snap);
    EXPECT_EQ(db->GetStats().live_keys, expected_.size());

    WriteBatch batch;
    batch.Put("x", "y");
    for (Status w : {db->Put("new", "v"), db->Delete("key1"), db->Write(batch)}) {
      EXPECT_TRUE(w.IsInvalidArgument()) << w.ToString();
      EXPECT_NE(w.message().find(path_.str()), std::string::npos) << w.ToString();
      EXPECT_NE(w.message().find("read-only"), std::string::npos) << w.ToString();
    }
    EXPECT_EQ(scan(*db), expected_) << "a refused write changed the store";
  }
  EXPECT_EQ(read_file(path_.str()), before) << "a read-only open changed the file";
}

// A write that did not complete (a node linked with the uncommitted version, as a crash
// leaves it) is skipped by a read-only open, not linked around: the file stays as it is. A
// read-write open would repair it, which is why the test can fail.
TEST_F(ReadOnlyTest, RecoveryRepairsNothing) {
  fill();
  {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(Options{}, path_.str(), &db).ok());
    ASSERT_TRUE(db->Put("interrupted", "write").ok());
  }
  std::vector<char> bytes = read_file(path_.str());
  const std::string needle = "interruptedwrite";
  auto at = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  ASSERT_NE(at, bytes.end());
  const std::size_t node = static_cast<std::size_t>(at - bytes.begin()) -
                           internal::pnode<P>::header_size();
  const internal::word63 uncommitted =
      internal::uncommitted_word(internal::in_node({node}, internal::word_field::version));
  std::memcpy(bytes.data() + node + offsetof(internal::pnode<P>, version), &uncommitted,
              sizeof uncommitted);
  write_file(path_.str(), bytes);

  CheckReport report;
  ASSERT_TRUE(DB::Check(path_.str(), &report).ok());
  EXPECT_EQ(report.uncommitted, 1u);
  {
    std::unique_ptr<DB> db;
    Status s = DB::Open(read_only(), path_.str(), &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(scan(*db), expected_);
    std::string v;
    EXPECT_TRUE(db->Get("interrupted", &v).IsNotFound());
  }
  EXPECT_EQ(read_file(path_.str()), bytes) << "a read-only recovery wrote";
  {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(Options{}, path_.str(), &db).ok());
    EXPECT_EQ(scan(*db), expected_);
  }
  EXPECT_NE(read_file(path_.str()), bytes) << "a read-write open repairs the list";
  ASSERT_TRUE(DB::Check(path_.str(), &report).ok());
  EXPECT_EQ(report.uncommitted, 0u);
}

// A pool created but never initialised by the engine is an empty store to a read-only open,
// which does not initialise it.
TEST_F(ReadOnlyTest, NeverInitialisedStoreIsEmptyAndStaysSo) {
  {
    auto p = alloc::pool::create<P>(path_.str(), 16 << 20, internal::engine_layout<P>());
    ASSERT_TRUE(p.has_value()) << p.error().to_string();
  }
  const std::vector<char> before = read_file(path_.str());
  {
    std::unique_ptr<DB> db;
    Status s = DB::Open(read_only(), path_.str(), &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(scan(*db).empty());
    auto it = db->NewIterator();
    it->SeekToLast();
    EXPECT_FALSE(it->Valid());
    std::string v;
    EXPECT_TRUE(db->Get("k", &v).IsNotFound());
    EXPECT_EQ(db->GetStats().visible_version, 0u);
  }
  EXPECT_EQ(read_file(path_.str()), before);
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options{}, path_.str(), &db).ok());
  ASSERT_TRUE(db->Put("k", "v").ok()) << "a read-write open initialises it";
}

TEST_F(ReadOnlyTest, ReadOnlyOpensCoexistAndExcludeAWriter) {
  fill();
  CheckReport report;
  {
    std::unique_ptr<DB> first, second, writer;
    ASSERT_TRUE(DB::Open(read_only(), path_.str(), &first).ok());
    Status s = DB::Open(read_only(), path_.str(), &second);
    ASSERT_TRUE(s.ok()) << "read-only opens coexist: " << s.ToString();
    EXPECT_TRUE(DB::Check(path_.str(), &report).ok()) << "and so does Check";
    s = DB::Open(Options{}, path_.str(), &writer);
    EXPECT_TRUE(s.IsBusy()) << s.ToString();
    EXPECT_NE(s.message().find(path_.str()), std::string::npos) << s.ToString();
    EXPECT_EQ(writer, nullptr);
    EXPECT_EQ(scan(*second), expected_);
  }
  std::unique_ptr<DB> writer, reader;
  ASSERT_TRUE(DB::Open(Options{}, path_.str(), &writer).ok());
  Status s = DB::Open(read_only(), path_.str(), &reader);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_NE(s.message().find(path_.str()), std::string::npos) << s.ToString();
  s = DB::Check(path_.str(), &report);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
}

TEST_F(ReadOnlyTest, NeverCreatesAPool) {
  Options o = read_only();
  o.create_if_missing = true;
  std::unique_ptr<DB> db;
  Status s = DB::Open(o, path_.str(), &db);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find(path_.str()), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(path_.str()));
}

// Every configuration's recovery runs on a read-only mapping: placements that keep metadata
// in the pool (adjacent counters, link_and_persist flags) do not reset it, and automatic
// mode's loads (which write back what they read) only read.
template <class Config>
class ReadOnlyConfigTest : public ::testing::Test {};
using read_only_configs = ::testing::Types<
    on_hardware<hashed, manual>, on_hardware<flit::adjacent, manual>,
    on_hardware<flit::link_and_persist, manual>, on_hardware<flit::adjacent, automatic>,
    on_hardware<flit::plain, automatic>>;
TYPED_TEST_SUITE(ReadOnlyConfigTest, read_only_configs);

TYPED_TEST(ReadOnlyConfigTest, RecoversAndReadsWithoutWriting) {
  temp_pool_path path("read-only-config");
  std::map<std::string, std::string> expected;
  {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(internal::open_file<TypeParam>(creating(), path.str(), &db).ok());
    for (int i = 0; i < 20; ++i) {
      expected["k" + std::to_string(i)] = std::to_string(i);
      ASSERT_TRUE(db->Put("k" + std::to_string(i), std::to_string(i)).ok());
    }
  }
  const std::vector<char> before = read_file(path.str());
  {
    std::unique_ptr<DB> db;
    Status s = internal::open_file<TypeParam>(read_only(), path.str(), &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(scan(*db), expected);
    EXPECT_TRUE(db->Put("k", "v").IsInvalidArgument());
  }
  EXPECT_EQ(read_file(path.str()), before);
}

}  // namespace
