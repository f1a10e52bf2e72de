// A software model of persistent memory, for testing crash consistency without NVM.
//
// The model owns a region of bytes. Programs run on the region directly (it is the volatile
// view: what loads see). Every access made through the persistence layer is observed: each
// store to a cache line creates a new version of that line, and the model remembers the
// versions that are not yet durable. pwb by a thread records the line's newest version;
// pfence by that thread makes every version it recorded durable. crash() produces the
// durable image: for each line, the last durable version, or, for lines with versions that
// were written but not fenced, any later version of that line, chosen by a write-back
// policy. Because a crash image holds a version (a prefix of the line's stores), each
// line's own stores reach memory in order, as on real hardware.
//
// Thread safety: every member may be called from any thread; accesses, pwb, pfence and
// crash() are serialized by one mutex, so the recorded order is a linearization of the
// run. The event hook runs outside that mutex, so it may block or call crash().
// Invariants:
//  (1) For each line, durable version <= newest version, and the model holds a snapshot of
//      every version in between.
//  (2) A line's durable version only grows, except by load_image() and persist_all().
// Persistence:
//  (1) Stores that bypass the layer (plain writes to the region) are seen by loads but never
//      reach a crash image unless a later observed store to the same line carries them.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "pv_interface/interface.hpp"

namespace pv {

// Which of the not-yet-durable versions of each line reach the image at a crash.
enum class writeback : std::uint8_t {
  none,    // every line as of its last fenced version
  all,     // every line as of its newest version
  random,  // each line independently: a version from the fenced one to the newest, seeded
};

std::string_view to_string(writeback w);

// Persistence events, numbered from 0 in the order the model sees them.
enum class event_kind : std::uint8_t { pwb, pfence };

// One entry of the recorded trace.
struct trace_event {
  enum class type : std::uint8_t { load, store, pwb, pfence, complete };
  type what;
  bool persisted = false;  // loads and stores: p-instruction
  bool shared = false;     // loads and stores: shared access
  std::uint32_t thread = 0;
  std::uint32_t size = 0;     // loads and stores: bytes accessed
  std::uint64_t offset = 0;   // loads, stores, pwb: offset in the region
  std::uint64_t version = 0;  // load: newest version of the line read; store: the version
                              // it created; pwb: the version it recorded
};

class model;

// Holds the model's lock for the duration of one observed access.
class access_guard {
 public:
  access_guard() = default;
  access_guard(model* m, access a, const void* p, std::size_t n);
  access_guard(access_guard&& other) noexcept;
  access_guard& operator=(access_guard&&) = delete;
  ~access_guard();
  // The store did not write (a failed CAS): record it as a load.
  void unchanged() noexcept { access_.kind = access_kind::load; }

 private:
  model* model_ = nullptr;
  access access_{};
  const void* address_ = nullptr;
  std::size_t size_ = 0;
};

class model {
 public:
  // A zero-filled region of `bytes` bytes (rounded up to whole cache lines), durable as zero.
  explicit model(std::size_t bytes);
  ~model();
  model(const model&) = delete;
  model& operator=(const model&) = delete;

  std::byte* base() const noexcept { return base_; }
  std::size_t size() const noexcept { return size_; }
  bool contains(const void* p, std::size_t n = 1) const noexcept;

  // ---- called by the backend ----
  void pwb(const void* p);
  void pfence();
  void operation_completed();

  // ---- crashes ----
  // The durable image if power failed now.
  std::vector<std::byte> crash(writeback policy, std::uint64_t seed = 0) const;
  // Makes the region's current content the durable content (a clean shutdown), dropping
  // every pending version.
  void persist_all();
  // Replaces the region and its durable content by `image` (restart after a crash).
  // REQUIRES: image.size() == size(); no other thread uses the region.
  void load_image(std::span<const std::byte> image);

  // Number of persistence events (pwb inside the region, pfence) seen so far.
  std::uint64_t persistence_events() const noexcept {
    return events_.load(std::memory_order_relaxed);
  }
  // Called before persistence event `index` takes effect, outside the model's lock, on the
  // thread issuing it. A hook that never returns (it exits the process) crashes "at" it.
  using event_hook = std::function<void(event_kind, std::uint64_t index)>;
  void set_event_hook(event_hook hook);

  // ---- tracing, for the Definition 1 checker ----
  void set_tracing(bool on);
  std::vector<trace_event> trace() const;

  // ---- the model the backend talks to ----
  static model* active() noexcept { return active_.load(std::memory_order_acquire); }

 private:
  friend class access_guard;
  friend class scoped_activation;

  struct line_state {
    std::uint64_t durable_version = 0;
    std::uint64_t newest_version = 0;
    // pending[i] is version durable_version + 1 + i.
    std::vector<std::array<std::byte, cache_line>> pending;
  };
  struct pending_writeback {
    std::size_t line;
    std::uint64_t version;
  };

  std::uint32_t thread_number();  // REQUIRES: mutex_ held
  void record(const trace_event& e);  // REQUIRES: mutex_ held
  void stored(access a, const void* p, std::size_t n);  // REQUIRES: mutex_ held
  void loaded(access a, const void* p, std::size_t n);  // REQUIRES: mutex_ held
  std::uint64_t next_event(event_kind kind);

  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  std::unique_ptr<std::byte[]> durable_;
  std::vector<line_state> lines_;
  std::unordered_map<std::thread::id, std::vector<pending_writeback>> unfenced_;
  std::unordered_map<std::thread::id, std::uint32_t> thread_numbers_;
  bool tracing_ = false;
  std::vector<trace_event> trace_;
  std::atomic<std::uint64_t> events_{0};
  event_hook hook_;
  mutable std::mutex mutex_;

  static inline std::atomic<model*> active_{nullptr};
};

// Makes `m` the model that model_backend talks to, for the lifetime of this object.
// REQUIRES: no other activation is alive (one active model per process).
class scoped_activation {
 public:
  explicit scoped_activation(model& m);
  ~scoped_activation();
  scoped_activation(const scoped_activation&) = delete;
  scoped_activation& operator=(const scoped_activation&) = delete;
};

// The flush backend that runs the layer on the active model. Accesses outside the active
// model's region (or with no active model) are performed but not observed.
struct model_backend {
  static void pwb(const void* p) noexcept {
    if (model* m = model::active()) m->pwb(p);
  }
  static void pfence() noexcept {
    if (model* m = model::active()) m->pfence();
  }
  static access_guard observe(access a, const void* p, std::size_t n) {
    model* m = model::active();
    if (m == nullptr || !m->contains(p, n)) return {};
    return access_guard(m, a, p, n);
  }
  static void operation_completed() noexcept {
    if (model* m = model::active()) m->operation_completed();
  }
  static std::string_view name() noexcept { return "pv-model"; }
};

static_assert(flush_backend<model_backend>);

}  // namespace pv
