// Damage is detected, never returned: the checksums and self-checking words of the engine's
// layout, and what recovery, DB::Check and reads do with a damaged pool. Each test edits a
// pool file the way a defect or a bad medium would, then checks that Open and Check report
// Corruption naming the place, agree, and leave the file as it was.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine_support.hpp"
#include "support/files.hpp"

namespace {

using namespace flintkv_test;
using namespace flintkv_test::pool_edit;
using test_support::read_file;
using test_support::write_file;
namespace in = flintkv::internal;


// ---- the checksum itself ----------------------------------------------------------------

TEST(ChecksumTest, Crc32cIsTheStandardOneInBothForms) {
  const std::string check = "123456789";
  EXPECT_EQ(~in::crc32c(~0u, check.data(), check.size()), 0xE3069283u);  // CRC-32C check value
  // The table (compile time) and the instruction (run time) agree.
  constexpr std::uint64_t w = 0x0123456789abcdefULL;
  constexpr std::uint32_t at_compile_time = in::crc32c_word(0x12345678u, w);
  EXPECT_EQ(at_compile_time, in::crc32c(0x12345678u, &w, sizeof w));
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t w = rng();
    const auto seed = static_cast<std::uint32_t>(rng());
    ASSERT_EQ(in::crc32c_word(seed, w), in::crc32c(seed, &w, sizeof w));
  }
  // Every length up to 40 bytes, from every offset within a word (the words, and each shape
  // of tail after them), against the register stepped a bit at a time.
  std::vector<unsigned char> bytes(48);
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(rng());
  for (std::size_t at = 0; at < 8; ++at) {
    for (std::size_t n = 0; n + at <= 40; ++n) {
      std::uint32_t want = 0x9abcdef0u;
      for (std::size_t i = at; i < at + n; ++i) {
        want ^= bytes[i];
        for (int k = 0; k < 8; ++k) want = (want >> 1) ^ ((want & 1) ? in::kCrc32cPolynomial : 0);
      }
      ASSERT_EQ(in::crc32c(0x9abcdef0u, bytes.data() + at, n), want) << at << " " << n;
      ASSERT_EQ(in::detail::crc32c_table(0x9abcdef0u, bytes.data() + at, n), want);
    }
  }
  // The seeded form is the two words and then the bytes, with either implementation.
  for (int i = 0; i < 200; ++i) {
    const std::uint64_t w0 = rng(), w1 = rng();
    const auto seed = static_cast<std::uint32_t>(rng());
    const std::size_t n = rng() % 41, at = rng() % 8;
    const std::uint32_t want =
        in::crc32c(in::crc32c_word(in::crc32c_word(seed, w0), w1), bytes.data() + at, n);
    ASSERT_EQ(in::crc32c_seeded(seed, w0, w1, bytes.data() + at, n), want) << at << " " << n;
    if (std::string_view(in::crc32c_implementation()) == "sse4.2") {
      ASSERT_EQ(in::detail::crc32c_seeded_sse42(seed, w0, w1, bytes.data() + at, n), want);
    }
  }
}

