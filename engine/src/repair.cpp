// DB::Repair: reads a damaged pool file into DRAM (never mapping or writing it), salvages
// its intact committed key-values (internal/salvage.hpp) and writes them into a new pool
// through the engine's own API.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "allocators/internal/pool_format.hpp"
#include "allocators/pool.hpp"
#include "flintkv/db.hpp"
#include "flintkv/internal/open.hpp"
#include "flintkv/internal/salvage.hpp"
#include "flintkv/write_batch.hpp"

namespace flintkv {
namespace {

namespace fmt = alloc::format;
using config = internal::default_config;

struct release {
  void operator()(std::byte* p) const { std::free(p); }
};
using image_bytes = std::unique_ptr<std::byte, release>;

std::string errno_text(int e) { return std::strerror(e); }

// A file descriptor closed (and so unlocked) on every path.
struct file_descriptor {
  int fd = -1;
  ~file_descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

template <std::size_t N>
std::string_view stored_string(const std::array<char, N>& a) {
  return {a.data(), ::strnlen(a.data(), N)};
}

// Every check alloc::pool::open makes of a header, but the file's size: the header's own
// words agree with each other. Returns what is wrong ("" when intact).
std::string header_problem(const std::byte* page, std::uint64_t available) {
  if (available < fmt::header_size) return "the file is shorter than a pool header";
  fmt::pool_header h;
  std::memcpy(&h, page, sizeof h);
  if (h.magic != fmt::magic) return "no pool magic 'FLNTPOOL' at offset 0";
  if (h.layout_version != fmt::layout_version) {
    return "pool layout version " + std::to_string(h.layout_version);
  }
  if (h.state != fmt::state_complete) return "the creation state word is not 'COMPLETE'";
  if (fmt::checksum({page, fmt::header_size}) != h.checksum) return "header checksum mismatch";
  const fmt::geometry g = fmt::geometry_for(h.pool_size);
  if (h.root_offset != fmt::root_offset || h.root_size != fmt::root_size ||
      h.chunk_table_offset != fmt::chunk_table_offset || h.chunk_size != fmt::chunk_size ||
      h.chunk_count != g.chunk_count || h.heap_offset != g.heap_offset || g.chunk_count == 0) {
    return "inconsistent geometry";
  }
  if (h.layout_name.back() != '\0' || h.build_layout.back() != '\0') {
    return "unterminated layout strings";
  }
  return {};
}

// Reads the file at `path` into DRAM, as a pool of the size its header says (or, when the
// header is damaged, of the file's size), and settles the geometry. Fills the report's
// damaged_size, header_intact and notes.
Status read_damaged(const std::string& path, image_bytes* bytes, internal::pool_image* image,
                    RepairReport* report) {
  file_descriptor f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) {
    const int e = errno;
    if (e == ENOENT) return Status::NotFound(path + ": no such pool");
    return Status::IOError(path + ": cannot open it for reading: " + errno_text(e));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    return Status::IOError(path + ": cannot stat it: " + errno_text(errno));
  }
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + " is not a regular file");
  if (st.st_size == 0) return Status::InvalidArgument(path + " is empty (0 bytes): not a pool");
  // A pool open in a process holds an exclusive lock: reading it while it changes would
  // salvage a torn state. A shared lock changes nothing in the file.
  if (::flock(f.fd, LOCK_SH | LOCK_NB) != 0) {
    const int e = errno;
    if (e == EWOULDBLOCK) {
      return Status::Busy(path + " is open in a process: close it before repairing");
    }
    return Status::IOError(path + ": cannot lock it: " + errno_text(e));
  }
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  report->damaged_size = file_size;

  auto read_at = [&](std::byte* to, std::uint64_t n, std::uint64_t at) -> Status {
    while (n > 0) {
      const ssize_t got = ::pread(f.fd, to, n, static_cast<off_t>(at));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        return Status::IOError(path + ": cannot read " + std::to_string(n) + " bytes at offset " +
                               std::to_string(at) + ": " + errno_text(errno));
      }
      if (got == 0) break;  // the file shrank: the rest stays zero
      to += got;
      n -= static_cast<std::uint64_t>(got);
      at += static_cast<std::uint64_t>(got);
    }
    return Status::OK();
  };

  alignas(64) std::byte page[fmt::header_size] = {};
  const std::uint64_t in_page = std::min<std::uint64_t>(file_size, fmt::header_size);
  if (Status s = read_at(page, in_page, 0); !s.ok()) return s;
  const std::string problem = header_problem(page, in_page);
  std::uint64_t pool_size = file_size;
  if (problem.empty()) {
    fmt::pool_header h;
    std::memcpy(&h, page, sizeof h);
    const std::string expected_build = alloc::layout_fingerprint<config::policy>();
    if (stored_string(h.layout_name) != internal::kLayoutName) {
      return Status::InvalidArgument(path + " holds a pool of layout '" +
                                     std::string(stored_string(h.layout_name)) + "', not '" +
                                     internal::kLayoutName + "': not a FlintKV store");
    }
    if (stored_string(h.build_layout) != expected_build) {
      return Status::InvalidArgument(
          path + " was created by a build with persistent layout '" +
          std::string(stored_string(h.build_layout)) + "'; this build uses '" + expected_build +
          "': repair it with a build of that layout");
    }
    pool_size = h.pool_size;
    report->header_intact = pool_size == file_size;
    if (pool_size != file_size) {
      report->notes.push_back("the file has " + std::to_string(file_size) +
                              " bytes, but its header says " + std::to_string(pool_size) +
                              (file_size < pool_size ? ": it is truncated (the missing bytes "
                                                       "are read as zeros)"
                                                     : ": the bytes past that are ignored"));
    }
  } else {
    report->notes.push_back("the pool header is damaged (" + problem +
                            "): the geometry is derived from the file's size, " +
                            std::to_string(file_size) + " bytes");
    if (file_size < fmt::min_pool_size) {
      return Status::Corruption(path + ": " + std::to_string(file_size) +
                                " bytes, too short to hold a pool (the smallest has " +
                                std::to_string(fmt::min_pool_size) +
                                "), and its header is damaged (" + problem + ")");
    }
  }

