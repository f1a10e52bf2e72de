// Bad input gets a clear error and loses nothing: limits, files that are not our pools,
// damaged pools, a pool open twice, a full pool.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine_support.hpp"
#include "support/files.hpp"

namespace {

using namespace flintkv_test;

using test_support::read_file;
using test_support::write_file;

Options creating(std::size_t size = 16 << 20) {
  Options o;
  o.create_if_missing = true;
  o.pool_size = size;
  return o;
}

// Opening `path` fails with a message naming it, and leaves the file as it was.
void expect_refused(const std::string& path, const char* what) {
  std::vector<char> before = read_file(path);
  std::unique_ptr<DB> db;
  Status s = DB::Open(Options{}, path, &db);
  EXPECT_FALSE(s.ok()) << what;
  EXPECT_EQ(db, nullptr);
  EXPECT_NE(s.message().find(path), std::string::npos) << what << ": " << s.ToString();
  EXPECT_TRUE(s.IsCorruption() || s.IsInvalidArgument()) << what << ": " << s.ToString();
  CheckReport report;
  EXPECT_FALSE(DB::Check(path, &report).ok()) << what;
  EXPECT_EQ(read_file(path), before) << what << ": the file must be left untouched";
}

TEST(BadInputTest, KeyAndValueLimits) {
  temp_pool_path path("limits");
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(creating(), path.str(), &db).ok());
  EXPECT_TRUE(db->Put("", "v").IsInvalidArgument());
  EXPECT_TRUE(db->Delete("").IsInvalidArgument());
  std::string big_key(kMaxKeySize + 1, 'k');
  Status s = db->Put(big_key, "v");
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find(std::to_string(kMaxKeySize)), std::string::npos) << s.ToString();
  EXPECT_TRUE(db->Put(std::string(kMaxKeySize, 'k'), "v").ok()) << "the limit itself is fine";
  EXPECT_TRUE(db->Put("k", std::string(kMaxValueSize + 1, 'v')).IsInvalidArgument());
  EXPECT_TRUE(db->Put("empty-value", "").ok());
  std::string v = "x";
  EXPECT_TRUE(db->Get("empty-value", &v).ok());
  EXPECT_EQ(v, "");
  EXPECT_TRUE(db->Get("", &v).IsInvalidArgument());
  // A batch with one bad entry applies nothing.
  WriteBatch batch;
  batch.Put("good", "1");
  batch.Put("", "2");
  EXPECT_TRUE(db->Write(batch).IsInvalidArgument());
  EXPECT_TRUE(db->Get("good", &v).IsNotFound());
  EXPECT_EQ(db->GetStats().live_keys, 2u);
}

TEST(BadInputTest, OpenOptionsAndPaths) {
  temp_pool_path path("options");
  std::unique_ptr<DB> db;
  Status s = DB::Open(Options{}, path.str(), &db);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find(path.str()), std::string::npos);
  Options tiny = creating(kMinPoolSize - 1);
  EXPECT_TRUE(DB::Open(tiny, path.str(), &db).IsInvalidArgument());
  ASSERT_TRUE(DB::Open(creating(), path.str(), &db).ok());
  ASSERT_TRUE(db->Put("k", "v").ok());
  db.reset();
  Options exclusive = creating();
  exclusive.error_if_exists = true;
  EXPECT_TRUE(DB::Open(exclusive, path.str(), &db).IsInvalidArgument());
  std::string missing_dir = "/dev/shm/flintkv-no-such-dir/sub/x.pool";
  s = DB::Open(creating(), missing_dir, &db);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("flintkv-no-such-dir"), std::string::npos) << s.ToString();
  EXPECT_TRUE(DB::Open(creating(), "", &db).IsInvalidArgument());
  EXPECT_TRUE(DB::Open(creating(), path.str(), nullptr).IsInvalidArgument());
}

// Part of defect 9 of issue 10: a pool size near SIZE_MAX wrapped ("0 bytes is below the
// minimum"), and over-long names were reported as missing pools or existing files.
TEST(BadInputTest, HugeSizesAndLongNamesAreRefusedNamingTheLimit) {
  temp_pool_path path("huge");
  std::unique_ptr<DB> db;
  Status s = DB::Open(creating(SIZE_MAX), path.str(), &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find(std::to_string(SIZE_MAX)), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("maximum"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(path.str()));

  const std::string over = "/dev/shm/" + std::string(NAME_MAX + 1, 'n');
  for (const Options& o : {Options{}, creating()}) {
    s = DB::Open(o, over, &db);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find("NAME_MAX"), std::string::npos) << s.ToString();
  }
  CheckReport report;
  s = DB::Check(over, &report);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  // Fits NAME_MAX, but not with the suffix of the temporary file a pool is built under.
  const std::string tight = "/dev/shm/" + std::string(NAME_MAX - 4, 'n');
  s = DB::Open(creating(), tight, &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("NAME_MAX"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(tight));
}

TEST(BadInputTest, APoolOpenTwiceIsBusy) {
  temp_pool_path path("busy");
  std::unique_ptr<DB> first, second;
  ASSERT_TRUE(DB::Open(creating(), path.str(), &first).ok());
  Status s = DB::Open(creating(), path.str(), &second);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_NE(s.message().find(path.str()), std::string::npos);
  first.reset();
  EXPECT_TRUE(DB::Open(creating(), path.str(), &second).ok()) << "free again once closed";
}

TEST(BadInputTest, FilesThatAreNotPoolsAreRefusedUntouched) {
  temp_pool_path path("garbage");
  write_file(path.str(), {});
  expect_refused(path.str(), "zero-length file");
  std::mt19937 rng(5);
  std::vector<char> noise(1 << 20);
  for (char& c : noise) c = static_cast<char>(rng());
  write_file(path.str(), noise);
  expect_refused(path.str(), "random bytes");
}

TEST(BadInputTest, DamagedPoolsAreRefusedUntouched) {
  temp_pool_path path("damaged");
  {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(creating(), path.str(), &db).ok());
    ASSERT_TRUE(db->Put("k", "v").ok());
  }
  const std::vector<char> good = read_file(path.str());
  std::vector<char> flipped = good;
  flipped[40] = static_cast<char>(flipped[40] ^ 0x10);
  write_file(path.str(), flipped);
  expect_refused(path.str(), "flipped header byte");
  std::vector<char> truncated(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2));
  write_file(path.str(), truncated);
  expect_refused(path.str(), "truncated pool");
  write_file(path.str(), good);
  std::unique_ptr<DB> db;
  EXPECT_TRUE(DB::Open(Options{}, path.str(), &db).ok()) << "the good bytes still open";
}