// The node checksum is 27 bits of a CRC-32C. A single flipped bit at distance d from the end
// of the message changes the CRC register by the polynomial stepped d times from x^31; the
// check catches the flip unless the low 27 bits of that are zero. Every distance up to the
// longest node (size word, the largest key and value) is tried.
TEST(ChecksumTest, EverySingleBitErrorChangesTheNodeChecksum) {
  // The checksum covers the sizes (8 bytes), the key, the value and the version (8 bytes).
  const std::uint64_t bits = (8 + kMaxKeySize + kMaxValueSize + 8) * 8;
  std::uint32_t diff = in::kCrc32cPolynomial;
  for (std::uint64_t d = 0; d < bits; ++d) {
    ASSERT_NE(diff & in::kNodeCheckMask, 0u) << "a flip " << d << " bits from the end";
    diff = (diff >> 1) ^ ((diff & 1) ? in::kCrc32cPolynomial : 0);
  }
  // And through the real function, on a small node: every bit of its sizes, key, value and
  // version.
  std::string key = "key", value = "value of a node";
  const in::node_offset at{4096 * 3};
  const std::uint64_t sizes = in::pack_sizes(key.size(), value.size(), 0);
  const std::uint64_t version = 12345;
  const std::uint64_t good = in::node_checksum(at, sizes, key, value, version);
  for (int b = 0; b < 36; ++b) {
    EXPECT_NE(in::node_checksum(at, sizes ^ (std::uint64_t{1} << b), key, value, version), good)
        << b;
  }
  for (int b = 0; b < 48; ++b) {
    EXPECT_NE(in::node_checksum(at, sizes, key, value, version ^ (std::uint64_t{1} << b)), good)
        << "version bit " << b;
  }
  EXPECT_NE(in::node_checksum({at.value + 64}, sizes, key, value, version), good)
      << "the same node in another place";
  for (std::string* s : {&key, &value}) {
    for (std::size_t i = 0; i < s->size() * 8; ++i) {
      (*s)[i / 8] = static_cast<char>((*s)[i / 8] ^ (1 << (i % 8)));
      EXPECT_NE(in::node_checksum(at, sizes, key, value, version), good) << i;
      (*s)[i / 8] = static_cast<char>((*s)[i / 8] ^ (1 << (i % 8)));
    }
  }
}

TEST(ChecksumTest, SelfCheckingWordsRefuseEverySingleBitFlipAndTheWrongPlace) {
  const in::word_place here = in::in_node({8192 + 640}, in::word_field::version);
  const in::word_place there = in::in_node({8192 + 704}, in::word_field::version);
  for (std::uint64_t v : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{123456789},
                          in::kMaxVersion}) {
    const in::word63 w = in::version_word(v, here);
    ASSERT_EQ(in::read_version_word(w, here).kind, in::version_kind::committed);
    ASSERT_EQ(in::read_version_word(w, here).version, v);
    for (int b = 0; b < 63; ++b) {
      EXPECT_EQ(in::read_version_word({w.bits ^ (std::uint64_t{1} << b)}, here).kind,
                in::version_kind::damaged)
          << "version " << v << ", bit " << b;
    }
  }
  const in::word_place next = in::in_node({8192 + 640}, in::word_field::next);
  for (std::uint64_t off : {std::uint64_t{0}, std::uint64_t{16}, std::uint64_t{1} << 40}) {
    const in::stored_offset w = in::offset_word({off}, next);
    ASSERT_EQ(in::read_offset_word(w, next)->value, off);
    for (int b = 0; b < 63; ++b) {
      EXPECT_FALSE(in::read_offset_word({w.bits ^ (std::uint64_t{1} << b)}, next).has_value())
          << "offset " << off << ", bit " << b;
    }
  }
  EXPECT_FALSE(in::read_offset_word({0}, next).has_value()) << "a zeroed word is damage";
  EXPECT_EQ(in::read_version_word({~std::uint64_t{0} >> 1}, here).kind,
            in::version_kind::damaged)
      << "an all-ones word is damage, not the uncommitted marker";
  // A word copied from another place (a misdirected write) does not pass, in all but about
  // one place in 2^15; these two places are fixed, so this is exact.
  EXPECT_EQ(in::read_version_word(in::version_word(7, there), here).kind,
            in::version_kind::damaged);
  EXPECT_EQ(in::read_version_word(in::uncommitted_word(there), here).kind,
            in::version_kind::damaged);
  EXPECT_FALSE(in::read_offset_word(in::offset_word({64}, {8192 + 704, in::word_field::next}),
                                    next)
                   .has_value());
}

// ---- pools edited by hand ------------------------------------------------------------------

