// pool: create, close and reopen with the same content; every bad file is refused with an
// error that names it, and left untouched; the lock keeps a pool open once; granularity.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "allocators/internal/pool_format.hpp"
#include "alloc_support.hpp"

namespace {

using namespace alloc_test;
using alloc::errc;
using P = file_policy;

struct test_root {
  flit::persist<std::uint64_t, P> generation;
  flit::persist<alloc::pptr<>, P> block;
};

constexpr std::uint64_t pool_bytes = 1 << 20;

class PoolTest : public ::testing::Test {
 protected:
  alloc::pool create(const std::filesystem::path& file, std::uint64_t bytes = pool_bytes) {
    auto p = alloc::pool::create<P>(file, bytes, layout_for<P>());
    EXPECT_TRUE(p.has_value()) << p.error().to_string();
    return std::move(p).value();
  }

  // Opening `file` fails with `code` and a message naming the file, and changes no byte.
  void expect_refused(const std::filesystem::path& file, errc code, const std::string& words,
                      const alloc::pool_layout& layout = layout_for<P>()) {
    const std::vector<char> before = read_file(file);
    auto p = alloc::pool::open(file, layout);
    ASSERT_FALSE(p.has_value());
    EXPECT_EQ(p.error().code(), code) << p.error().to_string();
    EXPECT_NE(p.error().message().find(file.string()), std::string::npos)
        << p.error().message();
    EXPECT_NE(p.error().message().find(words), std::string::npos) << p.error().message();
    EXPECT_EQ(read_file(file), before) << "a refused open changed the file";
  }

  // Rewrites the header of `file` through `change`, with a correct checksum.
  static void rewrite_header(const std::filesystem::path& file,
                             void (*change)(alloc::format::pool_header&)) {
    std::vector<char> bytes = read_file(file);
    alloc::format::pool_header h;
    std::memcpy(&h, bytes.data(), sizeof h);
    change(h);
    std::memcpy(bytes.data(), &h, sizeof h);
    h.checksum = alloc::format::checksum(
        std::as_bytes(std::span(bytes.data(), alloc::format::header_size)));
    std::memcpy(bytes.data(), &h, sizeof h);
    write_file(file, bytes);
  }

  // The bytes the file system has allocated to `file` (holes are not counted).
  static std::uint64_t allocated_bytes(const std::filesystem::path& file) {
    struct stat st {};
    EXPECT_EQ(::stat(file.c_str(), &st), 0) << file;
    return static_cast<std::uint64_t>(st.st_blocks) * 512;
  }

  // Copies `from` to `to` as `cp --sparse=always` does: pages of zeros become holes.
  static void sparse_copy(const std::filesystem::path& from, const std::filesystem::path& to) {
    const std::vector<char> bytes = read_file(from);
    const int fd = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << to;
    constexpr std::size_t page = alloc::format::page_size;
    for (std::size_t at = 0; at < bytes.size(); at += page) {
      const std::size_t n = std::min(page, bytes.size() - at);
      if (std::all_of(bytes.begin() + at, bytes.begin() + at + n, [](char c) { return c == 0; })) {
        continue;
      }
      ASSERT_EQ(::pwrite(fd, bytes.data() + at, n, static_cast<off_t>(at)),
                static_cast<ssize_t>(n));
    }
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(bytes.size())), 0);
    ::close(fd);
  }

  // The permissions of the mapping holding `address`, as /proc/self/maps shows them.
  static std::string mapping_permissions(const void* address) {
    std::ifstream maps("/proc/self/maps");
    const auto a = reinterpret_cast<std::uintptr_t>(address);
    for (std::string line; std::getline(maps, line);) {
      std::uintptr_t begin = 0, end = 0;
      char perms[5] = {};
      if (std::sscanf(line.c_str(), "%lx-%lx %4s", &begin, &end, perms) == 3 && a >= begin &&
          a < end) {
        return perms;
      }
    }
    return "not mapped";
  }

  static std::size_t files_in(const std::filesystem::path& dir) {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir),
                                                  std::filesystem::directory_iterator()));
  }

  scratch_dir dir_;
};