TEST(BadInputTest, PoolOfAnotherLayoutOrBuildIsRefused) {
  temp_pool_path foreign("foreign");
  {
    using P = flit::policy<hashed, flit::detected>;
    auto p = alloc::pool::create<P>(foreign.str(), 16 << 20, {"not-flintkv", "x"});
    ASSERT_TRUE(p) << p.error().to_string();
  }
  std::vector<char> before = read_file(foreign.str());
  std::unique_ptr<DB> db;
  Status s = DB::Open(Options{}, foreign.str(), &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("not-flintkv"), std::string::npos) << s.ToString();
  EXPECT_EQ(read_file(foreign.str()), before);

  // The same engine built with adjacent counters lays nodes out differently.
  temp_pool_path other("other-build");
  {
    using adjacent_build = on_hardware<flit::adjacent, manual>;
    ASSERT_TRUE(internal::open_file<adjacent_build>(creating(), other.str(), &db).ok());
    ASSERT_TRUE(db->Put("k", "v").ok());
    db.reset();
  }
  using hashed_build = on_hardware<hashed, manual>;
  s = internal::open_file<hashed_build>(Options{}, other.str(), &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

TEST(BadInputTest, CorruptedListIsReportedByCheckAndOpen) {
  temp_pool_path path("bad-list");
  {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(creating(), path.str(), &db).ok());
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(db->Put("key" + std::to_string(i), "value").ok());
  }
  CheckReport report;
  ASSERT_TRUE(DB::Check(path.str(), &report).ok());
  EXPECT_EQ(report.keys, 100u);
  EXPECT_EQ(report.versions, 100u);
  EXPECT_EQ(report.uncommitted, 0u);
  // Damage a node: find a stored key in the file and overwrite the size word before it.
  std::vector<char> bytes = read_file(path.str());
  std::string needle = "key42value";
  auto at = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  ASSERT_NE(at, bytes.end());
  std::size_t sizes_word = static_cast<std::size_t>(at - bytes.begin()) - 8;
  for (int i = 0; i < 8; ++i) bytes[sizes_word + static_cast<std::size_t>(i)] = '\x7f';
  write_file(path.str(), bytes);
  Status s = DB::Check(path.str(), &report);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("offset"), std::string::npos) << s.ToString();
  EXPECT_EQ(read_file(path.str()), bytes) << "check changes nothing";
  std::unique_ptr<DB> db;
  EXPECT_TRUE(DB::Open(Options{}, path.str(), &db).IsCorruption());
  EXPECT_EQ(read_file(path.str()), bytes) << "a refused open changes nothing";
}

TEST(BadInputTest, FullPoolGivesNoSpaceAndStaysReadable) {
  temp_pool_path path("full");
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(creating(kMinPoolSize), path.str(), &db).ok());
  std::string value(4000, 'v');
  int stored = 0;
  Status s;
  while ((s = db->Put("key" + std::to_string(stored), value)).ok()) ++stored;
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_GT(stored, 100);
  WriteBatch batch;
  for (int i = 0; i < 10; ++i) batch.Put("batch" + std::to_string(i), value);
  EXPECT_TRUE(db->Write(batch).IsNoSpace());
  std::string v;
  EXPECT_TRUE(db->Get("batch0", &v).IsNotFound()) << "a refused batch applies nothing";
  for (int i = 0; i < stored; ++i) {
    ASSERT_TRUE(db->Get("key" + std::to_string(i), &v).ok()) << i;
    ASSERT_EQ(v, value);
  }
  EXPECT_TRUE(db->Put("small", "x").ok() || db->Put("small", "x").IsNoSpace());
  db.reset();
  ASSERT_TRUE(DB::Open(Options{}, path.str(), &db).ok()) << "a full pool reopens";
  int found = 0;
  auto it = db->NewIterator();
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++found;
  EXPECT_GE(found, stored);
  it.reset();
  db.reset();
  CheckReport report;
  EXPECT_TRUE(DB::Check(path.str(), &report).ok());
  EXPECT_GE(report.live_keys, static_cast<std::uint64_t>(stored));
}

}  // namespace