// Runs fn in a child process that must exit within `seconds`: a hang is a failure, not a
// test that never ends. Returns the child's exit status, or -1 if it was killed.
int bounded(unsigned seconds, const std::function<int()>& fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(seconds);
    ::_exit(fn());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Check and Open both report Corruption (naming the file and `place`), within seconds, and
// leave the file as it was.
void expect_corruption(const std::string& path, const std::string& place) {
  const std::vector<char> before = read_file(path);
  const int code = bounded(20, [&] {
    CheckReport report;
    Status c = DB::Check(path, &report);
    if (!c.IsCorruption() || c.message().find(place) == std::string::npos) {
      std::fprintf(stderr, "check: %s\n", c.ToString().c_str());
      return 1;
    }
    std::unique_ptr<DB> db;
    Status o = DB::Open(Options{}, path, &db);
    if (!o.IsCorruption() || o.message().find(place) == std::string::npos) {
      std::fprintf(stderr, "open: %s\n", o.ToString().c_str());
      return 2;
    }
    if (o.message().find(path) == std::string::npos) return 3;
    return 0;
  });
  EXPECT_EQ(code, 0) << "1: check, 2: open did not report the damage at '" << place
                     << "'; 3: the message does not name the file; -1: crashed or hung";
  EXPECT_EQ(read_file(path), before) << "check and a refused open change nothing";
}

TEST(IntegrityTest, AnUncommittedNodeLinkedToItselfIsReportedNotWalkedForever) {
  temp_pool_path path("self-loop");
  fill(path.str(), 20);
  std::vector<char> bytes = read_file(path.str());
  const std::size_t n = node_at(bytes, 7);
  store(bytes, version_word_at(n), in::uncommitted_word(in::in_node({n}, in::word_field::version)));
  store(bytes, next_word(n), in::offset_word({n}, in::in_node({n}, in::word_field::next)));
  write_file(path.str(), bytes);
  expect_corruption(path.str(), "offset " + std::to_string(n));
}

TEST(IntegrityTest, ARefusedOpenDoesNotRepairFirst) {
  temp_pool_path path("no-repair");
  fill(path.str(), 60);
  std::vector<char> bytes = read_file(path.str());
  // An unfinished write that recovery would link around (a crash leaves such nodes)...
  const std::size_t unfinished = node_at(bytes, 10);
  store(bytes, version_word_at(unfinished),
        in::uncommitted_word(in::in_node({unfinished}, in::word_field::version)));
  // ...and, further on, a damaged value.
  const std::size_t damaged = node_at(bytes, 50);
  bytes[sizes_word_at(damaged) + W + 9] ^= 0x10;
  write_file(path.str(), bytes);
  expect_corruption(path.str(), "offset " + std::to_string(damaged));
  // Undamaged, the same pool opens, and the unfinished write is gone.
  bytes[sizes_word_at(damaged) + W + 9] ^= 0x10;
  write_file(path.str(), bytes);
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options{}, path.str(), &db).ok());
  std::string v;
  EXPECT_TRUE(db->Get(key_of(10), &v).IsNotFound());
  ASSERT_TRUE(db->Get(key_of(50), &v).ok());
  EXPECT_EQ(v, value_of(50));
}

TEST(IntegrityTest, OneFlippedBitInTheRootIsReportedNotTakenForANewStore) {
  temp_pool_path path("root-bits");
  fill(path.str(), 30);
  const std::vector<char> good = read_file(path.str());
  // format, head, commit_version, batch_mode, fenced, lease, tier
  for (std::size_t word : {std::size_t{0}, W, 2 * W, 3 * W, 4 * W, 5 * W, 6 * W}) {
    for (int bit : {1, 5, 47, 50, 62}) {  // bit 0 of an offset is link_and_persist's flag
      std::vector<char> bytes = good;
      bytes[kRoot + word + static_cast<std::size_t>(bit / 8)] ^= static_cast<char>(1 << (bit % 8));
      write_file(path.str(), bytes);
      expect_corruption(path.str(), "the root");
    }
  }
  // A blank root over a heap in use: the root page was lost, not a new store.
  std::vector<char> bytes = good;
  std::fill(bytes.begin() + kRoot, bytes.begin() + kRoot + 4096, 0);
  write_file(path.str(), bytes);
  expect_corruption(path.str(), "format word");
}

// A store of the layout before this one (format 2: nodes of three words) is refused by
// name, and left as it was.
TEST(IntegrityTest, AStoreOfTheEarlierLayoutIsRefusedByName) {
  temp_pool_path path("format-2");
  fill(path.str(), 5);
  std::vector<char> bytes = read_file(path.str());
  store(bytes, kRoot, in::kFormatV2);
  write_file(path.str(), bytes);
  std::unique_ptr<DB> db;
  const Status s = DB::Open(Options{}, path.str(), &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("layout format 2"), std::string::npos) << s.ToString();
  CheckReport report;
  EXPECT_TRUE(DB::Check(path.str(), &report).IsInvalidArgument());
  EXPECT_EQ(read_file(path.str()), bytes) << "a refused open changes nothing";
}