  const std::uint64_t buffer_size = fmt::align_up(pool_size, fmt::page_size);
  bytes->reset(static_cast<std::byte*>(std::aligned_alloc(fmt::page_size, buffer_size)));
  if (*bytes == nullptr) {
    return Status::NoSpace("out of DRAM: repair reads " + path + " (" +
                           std::to_string(pool_size) + " bytes) into memory");
  }
  std::memset(bytes->get(), 0, buffer_size);
  if (Status s = read_at(bytes->get(), std::min(file_size, pool_size), 0); !s.ok()) return s;

  const fmt::geometry g = fmt::geometry_for(pool_size);
  image->path = path;
  image->base = bytes->get();
  image->size = buffer_size;
  image->heap_begin = g.heap_offset;
  image->chunk_count = g.chunk_count;
  return Status::OK();
}

// The new pool does not exist, and its directory does and is writable (as far as access()
// can tell: creating the pool has the last word).
Status check_target(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::symlink_status(path, ec).type() != fs::file_type::not_found) {
    return Status::InvalidArgument(path + ": exists; repair writes a new pool and never "
                                          "replaces a file");
  }
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) {
    return Status::IOError("cannot create the new pool " + path + ": its directory " +
                           dir.string() + " does not exist");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Status::IOError("cannot create the new pool " + path + ": its directory " +
                           dir.string() + " is not writable: " + errno_text(errno));
  }
  return Status::OK();
}

// Writes `live` into a new pool at `path`; removes the pool again on any error.
Status write_new_pool(const std::string& path, std::uint64_t pool_size,
                      const std::vector<internal::salvaged>& live, RepairReport* report) {
  Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  options.pool_size = pool_size;
  std::unique_ptr<DB> db;
  if (Status s = DB::Open(options, path, &db); !s.ok()) return s;
  auto fail = [&](Status s, const std::string& what) {
    db.reset();
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    const std::string message = what + ": " + s.message();
    switch (s.code()) {
      case Status::Code::kNoSpace:
        return Status::NoSpace(message + " (a larger pool size may hold the salvaged keys)");
      case Status::Code::kIOError: return Status::IOError(message);
      default: return Status::Corruption(message);
    }
  };
  // Batches of about 4 MiB or 1024 keys: each is one version and one attach.
  try {
    WriteBatch batch;
    std::size_t bytes = 0;
    for (const internal::salvaged& kv : live) {
      batch.Put(kv.key, kv.value);
      bytes += kv.key.size() + kv.value.size();
      if (batch.Count() >= 1024 || bytes >= (4u << 20)) {
        if (Status s = db->Write(batch); !s.ok()) {
          return fail(s, "writing the salvaged keys into " + path);
        }
        batch.Clear();
        bytes = 0;
      }
    }
    if (Status s = db->Write(batch); !s.ok()) {
      return fail(s, "writing the salvaged keys into " + path);
    }
  } catch (const std::bad_alloc&) {
    return fail(Status::NoSpace("out of DRAM"), "writing the salvaged keys into " + path);
  }
  db.reset();
  // What the engine wrote, read back as any later open will.
  CheckReport check;
  if (Status s = DB::Check(path, &check); !s.ok()) return fail(s, "the new pool failed its check");
  if (check.live_keys != live.size()) {
    return fail(Status::Corruption(std::to_string(check.live_keys) + " live keys, not " +
                                   std::to_string(live.size())),
                "the new pool failed its check");
  }
  report->new_pool_size = check.pool_size;
  report->keys_salvaged = live.size();
  return Status::OK();
}

Status repair(const std::string& damaged, const std::string& new_pool, const Options& options,
              RepairReport* report) {
  if (damaged.empty() || new_pool.empty()) {
    return Status::InvalidArgument("repair: empty pool path");
  }
  if (options.pool_size != 0 && options.pool_size < kMinPoolSize) {
    return Status::InvalidArgument("pool size " + std::to_string(options.pool_size) +
                                   " below the minimum " + std::to_string(kMinPoolSize));
  }
  if (Status s = check_target(new_pool); !s.ok()) return s;
  image_bytes bytes;
  internal::pool_image image;
  if (Status s = read_damaged(damaged, &bytes, &image, report); !s.ok()) return s;

  internal::salvage<config::policy, config::mode> salvage(image, report);
  const std::vector<internal::salvaged> live = salvage.run();
  if (!report->header_intact && !salvage.found_a_store()) {
    return Status::InvalidArgument(damaged + ": no pool header and no node of a store in it: "
                                             "not a FlintKV pool, nothing to salvage");
  }
  const std::uint64_t size =
      options.pool_size != 0
          ? options.pool_size
          : std::max<std::uint64_t>(fmt::align_up(report->damaged_size, fmt::page_size),
                                    kMinPoolSize);
  return write_new_pool(new_pool, size, live, report);
}

}  // namespace

Status DB::Repair(const std::string& damaged, const std::string& new_pool, const Options& options,
                  RepairReport* report) {
  RepairReport ignored;
  RepairReport* r = report != nullptr ? report : &ignored;
  *r = RepairReport{};
  try {
    return repair(damaged, new_pool, options, r);
  } catch (const std::bad_alloc&) {
    return Status::NoSpace("out of DRAM while repairing " + damaged);
  }
}

}  // namespace flintkv