TEST_F(PoolTest, CreateCloseReopenKeepsContent) {
  const auto file = dir_.file("a.pool");
  std::array<std::uint8_t, 16> uuid;
  alloc::pptr<> block;
  {
    alloc::pool p = create(file);
    EXPECT_EQ(p.size(), pool_bytes);
    EXPECT_EQ(p.name(), std::string("'").append(file.string()).append("'"));
    uuid = p.uuid();
    auto* root = p.root_as<test_root>();
    EXPECT_EQ(root->generation.load(), 0u) << "the root area starts zeroed";
    alloc::persistent_allocator<P> heap(p);
    ASSERT_TRUE(heap.finish_recovery());
    auto b = heap.allocate(100);
    ASSERT_TRUE(b.has_value());
    block = *b;
    const char text[] = "persistent payload";
    P::write_range(p.get(block), text, sizeof text, flit::persisted);
    root->block.store(block);
    root->generation.store(7);
    P::operation_completion();
  }
  auto reopened = alloc::pool::open(file, layout_for<P>());
  ASSERT_TRUE(reopened.has_value()) << reopened.error().to_string();
  alloc::pool& p = *reopened;
  EXPECT_EQ(p.uuid(), uuid);
  EXPECT_EQ(p.uuid_string().size(), 36u);
  EXPECT_EQ(p.layout().name, "alloc-test");
  EXPECT_EQ(p.layout().build_layout, alloc::layout_fingerprint<P>());
  auto* root = p.root_as<test_root>();
  EXPECT_EQ(root->generation.load(), 7u);
  EXPECT_EQ(root->block.load(), block);
  EXPECT_STREQ(static_cast<const char*>(p.get(block)), "persistent payload");

  alloc::persistent_allocator<P> heap(p);
  ASSERT_TRUE(heap.mark_live(block, 100));
  ASSERT_TRUE(heap.finish_recovery());
  EXPECT_EQ(heap.stats().in_use_bytes, heap.usable_size(block));
}

TEST_F(PoolTest, CreateRefusesAnExistingFileAndBadArguments) {
  const auto file = dir_.file("a.pool");
  { alloc::pool p = create(file); }
  const std::vector<char> before = read_file(file);
  auto again = alloc::pool::create<P>(file, pool_bytes, layout_for<P>());
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code(), errc::invalid_argument);
  EXPECT_NE(again.error().message().find("already exists"), std::string::npos);
  EXPECT_EQ(read_file(file), before);

  auto small = alloc::pool::create<P>(dir_.file("small.pool"), 4096, layout_for<P>());
  ASSERT_FALSE(small.has_value());
  EXPECT_EQ(small.error().code(), errc::invalid_argument);
  EXPECT_NE(small.error().message().find(std::to_string(alloc::pool::min_size)),
            std::string::npos)
      << "names the limit: " << small.error().message();

  auto unnamed = alloc::pool::create<P>(dir_.file("b.pool"), pool_bytes,
                                        {"", alloc::layout_fingerprint<P>()});
  EXPECT_EQ(unnamed.code(), errc::invalid_argument);
  auto long_name = alloc::pool::create<P>(dir_.file("c.pool"), pool_bytes,
                                          {std::string(32, 'x'), "b"});
  EXPECT_EQ(long_name.code(), errc::invalid_argument);
  // Nothing is left behind by refused creations, not even temporary files.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_.path()),
                          std::filesystem::directory_iterator()),
            1);
}

TEST_F(PoolTest, MissingFileIsNotFound) {
  auto p = alloc::pool::open(dir_.file("none.pool"), layout_for<P>());
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), errc::not_found);
  EXPECT_NE(p.error().message().find("none.pool"), std::string::npos);
}

TEST_F(PoolTest, EmptyFileIsNotAPool) {
  const auto file = dir_.file("empty.pool");
  write_file(file, {});
  expect_refused(file, errc::invalid_argument, "empty");
}

TEST_F(PoolTest, RandomBytesAreNotAPool) {
  const auto file = dir_.file("random.pool");
  std::mt19937_64 rng(42);
  std::vector<char> bytes(pool_bytes);
  for (char& c : bytes) c = static_cast<char>(rng());
  write_file(file, bytes);
  expect_refused(file, errc::invalid_argument, "not a flint pool");
}

TEST_F(PoolTest, TruncatedFileIsCorruption) {
  const auto file = dir_.file("a.pool");
  { alloc::pool p = create(file); }
  std::filesystem::resize_file(file, pool_bytes / 2);
  expect_refused(file, errc::corruption, "truncated");
  std::filesystem::resize_file(file, 100);
  expect_refused(file, errc::corruption, "truncated");
}