// Versions come from a lease in the root, so a store whose newest versions were all
// reclaimed does not hand them out again when it is opened next: recovery takes a link to
// a node of the version it names for that node (a block may still hold an earlier node).
TEST(IntegrityTest, NoVersionIsAssignedTwiceAcrossOpens) {
  temp_pool_path path("versions-once");
  std::uint64_t before = 0;
  {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(creating(), path.str(), &db).ok());
    ASSERT_TRUE(db->Put("k", "1").ok());
    ASSERT_TRUE(db->Delete("k").ok());
    const Snapshot* s = db->GetSnapshot();
    before = s->version();
    db->ReleaseSnapshot(s);
  }  // the close reclaims both versions: the list is empty again
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options{}, path.str(), &db).ok());
  EXPECT_EQ(db->GetStats().versions, 0u);
  ASSERT_TRUE(db->Put("k", "2").ok());
  const Snapshot* s = db->GetSnapshot();
  EXPECT_GT(s->version(), before);
  db->ReleaseSnapshot(s);
}

TEST(IntegrityTest, DamagedVersionWordsAreReported) {
  temp_pool_path path("versions");
  fill(path.str(), 30);
  const std::vector<char> good = read_file(path.str());
  const std::size_t n = node_at(good, 3);
  const in::word_place place = in::in_node({n}, in::word_field::version);
  for (std::uint64_t garbage :
       {~std::uint64_t{0} >> 1, (std::uint64_t{1} << 63) - 2, in::version_word(5, place).bits ^ 4,
        in::version_word(5, in::in_node({n + 64}, in::word_field::version)).bits}) {
    std::vector<char> bytes = good;
    store(bytes, version_word_at(n), garbage);
    write_file(path.str(), bytes);
    expect_corruption(path.str(), "offset " + std::to_string(n));
  }
  std::vector<char> bytes = good;
  store(bytes, kRoot + 2 * W, ~std::uint64_t{0} >> 1);  // commit_version all ones
  write_file(path.str(), bytes);
  expect_corruption(path.str(), "commit_version");
}

TEST(IntegrityTest, TheLastVersionNumberIsNoSpaceNotAWrap) {
  temp_pool_path path("last-version");
  fill(path.str(), 5);
  std::vector<char> bytes = read_file(path.str());
  const std::size_t n = node_at(bytes, 2);
  store(bytes, version_word_at(n),
        in::version_word(in::kMaxVersion, in::in_node({n}, in::word_field::version)));
  store(bytes, sizes_word_at(n),
        in::sizes_word({n}, key_of(2), value_of(2), 0, in::kMaxVersion).bits);  // its checksum
  write_file(path.str(), bytes);
  {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(Options{}, path.str(), &db).ok());
    EXPECT_TRUE(db->Put("another", "value").IsNoSpace());
    WriteBatch batch;
    batch.Put("a", "1");
    EXPECT_TRUE(db->Write(batch).IsNoSpace());
  }
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options{}, path.str(), &db).ok()) << "nothing was lost or wrapped";
  for (int i = 0; i < 5; ++i) {
    std::string v;
    ASSERT_TRUE(db->Get(key_of(i), &v).ok());
    EXPECT_EQ(v, value_of(i));
  }
}

