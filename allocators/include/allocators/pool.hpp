// pool: a region of persistent memory with a validated header, a root area for its user,
// and a heap for persistent_allocator.
//
// Two settings:
//  - a file, mapped with libpmem2 (production): create() builds the pool under a temporary
//    name and links it into place only once it is complete and durable; open() validates the
//    file before mapping it, and locks it (flock) for as long as the pool object lives:
//    exclusively for read_write (which also reserves the file's space), shared for
//    read_only (mapped read-only: nothing can change the file);
//  - a caller's memory range (the pv model's region, for crash tests): create_in() and
//    open_in(), with no file, lock or libpmem2.
//
//   auto p = alloc::pool::create<P>("/dev/shm/db.pool", 64 << 20,
//                                   {"flintkv", alloc::layout_fingerprint<P>()});
//   if (!p) return p.error();           // names the file and what is wrong
//   my_root* r = p->root_as<my_root>(); // zero after create
//
// Every write the pool makes goes through the Policy given to create (write_range and a
// fence), so under pv::model_backend the model sees all of it. For file pools use
// flit::policy<Placement, alloc::pool_backend>, which persists on page-granular mappings too.
//
// Thread safety: after create/open returns, every const member may be called from any
// thread. Moving or destroying a pool REQUIRES that no thread uses it.
// Invariants:
//  (1) A pool object exists only for bytes whose header passed every check of open():
//      magic, version, completion, checksum, size, geometry, layout name, build layout.
//  (2) A failed create or open leaves every existing file untouched. (A create removes
//      temporary files of crashed creations before it starts, a read-write open once it
//      has succeeded: see create() and open().)
//  (3) A read_only pool's mapping is read-only: a store into it faults.
// Persistence:
//  (1) Creation writes the state word last, after a fence: a crash during creation leaves
//      bytes that open() rejects as incomplete (or, for files, only a temporary file).
//  (2) Closing a page-granular pool syncs its whole mapping.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "allocators/error.hpp"
#include "allocators/internal/pool_format.hpp"
#include "allocators/pptr.hpp"
#include "flit/flit.hpp"

namespace alloc {

// The store granularity of a pool's mapping: the unit in which stores become durable without
// the pool's help (byte: eADR; cache_line: DAX, flush instructions suffice; page: msync).
// Pools over a memory range report cache_line (the pv model works per line).
enum class granularity : std::uint8_t { byte, cache_line, page };
std::string_view to_string(granularity g) noexcept;

// How open() takes a pool file.
enum class pool_access : std::uint8_t {
  read_write,  // O_RDWR, exclusive lock, the file's space reserved, mapped read-write
  read_only,   // O_RDONLY, shared lock, mapped read-only: the file cannot change
};

// What a pool was made for; open() accepts a pool only if both match.
struct pool_layout {
  std::string name;          // the user's layout, e.g. "flintkv": 1 to 31 characters
  std::string build_layout;  // layout-relevant build choices: 1 to 63 characters
};

// The persistent layout of persist<T> under Policy: its cell size and alignment, and whether
// the placement keeps a flag bit inside the word. Builds whose words are laid out alike get
// the same string, e.g. "persist64:8B/8" (hashed, plain) or "persist64:16B/16" (adjacent).
template <class Policy>
std::string layout_fingerprint() {
  using cell = typename Policy::template cell<pptr<>>;  // a 64-bit word every placement holds
  std::string s = "persist64:" + std::to_string(sizeof(cell)) + "B/" +
                  std::to_string(alignof(cell));
  if constexpr (Policy::placement::tracks == flit::tracking::flush_bit) s += "+flagbit";
  return s;
}

// Durable writes through a Policy, for the layer's code that is not a template.
struct persist_ops {
  void (*write)(void* dst, const void* src, std::size_t n);  // a private p-store of a range
  void (*fence)();  // completes every write-back of this thread
};

template <class Policy>
inline constexpr persist_ops persist_ops_for{
    [](void* dst, const void* src, std::size_t n) {
      Policy::write_range(dst, src, n, flit::persisted);
    },
    [] { Policy::fence_pending(); }};

class pool {
 public:
  static constexpr std::uint64_t root_size = format::root_size;
  static constexpr std::uint64_t min_size = format::min_pool_size;
  // The largest size a file can have (off_t), in whole pages.
  static constexpr std::uint64_t max_size =
      (std::uint64_t{INT64_MAX} / format::page_size) * format::page_size;
  // The suffix of the temporary file a pool is built under: `<file>.creating-XXXXXX`.
  static constexpr std::string_view temp_suffix = ".creating-XXXXXX";

  // Creates the pool file `file` of `size` bytes (rounded up to 4 KiB), under the temporary
  // name `<file>.creating-XXXXXX`, which its creator holds an exclusive flock on. Temporary
  // files of `file` that nobody holds (their creator crashed) are removed first.
  // Errors: invalid_argument (file exists, size below min_size or above max_size, a path or
  // name over PATH_MAX or NAME_MAX with the temporary suffix, layout strings too long or
  // empty), no_space (the file system cannot hold it), io_error.
  template <class Policy>
  static result<pool> create(const std::filesystem::path& file, std::uint64_t size,
                             const pool_layout& layout) {
    return create_file(file, size, layout, persist_ops_for<Policy>);
  }
  // Opens an existing pool file. read_write locks it exclusively, reserves the space of the
  // whole file (posix_fallocate: a sparse copy gets its holes filled, so no later store
  // can fault for want of space) and removes temporary files of crashed creations of it;
  // read_only locks it shared (read-only opens coexist; a read-write open and a read-only
  // one exclude each other) and maps it read-only.
  // Errors: not_found; busy (open elsewhere, in this process or another, in a conflicting
  // mode); invalid_argument (not a pool, newer layout version, other layout or build layout,
  // a path or name over PATH_MAX or NAME_MAX); corruption (truncated, incomplete, bad
  // checksum, inconsistent geometry); no_space (read_write: the file system cannot hold the
  // whole file; the file is left as it was); io_error.
  static result<pool> open(const std::filesystem::path& file, const pool_layout& layout,
                           pool_access access = pool_access::read_write);