TEST_F(PoolTest, EveryFlippedHeaderByteIsRefused) {
  const auto file = dir_.file("a.pool");
  { alloc::pool p = create(file); }
  const std::vector<char> good = read_file(file);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  auto put = [&](std::size_t at, char c) {
    f.seekp(static_cast<std::streamoff>(at));
    f.put(c);
    f.flush();
  };
  for (std::size_t i = 0; i < alloc::format::header_size; ++i) {
    put(i, static_cast<char>(good[i] ^ 0x10));
    auto p = alloc::pool::open(file, layout_for<P>());
    ASSERT_FALSE(p.has_value()) << "a flip at byte " << i << " went unnoticed";
    if (i >= offsetof(alloc::format::pool_header, pool_size)) {
      EXPECT_EQ(p.error().code(), errc::corruption) << i << ": " << p.error().to_string();
    }
    EXPECT_NE(p.error().message().find(file.string()), std::string::npos);
    f.seekg(static_cast<std::streamoff>(i));
    EXPECT_EQ(f.get(), static_cast<unsigned char>(good[i] ^ 0x10)) << "the open wrote";
    put(i, good[i]);
  }
  f.close();
  EXPECT_EQ(read_file(file), good);
  EXPECT_TRUE(alloc::pool::open(file, layout_for<P>()).has_value());
}

TEST_F(PoolTest, NewerLayoutVersionIsRefused) {
  const auto file = dir_.file("a.pool");
  { alloc::pool p = create(file); }
  rewrite_header(file, [](alloc::format::pool_header& h) { h.layout_version = 2; });
  expect_refused(file, errc::invalid_argument, "layout version 2, newer than this build");
}

TEST_F(PoolTest, IncompleteCreationIsRecognised) {
  const auto file = dir_.file("a.pool");
  { alloc::pool p = create(file); }
  rewrite_header(file, [](alloc::format::pool_header& h) { h.state = 0; });
  expect_refused(file, errc::corruption, "incomplete");
}

TEST_F(PoolTest, OtherBuildLayoutOrLayoutNameIsRefused) {
  const auto file = dir_.file("a.pool");
  { alloc::pool p = create(file); }
  using adjacent_policy = flit::policy<flit::adjacent, alloc::pool_backend>;
  expect_refused(file, errc::invalid_argument, alloc::layout_fingerprint<adjacent_policy>(),
                 layout_for<adjacent_policy>());
  expect_refused(file, errc::invalid_argument, "'alloc-test', not 'flintkv'",
                 layout_for<P>("flintkv"));
}

TEST_F(PoolTest, LayoutFingerprintTellsWordLayoutsApart) {
  using hashed = flit::policy<test_hashed, pv::model_backend>;
  using plain = flit::policy<flit::plain, pv::model_backend>;
  using adjacent = flit::policy<flit::adjacent, pv::model_backend>;
  using flagged = flit::policy<flit::link_and_persist, pv::model_backend>;
  EXPECT_EQ(alloc::layout_fingerprint<hashed>(), alloc::layout_fingerprint<plain>());
  EXPECT_NE(alloc::layout_fingerprint<hashed>(), alloc::layout_fingerprint<adjacent>());
  EXPECT_NE(alloc::layout_fingerprint<hashed>(), alloc::layout_fingerprint<flagged>());
  EXPECT_NE(alloc::layout_fingerprint<adjacent>(), alloc::layout_fingerprint<flagged>());
}

TEST_F(PoolTest, SecondOpenIsBusyUntilTheFirstCloses) {
  const auto file = dir_.file("a.pool");
  { alloc::pool p = create(file); }
  {
    auto first = alloc::pool::open(file, layout_for<P>());
    ASSERT_TRUE(first.has_value());
    expect_refused(file, errc::busy, "already open");
  }
  EXPECT_TRUE(alloc::pool::open(file, layout_for<P>()).has_value());
}

TEST_F(PoolTest, OpenFromAnotherProcessIsBusy) {
  const auto file = dir_.file("a.pool");
  alloc::pool p = create(file);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto other = alloc::pool::open(file, layout_for<P>());
    ::_exit(other.has_value() ? 100 : static_cast<int>(other.error().code()));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), static_cast<int>(errc::busy));
}

