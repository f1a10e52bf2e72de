#include "allocators/pool.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <libpmem2.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "allocators/helper_thread.hpp"
#include "pool_registry.hpp"

namespace alloc {

namespace {

using format::pool_header;

std::string quoted(const std::filesystem::path& p) {
  std::string s = p.string();
  s.insert(s.begin(), '\'');
  s.push_back('\'');
  return s;
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

std::string errno_text(int e) { return std::strerror(e); }

template <std::size_t N>
std::string_view stored_string(const std::array<char, N>& a) {
  std::size_t n = 0;
  while (n < N && a[n] != '\0') ++n;
  return {a.data(), n};
}

status check_layout(const pool_layout& layout, const std::string& what) {
  auto bad = [&](std::string_view field, const std::string& v, std::size_t limit) {
    return error(errc::invalid_argument,
                 what + ": the " + std::string(field) + " '" + v + "' must be 1 to " +
                     std::to_string(limit) + " characters without NUL");
  };
  auto fits = [](const std::string& v, std::size_t limit) {
    return !v.empty() && v.size() <= limit && v.find('\0') == std::string::npos;
  };
  if (!fits(layout.name, format::layout_name_size - 1)) {
    return bad("layout name", layout.name, format::layout_name_size - 1);
  }
  if (!fits(layout.build_layout, format::build_layout_size - 1)) {
    return bad("build layout", layout.build_layout, format::build_layout_size - 1);
  }
  return {};
}

pool_header make_header(std::uint64_t size, const pool_layout& layout) {
  pool_header h{};
  h.magic = format::magic;
  h.layout_version = format::layout_version;
  h.pool_size = size;
  std::random_device rd;
  for (std::size_t i = 0; i < h.uuid.size(); i += 4) {
    std::uint32_t r = rd();
    std::memcpy(h.uuid.data() + i, &r, 4);
  }
  h.uuid[6] = static_cast<std::uint8_t>((h.uuid[6] & 0x0f) | 0x40);  // version 4 (random)
  h.uuid[8] = static_cast<std::uint8_t>((h.uuid[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::memcpy(h.layout_name.data(), layout.name.data(), layout.name.size());
  std::memcpy(h.build_layout.data(), layout.build_layout.data(), layout.build_layout.size());
  const format::geometry g = format::geometry_for(size);
  h.root_offset = format::root_offset;
  h.root_size = format::root_size;
  h.chunk_table_offset = format::chunk_table_offset;
  h.chunk_size = format::chunk_size;
  h.chunk_count = g.chunk_count;
  h.heap_offset = g.heap_offset;
  h.state = 0;
  // The rest of the header page is zero.
  std::array<std::byte, format::header_size> page{};
  std::memcpy(page.data(), &h, sizeof h);
  h.checksum = format::checksum(page);
  return h;
}

// Lays the pool out at `base`: state word cleared and fenced first (so stale bytes of an
// earlier pool in a reused range cannot look complete), then header, zero root and zero
// chunk table, fenced, then the state word, fenced.
void format_pool(std::byte* base, const pool_header& h, const persist_ops& ops) {
  static constexpr std::byte zeros[format::page_size] = {};
  const std::uint64_t incomplete = 0;
  ops.write(base + offsetof(pool_header, state), &incomplete, sizeof incomplete);
  ops.fence();
  ops.write(base, &h, offsetof(pool_header, state));
  ops.write(base + sizeof(pool_header), zeros, format::header_size - sizeof(pool_header));
  ops.write(base + format::root_offset, zeros, format::root_size);
  for (std::uint64_t at = format::chunk_table_offset; at < h.heap_offset; at += sizeof zeros) {
    ops.write(base + at, zeros, sizeof zeros);
  }
  ops.fence();
  const std::uint64_t complete = format::state_complete;
  ops.write(base + offsetof(pool_header, state), &complete, sizeof complete);
  ops.fence();
}

// Every check of open(), on the first bytes of a file or range of `actual_size` bytes.
status validate(std::span<const std::byte> bytes, std::uint64_t actual_size,
                const pool_layout& expected, const std::string& name) {
  if (actual_size == 0) {
    return error(errc::invalid_argument, name + " is empty (0 bytes): not a flint pool");
  }
  if (bytes.size() < format::magic.size() ||
      std::memcmp(bytes.data(), format::magic.data(), format::magic.size()) != 0) {
    return error(errc::invalid_argument,
                 name + " is not a flint pool: no pool magic 'FLNTPOOL' at offset 0");
  }
  if (bytes.size() < format::header_size) {
    return error(errc::corruption, name + " is truncated: " + std::to_string(actual_size) +
                                       " bytes, less than a pool header (" +
                                       std::to_string(format::header_size) + " bytes)");
  }
  pool_header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.layout_version == 0) {
    return error(errc::corruption, name + " has pool layout version 0, which no build wrote");
  }
  if (h.layout_version > format::layout_version) {
    return error(errc::invalid_argument,
                 name + " has pool layout version " + std::to_string(h.layout_version) +
                     ", newer than this build reads (" +
                     std::to_string(format::layout_version) + ")");
  }
  if (h.state != format::state_complete) {
    return error(errc::corruption,
                 name + " is incomplete: its creation was interrupted (state word " +
                     hex(h.state) + ", expected " + hex(format::state_complete) + ")");
  }
  const std::uint64_t sum = format::checksum(bytes.first(format::header_size));
  if (sum != h.checksum) {
    return error(errc::corruption, name + ": header checksum mismatch (stored " +
                                       hex(h.checksum) + ", computed " + hex(sum) + ")");
  }
  if (actual_size < h.pool_size) {
    return error(errc::corruption, name + " is truncated: the header says " +
                                       std::to_string(h.pool_size) + " bytes, it has " +
                                       std::to_string(actual_size));
  }
  if (actual_size > h.pool_size) {
    return error(errc::corruption, name + " has " + std::to_string(actual_size) +
                                       " bytes, but its header says " +
                                       std::to_string(h.pool_size));
  }
  const format::geometry g = format::geometry_for(h.pool_size);
  if (h.root_offset != format::root_offset || h.root_size != format::root_size ||
      h.chunk_table_offset != format::chunk_table_offset ||
      h.chunk_size != format::chunk_size || h.chunk_count != g.chunk_count ||
      h.heap_offset != g.heap_offset || g.chunk_count == 0) {
    return error(errc::corruption,
                 name + ": inconsistent geometry in the header (chunk size " +
                     std::to_string(h.chunk_size) + ", " + std::to_string(h.chunk_count) +
                     " chunks from offset " + std::to_string(h.heap_offset) + " in " +
                     std::to_string(h.pool_size) + " bytes)");
  }
  if (h.layout_name.back() != '\0' || h.build_layout.back() != '\0') {
    return error(errc::corruption, name + ": unterminated layout strings in the header");
  }
  if (stored_string(h.layout_name) != expected.name) {
    return error(errc::invalid_argument, name + " holds a pool of layout '" +
                                             std::string(stored_string(h.layout_name)) +
                                             "', not '" + expected.name + "'");
  }
  if (stored_string(h.build_layout) != expected.build_layout) {
    return error(errc::invalid_argument,
                 name + " was created by a build with persistent layout '" +
                     std::string(stored_string(h.build_layout)) + "'; this build uses '" +
                     expected.build_layout + "'");
  }
  return {};
}

granularity from_pmem2(pmem2_granularity g) {
  switch (g) {
    case PMEM2_GRANULARITY_BYTE: return granularity::byte;
    case PMEM2_GRANULARITY_CACHE_LINE: return granularity::cache_line;
    case PMEM2_GRANULARITY_PAGE: return granularity::page;
  }
  return granularity::page;
}

std::string region_name(const std::byte* base) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "memory region at %p", static_cast<const void*>(base));
  return buf;
}

// ---- names, limits and temporary files ------------------------------------------------

std::filesystem::path directory_of(const std::filesystem::path& file) {
  return file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
}

// The longest name the file system of `dir` takes (NAME_MAX where it cannot tell).
std::size_t name_max_of(const std::filesystem::path& dir) {
  const long n = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  return n > 0 ? static_cast<std::size_t>(n) : std::size_t{NAME_MAX};
}

// What ENAMETOOLONG means for `file`: its lengths and the limits.
std::string too_long(const std::filesystem::path& file) {
  std::size_t longest = 0;
  for (const auto& part : file) longest = std::max(longest, part.native().size());
  return "the path is " + std::to_string(file.native().size()) + " bytes and its longest name " +
         std::to_string(longest) + " bytes; the system's limits are " +
         std::to_string(PATH_MAX - 1) + " bytes for a path (PATH_MAX) and " +
         std::to_string(name_max_of(directory_of(file))) + " bytes for a name (NAME_MAX)";
}

// A pool is built as `<file>.creating-XXXXXX`: the name and the path must fit the system's
// limits with that suffix.
status check_create_limits(const std::filesystem::path& file, const std::string& what) {
  const std::size_t suffix = pool::temp_suffix.size();
  const std::size_t name = file.filename().native().size();
  const std::size_t name_max = name_max_of(directory_of(file));
  if (name + suffix > name_max) {
    return error(errc::invalid_argument,
                 what + ": its name is " + std::to_string(name) +
                     " bytes; it is built as '<name>" + std::string(pool::temp_suffix) +
                     "', which must fit the system's limit of " + std::to_string(name_max) +
                     " bytes for a name (NAME_MAX), so the name may have at most " +
                     std::to_string(name_max - suffix) + " bytes");
  }
  const std::size_t path = file.native().size();
  if (path + suffix > PATH_MAX - 1) {
    return error(errc::invalid_argument,
                 what + ": the path is " + std::to_string(path) +
                     " bytes; it is built as '<path>" + std::string(pool::temp_suffix) +
                     "', which must fit the system's limit of " + std::to_string(PATH_MAX - 1) +
                     " bytes for a path (PATH_MAX), so the path may have at most " +
                     std::to_string(PATH_MAX - 1 - suffix) + " bytes");
  }
  return {};
}

// `<name>.creating-` followed by the six letters or digits mkostemp puts for XXXXXX.
bool is_temp_name(std::string_view entry, std::string_view prefix) {
  const std::size_t random = 6;
  return entry.size() == prefix.size() + random && entry.starts_with(prefix) &&
         std::all_of(entry.end() - random, entry.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; });
}

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// Removes the temporary files of `file` (`<file>.creating-XXXXXX`) that no creator holds.
// A creator keeps an exclusive flock on its temporary file until the pool is linked into
// place, so one that can be locked is what a crashed creation left; one that cannot is being
// created and stays. `own`, if given, is the pool file this process holds locked
// exclusively: a temporary name of it is what a crash between linking the pool into place
// and removing that name left. Best effort: what cannot be removed stays.
void remove_stale_temps(const std::filesystem::path& file, const struct stat* own) {
  const std::string prefix = file.filename().native() + ".creating-";
  DIR* dir = ::opendir(directory_of(file).c_str());
  if (dir == nullptr) return;
  const int dfd = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    if (!is_temp_name(entry->d_name, prefix)) continue;
    const int fd = ::openat(dfd, entry->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat held {};
    if (::fstat(fd, &held) == 0 && S_ISREG(held.st_mode) &&
        ((own != nullptr && same_file(held, *own)) || ::flock(fd, LOCK_EX | LOCK_NB) == 0)) {
      // Only while the name still names the file that was locked.
      struct stat named {};
      if (::fstatat(dfd, entry->d_name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
          same_file(named, held)) {
        ::unlinkat(dfd, entry->d_name, 0);
      }
    }
    ::close(fd);
  }
  ::closedir(dir);
}

// True if `path` still names the file open as `fd`.
bool names(const std::string& path, int fd) {
  struct stat a {}, b {};
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && same_file(a, b);
}

bool on_tmpfs(int fd) {
  struct statfs fs;
  return ::fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

// Reserves the space of the whole file, so that no store into the mapping can fault with
// SIGBUS for want of space (a pool copied as a sparse file has holes). On tmpfs st_blocks
// counts exactly the pages the file has, so a file without holes is left as it is
// (reserving its pages again costs about 0.1 s per GiB there); elsewhere posix_fallocate
// decides, which is quick where the space is allocated already.
status reserve_space(int fd, const struct stat& st, const std::string& name) {
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (on_tmpfs(fd) && static_cast<std::uint64_t>(st.st_blocks) * 512 >= size) return {};
  if (int e = ::posix_fallocate(fd, 0, static_cast<off_t>(size)); e != 0) {
    return error(e == ENOSPC ? errc::no_space : errc::io_error,
                 "cannot reserve the space of " + name + " (" + std::to_string(size) +
                     " bytes) on its file system: " + errno_text(e));
  }
  return {};
}

}  // namespace

std::string_view to_string(granularity g) noexcept {
  switch (g) {
    case granularity::byte: return "byte";
    case granularity::cache_line: return "cache-line";
    case granularity::page: return "page";
  }
  return "?";
}

// Linux 6.1's synchronous collapse into huge pages; glibc 2.36's <sys/mman.h> predates it.
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

// ---- the file behind a file pool ---------------------------------------------------------

struct pool::file_mapping {
  static constexpr std::uint64_t kHugePage = std::uint64_t{2} << 20;

  int fd = -1;
  pmem2_map* map = nullptr;
  bool writable = true;  // mapped read-write (not a read_only open)
  // The granularity the pool works at, decided once by map_file. Page-granular mappings are
  // registered with pool_backend (their persistence is msync) until the mapping goes.
  granularity effective = granularity::page;

  // Huge pages (pool::huge_page_hint). `huge` exists only for a mapping where they
  // apply: a tmpfs file mapped at a 2 MiB boundary. The pool's first huge_wanted bytes are
  // to be backed by huge pages; the helper has handed [0, huge_done) to the kernel (only it
  // writes huge_done). huge_refused: the kernel refused in a way that will not change (no
  // MADV_COLLAPSE before Linux 6.1, or shmem huge pages denied), so nothing more is asked.
  std::atomic<std::uint64_t> huge_wanted{0};
  std::atomic<std::uint64_t> huge_done{0};
  std::atomic<bool> huge_refused{false};
  std::unique_ptr<helper_thread> huge;

  file_mapping() = default;
  file_mapping(const file_mapping&) = delete;
  file_mapping& operator=(const file_mapping&) = delete;
  ~file_mapping() {
    if (huge != nullptr) huge->stop();  // before the mapping goes: it may be collapsing it
    if (map != nullptr) {
      if (effective == granularity::page && writable) {
        pmem2_get_persist_fn(map)(pmem2_map_get_address(map), pmem2_map_get_size(map));
        detail::unregister_page_pool(pmem2_map_get_address(map));
      }
      pmem2_map_delete(&map);
    }
    if (fd >= 0) ::close(fd);
  }

  // A file on tmpfs (/dev/shm) is DRAM emulating persistent memory: the page cache is the
  // medium, msync has nothing to write back, and the cache-line flush instructions are
  // what emulates NVM's persistence. libpmem2 reports page granularity there (it looks for
  // DAX); the pool uses cache-line granularity instead, unless PMEM2_FORCE_GRANULARITY
  // says otherwise (libpmem2 then honours that itself).
  bool emulated_on_tmpfs() const {
    struct statfs fs;
    return std::getenv("PMEM2_FORCE_GRANULARITY") == nullptr && ::fstatfs(fd, &fs) == 0 &&
           fs.f_type == TMPFS_MAGIC;
  }

  // Maps the whole file, read-write or (not `writable`) read-only, asking for cache-line
  // granularity and settling for page.
  status map_file(const std::string& name) {
    pmem2_source* source = nullptr;
    pmem2_config* config = nullptr;
    auto fail = [&](const char* step) {
      std::string message = "cannot map " + name + " (" + step + "): " + pmem2_errormsg();
      if (config != nullptr) pmem2_config_delete(&config);
      if (source != nullptr) pmem2_source_delete(&source);
      return error(errc::io_error, message);
    };
    const bool tmpfs = emulated_on_tmpfs();
    if (pmem2_source_from_fd(&source, fd) != 0) return fail("pmem2_source_from_fd");
    if (pmem2_config_new(&config) != 0) return fail("pmem2_config_new");
    if (!writable && pmem2_config_set_protection(config, PMEM2_PROT_READ) != 0) {
      return fail("pmem2_config_set_protection");
    }
    if (pmem2_config_set_required_store_granularity(config, PMEM2_GRANULARITY_CACHE_LINE) !=
        0) {
      return fail("pmem2_config_set_required_store_granularity");
    }
    int r = pmem2_map_new(&map, config, source);
    if (r == PMEM2_E_GRANULARITY_NOT_SUPPORTED) {
      if (pmem2_config_set_required_store_granularity(config, PMEM2_GRANULARITY_PAGE) != 0) {
        return fail("pmem2_config_set_required_store_granularity");
      }
      r = pmem2_map_new(&map, config, source);
    }
    if (r != 0) {
      map = nullptr;
      return fail("pmem2_map_new");
    }
    pmem2_config_delete(&config);
    pmem2_source_delete(&source);
    effective = tmpfs ? granularity::cache_line
                      : from_pmem2(pmem2_map_get_store_granularity(map));
    if (on_tmpfs(fd) &&
        reinterpret_cast<std::uintptr_t>(pmem2_map_get_address(map)) % kHugePage == 0) {
      huge = std::make_unique<helper_thread>([this] { collapse_wanted(); });
    }
    if (effective == granularity::page && writable) {  // a read-only pool has nothing to sync
      detail::register_page_pool(pmem2_map_get_address(map), pmem2_map_get_size(map),
                                 pmem2_get_flush_fn(map), pmem2_get_drain_fn(map));
    }
    return {};
  }

  // The helper's job: asks the kernel to back each whole 2 MiB region below huge_wanted
  // with a huge page (MADV_COLLAPSE, which copies the region's pages into one and maps it
  // with one page-table entry; stores into the region meanwhile wait for it). EAGAIN is
  // the kernel's transient refusal (a page of the region locked or being written back at
  // that moment, seen once in a parallel test run): the region is asked again, up to
  // kCollapseTries times. A region the kernel still has no huge page for (EAGAIN, ENOMEM)
  // stays as it is.
  static constexpr int kCollapseTries = 4;
  void collapse_wanted() noexcept {
    auto* base = static_cast<std::byte*>(pmem2_map_get_address(map));
    const std::uint64_t size = pmem2_map_get_size(map);
    const std::uint64_t wanted = std::min(huge_wanted.load(std::memory_order_acquire), size);
    for (std::uint64_t at = huge_done.load(std::memory_order_relaxed);
         at + kHugePage <= wanted && !huge_refused.load(std::memory_order_relaxed);
         at += kHugePage) {
      for (int attempt = 1;; ++attempt) {
        if (::madvise(base + at, kHugePage, MADV_COLLAPSE) == 0) break;
        if (errno == EAGAIN && attempt < kCollapseTries) {
          std::this_thread::yield();
          continue;
        }
        if (errno != EAGAIN && errno != ENOMEM) huge_refused.store(true, std::memory_order_relaxed);
        break;
      }
      huge_done.store(at + kHugePage, std::memory_order_release);
    }
  }
};

// ---- pool --------------------------------------------------------------------------------

pool::pool() = default;
pool::pool(pool&&) noexcept = default;
pool& pool::operator=(pool&&) noexcept = default;
pool::~pool() = default;

void pool::huge_page_hint::back(std::uint64_t end) const noexcept {
  file_mapping* f = file_;
  if (f == nullptr || f->huge == nullptr || f->huge_refused.load(std::memory_order_relaxed)) {
    return;
  }
  constexpr std::uint64_t region = file_mapping::kHugePage;
  // Whole regions, and the one after them: the next allocations land there, and find it
  // backed already rather than wait for it.
  const std::uint64_t want = std::min((end + region - 1) / region * region + region,
                                      std::uint64_t{pmem2_map_get_size(f->map)});
  std::uint64_t had = f->huge_wanted.load(std::memory_order_relaxed);
  while (had < want) {
    if (f->huge_wanted.compare_exchange_weak(had, want, std::memory_order_release,
                                             std::memory_order_relaxed)) {
      (void)f->huge->ask();  // no helper (a forked child): the hint is dropped
      return;
    }
  }
}

std::uint64_t pool::TEST_await_huge_pages() const noexcept {
  file_mapping* f = file_.get();
  if (f == nullptr || f->huge == nullptr) return 0;
  f->huge->await();
  return f->huge_refused.load(std::memory_order_relaxed)
             ? 0
             : f->huge_done.load(std::memory_order_acquire);
}

std::string pool::uuid_string() const {
  const auto u = uuid();
  char buf[40];
  std::snprintf(buf, sizeof buf,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                u[14], u[15]);
  return buf;
}

pool_layout pool::layout() const {
  return {std::string(stored_string(header().layout_name)),
          std::string(stored_string(header().build_layout))};
}

result<pool> pool::create_file(const std::filesystem::path& file, std::uint64_t size,
                               const pool_layout& layout, const persist_ops& ops) {
  const std::string what = "cannot create pool " + quoted(file);
  if (status s = check_layout(layout, what); !s) return std::move(s).error();
  if (size > max_size) {
    return error(errc::invalid_argument, what + ": " + std::to_string(size) +
                                             " bytes is above the maximum pool size of " +
                                             std::to_string(max_size) + " bytes");
  }
  size = format::align_up(size, format::page_size);
  if (size < min_size) {
    return error(errc::invalid_argument, what + ": " + std::to_string(size) +
                                             " bytes is below the minimum pool size of " +
                                             std::to_string(min_size) + " bytes");
  }
  if (status s = check_create_limits(file, what); !s) return std::move(s).error();
  std::error_code ec;
  const auto type = std::filesystem::symlink_status(file, ec).type();
  if (type == std::filesystem::file_type::none) {  // not even its absence is known
    const int e = ec.value();
    if (e == ENAMETOOLONG) return error(errc::invalid_argument, what + ": " + too_long(file));
    return error(errc::io_error, what + ": " + errno_text(e));
  }
  if (type != std::filesystem::file_type::not_found) {
    return error(errc::invalid_argument, what + ": the file already exists");
  }
  remove_stale_temps(file, nullptr);

  // Built under a temporary name in the same directory, linked into place when durable.
  // Between mkostemp and flock, another creator's remove_stale_temps may take the new file
  // for a stale one: it then holds the lock or has removed the name, and the creation starts
  // again under a new name.
  std::string temp;
  pool p;
  p.file_ = std::make_unique<file_mapping>();
  for (int attempt = 1;; ++attempt) {
    temp = file.string() + std::string(temp_suffix);
    const int fd = ::mkostemp(temp.data(), O_CLOEXEC);
    if (fd < 0) {
      return error(errc::io_error, what + ": cannot create a temporary file next to it: " +
                                       errno_text(errno));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && names(temp, fd)) {
      p.file_->fd = fd;
      break;
    }
    const int e = errno;
    ::close(fd);
    if (attempt == 8) {
      return error(errc::io_error, what + ": cannot lock a temporary file next to it (" +
                                       std::to_string(attempt) + " tries; last " + temp +
                                       "): " + errno_text(e));
    }
  }
  struct remove_temp {
    const std::string& path;
    ~remove_temp() { ::unlink(path.c_str()); }
  } remove{temp};

  ::fchmod(p.file_->fd, 0644);
  if (int e = ::posix_fallocate(p.file_->fd, 0, static_cast<off_t>(size)); e != 0) {
    return error(e == ENOSPC ? errc::no_space : errc::io_error,
                 what + ": cannot reserve " + std::to_string(size) + " bytes: " + errno_text(e));
  }
  p.name_ = quoted(file);
  if (status s = p.file_->map_file(p.name_); !s) return std::move(s).error();
  p.base_ = static_cast<std::byte*>(pmem2_map_get_address(p.file_->map));
  p.size_ = size;
  p.granularity_ = p.file_->effective;

  format_pool(p.base_, make_header(size, layout), ops);
  if (::fsync(p.file_->fd) != 0) {
    return error(errc::io_error, what + ": fsync: " + errno_text(errno));
  }
  if (::link(temp.c_str(), file.c_str()) != 0) {
    const int e = errno;
    return error(e == EEXIST ? errc::invalid_argument : errc::io_error,
                 what + (e == EEXIST ? ": the file already exists"
                                     : ": cannot link it into place: " + errno_text(e)));
  }
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : ".";
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::unlink(temp.c_str());
    ::fsync(dfd);
    ::close(dfd);
  }
  return p;
}

result<pool> pool::open(const std::filesystem::path& file, const pool_layout& layout,
                        pool_access access) {
  const std::string name = quoted(file);
  const bool read_only = access == pool_access::read_only;
  pool p;
  p.file_ = std::make_unique<file_mapping>();
  p.file_->writable = !read_only;
  p.file_->fd = ::open(file.c_str(), (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (p.file_->fd < 0) {
    const int e = errno;
    if (e == ENOENT) return error(errc::not_found, "pool file " + name + " does not exist");
    if (e == EISDIR) return error(errc::invalid_argument, name + " is a directory, not a pool");
    if (e == ENAMETOOLONG) {
      return error(errc::invalid_argument, "cannot open " + name + ": " + too_long(file));
    }
    return error(errc::io_error, "cannot open " + name + (read_only ? "" : " for writing") +
                                     ": " + errno_text(e));
  }
  if (::flock(p.file_->fd, (read_only ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    const int e = errno;
    if (e == EWOULDBLOCK) {
      return error(errc::busy,
                   "pool " + name +
                       (read_only ? " is already open for writing (another process or pool "
                                    "object holds its lock)"
                                  : " is already open (another process or pool object holds "
                                    "its lock)"));
    }
    return error(errc::io_error, "cannot lock " + name + ": " + errno_text(e));
  }
  struct stat st {};
  if (::fstat(p.file_->fd, &st) != 0) {
    return error(errc::io_error, "cannot stat " + name + ": " + errno_text(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return error(errc::invalid_argument, name + " is not a regular file, not a pool");
  }
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  std::vector<std::byte> head(std::min<std::uint64_t>(file_size, format::header_size));
  std::size_t got = 0;
  while (got < head.size()) {
    ssize_t n = ::pread(p.file_->fd, head.data() + got, head.size() - got,
                        static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return error(errc::io_error, "cannot read the header of " + name);
    got += static_cast<std::size_t>(n);
  }
  if (status s = validate(head, file_size, layout, name); !s) return std::move(s).error();
  if (!read_only) {
    if (status s = reserve_space(p.file_->fd, st, name); !s) return std::move(s).error();
  }

  if (status s = p.file_->map_file(name); !s) return std::move(s).error();
  if (pmem2_map_get_size(p.file_->map) != file_size) {
    return error(errc::io_error, "cannot map " + name + ": mapped " +
                                     std::to_string(pmem2_map_get_size(p.file_->map)) +
                                     " bytes of " + std::to_string(file_size));
  }
  p.base_ = static_cast<std::byte*>(pmem2_map_get_address(p.file_->map));
  p.size_ = file_size;
  p.name_ = name;
  p.granularity_ = p.file_->effective;
  p.access_ = access;
  if (!read_only) remove_stale_temps(file, &st);  // only once the open has succeeded
  return p;
}

result<pool> pool::create_region(std::span<std::byte> region, const pool_layout& layout,
                                 const persist_ops& ops) {
  const std::string name = region_name(region.data());
  const std::string what = "cannot create a pool in the " + name;
  if (status s = check_layout(layout, what); !s) return std::move(s).error();
  if (reinterpret_cast<std::uintptr_t>(region.data()) % pv::cache_line != 0) {
    return error(errc::invalid_argument, what + ": it is not 64-byte aligned");
  }
  if (region.size() < min_size) {
    return error(errc::invalid_argument, what + ": " + std::to_string(region.size()) +
                                             " bytes is below the minimum pool size of " +
                                             std::to_string(min_size) + " bytes");
  }
  format_pool(region.data(), make_header(region.size(), layout), ops);
  pool p;
  p.base_ = region.data();
  p.size_ = region.size();
  p.name_ = name;
  return p;
}

result<pool> pool::open_in(std::span<std::byte> region, const pool_layout& layout) {
  const std::string name = region_name(region.data());
  if (reinterpret_cast<std::uintptr_t>(region.data()) % pv::cache_line != 0) {
    return error(errc::invalid_argument, "cannot open a pool in the " + name +
                                             ": it is not 64-byte aligned");
  }
  const std::span<const std::byte> head =
      std::span<const std::byte>(region).first(std::min<std::size_t>(region.size(),
                                                                     format::header_size));
  if (status s = validate(head, region.size(), layout, name); !s) return std::move(s).error();
  pool p;
  p.base_ = region.data();
  p.size_ = region.size();
  p.name_ = name;
  return p;
}

}  // namespace alloc