  // The same over a caller's memory range (64-byte aligned, at least min_size bytes), which
  // must outlive the pool. No lock: two pools over one range are the caller's business.
  template <class Policy>
  static result<pool> create_in(std::span<std::byte> region, const pool_layout& layout) {
    return create_region(region, layout, persist_ops_for<Policy>);
  }
  static result<pool> open_in(std::span<std::byte> region, const pool_layout& layout);

  pool(pool&&) noexcept;
  pool& operator=(pool&&) noexcept;
  ~pool();

  std::byte* base() const noexcept { return base_; }
  std::uint64_t size() const noexcept { return size_; }
  // The file's path, or "memory region at 0x...": what error messages name.
  const std::string& name() const noexcept { return name_; }
  granularity store_granularity() const noexcept { return granularity_; }
  // read_only only for a file opened so; created pools and region pools are read_write.
  pool_access access() const noexcept { return access_; }
  std::array<std::uint8_t, 16> uuid() const noexcept { return header().uuid; }
  std::string uuid_string() const;
  pool_layout layout() const;

  // The root area: root_size bytes, 64-byte aligned, zero after creation, owned by the user.
  void* root() const noexcept { return base_ + format::root_offset; }
  // The root area as a T. T must be valid when its bytes are all zero (persist<U> words are).
  template <class T>
  T* root_as() const noexcept {
    static_assert(sizeof(T) <= root_size && alignof(T) <= 64);
    static_assert(std::is_standard_layout_v<T>);
    return std::launder(reinterpret_cast<T*>(root()));
  }

  template <class T>
  T* get(pptr<T> p) const noexcept {
    return p.get(base_);
  }
  // REQUIRES: object lies in the pool.
  template <class T>
  pptr<T> pointer_to(const T* object) const noexcept {
    return pptr<T>(static_cast<std::uint64_t>(reinterpret_cast<const std::byte*>(object) - base_));
  }
  // The heap, as offsets: every block persistent_allocator hands out lies in
  // [heap_begin(), heap_end()). For validating offsets read from the pool.
  std::uint64_t heap_begin() const noexcept { return header().heap_offset; }
  std::uint64_t heap_end() const noexcept {
    return header().heap_offset + header().chunk_count * format::chunk_size;
  }
  class huge_page_hint;
  // The pool's huge-page hint: see huge_page_hint below.
  huge_page_hint huge_pages() const noexcept;
  // For tests: waits until every region asked for so far was handed to the kernel; returns
  // how many bytes from the pool's start were (0 where huge pages do not apply).
  std::uint64_t TEST_await_huge_pages() const noexcept;

  bool contains(const void* p, std::size_t n = 1) const noexcept {
    auto a = reinterpret_cast<std::uintptr_t>(p);
    auto b = reinterpret_cast<std::uintptr_t>(base_);
    return a >= b && a - b <= size_ && n <= size_ - (a - b);
  }

 private:
  struct file_mapping;

  pool();
  static result<pool> create_file(const std::filesystem::path& file, std::uint64_t size,
                                  const pool_layout& layout, const persist_ops& ops);
  static result<pool> create_region(std::span<std::byte> region, const pool_layout& layout,
                                    const persist_ops& ops);
  const format::pool_header& header() const noexcept {
    return *reinterpret_cast<const format::pool_header*>(base_);
  }

  std::byte* base_ = nullptr;
  std::uint64_t size_ = 0;
  granularity granularity_ = granularity::cache_line;
  pool_access access_ = pool_access::read_write;
  std::string name_;
  std::unique_ptr<file_mapping> file_;  // file pools only

 public:
  // back(end) asks that the pool's first `end` bytes be backed by huge pages, so that reads
  // scattered over them miss the TLB less: whole 2 MiB regions, and one more beyond them,
  // collapsed by a helper thread of the pool's (MADV_COLLAPSE), not by the caller. Only
  // what is asked for is backed, so resident memory grows with the part of the pool in use,
  // not with its size (persistent_allocator asks for the chunks it hands out). A hint: it
  // applies to a file on tmpfs (/dev/shm) mapped at a 2 MiB boundary, on a kernel that can
  // collapse it (Linux 6.1 or later), and does nothing elsewhere. The bytes read the same
  // before and after. The handle stays valid while the pool's mapping does, also when the
  // pool object is moved (as base() does). Thread safety: back() from any thread.
  class huge_page_hint {
   public:
    huge_page_hint() = default;  // applies nowhere
    void back(std::uint64_t end) const noexcept;

   private:
    friend class pool;
    explicit huge_page_hint(file_mapping* f) noexcept : file_(f) {}
    file_mapping* file_ = nullptr;
  };
};

inline pool::huge_page_hint pool::huge_pages() const noexcept {
  return huge_page_hint(file_.get());
}

}  // namespace alloc