TEST_F(PoolTest, GranularityIsReportedAndForcible) {
  struct statfs fs {};
  if (::statfs(dir_.path().c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
    // tmpfs is DRAM emulating persistent memory: flush instructions are its persistence.
    alloc::pool p = create(dir_.file("tmpfs.pool"));
    EXPECT_EQ(p.store_granularity(), alloc::granularity::cache_line);
    EXPECT_EQ(alloc::detail::page_pools_open.load(), 0);
  }
  {
    ::setenv("PMEM2_FORCE_GRANULARITY", "CACHE_LINE", 1);
    alloc::pool p = create(dir_.file("line.pool"));
    ::unsetenv("PMEM2_FORCE_GRANULARITY");
    EXPECT_EQ(p.store_granularity(), alloc::granularity::cache_line);
    EXPECT_EQ(alloc::detail::page_pools_open.load(), 0);
    EXPECT_EQ(alloc::pool_backend::name(), flit::default_backend::name());
  }
  ::setenv("PMEM2_FORCE_GRANULARITY", "PAGE", 1);
  alloc::pool p = create(dir_.file("page.pool"));
  ::unsetenv("PMEM2_FORCE_GRANULARITY");
  EXPECT_EQ(p.store_granularity(), alloc::granularity::page);
  EXPECT_EQ(alloc::to_string(p.store_granularity()), "page");
  EXPECT_EQ(alloc::detail::page_pools_open.load(), 1) << "pool_backend is in page mode";
  EXPECT_EQ(alloc::pool_backend::name(), "pmem2-msync");
}

TEST_F(PoolTest, PageModeSyncsNotedPagesAtTheFence) {
  ::setenv("PMEM2_FORCE_GRANULARITY", "PAGE", 1);
  alloc::pool p = create(dir_.file("page.pool"));
  ::unsetenv("PMEM2_FORCE_GRANULARITY");
  auto* root = p.root_as<test_root>();
  root->generation.store(1, flit::persisted, flit::private_);
  root->block.store(alloc::pptr<>(64), flit::persisted, flit::private_);
  EXPECT_EQ(alloc::detail::noted_pages.count, 1u) << "two words of one page: one page noted";
  P::operation_completion();
  EXPECT_EQ(alloc::detail::noted_pages.count, 0u) << "the fence synced the noted page";
  // More pages than the log holds: it syncs early and keeps working.
  std::vector<std::byte> bytes(64 * alloc::format::page_size, std::byte{1});
  alloc::persistent_allocator<P> heap(p);
  ASSERT_TRUE(heap.finish_recovery());
  auto big = heap.allocate(bytes.size());
  ASSERT_TRUE(big.has_value());
  P::write_range(p.get(*big), bytes.data(), bytes.size(), flit::persisted);
  EXPECT_LE(alloc::detail::noted_pages.count, alloc::detail::page_log::capacity);
  P::operation_completion();
  EXPECT_EQ(alloc::detail::noted_pages.count, 0u);
}

TEST_F(PoolTest, RegionPoolCreatesAndReopens) {
  using M = on_model<test_hashed>;
  pv::model m(alloc::pool::min_size * 4);
  pv::scoped_activation on(m);
  std::span<std::byte> region(m.base(), m.size());
  std::array<std::uint8_t, 16> uuid;
  {
    auto p = alloc::pool::create_in<M>(region, layout_for<M>());
    ASSERT_TRUE(p.has_value()) << p.error().to_string();
    EXPECT_EQ(p->store_granularity(), alloc::granularity::cache_line);
    EXPECT_NE(p->name().find("memory region"), std::string::npos);
    uuid = p->uuid();
  }
  // Only what reached the durable image counts.
  m.load_image(m.crash(pv::writeback::none));
  auto p = alloc::pool::open_in(region, layout_for<M>());
  ASSERT_TRUE(p.has_value()) << p.error().to_string();
  EXPECT_EQ(p->uuid(), uuid);

  auto wrong = alloc::pool::open_in(region, layout_for<M>("other"));
  EXPECT_EQ(wrong.code(), errc::invalid_argument);
  auto misaligned = alloc::pool::open_in(region.subspan(8), layout_for<M>());
  EXPECT_EQ(misaligned.code(), errc::invalid_argument);
  auto small = alloc::pool::create_in<M>(region.first(4096), layout_for<M>());
  EXPECT_EQ(small.code(), errc::invalid_argument);
}

TEST_F(PoolTest, ReadOnlyOpensShareTheLockAndExcludeAWriter) {
  const auto file = dir_.file("a.pool");
  { alloc::pool p = create(file); }
  const std::vector<char> before = read_file(file);
  {
    auto first = alloc::pool::open(file, layout_for<P>(), alloc::pool_access::read_only);
    ASSERT_TRUE(first.has_value()) << first.error().to_string();
    EXPECT_EQ(first->access(), alloc::pool_access::read_only);
    auto second = alloc::pool::open(file, layout_for<P>(), alloc::pool_access::read_only);
    ASSERT_TRUE(second.has_value()) << "read-only opens coexist: " << second.error().to_string();
    EXPECT_EQ(std::memcmp(first->base(), before.data(), before.size()), 0);
    expect_refused(file, errc::busy, "already open");  // a writer waits for the readers
  }
  {
    auto writer = alloc::pool::open(file, layout_for<P>());
    ASSERT_TRUE(writer.has_value());
    EXPECT_EQ(writer->access(), alloc::pool_access::read_write);
    auto reader = alloc::pool::open(file, layout_for<P>(), alloc::pool_access::read_only);
    ASSERT_FALSE(reader.has_value());
    EXPECT_EQ(reader.error().code(), errc::busy);
    EXPECT_NE(reader.error().message().find(file.string()), std::string::npos);
    EXPECT_NE(reader.error().message().find("open for writing"), std::string::npos)
        << reader.error().message();
  }
  EXPECT_EQ(read_file(file), before);
}

TEST_F(PoolTest, ReadOnlyOpenMapsReadOnlyAndReservesNothing) {
  const auto file = dir_.file("a.pool");
  const auto copy = dir_.file("copy.pool");
  { alloc::pool p = create(file, 8 * pool_bytes); }
  sparse_copy(file, copy);
  const std::uint64_t allocated = allocated_bytes(copy);
  ASSERT_LT(allocated, std::filesystem::file_size(copy));
  const std::vector<char> before = read_file(copy);
  auto p = alloc::pool::open(copy, layout_for<P>(), alloc::pool_access::read_only);
  ASSERT_TRUE(p.has_value()) << p.error().to_string();
  EXPECT_EQ(allocated_bytes(copy), allocated) << "a read-only open reserved space";
  // The mapping is read-only (a store into it would fault): nothing can change the file.
  EXPECT_EQ(mapping_permissions(p->base()), "r--s");
  EXPECT_EQ(read_file(copy), before);
  auto writer = alloc::pool::open(file, layout_for<P>());
  ASSERT_TRUE(writer.has_value());
  EXPECT_EQ(mapping_permissions(writer->base()), "rw-s") << "the check tells the two apart";
}

// A user who cannot write the file can still open it read-only (and only so). The test runs
// as root in CI, where permission bits stop nothing: the child drops to the unprivileged
// uid 65534 first.
TEST_F(PoolTest, ReadOnlyOpenWorksWithoutWritePermission) {
  const auto file = dir_.file("a.pool");
  { alloc::pool p = create(file); }
  std::filesystem::permissions(file, std::filesystem::perms::owner_read |
                                         std::filesystem::perms::group_read |
                                         std::filesystem::perms::others_read);
  const std::vector<char> before = read_file(file);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::geteuid() == 0 && (::setresgid(65534, 65534, 65534) != 0 ||
                             ::setresuid(65534, 65534, 65534) != 0)) {
      ::_exit(90);
    }
    auto writer = alloc::pool::open(file, layout_for<P>());
    if (writer.has_value()) ::_exit(91);  // the test proves nothing: it can write
    auto reader = alloc::pool::open(file, layout_for<P>(), alloc::pool_access::read_only);
    ::_exit(reader.has_value() ? 0 : 100 + static_cast<int>(reader.error().code()));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "90: cannot drop privileges; 91: could open for "
                                       "writing; 100 + code: the read-only open failed";
  EXPECT_EQ(read_file(file), before);
}