// The chunk table: one 8-byte tag per 64 KiB chunk, low byte the kind (1: small blocks),
// the rest the block size.
TEST(IntegrityTest, AChunkTagThatDoesNotFitItsNodesIsReportedByCheckAndOpen) {
  temp_pool_path path("chunk-tag");
  fill(path.str(), 200);
  const std::vector<char> good = read_file(path.str());
  const auto heap = load<std::uint64_t>(good, 176);  // pool_header::heap_offset
  const std::size_t chunk = (node_at(good, 0) - heap) >> alloc::format::chunk_shift;
  const std::size_t tag_at = alloc::format::chunk_table_offset + chunk * 8;
  const auto tag = load<alloc::format::chunk_tag>(good, tag_at);
  ASSERT_EQ(tag.kind(), alloc::format::chunk_kind::small);
  for (std::uint64_t size : {tag.argument() / 2, tag.argument() * 2}) {
    std::vector<char> bytes = good;
    store(bytes, tag_at, alloc::format::chunk_tag::make(alloc::format::chunk_kind::small, size));
    write_file(path.str(), bytes);
    expect_corruption(path.str(), "chunk " + std::to_string(chunk));
  }
  std::vector<char> bytes = good;
  store(bytes, tag_at, std::uint64_t{0});  // "never given out"
  write_file(path.str(), bytes);
  expect_corruption(path.str(), "chunk " + std::to_string(chunk));
}

TEST(IntegrityTest, AHeadOffsetThatIsNotTheSentinelIsReported) {
  temp_pool_path path("head");
  fill(path.str(), 10);
  const std::vector<char> good = read_file(path.str());
  const in::word_place place = in::in_root(in::word_field::head);
  const auto head = in::read_offset_word({load<std::uint64_t>(good, kRoot + W)}, place);
  ASSERT_TRUE(head.has_value());
  for (std::uint64_t word : {in::offset_word({head->value + 16}, place).bits,
                             in::offset_word({head->value}, place).bits + 4}) {
    std::vector<char> bytes = good;
    store(bytes, kRoot + W, word);
    write_file(path.str(), bytes);
    expect_corruption(path.str(), "head");
  }
}

// Recovery's message places a damaged node by the key before it, which is read only when a
// message is made: the first node and a later one, each with one bit of its value flipped.
TEST(IntegrityTest, ADamagedNodeIsPlacedAfterTheKeyBeforeIt) {
  for (const int k : {0, 5}) {
    temp_pool_path path("placed");
    fill(path.str(), 20);
    std::vector<char> bytes = read_file(path.str());
    bytes[node_at(bytes, k) + 5 * W + key_of(k).size() + 2] ^= 0x01;
    write_file(path.str(), bytes);
    const std::string where =
        k == 0 ? "the first node" : "the node after key '" + key_of(k - 1) + "'";
    expect_corruption(path.str(), where + ": checksum mismatch");
  }
}

TEST(IntegrityTest, ReadsReportDamageAfterOpen) {
  temp_pool_path path("reads");
  fill(path.str(), 20);
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options{}, path.str(), &db).ok());
  // The medium changes under the open store: one bit of key 5's value.
  const std::vector<char> bytes = read_file(path.str());
  const std::size_t at = node_at(bytes, 5) + 5 * W + key_of(5).size() + 2;
  const int fd = ::open(path.str().c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const char flipped = static_cast<char>(bytes[at] ^ 0x01);
  ASSERT_EQ(::pwrite(fd, &flipped, 1, static_cast<off_t>(at)), 1);
  ::close(fd);
  std::string v;
  Status s = db->Get(key_of(5), &v);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(key_of(5)), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset " + std::to_string(node_at(bytes, 5))), std::string::npos);
  ASSERT_TRUE(db->Get(key_of(4), &v).ok()) << "other keys read as before";
  EXPECT_EQ(v, value_of(4));
  ReadOptions unchecked;
  unchecked.verify_checksums = false;
  ASSERT_TRUE(db->Get(key_of(5), &v, unchecked).ok()) << "verification was asked off";
  EXPECT_NE(v, value_of(5));
  // An iterator stops at the damaged node, with the error in status().
  auto it = db->NewIterator();
  int seen = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++seen;
  EXPECT_EQ(seen, 5);
  EXPECT_TRUE(it->status().IsCorruption()) << it->status().ToString();
  for (it->SeekToLast(); it->Valid(); it->Prev()) ++seen;
  EXPECT_EQ(seen, 5 + 14);
  EXPECT_TRUE(it->status().IsCorruption());
  it->Seek(key_of(6));
  EXPECT_TRUE(it->Valid() && it->status().ok()) << "a new seek clears the error";
}

}  // namespace