// Defect 7 of issue 10: a pool copied as a sparse file was opened without its space, so a
// store into a hole of a full file system raised SIGBUS. A read-write open reserves it.
TEST_F(PoolTest, OpenReservesTheSpaceOfASparseCopy) {
  const auto file = dir_.file("a.pool");
  const auto copy = dir_.file("copy.pool");
  { alloc::pool p = create(file, 8 * pool_bytes); }
  sparse_copy(file, copy);
  const std::uint64_t size = std::filesystem::file_size(copy);
  ASSERT_LT(allocated_bytes(copy), size) << "the copy must have holes for this test to mean anything";
  const std::vector<char> before = read_file(copy);
  {
    auto p = alloc::pool::open(copy, layout_for<P>());
    ASSERT_TRUE(p.has_value()) << p.error().to_string();
    EXPECT_GE(allocated_bytes(copy), size) << "the open left holes in the pool file";
  }
  EXPECT_EQ(read_file(copy), before) << "reserving the space changed the bytes";
}

// Where the space cannot be had, the open says so and leaves the file as it was.
TEST_F(PoolTest, OpenOfAPoolLargerThanItsFileSystemIsNoSpace) {
  struct statfs fs {};
  ASSERT_EQ(::statfs(dir_.path().c_str(), &fs), 0);
  // tmpfs refuses a reservation above its size at once; elsewhere the test would fill a disk.
  if (fs.f_type != TMPFS_MAGIC || fs.f_blocks == 0) GTEST_SKIP() << "needs a sized tmpfs";
  const auto file = dir_.file("huge.pool");
  { alloc::pool p = create(file); }
  static std::uint64_t huge;
  huge = alloc::format::align_up(
      static_cast<std::uint64_t>(fs.f_blocks) * static_cast<std::uint64_t>(fs.f_bsize) +
          (std::uint64_t{1} << 30),
      alloc::format::page_size);
  rewrite_header(file, [](alloc::format::pool_header& h) {
    const auto g = alloc::format::geometry_for(huge);
    h.pool_size = huge;
    h.chunk_count = g.chunk_count;
    h.heap_offset = g.heap_offset;
  });
  std::filesystem::resize_file(file, huge);  // sparse: the header says it is this big
  const std::vector<char> head = [&] {
    std::vector<char> b(pool_bytes);
    std::ifstream in(file, std::ios::binary);
    in.read(b.data(), static_cast<std::streamsize>(b.size()));
    return b;
  }();
  const std::uint64_t allocated = allocated_bytes(file);
  auto p = alloc::pool::open(file, layout_for<P>());
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), errc::no_space) << p.error().to_string();
  EXPECT_NE(p.error().message().find(file.string()), std::string::npos) << p.error().message();
  EXPECT_NE(p.error().message().find(std::to_string(huge)), std::string::npos)
      << "names the size: " << p.error().message();
  EXPECT_EQ(std::filesystem::file_size(file), huge);
  EXPECT_EQ(allocated_bytes(file), allocated);
  std::vector<char> after(pool_bytes);
  std::ifstream in(file, std::ios::binary);
  in.read(after.data(), static_cast<std::streamsize>(after.size()));
  EXPECT_EQ(after, head) << "a refused open changed the file";
}

// Part of defect 9: a crashed creation left `<pool>.creating-XXXXXX` behind for good.
// A creator holds an exclusive flock on its temporary file: one that can be locked has no
// creator any more and is removed; one that is locked is being created and stays.
TEST_F(PoolTest, CreateRemovesTemporaryFilesOfCrashedCreations) {
  const auto file = dir_.file("a.pool");
  const auto stale = dir_.file("a.pool.creating-Ab12Cd");
  const auto in_progress = dir_.file("a.pool.creating-Zz99Yy");
  const auto others = dir_.file("b.pool.creating-Ab12Cd");
  const auto not_temp = dir_.file("a.pool.creating-notmine");
  for (const auto& f : {stale, in_progress, others, not_temp}) write_file(f, {'x'});
  const int creator = ::open(in_progress.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(creator, 0);
  ASSERT_EQ(::flock(creator, LOCK_EX | LOCK_NB), 0);

  { alloc::pool p = create(file); }
  EXPECT_FALSE(std::filesystem::exists(stale)) << "the crashed creation's file is still there";
  EXPECT_TRUE(std::filesystem::exists(in_progress)) << "removed a file being created";
  EXPECT_TRUE(std::filesystem::exists(others));
  EXPECT_TRUE(std::filesystem::exists(not_temp));
  ::close(creator);
}

// A crash between linking the pool into place and removing its temporary name leaves a
// second name of the pool itself: a read-write open removes it (and other stale ones).
TEST_F(PoolTest, OpenRemovesTemporaryFilesOfCrashedCreations) {
  const auto file = dir_.file("a.pool");
  { alloc::pool p = create(file); }
  const auto second_name = dir_.file("a.pool.creating-Qw34Er");
  const auto stale = dir_.file("a.pool.creating-Ab12Cd");
  std::filesystem::create_hard_link(file, second_name);
  write_file(stale, {'x'});
  const std::vector<char> before = read_file(file);
  {
    auto p = alloc::pool::open(file, layout_for<P>());
    ASSERT_TRUE(p.has_value()) << p.error().to_string();
  }
  EXPECT_FALSE(std::filesystem::exists(second_name));
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_EQ(read_file(file), before);
  EXPECT_EQ(files_in(dir_.path()), 1u);
}

// Part of defect 9: names over the system's limits gave misleading errors ("the file already
// exists", a bare "File name too long" as an I/O error).
TEST_F(PoolTest, OverlongNamesAreRefusedNamingTheLimit) {
  auto expect_named_limit = [](const alloc::error& e, const std::string& limit) {
    EXPECT_EQ(e.code(), errc::invalid_argument) << e.to_string();
    EXPECT_NE(e.message().find(limit), std::string::npos) << e.message();
  };
  // Fits NAME_MAX, but not with the suffix of the temporary file it is built under.
  const auto tight = dir_.file(std::string(NAME_MAX - 4, 'n'));
  auto c1 = alloc::pool::create<P>(tight, pool_bytes, layout_for<P>());
  ASSERT_FALSE(c1.has_value());
  expect_named_limit(c1.error(), "NAME_MAX");
  EXPECT_NE(c1.error().message().find(".creating-XXXXXX"), std::string::npos)
      << c1.error().message();

  const auto over = dir_.file(std::string(NAME_MAX + 1, 'n'));
  auto c2 = alloc::pool::create<P>(over, pool_bytes, layout_for<P>());
  ASSERT_FALSE(c2.has_value());
  expect_named_limit(c2.error(), "NAME_MAX");
  auto o2 = alloc::pool::open(over, layout_for<P>());
  ASSERT_FALSE(o2.has_value());
  expect_named_limit(o2.error(), "NAME_MAX");

  std::string deep = dir_.path().string();
  while (deep.size() <= PATH_MAX) deep += "/dd";
  auto c3 = alloc::pool::create<P>(deep, pool_bytes, layout_for<P>());
  ASSERT_FALSE(c3.has_value());
  expect_named_limit(c3.error(), "PATH_MAX");
  auto o3 = alloc::pool::open(deep, layout_for<P>());
  ASSERT_FALSE(o3.has_value());
  expect_named_limit(o3.error(), "PATH_MAX");
  EXPECT_EQ(files_in(dir_.path()), 0u);
}

// Part of defect 9: a size near 2^64 wrapped when rounded up, and the message said 0 bytes.
TEST_F(PoolTest, CreateRefusesASizeAboveTheMaximumNamingBoth) {
  for (std::uint64_t size : {~std::uint64_t{0}, ~std::uint64_t{0} - 4095,
                             std::uint64_t{1} << 63}) {
    auto p = alloc::pool::create<P>(dir_.file("a.pool"), size, layout_for<P>());
    ASSERT_FALSE(p.has_value());
    EXPECT_EQ(p.error().code(), errc::invalid_argument) << p.error().to_string();
    EXPECT_NE(p.error().message().find(std::to_string(size)), std::string::npos)
        << p.error().message();
    EXPECT_NE(p.error().message().find("maximum"), std::string::npos) << p.error().message();
  }
  EXPECT_EQ(files_in(dir_.path()), 0u);
}

TEST(ErrorTest, ResultCarriesValueOrError) {
  alloc::result<int> ok = 5;
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(*ok, 5);
  EXPECT_EQ(ok.code(), errc::ok);
  alloc::result<int> bad = alloc::error(errc::no_space, "pool 'x' is full");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.code(), errc::no_space);
  EXPECT_EQ(bad.error().to_string(), "no space: pool 'x' is full");
  alloc::status fine;
  EXPECT_TRUE(fine);
  alloc::status busy = alloc::error(errc::busy, "locked");
  EXPECT_EQ(busy.code(), errc::busy);
}

}  // namespace
