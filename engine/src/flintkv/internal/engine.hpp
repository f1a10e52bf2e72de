// The FlintKV engine: a DRAM index (a sorted list of entries under a B+tree) with one entry
// per key (its versions chained, index.hpp) over a sorted persistent list of versioned
// nodes, updated in three phases
// (locate, prepare, attach by flat combining, combiner.hpp), with the versions no reader can
// see reclaimed between combining passes (reclamation.hpp). Recovery: recovery.hpp;
// iteration: iterator.hpp. See docs/engine-design.md for the algorithm and its arguments.
//
// Thread safety: every public member may be called by any number of threads at once.
//  - locate and prepare run lock-free on the calling thread;
//  - attach and reclamation run under the combiner lock, by whichever thread holds it;
//  - readers take visible_version once and ignore newer versions; they take no lock, and
//    run pinned in the storage's epoch domain (so do writers, from locate to attach).
// Invariants:
//  (1) visible_version is written only by the combiner, and only after every node with a
//      version at or below it is durably linked.
//  (2) The index's structure and the persistent list are written only under the combiner
//      lock (or by recovery before the engine is shared).
//  (3) Every version in the index is durably linked, or is being attached by the current
//      combiner with a version above visible_version.
//  (4) No version a live reader can read is dropped (reclamation.hpp, invariant (1)).
// Persistence (manual mode; automatic mode makes every access a p-instruction instead):
//  (1) prepare: a put's node is written, not written back (its pass does that, or, for a
//      weak put, its window's end); a batch's nodes are written back and fenced before
//      advertising.
//  (2) attach (sync put): version (and the size word whose checksum covers it) stored, the
//      predecessor's link (prior, link_version, successor) stored, node and link written
//      back; one fence for every sync put of the combining pass (group commit); the root's
//      fenced word then covers them, fenced, and only then visible_version. A crash before
//      the first fence may leave a link to a torn node, which recovery passes by its prior
//      (layout.hpp, invariant (3)); versions nobody has seen. So a prior must name a durable
//      node: a link that would replace a node linked since the last fence (of the same
//      pass, or of the weak window) fences first (fence_before_relinking). Once the writers
//      return, their links are at or below the durable `fenced`, so damage to their nodes is
//      reported. Versions are assigned only up to the root's durable lease (lease(), one
//      fence every kLeaseStep versions).
//  (3) attach (batch): commit_version and batch_mode active fenced first; all nodes get one
//      version; links written back; one fence; batch_mode idle and fenced at the batch's
//      version, one fence; then visible_version.
//      A transaction's commit is a batch, validated under the lock before any of this
//      (transaction.hpp); a refused one writes nothing.
//  (3a) Weak writes (WriteOptions::sync = false) open a window: commit_version (every version
//      up to it durable) and batch_mode active, fenced, as for a batch; recovery drops the
//      versions above commit_version while the window is open. Inside it the combiner stores
//      versions and links without writing them back (their words are noted); the window
//      closes (end_weak_window: the noted words written back, one fence, batch_mode idle
//      and fenced at the window's newest version, one fence) at Persist(), before any sync
//      write or batch is attached, before a reclamation pass, when the noted words reach
//      kWeakWords, at the interval and at the close. So the durable store is always a
//      prefix of the version order. (Automatic mode makes every store durable itself:
//      there a weak write is a sync one.)
//  (4) Recovery validates the whole store before it writes (recovery.hpp), then rebuilds the
//      index with its chains, visible_version and the allocator's free space.
//  (5) Every word written is self-checking and every node carries its checksum (layout.hpp),
//      computed from the caller's bytes and written in the node's own lines: no extra
//      write-back or fence.
//  (6) With Options::read_only nothing is written to the pool, by recovery either, and
//      nothing is reclaimed.
//  (7) Hand-offs: advertising a slot, publishing visible_version, marking a slot done and
//      freeing a block are stores outside the P-V layer that let other threads reach
//      persistent data, so each is preceded by io::hand_off() (mode.hpp; io::before_free()
//      for frees): in automatic mode the fence of the calling thread's pending write-backs;
//      in manual mode (1)-(3) and the reclamation's fence have fenced them.
//  (8) Reclamation: unlinks written back, one fence, then blocks freed (reclamation.hpp).
#pragma once

#include <immintrin.h>
#include <pthread.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "flintkv/db.hpp"
#include "flintkv/internal/combiner.hpp"
#include "flintkv/internal/counter.hpp"
#include "flintkv/internal/guarded.hpp"
#include "flintkv/internal/index.hpp"
#include "flintkv/internal/iterator.hpp"
#include "flintkv/internal/layout.hpp"
#include "flintkv/internal/mode.hpp"
#include "flintkv/internal/no_memory_iterator.hpp"
#include "flintkv/internal/reclamation.hpp"
#include "flintkv/internal/recovery.hpp"
#include "flintkv/internal/transaction.hpp"

namespace flintkv::internal {

// What the engine needs of the pool: implemented by storage<Policy> (storage.hpp).
template <class S>
concept engine_storage = recovery_storage<S> &&
                         requires(S& s, const S& cs, std::size_t n, node_offset off, void* p) {
  { s.allocate(n, &off) } -> std::same_as<Status>;
  s.free(off);
  { s.dram_allocate(n) } -> std::same_as<void*>;
  s.dram_free(p, n);
  { S::dram_released_whole(n) } -> std::same_as<bool>;
  s.retire_dram(p, n);
  s.epochs().pin();
  { cs.granularity() } -> std::convertible_to<std::string>;
  { cs.size() } -> std::convertible_to<std::uint64_t>;
  { cs.used() } -> std::convertible_to<std::uint64_t>;
  { cs.path() } -> std::convertible_to<std::string>;
};

template <class Policy, class Mode>
struct engine_config {
  using policy = Policy;
  using mode = Mode;
};

template <class Config, engine_storage Storage>
class engine final : public DB, private transaction_host {
  using P = typename Config::policy;
  using M = typename Config::mode;
  using io = durable<P, M>;
  using node = pnode<P>;
  using root_t = root<P>;
  using recovery_t = recovery<P, M>;
  using tier_t = typename recovery_t::tier_t;
  using reclaimer_t = reclaimer<P, M, Storage>;
  using iterator_t = engine_iterator<engine>;
  friend iterator_t;
  static_assert(layout_pinned<P>());

 public:
  // Opens the engine on `storage`, recovering or initialising the store in it.
  static Status open(std::unique_ptr<Storage> storage, const Options& options,
                     std::unique_ptr<DB>* db) {
    try {
      auto e = std::unique_ptr<engine>(new engine(std::move(storage), options));
      Status s = e->recover();
      if (!s.ok()) return s;
      if (options.persist_interval.count() > 0 && !options.read_only) {
        e->start_persister(options.persist_interval);
      }
      if (options.merge_interval.count() > 0 && !options.read_only && e->tier_ != nullptr) {
        e->start_merger(options.merge_interval);
      }
      *db = std::move(e);
      return Status::OK();
    } catch (const std::bad_alloc&) {
      return Status::NoSpace("out of DRAM while opening the store");
    }
  }

  ~engine() override {
    stop_merger();
    stop_persister();
    if (index_ == nullptr) return;  // recovery failed before building the index
    // No reader is left (snapshots and iterators go before the DB): the weak writes are made
    // durable, and everything a newer version or a delete made obsolete is dropped, so the
    // pool holds live data only.
    if (recovered_ && !read_only_) {
      if (weak_window_open()) end_weak_window();
      (void)reclaim(next_version_, SIZE_MAX, true);
      note_fenced(next_version_);  // a store closed cleanly has no link recovery must doubt
      io::fence();
      io::complete();
    }
    reclaimer_.clear();
    // Entries and chain records live in the DRAM allocator's arenas, which storage_'s
    // destruction (after this) unmaps whole, so they need no freeing one by one (a walk of
    // about 0.1 s per million keys), unless a key was long enough for an entry that does not.
    static_assert(Storage::dram_released_whole(sizeof(vrec)));
    if (!large_entries_.load(std::memory_order_relaxed)) return;
    inode* n = index_->head();
    while (n != nullptr) {
      inode* next = n->load_next();
      for (vrec* r = n->older().load(std::memory_order_relaxed); r != nullptr;) {
        vrec* older = r->older.load(std::memory_order_relaxed);
        storage_->dram_free(r, sizeof(vrec));
        r = older;
      }
      storage_->dram_free(n, n->size());
      n = next;
    }
  }

  // ---- writes ----------------------------------------------------------------------------

  Status Put(std::string_view key, std::string_view value,
             const WriteOptions& options) override {
    return guarded([&] {
      return read_only_ ? refuse_write("Put") : write_one(key, value, false, !options.sync);
    });
  }

  Status Delete(std::string_view key, const WriteOptions& options) override {
    return guarded([&] {
      return read_only_ ? refuse_write("Delete") : write_one(key, {}, true, !options.sync);
    });
  }

  Status Write(const WriteBatch& batch, const WriteOptions& options) override {
    return guarded([&] {
      return read_only_ ? refuse_write("Write") : write_batch(batch, !options.sync);
    });
  }

  Status Persist() override {
    return guarded([&] {
      persist_calls_.add();
      persist_weak_writes();
      return Status::OK();
    });
  }

  Status WaitForMerges() override {
    return guarded([&]() -> Status {
      if (!merger_.joinable()) return Status::OK();
      std::unique_lock lock(merger_mutex_);
      const std::uint64_t after = merge_passes_;  // a pass counted later began after this
      wanted_pass_ = after + 1;
      merger_cv_.notify_all();
      merger_cv_.wait(lock, [&] {
        return stop_merger_ || settled_pass_ > after || failed_pass_ > after;
      });
      if (failed_pass_ > after && failed_pass_ >= settled_pass_) return failed_pass_status_;
      return Status::OK();
    });
  }

  // A transaction (transaction.hpp) whose commit is a batch validated by the combiner.
  std::unique_ptr<Transaction> BeginTransaction(const WriteOptions& write_options,
                                                const TransactionOptions& options) override {
    return begin_transaction(*this, *this, write_options, options);
  }

  // ---- reads -----------------------------------------------------------------------------

  Status Get(std::string_view key, std::string* value, const ReadOptions& options) override {
    return guarded([&]() -> Status {
      if (Status s = check_key(key); !s.ok()) return s;
      auto pinned = pin();  // before the visible version is read: reclamation.hpp
      const std::uint64_t visible = visible_version_.load(std::memory_order_acquire);
      const std::uint64_t vv = options.snapshot != nullptr ? options.snapshot->version() : visible;
      gets_.add();
      const std::uint32_t key_hashed = key_hash(key);
      const std::uint64_t hash = key_index::hash_of(key_hashed);
      // Most keys are in the tier once merges run: its filters' lines come while the point
      // table's slot does.
      if (tier_ != nullptr) tier_->prefetch_for_get(key_hashed);
      if (get_newest(key, hash, vv, value, options.verify_checksums)) {
        io::complete();
        return Status::OK();
      }
      const inode* n = index_->find(key, hash);
      const std::optional<version_ref> v = n != nullptr ? n->visible_at(vv) : std::nullopt;
      if (!v) return get_from_tier(key, key_hashed, value, options.verify_checksums);
      if (v->tombstone) return Status::NotFound(key.substr(0, 64));
      if (options.verify_checksums) {
        if (Status s = verify(n, *v); !s.ok()) return s;
      }
      if (value != nullptr) {
        std::string_view bytes = value_of(n, *v);
        value->assign(bytes.data(), bytes.size());
      }
      io::complete();
      return Status::OK();
    });
  }

  // A snapshot is its version, registered until it is released: the versions it reads are
  // kept. nullptr when out of DRAM.
  const Snapshot* GetSnapshot() override {
    std::uint64_t v;
    try {
      v = registry_.enter(visible_version_);
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
    auto* snapshot = new (std::nothrow) snapshot_impl(v);
    if (snapshot == nullptr) registry_.leave(v);
    return snapshot;
  }

  void ReleaseSnapshot(const Snapshot* snapshot) override {
    if (snapshot == nullptr) return;
    registry_.leave(snapshot->version());
    delete static_cast<const snapshot_impl*>(snapshot);
  }

  // Out of DRAM: an iterator over nothing whose status() is NoSpace.
  std::unique_ptr<Iterator> NewIterator(const ReadOptions& options) override {
    snapshot_registry::registration r;
    try {
      if (options.snapshot != nullptr) {
        r.version = options.snapshot->version();
        registry_.enter_at(r.version);
      } else {
        r = enter_reader();
      }
    } catch (const std::bad_alloc&) {
      return no_memory_iterator::make();
    }
    try {
      auto it = std::make_unique<iterator_t>(this, r, options);  // takes the registration
      iterators_.add();
      return it;
    } catch (const std::bad_alloc&) {
      registry_.leave(r);
      return no_memory_iterator::make();
    }
  }

  Stats GetStats() override {
    Stats s;
    s.puts = puts_.load();
    s.deletes = deletes_.load();
    s.batches = batches_.load();
    s.gets = gets_.load();
    s.iterators = iterators_.load();
    s.weak_writes = weak_writes_.load();
    s.persist_calls = persist_calls_.load();
    s.weak_persists = weak_persists_.load(std::memory_order_relaxed);
    s.unpersisted_writes = unpersisted_writes_.load(std::memory_order_relaxed);
    flit::counts c = flit::all_threads();
    s.pwb = c.pwb;
    s.pfence = c.pfence;
    s.visible_version = visible_version_.load(std::memory_order_acquire);
    const std::uint64_t list_live = live_keys_.load(std::memory_order_relaxed);
    s.live_keys = list_live + tier_live_keys_.load(std::memory_order_relaxed);
    s.keys = keys_.load(std::memory_order_relaxed);
    s.versions = versions_.load(std::memory_order_relaxed);
    s.obsolete_versions = s.versions - std::min(s.versions, list_live);
    s.watermark = reclaimer_.last_watermark();
    s.snapshots = registry_.count();
    s.reclaimed_versions = reclaimer_.reclaimed_versions();
    s.reclaimed_bytes = reclaimer_.reclaimed_bytes();
    s.reclamation_passes = reclaimer_.passes();
    s.merges = merges_.load(std::memory_order_relaxed);
    s.merged_keys = merged_keys_.load(std::memory_order_relaxed);
    s.write_stalls = write_stalls_.load(std::memory_order_relaxed);
    s.merge_errors = merge_errors_.load(std::memory_order_relaxed);
    {
      std::lock_guard lock(merge_error_mutex_);
      s.merge_error = merge_error_;
    }
    s.pool_size = storage_->size();
    s.pool_used = storage_->used();
    s.granularity = storage_->granularity();
    s.configuration = configuration();
    s.recovered_versions = recovered_versions_;
    s.recovery_seconds = recovery_seconds_;
    return s;
  }

  static std::string configuration() {
    return std::string(M::name) + " mode, " + std::string(P::placement::name) + " counters, " +
           std::string(P::backend::name()) + " flushes";
  }

  // Test hook: commits of transactions skip their validation (a broken variant, for tests
  // that show their checkers catch non-serializable histories).
  void TEST_skip_validation(bool skip) { test_skip_validation_.store(skip); }

  // Test hook: an update of a key leaves the point table's newest word of the key as it
  // was (a broken variant, for tests that show their checks catch a stale word).
  void TEST_skip_newest_words(bool skip) { test_skip_newest_.store(skip); }
  // Test hook: updates leave their entries unmarked (update_marks), so that scans take
  // stale tags for the newest versions: shows that the iterator tests catch it. Such a scan
  // may stand on the entry of a key removed since (iterator.hpp's invariant (1) no longer
  // protects it), so removed entries are then kept until the engine closes: the variant
  // reads stale entries, never freed ones.
  void TEST_skip_update_marks(bool skip) {
    test_skip_marks_.store(skip);
    reclaimer_.TEST_keep_removed_entries(skip);
  }

  // Test hook: `f` runs once, on the combining thread, after the next pass attached its
  // first request and before it serves the others (REQUIRES: no write in progress). With
  // TEST_advertised, a test makes another thread's write share that pass.
  void TEST_once_in_pass(std::function<void()> f) { test_in_pass_ = std::move(f); }
  // Test hook: a writer waits in a slot for a pass.
  bool TEST_advertised() const { return combiner_.advertised(); }

  // Test hook: `f(n)` runs on the merging thread, under the combiner lock, while each merge
  // removes its keys from the list: after moves() turned odd and n keys were handled (each
  // left, or was kept as written since), for n from 0 to the merge's count. A test reads the
  // store there (an iterator, not a write: the lock is held). REQUIRES: no merge running.
  void TEST_in_merge_unlinks(std::function<void(std::size_t)> f) {
    test_in_unlinks_ = std::move(f);
  }

  // Test hook: `f` runs on the merging thread, pinned, between a merge's choice of keys and
  // its claim of them (merge_round's (a)). A test writes there. REQUIRES: no merge running.
  void TEST_before_merge_claims(std::function<void()> f) { test_before_claims_ = std::move(f); }

  // Test hook: `f` runs on the merging thread, without the combiner lock, between two steps
  // of a merge's unlinks (merge_round's (c)). REQUIRES: no merge running.
  void TEST_between_unlink_steps(std::function<void()> f) { test_between_steps_ = std::move(f); }
  static constexpr std::size_t TEST_unlink_step() { return kUnlinkStep; }
  // Test hook: merges unlink `keys` keys per step instead (crash tests make small merges
  // and want them in several steps). REQUIRES: no merge running; keys >= 1.
  void TEST_set_unlink_step(std::size_t keys) { unlink_step_ = keys; }

  // Test hook: the packed tier's small runs (those not yet merged into its large run).
  // REQUIRES: no merge running.
  std::size_t TEST_tier_small_runs() const { return tier_ == nullptr ? 0 : tier_->small_runs(); }

  // Test hooks: while held, the merge thread makes no merge (it waits before its next
  // one); the keys the list holds at most before writers wait for merges (await_merges).
  void TEST_hold_merges(bool hold) { test_hold_merges_.store(hold, std::memory_order_release); }
  static constexpr std::uint64_t TEST_list_bound() { return kListBound; }

  // Test hook: advances the epoch as far as pinned readers let it, up to three times, and
  // frees what the calling thread retired that no reader can still hold (with no reader
  // pinned, all of it: a merge's entries inside TEST_in_merge_unlinks, a reclamation
  // pass's). Does not wait.
  void TEST_free_retired() {
    for (int i = 0; i < 3; ++i) storage_->epochs().collect();
  }

  // Test hook: `f(key, tombstone)` runs before each check of a node that a read asked for
  // (verify), on the reading thread, pinned. A test writes there. REQUIRES: no read running.
  void TEST_on_verify(std::function<void(std::string_view, bool)> f) {
    test_on_verify_ = std::move(f);
  }

  // Test hook: the version the calling thread's last successful write was given.
  static std::uint64_t TEST_last_write_version() { return last_write_version_; }

  // Test hook: the newest visible version of `key` (nullopt if none or deleted), with its
  // version number, read as Get reads it: from the list, else from the packed tier, which
  // keeps no versions (0).
  std::optional<std::pair<std::string, std::uint64_t>> TEST_read(std::string_view key) const {
    auto pinned = pin();
    const inode* n = index_->find(key);
    auto v = n != nullptr ? n->visible_at(visible_version_.load(std::memory_order_acquire))
                          : std::nullopt;
    if (!v) {
      std::string value;
      if (!get_from_tier(key, &value, true).ok()) return std::nullopt;
      return std::pair{std::move(value), std::uint64_t{0}};
    }
    if (v->tombstone) return std::nullopt;
    return std::pair{std::string(value_of(n, *v)), v->version};
  }

  // Test hook: every live key with its newest visible value and version, in key order: the
  // list's keys over the packed tier's (whose keys have version 0: the tier keeps none).
  // A damaged tier record ends the tier's part. REQUIRES: no merge running.
  struct TEST_entry {
    std::string key, value;
    std::uint64_t version;
  };
  std::vector<TEST_entry> TEST_state() const {
    auto pinned = pin();
    std::vector<TEST_entry> list;  // deletes too (an empty value, version 0 never used)
    std::vector<bool> deleted;
    const std::uint64_t vv = visible_version_.load(std::memory_order_acquire);
    for (inode* n = index_->head()->load_next(); n != nullptr; n = n->load_next()) {
      auto v = n->visible_at(vv);
      if (!v) continue;
      list.push_back({std::string(n->key()),
                      v->tombstone ? std::string() : std::string(value_of(n, *v)), v->version});
      deleted.push_back(v->tombstone);
    }
    std::vector<TEST_entry> out;
    std::optional<typename tier_t::cursor> c;
    if (tier_ != nullptr) {
      c.emplace(*tier_, true);
      if (!c->seek_to_first().ok()) c.reset();
    }
    std::size_t i = 0;
    while (i < list.size() || (c && c->valid())) {
      const int order = i == list.size() ? 1 : !(c && c->valid()) ? -1
                                                : compare_keys(list[i].key, c->key());
      if (order > 0) {
        out.push_back({std::string(c->key()), std::string(c->value()), 0});
      }
      if (order >= 0 && !c->next().ok()) c.reset();
      if (order <= 0) {
        if (!deleted[i]) out.push_back(std::move(list[i]));
        ++i;
      }
    }
    return out;
  }

  // Test hook: writes `records` (sorted by key, no key twice; an absent value is an
  // erasure) into the packed tier as a small run, merging its small runs into the large run
  // first if every slot is taken, or after, with `merge`. The caller keeps precedence (the
  // tier holds, of every key, a value older than every version the list keeps) and runs no
  // other write meanwhile. REQUIRES: a writable store.
  Status TEST_tier_write(const std::vector<std::pair<std::string, std::optional<std::string>>>&
                             records,
                         bool merge = false) {
    std::vector<typename tier_t::change> changes;
    for (const auto& [key, value] : records) {
      changes.push_back({key, value ? std::string_view(*value) : std::string_view(), !value,
                         tier_t::run::erase_as::record});
    }
    if (tier_->full()) {
      if (Status s = tier_->merge(); !s.ok()) return s;
    }
    Status s = tier_->flush(changes);
    if (s.ok() && merge) s = tier_->merge();
    moves_.fetch_add(2, std::memory_order_seq_cst);  // iterators over an empty tier look again
    if (Status c = count_tier_live(); s.ok()) s = c;
    return s;
  }

  // Test hook: one merge, as the merge thread makes them (Options::merge_interval): moves
  // to the packed tier up to `limit` keys whose only version every reader reads, looking
  // from where the last merge stopped (`lag`: versions that stay in the list, counted back
  // from the watermark). *moved: the keys moved. REQUIRES: the calling thread is not inside
  // an operation of this engine; a writable store of format 4.
  Status TEST_merge(std::size_t limit, std::size_t* moved, std::uint64_t lag = 0) {
    std::lock_guard lock(merge_mutex_);
    std::vector<node_offset> unlinked;
    Status s = merge_round(limit, lag, moved, &unlinked);
    free_after_readers(unlinked);
    note_merge(s);
    return s;
  }

  // Test hook: the merge the thread makes once writes pause: every small run of the packed
  // tier into its large run, no key moved from the list (the tier's slots seldom fill, so
  // merge_round seldom makes one). REQUIRES: as TEST_merge.
  Status TEST_merge_tier() {
    std::lock_guard lock(merge_mutex_);
    if (read_only_ || tier_ == nullptr) return Status::OK();
    return merge_tier();
  }

  // Test hook: a reclamation pass after every `n`th combining pass (0: only when due), so
  // tests meet reclamation at every step.
  void TEST_reclaim_every(unsigned n) { test_reclaim_every_.store(n, std::memory_order_relaxed); }

  // Test hook: reclaims everything the readers allow now (as a write that found the pool
  // full does); returns the versions dropped. REQUIRES: the calling thread is not inside
  // an operation of this engine.
  std::uint64_t TEST_reclaim() { return reclaim_now(); }

  // Test hook: the index's own check (key_index::check): "" if it holds. REQUIRES: no
  // writer.
  std::string TEST_check_index() const {
    auto pinned = pin();
    return index_->check();
  }

  // Test hook: the versions the index holds for `key`, newest first (empty if none).
  std::vector<std::uint64_t> TEST_versions(std::string_view key) const {
    auto pinned = pin();
    std::vector<std::uint64_t> out;
    vrec* chain = nullptr;
    const inode* n = index_->find(key);
    if (n == nullptr) return out;
    out.push_back(n->newest(&chain).version);
    for (vrec* r = chain; r != nullptr; r = r->older.load(std::memory_order_acquire)) {
      out.push_back(r->version);
    }
    return out;
  }

 private:
  // ---- types -----------------------------------------------------------------------------

  class snapshot_impl final : public Snapshot {
   public:
    explicit snapshot_impl(std::uint64_t v) : Snapshot(v) {}
  };

  // One prepared update, as advertised to the combiner.
  struct update {
    std::string_view key;
    std::string_view value;
    bool tombstone = false;
    bool weak = false;           // WriteOptions::sync = false
    inode* entry = nullptr;      // the key's index entry, if it had one when located
    inode* fresh = nullptr;      // a new entry, for a key that has none
    vrec* displaced = nullptr;   // a chain record, for the version this one displaces
    node* persistent = nullptr;
    node_offset offset{0};
    node_offset succ{0};         // the successor written into the node
    // A put's node: not written back by prepare, but with its link, by the pass that links
    // it (sync) or at its weak window's end (weak), whose fence makes node and link durable
    // together (recovery passes it by its predecessor's prior if torn). A batch's nodes are
    // written back and fenced in prepare.
    bool deferred = false;
    std::uint64_t sizes = 0;        // the node's size word without its checksum
    std::uint32_t content_crc = 0;  // the node's checksum state before its version
    std::uint64_t version = 0;   // given by attach
    bool out_of_pool = false;    // prepare found the pool full
    // Located: the key is new to the list and the packed tier holds a live value of it
    // (which then counts in the list's live keys, not the tier's), as of moves() at
    // `tier_moves`: link() asks the tier again if a merge moved keys since.
    bool tier_live = false;
    std::uint64_t tier_moves = 0;
    inode* pred = nullptr;       // located: the last entry before the key
    inode* after = nullptr;      // located: the first entry at or after the key
    key_index::tree_place where;  // located: where a new key goes in the tree
  };

  struct request {
    update* one = nullptr;                 // a put or delete
    std::vector<update>* batch = nullptr;  // or a batch
    bool weak = false;                     // a batch made with WriteOptions::sync = false
    txn_validation* txn = nullptr;         // the batch is a transaction's commit
  };
  using combiner_t = combiner<request>;

  // ---- construction and recovery ---------------------------------------------------------

  engine(std::unique_ptr<Storage> storage, const Options& options)
      : storage_(std::move(storage)),
        combiner_(std::min(options.thread_slots, kMaxThreadSlots)),
        reclaimer_(*storage_),
        read_only_(options.read_only) {
    weak_words_.reserve(kWeakWords);  // the combiner never allocates
  }

  root_t& root_ref() const { return *static_cast<root_t*>(storage_->root_area()); }
  node* at(node_offset off) const { return static_cast<node*>(storage_->pointer(off)); }
  auto pin() const { return storage_->epochs().pin(); }
  const key_index& index() const { return *index_; }
  snapshot_registry& registry() const { return registry_; }
  // Registers a reader at the visible version (an iterator without a snapshot, made or
  // refreshed). Throws std::bad_alloc.
  snapshot_registry::registration enter_reader() const {
    auto pinned = pin();  // a reader in flight until registered (reclamation.hpp)
    return registry_.enter_reader(visible_version_);
  }

  // Validates the store (writing nothing), then repairs what a crash left and, for a new
  // store, initialises it. See recovery.hpp.
  Status recover() {
    auto start = std::chrono::steady_clock::now();
    // Builds the index during the walk, in list order: a key's first node is its newest
    // version, the following ones its chain. On an error the destructor frees what was built.
    struct index_builder {
      engine& e;
      inode* last = nullptr;
      vrec* chain_tail = nullptr;
      void head(node_offset h) { e.make_index(h); }
      void kept(node_offset off, std::string_view key, std::uint64_t version, bool tombstone,
                std::size_t value_size) {
        const version_ref v{version, off.value, static_cast<std::uint32_t>(value_size), tombstone};
        if (last != nullptr && same_key(last->key(), key)) {
          auto* r = new (e.storage_->dram_allocate(sizeof(vrec))) vrec{v.version, v.pnode,
                                                                   v.value_size, v.tombstone};
          (chain_tail != nullptr ? chain_tail->older : last->older())
              .store(r, std::memory_order_relaxed);
          if (chain_tail == nullptr && !e.read_only_) {
            e.reclaimer_.note(last, last->unlocked_newest().version);
          }
          chain_tail = r;
          last->set_tail_pnode(off.value);
          return;
        }
        last = e.make_entry(key, v);
        chain_tail = nullptr;
        e.index_->append(last);
        if (tombstone && !e.read_only_) e.reclaimer_.note(last, version);
      }
    };
    typename recovery_t::found found;
    typename recovery_t::plan repairs;
    if (Status s = recovery_t::validate(*storage_, index_builder{*this}, &found, &repairs);
        !s.ok()) {
      return s;
    }
    if (!read_only_) recovery_t::repair(*storage_, repairs);
    const bool listed = found.format == kFormat || found.format == kFormatV3;
    if (!listed && read_only_) {
      make_index(node_offset{0});  // never initialised: an empty store, left as it is
    } else if (!listed) {
      // A new pool (or one whose initialisation was interrupted: start it again).
      if (Status s = recovery_t::initialise(*storage_, &found); !s.ok()) return s;
      make_index(*read_offset_word(io::get(root_ref().head), in_root(word_field::head)));
    } else if (found.format == kFormatV3 && !read_only_) {
      if (Status s = recovery_t::upgrade(*storage_, &found); !s.ok()) return s;
    }
    tier_ = std::move(found.tier);
    if (tier_ != nullptr) {
      // Pinned: a pass of reclaim_now runs unpinned, and a tier's reader must be pinned
      // beside its writer (pins nest).
      reclaimer_.set_tier_holds([this](std::string_view key) {
        auto pinned = pin();
        return !tier_->get(key, nullptr, false).IsNotFound();
      });
    }
    index_->finish_build();
    if (Status s = count_tier_live(); !s.ok()) return s;
    visible_version_.store(found.newest_version, std::memory_order_release);
    next_version_ = found.newest_version;
    lease_ = found.newest_version;
    durable_through_ = found.newest_version;
    live_keys_.store(found.live_keys, std::memory_order_relaxed);
    keys_.store(found.keys, std::memory_order_relaxed);
    versions_.store(found.versions, std::memory_order_relaxed);
    recovered_versions_ = found.versions;
    recovered_ = true;
    io::complete();
    recovery_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return Status::OK();
  }

  void make_index(node_offset head) {
    void* head_memory = storage_->dram_allocate(inode::size_for(0));
    index_ = std::make_unique<key_index>(head_memory, head.value, storage_->dram(),
                                         storage_->epochs());
  }

  // ---- the write path --------------------------------------------------------------------

  static Status check_key(std::string_view key) {
    if (key.empty()) return Status::InvalidArgument("empty key");
    if (key.size() > kMaxKeySize) {
      return Status::InvalidArgument("key of " + std::to_string(key.size()) +
                                     " bytes; the limit is " + std::to_string(kMaxKeySize));
    }
    return Status::OK();
  }
  static Status check_value(std::string_view value) {
    if (value.size() > kMaxValueSize) {
      return Status::InvalidArgument("value of " + std::to_string(value.size()) +
                                     " bytes; the limit is " + std::to_string(kMaxValueSize));
    }
    return Status::OK();
  }

  // Returns what prepare took and attach did not use (everything, if never attached).
  class spares {
   public:
    spares(engine& e, std::span<update> updates) : engine_(e), updates_(updates) {}
    ~spares() {
      for (update& u : updates_) engine_.release(u);
    }
    spares(const spares&) = delete;
    spares& operator=(const spares&) = delete;

   private:
    engine& engine_;
    std::span<update> updates_;
  };

  void release(update& u) {
    if (u.persistent != nullptr && u.version == 0) storage_->free(u.offset);
    u.persistent = nullptr;
    if (u.fresh != nullptr) storage_->dram_free(u.fresh, u.fresh->size());
    if (u.displaced != nullptr) storage_->dram_free(u.displaced, sizeof(vrec));
    u.fresh = nullptr;
    u.displaced = nullptr;
  }

  Status write_one(std::string_view key, std::string_view value, bool tombstone, bool weak) {
    if (Status s = check_key(key); !s.ok()) return s;
    if (Status s = check_value(value); !s.ok()) return s;
    await_merges();
    update u;
    u.key = key;
    u.value = value;
    u.tombstone = tombstone;
    u.weak = weak;
    u.deferred = true;  // written back by what links it: its pass, or its weak window's end
    spares cleanup(*this, {&u, 1});
    const Status s = reclaiming_when_full({&u, 1}, [&] { return try_write_one(u); });
    if (s.ok()) {
      (tombstone ? deletes_ : puts_).add();
      if (weak) weak_writes_.add();
      last_write_version_ = u.version;
    }
    io::complete();
    return s;
  }

  // Runs `attempt`; while it found the pool full (an update's out_of_pool), reclaims what
  // readers allow and runs it again, as long as reclaiming frees something (other writers
  // may take what one round freed).
  template <class Attempt>
  Status reclaiming_when_full(std::span<update> updates, Attempt&& attempt) {
    for (int round = 0;; ++round) {
      Status s = attempt();
      const bool full = std::any_of(updates.begin(), updates.end(),
                                    [](const update& u) { return u.out_of_pool; });
      if (!full || round == kFullPoolRounds || reclaim_now() == 0) return s;
      for (update& u : updates) u.out_of_pool = false;
    }
  }

  Status try_write_one(update& u) {
    auto pinned = pin();
    while (true) {
      locate(u);
      if (Status s = prepare(u, true); !s.ok()) return s;
      index_->prepare_insert();  // this thread's pass may insert other writers' keys too
      const slot_state outcome = attach({&u, nullptr});
      if (outcome == slot_state::done) return Status::OK();
      if (outcome == slot_state::exhausted) return exhausted_versions();
    }
  }

  Status write_batch(const WriteBatch& batch, bool weak, txn_validation* txn = nullptr) {
    // One entry per key, the batch's last; sorted, so neighbours rarely go stale.
    std::map<std::string_view, const WriteBatch::Entry*> last;
    for (const WriteBatch::Entry& e : batch.entries()) {
      if (Status s = check_key(e.key); !s.ok()) return s;
      if (Status s = check_value(e.value); !s.ok()) return s;
      last[e.key] = &e;
    }
    if (last.empty()) return Status::OK();
    await_merges();
    std::vector<update> updates(last.size());
    spares cleanup(*this, updates);
    std::size_t i = 0;
    for (auto& [key, e] : last) {
      update& u = updates[i++];
      u.key = key;
      u.value = e->value;
      u.tombstone = e->kind == WriteBatch::Kind::kDelete;
    }
    const Status s =
        reclaiming_when_full(updates, [&] { return try_write_batch(updates, weak, txn); });
    if (s.ok()) {
      batches_.add();
      if (weak) weak_writes_.add();
      last_write_version_ = updates.front().version;
    }
    io::complete();
    return s;
  }

  Status try_write_batch(std::vector<update>& updates, bool weak, txn_validation* txn) {
    auto pinned = pin();
    for (update& u : updates) {
      locate(u);
      // Both kinds of DRAM: attach may find the key's entry gone or new (attach_batch).
      if (Status s = prepare(u, false); !s.ok()) return s;
    }
    index_->prepare_insert();
    io::fence();  // one fence for every node of the batch
    // A batch is never sent back for stale neighbours (attach_batch retries them).
    const slot_state outcome = attach({nullptr, &updates, weak, txn});
    if (outcome == slot_state::exhausted) return exhausted_versions();
    if (outcome == slot_state::conflict) {
      return Status::Busy(conflict_message(*txn, storage_->path()));
    }
    return Status::OK();
  }

  Status exhausted_versions() const {
    return Status::NoSpace(storage_->path() + ": every version number up to " +
                           std::to_string(kMaxVersion) + " has been used");
  }

  // The located neighbours of u.key: for a key in the point table, its entry and the
  // entry's predecessor (all an update of an existing key needs: link()); else a search.
  // An existing entry is marked as updated (update_marks) here, by its writer, before the
  // update is handed to a combiner: link() publishes a version of an entry only if it is
  // the one located, so every version after an entry's first is marked before it is
  // visible. A retry, or an update that fails, leaves a mark it did not need, which costs a
  // scan a step through the entry and nothing else. Here and not in link(): under the lock,
  // a mark's line would often come from the other core's cache.
  // The way is this thread's guess from its last eight locates (a retry counts again): the
  // point table first unless at least six found the key new (a fill), then a search alone.
  // A key new to the list is asked of the packed tier (tier_holds_live); for a writer that
  // expects a new key, the lines of the tier's filters are requested first, so that they
  // come while the search runs.
  void locate(update& u) const {
    const auto way = std::popcount(recent_new_keys_ & 0xffu) >= 6
                         ? key_index::locate_way::search_only
                         : key_index::locate_way::table_first;
    const std::uint32_t hashed = key_hash(u.key);
    const bool tiered = tier_ != nullptr && !tier_->empty();
    if (tiered && way == key_index::locate_way::search_only) tier_->prefetch_for_get(hashed);
    if (inode* e = index_->locate_for_update(u.key, key_index::hash_of(hashed), way, &u.pred,
                                             &u.after, &u.where);
        e != nullptr) {
      u.entry = e;
    } else {
      inode* s = u.after;
      u.entry = s != nullptr && same_key(s->key(), u.key) ? s : nullptr;
    }
    recent_new_keys_ = recent_new_keys_ << 1 | (u.entry == nullptr ? 1u : 0u);
    if (u.entry != nullptr && !test_skip_marks_.load(std::memory_order_relaxed)) {
      index_->mark_updated(u.entry);
    }
    u.tier_moves = moves();
    u.tier_live = u.entry == nullptr && tiered && tier_holds_live(u.key, hashed);
  }

  // Whether the packed tier holds a live value of `key` (its newest record a value), for
  // the count of live keys: a damaged record counts as none. `hashed`: key_hash(key).
  // REQUIRES: pinned.
  bool tier_holds_live(std::string_view key, std::uint32_t hashed) const {
    return tier_ != nullptr && !tier_->empty() && tier_->get(key, hashed, nullptr, false).ok();
  }

  // The persistent node a new version of u.key goes before (the key's newest version, or
  // the next key's): the successor of the located predecessor's oldest node, whose line the
  // link writes anyway. Outside the lock a hint (that node may even be reclaimed meanwhile:
  // its bytes stay in the pool), which link() checks again under the lock.
  node_offset successor_of(const update& u) const {
    return recovery_t::successor(*storage_, node_offset{u.pred->tail_pnode()});
  }

  // What successor_of(u) will read, from DRAM instead of the pool: the newest version's
  // node of the key's entry, or of the located next key (none at the end of the list), by
  // the index's invariant (4). A hint as well (the entry may be mid-rewrite): link()
  // compares it with the pool's word. It spares prepare a wait for that word, a miss in the
  // pool (and in the TLB where the pool is mapped in 4 KiB pages) that costs as much as the
  // rest of prepare; the line is only requested here, for the link to write under the lock.
  node_offset expected_successor(const update& u) const {
    const inode* s = u.entry != nullptr ? u.entry : u.after;
    __builtin_prefetch(storage_->pointer(node_offset{u.pred->tail_pnode()}), 1);
    return node_offset{s == nullptr ? 0 : s->unlocked_newest().pnode};
  }

  // Allocates and fills the persistent node (first call), points it at the located
  // successor, and takes the DRAM attach will need (only what the located key needs if
  // `lean`, else both kinds, so that attach never allocates). Unless the node is deferred
  // (a put's: what links it writes it back), writes it back, and the caller fences before
  // advertising it.
  Status prepare(update& u, bool lean) {
    // A retry (the node exists) reads the pool: the hint may be what failed.
    const node_offset succ = u.persistent == nullptr ? expected_successor(u) : successor_of(u);
    if (u.persistent == nullptr) {
      const std::size_t size = node::size_for(u.key.size(), u.value.size());
      if (Status s = storage_->allocate(size, &u.offset); !s.ok()) {
        u.out_of_pool = s.IsNoSpace();
        return s;
      }
      node* n = at(u.offset);
      recovery_t::init_link(n, u.offset, succ);
      io::put(n->version, uncommitted_word(in_node(u.offset, word_field::version)));
      u.sizes =
          pack_sizes(u.key.size(), u.value.size(), u.tombstone ? std::uint64_t{kTombstone} : 0);
      u.content_crc = node_content_crc(u.offset, u.sizes, u.key, u.value);
      io::put(n->sizes, checked_sizes(u.sizes, u.content_crc, kUnassigned));
      io::put_bytes(n->body(), u.key.data(), u.key.size());
      io::put_bytes(n->body() + u.key.size(), u.value.data(), u.value.size());
      if (!u.deferred) io::flush(n, size);
      u.persistent = n;
    } else if (succ != u.succ) {
      recovery_t::init_link(u.persistent, u.offset, succ);
      if (!u.deferred) io::flush(u.persistent->next);
    }
    u.succ = succ;
    if ((u.entry != nullptr || !lean) && u.displaced == nullptr) {
      u.displaced = static_cast<vrec*>(storage_->dram_allocate(sizeof(vrec)));
    }
    if ((u.entry == nullptr || !lean) && u.fresh == nullptr) {
      u.fresh = make_entry(u.key, {0, u.offset.value, 0, false});
    }
    _mm_prefetch(reinterpret_cast<const char*>(u.persistent), _MM_HINT_T0);
    return Status::OK();
  }

  inode* make_entry(std::string_view key, const version_ref& v) {
    const std::size_t bytes = inode::size_for(key.size());
    if (!Storage::dram_released_whole(bytes)) [[unlikely]] {
      large_entries_.store(true, std::memory_order_relaxed);
    }
    return inode::make(storage_->dram_allocate(bytes), key, v);
  }

  // ---- attach: flat combining ------------------------------------------------------------

  // Attaches a prepared request: in a pass of this thread's own if the combiner lock is
  // free, else advertised in a slot for the next pass (this thread's or another's).
  slot_state attach(request r) {
    auto serve = [this](request& q) {
      if (next_version_ >= kMaxVersion) return slot_state::exhausted;
      if (q.txn != nullptr && !test_skip_validation_.load(std::memory_order_relaxed) &&
          !validate(*index_, *q.txn, *q.batch)) {
        return slot_state::conflict;
      }
      const bool ok = q.batch != nullptr ? attach_batch(*q.batch, q.weak) : attach_one(*q.one);
      if (test_in_pass_) [[unlikely]] std::exchange(test_in_pass_, nullptr)();
      return ok ? slot_state::done : slot_state::failed;
    };
    auto end = [this] { end_pass(); };
    auto after = [this] { after_pass(); };
    io::hand_off();  // a pass may link the request's nodes as soon as it sees them
    if (const auto outcome = combiner_.attach_if_free(r, serve, end, after)) return *outcome;
    typename combiner_t::lease me(combiner_);
    me->request = r;
    return combiner_.attach(*me, serve, end, after);
  }

  // A put or delete: linked, and visible and (sync) durable at the end of the pass.
  // REQUIRES: the combiner lock.
  bool attach_one(update& u) {
    const std::uint64_t version = next_version_ + 1;
    lease(version);
    const bool weak = u.weak && kWeakWindows;
    if (weak) {
      enter_weak_window(kWordsPerUpdate);
    } else if (weak_window_open()) {
      end_weak_window();  // the weak writes before it are durable before it is
    }
    if (!link(u, version, !weak)) return false;
    if (weak) {
      unpersisted_writes_.fetch_add(1, std::memory_order_relaxed);
    } else {
      group_unfenced_ = true;  // end_pass fences the group's links once
    }
    next_version_ = version;
    return true;
  }

  // A batch: one version for every update. A sync batch is attached in its own window
  // (durable when the pass ends); a weak one inside the weak window. REQUIRES: the combiner
  // lock.
  bool attach_batch(std::vector<update>& updates, bool weak_batch) {
    // A batch too large for the window's noted words is made durable at once.
    const bool weak = weak_batch && kWeakWindows && updates.size() * kWordsPerUpdate <= kWeakWords;
    if (weak) {
      enter_weak_window(updates.size() * kWordsPerUpdate);
    } else {
      if (weak_window_open()) end_weak_window();
      open_window();
    }
    const std::uint64_t version = next_version_ + 1;
    lease(version);
    for (update& u : updates) {
      if (link(u, version, !weak)) continue;
      // Stale neighbours: nothing else moves under the lock, so one retry suffices.
      locate(u);
      (void)prepare(u, false);  // only re-points the successor: allocates nothing
      io::fence();              // the new successor is durable before the link
      const bool linked = link(u, version, !weak);
      (void)linked;
    }
    if (weak) {
      unpersisted_writes_.fetch_add(1, std::memory_order_relaxed);
    } else {
      io::fence();
      close_window(version);
    }
    next_version_ = version;
    return true;
  }

  // The end of a combining pass: one fence for the sync puts it linked (group commit), then
  // the root's fenced word covers them, fenced too, and everything the pass attached becomes
  // visible. The slots learn their outcome after this. The second fence is what lets
  // recovery report damage to an acknowledged put's node: a link above `fenced` may name a
  // torn node, which recovery passes silently, so no writer returns while its link is above
  // the durable `fenced`. REQUIRES: the combiner lock.
  void end_pass() {
    if (group_unfenced_) {
      if constexpr (M::explicit_flushes) {
        io::fence();
        // A weak window opened after the pass's sync puts (which its opening fenced) holds
        // links to nodes not yet written back: `fenced` stops below them.
        if (!weak_window_open()) durable_through_ = next_version_;
        note_fenced(durable_through_);
        io::fence();
      } else {
        // Automatic mode: each writer fenced its node at its hand-off, and every p-store is
        // durable before the next, so the pass's links name whole nodes already.
        note_fenced(next_version_);
      }
      group_unfenced_ = false;
    }
    io::hand_off();  // covers the slots' `done` too
    visible_version_.store(next_version_, std::memory_order_release);
  }

  // Every link to a version up to `v` is durable with its node (REQUIRES: a fence since
  // they were linked, and the combiner lock): recovery may trust those links (layout
  // invariant (3)). Written back, made durable by the caller's next fence: until then
  // recovery checks their nodes as it checks the newest ones.
  void note_fenced(std::uint64_t v) {
    if (fenced_ == v) return;
    fenced_ = v;
    root_t& r = root_ref();
    io::put(r.fenced, version_word(fenced_, in_root(word_field::fenced)));
    io::flush(r.fenced);
  }

  // Before `version` is assigned: if it is above the durable lease, the lease moves ahead by
  // kLeaseStep, fenced (once every kLeaseStep versions), so that a version is never assigned
  // twice, not even after a crash (layout invariant (4)). REQUIRES: the combiner lock.
  void lease(std::uint64_t version) {
    if (version <= lease_) return;
    lease_ = std::min(version + kLeaseStep, kMaxVersion);
    root_t& r = root_ref();
    io::put(r.lease, version_word(lease_, in_root(word_field::lease)));
    io::flush(r.lease);
    io::fence();
  }

  // ---- weak writes: the window ---------------------------------------------------------

  // From here recovery drops every version above next_version_ (all durable now): the
  // root's commit_version and batch_mode active, fenced.
  void open_window() {
    root_t& r = root_ref();
    io::put(r.commit_version, version_word(next_version_, in_root(word_field::commit_version)));
    io::put(r.batch_mode, kBatchActive);
    io::flush(&r.commit_version, 2 * sizeof(r.commit_version));
    io::fence();
    durable_through_ = next_version_;
  }
  // Every version up to `newest` (the window's newest) counts again: batch_mode idle, and
  // the root's fenced word at `newest`, so that recovery reports damage to the window's
  // nodes rather than passing them as torn; one fence. REQUIRES: every link and version
  // word up to `newest` durable.
  void close_window(std::uint64_t newest) {
    root_t& r = root_ref();
    durable_through_ = newest;
    note_fenced(newest);
    io::put(r.batch_mode, kBatchIdle);
    io::flush(r.batch_mode);
    io::fence();
  }

  bool weak_window_open() const { return weak_open_.load(std::memory_order_relaxed); }

  // Before a weak update's `words` words are noted: opens the window, or first closes it if
  // the words would not fit. REQUIRES: the combiner lock, words <= kWeakWords.
  void enter_weak_window(std::size_t words) {
    if (weak_window_open() && window_words_ + words > kWeakWords) end_weak_window();
    if (!weak_window_open()) {
      open_window();
      window_words_ = 0;
      weak_open_.store(true, std::memory_order_release);
    }
    window_words_ += words;
  }

  // A link keeps the successor it replaces as its prior, which recovery follows past a torn
  // node: that successor must be durable with its node. It is not if it was linked since the
  // last fence that covered it: a sync put earlier in this pass (node and link written back,
  // fenced at the pass's end; another writer's put can be served in the same pass, before a
  // key just after it), or a weak write of the open window (its words only noted). If it is
  // such a node, everything linked so far is made durable first (the window stays open).
  // A batch's nodes need none of this: prepare fenced them. REQUIRES: the combiner lock.
  void fence_before_relinking(const inode* successor_entry) {
    if (!io::fences_unfenced_priors || successor_entry == nullptr ||
        successor_entry->unlocked_newest().version <= durable_through_) {
      return;
    }
    if (weak_window_open()) write_back_noted();
    io::fence();
    durable_through_ = next_version_;
  }

  // Writes back the words the window noted, and forgets them (the caller fences).
  void write_back_noted() {
    for (const noted_word& w : weak_words_) io::flush(w.address, w.size);
    weak_words_.clear();
  }

  // Makes the window's weak writes durable and closes it: their noted words written back,
  // one fence, then batch_mode idle (close_window). REQUIRES: the combiner lock (or no other
  // thread uses the engine), the window open.
  void end_weak_window() {
    write_back_noted();
    io::before_window_close();
    close_window(next_version_);
    unpersisted_writes_.store(0, std::memory_order_relaxed);
    weak_persists_.fetch_add(1, std::memory_order_relaxed);
    weak_open_.store(false, std::memory_order_release);
  }

  // Persist(): every write visible before the call is durable when it returns. A weak write
  // visible to the caller was attached in a window that is still open (seen here: the
  // window opened before the write was published) or has been closed.
  void persist_weak_writes() {
    if (read_only_ || !weak_open_.load(std::memory_order_acquire)) return;
    combiner_.locked([&] {
      if (weak_window_open()) end_weak_window();
    });
    io::complete();
  }

  // The engine's threads carry names (at most 15 characters) so that top, perf and a
  // debugger tell them from the application's; a name that cannot be set changes nothing.
  static void name_thread(const char* name) { (void)pthread_setname_np(pthread_self(), name); }

  void start_persister(std::chrono::milliseconds interval) {
    persister_ = std::thread([this, interval] {
      name_thread("flintkv-persist");
      std::unique_lock lock(persister_mutex_);
      while (!persister_cv_.wait_for(lock, interval, [this] { return stop_persister_; })) {
        lock.unlock();
        persist_weak_writes();
        lock.lock();
      }
    });
  }
  void stop_persister() {
    if (!persister_.joinable()) return;
    {
      std::lock_guard lock(persister_mutex_);
      stop_persister_ = true;
    }
    persister_cv_.notify_all();
    persister_.join();
  }

  template <class Word>
  void note(const Word& w) {
    note_range(w.address(), sizeof(Word));
  }
  void note_range(const void* p, std::size_t n) {
    weak_words_.push_back({p, n});  // within the reserved capacity
  }

  // Validates the located neighbours and the prepared successor, then links the node into
  // the persistent list and the index: its version and link written back, not fenced
  // (`write_back`), or noted for the weak window's end. REQUIRES: the combiner lock.
  bool link(update& u, std::uint64_t version, bool write_back) {
    inode* pred = u.pred;
    inode* entry = u.entry;
    if (pred->removed.load(std::memory_order_relaxed) ||
        pred->load_next() != (entry != nullptr ? entry : u.after)) {
      return false;
    }
    if (entry != nullptr && entry->removed.load(std::memory_order_relaxed)) return false;
    if (successor_of(u) != u.succ) return false;
    if (M::explicit_flushes && (!write_back || u.deferred)) {
      fence_before_relinking(entry != nullptr ? entry : u.after);
    }
    // The checksum covers the version; in line order, the version word comes last.
    io::put(u.persistent->sizes, checked_sizes(u.sizes, u.content_crc, version));
    io::put(u.persistent->version, version_word(version, in_node(u.offset, word_field::version)));
    const auto& link_word = recovery_t::store_link(*storage_, node_offset{pred->tail_pnode()},
                                                   u.offset, version);
    // What goes out with the link: a put's whole node (its version among its lines), or a
    // batch entry's version and size words (the rest was fenced in prepare).
    const void* node_words = u.deferred ? static_cast<const void*>(u.persistent)
                                        : static_cast<const void*>(&u.persistent->version);
    const std::size_t node_bytes = u.deferred ? node::size_for(u.key.size(), u.value.size())
                                              : 2 * sizeof(u.persistent->version);
    if (write_back) {
      io::flush(node_words, node_bytes);
      io::flush(link_word);
    } else {
      note_range(node_words, node_bytes);
      note(link_word);
    }
    const version_ref v{version, u.offset.value, static_cast<std::uint32_t>(u.value.size()),
                        u.tombstone};
    bool had_live = false;
    if (entry != nullptr) {
      const version_ref displaced = entry->unlocked_newest();
      had_live = !displaced.tombstone;
      vrec* r = new (u.displaced) vrec{displaced.version, displaced.pnode, displaced.value_size,
                                       displaced.tombstone};
      u.displaced = nullptr;
      r->older.store(entry->older().load(std::memory_order_relaxed), std::memory_order_relaxed);
      entry->publish(v, r);
      if (!test_skip_newest_.load(std::memory_order_relaxed)) index_->set_newest(entry);
      reclaimer_.note(entry, version);
    } else {
      entry = u.fresh;
      u.fresh = nullptr;
      entry->publish(v, nullptr);
      entry->set_tail_pnode(u.offset.value);
      index_->insert(entry, u.pred, u.where);
      add(keys_, 1);
      // A key new to the list that the tier holds live: the list counts it from here on. A
      // merge that moved keys since locate may have moved this one (out of an entry made
      // and removed since): the tier is asked again.
      if (moves_.load(std::memory_order_seq_cst) != u.tier_moves) {
        u.tier_live = tier_holds_live(u.key, key_hash(u.key));
      }
      if (u.tier_live) add(tier_live_keys_, std::uint64_t(-1));
      if (u.tombstone) reclaimer_.note(entry, version);
    }
    u.version = version;
    add(versions_, 1);
    if (had_live != !u.tombstone) {
      add(live_keys_, u.tombstone ? std::uint64_t(-1) : 1);
    }
    return true;
  }

  // ---- reclamation -----------------------------------------------------------------------

  // After each combining pass: a reclamation pass when enough is due (or the test hook asks).
  // REQUIRES: the combiner lock.
  void after_pass() {
    const unsigned every = test_reclaim_every_.load(std::memory_order_relaxed);
    const bool test_due = every != 0 && ++passes_since_reclaim_ >= every;
    if (!test_due) {
      // Checking costs a fence and the registry's lock: only every kCheckEvery passes,
      // and only with a batch queued.
      if (reclaimer_.queued() < reclaimer_t::kBatch || ++passes_since_check_ < kCheckEvery) {
        return;
      }
      passes_since_check_ = 0;
    }
    passes_since_reclaim_ = 0;
    const std::optional<std::uint64_t> m = reclaimer_.settled(next_version_);
    if (!m || (!test_due && !reclaimer_.due(*m, reclaimer_t::kBatch))) return;
    (void)reclaim(*m, reclaimer_t::kBudget, false);
  }

  // A reclamation pass with settled mark m and the registry as it is now; the versions
  // dropped. Out of DRAM for the registry's copy, no pass (the combiner must not throw).
  // REQUIRES: the combiner lock (or no other thread uses the engine).
  std::uint64_t reclaim(std::uint64_t m, std::size_t budget, bool all) noexcept {
    // Reclamation unlinks through the list as it is durable: the weak window is closed
    // first. Else it could drop a version that a weak write, not durable yet, made
    // obsolete, or remove a key through its predecessor key's oldest node when that key is
    // new in the window (its node not durably linked: the durable list would still reach
    // the freed blocks).
    if (weak_window_open()) end_weak_window();
    try {
      const std::uint64_t generation = registry_.generation();  // before the copy: a reader
      const std::vector<std::uint64_t> readers = registry_.versions();  // leaving now is seen
      return apply(reclaimer_.pass(*index_, m, readers, generation, budget, all));
    } catch (const std::bad_alloc&) {
      return 0;
    }
  }

  // Reclaims everything readers allow, waiting for the marks of the visible version to
  // settle (a few epochs). Returns the versions dropped. REQUIRES: the calling thread is not
  // pinned (it would hold the epochs back).
  std::uint64_t reclaim_now() {
    if (read_only_) return 0;
    std::uint64_t dropped = 0;
    for (int round = 0; round < kReclaimRounds; ++round) {
      bool finished = false;
      combiner_.locked([&] {
        if (reclaimer_.queued() == 0 && reclaimer_.parked() == 0) {
          finished = true;
          return;
        }
        const std::optional<std::uint64_t> m = reclaimer_.settled(next_version_);
        if (!m) return;
        finished = *m == next_version_;
        dropped += reclaim(*m, SIZE_MAX, true);
      });
      if (finished) break;
    }
    io::complete();
    return dropped;
  }

  // Adds n (modulo 2^64) to a statistic the combiner alone writes: a plain load and store,
  // not a locked add, which on x86 would also wait for the write-backs the pass has issued
  // so far, as a store fence does.
  static void add(std::atomic<std::uint64_t>& counter, std::uint64_t n) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  std::uint64_t apply(const reclaimed& r) {
    add(versions_, -r.versions);
    add(keys_, -r.keys);
    return r.versions;
  }

  // ---- merges: keys that stopped changing move to the packed tier ------------------------

  // A key a merge chose: its entry, its only version, and what the tier gets of it, its key
  // and value copied into the merge's bytes (merge_bytes_) at `at`, the value right after
  // the key. One buffer for the merge, kept from one to the next: a string for each key and
  // each value cost the merge thread two allocations and two frees a key.
  struct merge_pick {
    inode* entry;
    std::uint64_t version;
    std::size_t at;
    std::uint32_t key_size, value_size;
    bool erasure;
    std::string_view key(const std::string& bytes) const { return {bytes.data() + at, key_size}; }
    std::string_view value(const std::string& bytes) const {
      return {bytes.data() + at + key_size, value_size};
    }
  };

  // One merge (docs/engine-design.md, "The engine over the packed tier", Order of a merge):
  //  (a) the watermark W = min(settled mark, oldest registered reader, durable bound) less
  //      `lag`, read under the combiner lock; then, pinned and without the lock, up to
  //      `limit` keys whose only version u is at or below W, copied (a damaged node is left
  //      to the list's readers, which report it), from where the last merge stopped; then,
  //      still pinned (no entry chosen is freed before it), under the lock, each one still
  //      so is claimed: a reference in its `queued` count, so that reclamation removes none
  //      of them (a delete arriving meanwhile stays until the next merge moves it as an
  //      erasure record);
  //  (b) their values, and their deletes as erasure records, written to the tier as one
  //      small run, durable and published (the small runs merged into the large run first
  //      if every slot is taken): each key is now in both tiers, and the list wins;
  //  (c) in steps of kUnlinkStep keys (unlink_step_), each under the lock (writers take it between
  //      steps): moves_ raised to an odd value (iterators find their place again by key),
  //      then each claimed key of the step whose only version is still u leaves the index
  //      and the list (one link each, reclaimer::move_out), moves_ raised to an even value,
  //      one fence; after the last step, outside the lock, once every reader pinned before
  //      has unpinned (two epochs), the moved nodes get the uncommitted marker (for
  //      repair's scan), one fence, and are freed.
  // A crash before a step's fence leaves its keys in both tiers (the list wins; the next
  // merge moves them again); after it, in the tier alone. u is at or below the durable
  // bound, so no crash takes it from the list while the tier keeps it. A write between
  // steps is as a write between the claim and (c): a key it updates stays in the list,
  // over the tier's older value. *moved: the keys moved.
  // REQUIRES: merge_mutex_; the calling thread is not pinned.
  // The nodes of the keys it moved go to *unlinked, for free_after_readers: the caller
  // frees those of several merges after one wait for the readers.
  Status merge_round(std::size_t limit, std::uint64_t lag, std::size_t* moved,
                     std::vector<node_offset>* unlinked) {
    *moved = 0;
    if (read_only_ || tier_ == nullptr || limit == 0) return Status::OK();
    // However the merge ends, a buffer that large values grew is let go with it.
    struct bytes_kept {
      std::string& bytes;
      ~bytes_kept() {
        if (bytes.capacity() > kMergeBytesKept) std::string().swap(bytes);
      }
    } kept{merge_bytes_};
    try {
      std::vector<merge_pick> picks = choose_for_merge(limit, lag);
      if (picks.empty()) return Status::OK();
      std::vector<typename tier_t::change> changes;
      changes.reserve(picks.size());
      for (const merge_pick& p : picks) {
        changes.push_back({p.key(merge_bytes_), p.value(merge_bytes_), p.erasure,
                           tier_t::run::erase_as::record});
      }
      Status s = Status::OK();
      if (tier_->full()) {
        s = tier_->merge();
        ++tier_merges_;
      }
      if (s.ok()) s = tier_->flush(changes);
      if (!s.ok()) {
        combiner_.locked([&] {
          for (merge_pick& p : picks) --p.entry->queued();
        });
        return s.IsNoSpace() ? Status::NoSpace(storage_->path() + ": " + s.message())
                             : with_path(s);
      }
      const std::size_t before = unlinked->size();
      unlinked->reserve(before + picks.size());
      std::vector<alloc::node_block> retiring;
      retiring.reserve(picks.size());
      for (std::size_t from = 0; from < picks.size(); from += unlink_step_) {
        const std::span<merge_pick> step(picks.data() + from,
                                         std::min(unlink_step_, picks.size() - from));
        if (from != 0 && test_between_steps_) test_between_steps_();
        request_unlink_lines(step);
        combiner_.locked([&] { unlink_merged(step, from, picks.size(), unlinked, &retiring); });
      }
      storage_->retire_dram(retiring);
      *moved = unlinked->size() - before;
      if (*moved != 0) add(merges_, 1);
      return Status::OK();
    } catch (const std::bad_alloc&) {
      return Status::NoSpace("out of DRAM for a merge");
    }
  }

  // A merge's (a): the keys, chosen and claimed, their bytes in merge_bytes_. Throws
  // std::bad_alloc (nothing claimed). REQUIRES: merge_mutex_.
  std::vector<merge_pick> choose_for_merge(std::size_t limit, std::uint64_t lag) {
    merge_bytes_.clear();
    std::uint64_t w = 0;
    bool have_w = false;
    std::vector<std::uint64_t> readers;
    choice_saw_every_version_ = false;
    combiner_.locked([&] {
      const std::optional<std::uint64_t> m = reclaimer_.settled(next_version_);
      if (!m) return;
      // A reclamation pass first, as a combining pass would make: once writes stop, no pass
      // comes, and a key keeping older versions nobody reads would never move.
      if (reclaimer_.queued() != 0 || reclaimer_.parked() != 0) {
        (void)reclaim(*m, reclaimer_t::kBudget, false);
      }
      const std::uint64_t durable = M::explicit_flushes ? durable_through_ : next_version_;
      w = std::min(*m, durable);
      have_w = true;
      // Every durable version is settled: what this walk leaves, only readers (snapshots,
      // iterators) or weak writes not yet durable keep in the list.
      choice_saw_every_version_ = *m >= durable;
    });
    if (!have_w) return {};
    readers = registry_.versions();  // after the mark settled, as a reclamation pass reads it
    if (!readers.empty()) w = std::min(w, readers.front());
    w -= std::min(w, lag);
    std::vector<merge_pick> picks;
    // Pinned until every pick is claimed: a key deleted and removed by a reclamation pass
    // meanwhile leaves its entry retired, not freed, so the claim can read that it left.
    // (Writers take the combiner lock pinned too: nothing under it waits for readers.)
    auto pinned = pin();
    inode* n = merge_from_.empty() ? index_->head()->load_next() : index_->seek(merge_from_);
    // The walk waits on a miss for each entry and one for each node it checks: two
    // pointers run ahead of it along the list, the far one requesting entries, the near one
    // (whose entries the far one requested already) their newest nodes, so that those misses
    // overlap the walk's work. They only request: the walk follows its own links.
    const inode* far = n;
    const inode* near = n;
    for (std::size_t i = 0; i < kMergeAhead && far != nullptr; ++i) {
      far = far->next_relaxed();
      if (far != nullptr) __builtin_prefetch(far);
      if (i >= kMergeAhead / 2 && near != nullptr) near = near->next_relaxed();
    }
    for (std::size_t looked = 0;
         n != nullptr && picks.size() < limit && looked < kMergeLookFactor * limit;
         n = n->load_next(), ++looked) {
      if (far != nullptr && (far = far->next_relaxed()) != nullptr) __builtin_prefetch(far);
      if (near != nullptr && (near = near->next_relaxed()) != nullptr) {
        prefetch_node(near, near->unlocked_newest());
      }
      vrec* chain = nullptr;
      const version_ref v = n->newest(&chain);
      if (v.version > w || chain != nullptr || n->removed.load(std::memory_order_acquire)) {
        continue;
      }
      // Read without the lock: a node freed meanwhile (the key deleted and removed) reads
      // as anything, and the claim below drops the key, whose entry is then removed.
      if (!v.tombstone && !node_matches(n->key_size, v, true)) continue;
      const std::string_view value = v.tombstone ? std::string_view() : value_of(n, v);
      picks.push_back({n, v.version, merge_bytes_.size(), n->key_size,
                       static_cast<std::uint32_t>(value.size()), v.tombstone});
      merge_bytes_.append(n->key()).append(value);
    }
    merge_from_.assign(n == nullptr ? std::string_view() : n->key());
    if (picks.empty()) return picks;
    if (test_before_claims_) test_before_claims_();
    combiner_.locked([&] {
      std::erase_if(picks, [](merge_pick& p) {
        inode* e = p.entry;
        if (e->removed.load(std::memory_order_relaxed) ||
            e->unlocked_newest().version != p.version ||
            e->older().load(std::memory_order_relaxed) != nullptr || e->queued() != 0) {
          return true;
        }
        ++e->queued();
        return false;
      });
    });
    return picks;
  }

  // Requests, without the combiner lock, lines a step of a merge's unlinks will read and
  // write (unlink_merged): each key's entry and point table slot, then its node and its
  // neighbours' entries, then the node its predecessor links from. The step's unlinks then
  // wait on fewer misses under the lock, and while this runs, writers take the lock: during
  // a merge's unlinks they wait for a step at a time, about half of it, not for the whole
  // merge. Hints only (writers may change any of it before the lock is taken); nothing of
  // the pool is read. REQUIRES: the picks claimed (their entries stay in the list).
  void request_unlink_lines(std::span<const merge_pick> step) const {
    auto pinned = pin();  // a neighbour read may leave the list meanwhile, not be freed
    for (const merge_pick& p : step) index_->prefetch_removal(p.entry, p.key(merge_bytes_));
    for (const merge_pick& p : step) {
      const inode* e = p.entry;
      prefetch_node_start(e->unlocked_newest().pnode);
      __builtin_prefetch(e->prev(), 1);
      __builtin_prefetch(e->next_relaxed(), 1);
    }
    for (const merge_pick& p : step) {
      __builtin_prefetch(storage_->pointer(node_offset{p.entry->prev()->tail_pnode()}), 1);
    }
  }

  // A step of a merge's (c) under the lock: the claimed keys of `step` (picks `from` on of
  // the merge's `count`) still at their chosen version leave the index and the list, their
  // nodes appended to *freed and their entries to *retiring (retired by the caller once the
  // lock is free: reclaimer::move_out). Each step is a whole unlink of its keys (moves()
  // odd, then even; the unlinks durable before it returns); between steps writers take
  // the lock. REQUIRES: the combiner lock; freed and retiring have room for every pick.
  void unlink_merged(std::span<merge_pick> picks, std::size_t from, std::size_t count,
                     std::vector<node_offset>* freed, std::vector<alloc::node_block>* retiring) {
    // The unlinks go through the list as it is durable (as reclamation's: reclaim()).
    if (weak_window_open()) end_weak_window();
    moves_.fetch_add(1, std::memory_order_seq_cst);  // odd: entries are leaving
    std::uint64_t live = 0;
    const std::size_t before = freed->size();
    // Each removal waits on a miss in the point table, one on its entry (claimed, so still
    // in the index) and one on its node, whose successor word the unlink reads: the first
    // two requested kRemovalAhead picks before, the node (named by the entry, which has
    // arrived by then) half as many, so that they overlap.
    constexpr std::size_t kRemovalAhead = 8;
    for (std::size_t i = 0; i < picks.size() && i < kRemovalAhead; ++i) {
      index_->prefetch_removal(picks[i].entry, picks[i].key(merge_bytes_));
    }
    for (std::size_t i = 0; i < picks.size() && i < kRemovalAhead / 2; ++i) {
      prefetch_node_start(picks[i].entry->unlocked_newest().pnode);
    }
    for (std::size_t i = 0; i < picks.size(); ++i) {
      if (test_in_unlinks_) test_in_unlinks_(from + i);
      if (i + kRemovalAhead < picks.size()) {
        index_->prefetch_removal(picks[i + kRemovalAhead].entry,
                                 picks[i + kRemovalAhead].key(merge_bytes_));
      }
      if (i + kRemovalAhead / 2 < picks.size()) {
        prefetch_node_start(picks[i + kRemovalAhead / 2].entry->unlocked_newest().pnode);
      }
      inode* e = picks[i].entry;
      --e->queued();
      const version_ref v = e->unlocked_newest();
      if (v.version != picks[i].version ||
          e->older().load(std::memory_order_relaxed) != nullptr || e->queued() != 0) {
        continue;  // written since: the list keeps the key, over the tier's older value
      }
      freed->push_back(reclaimer_.move_out(*index_, e, retiring));
      if (!v.tombstone) ++live;
    }
    if (test_in_unlinks_ && from + picks.size() == count) test_in_unlinks_(count);
    moves_.fetch_add(1, std::memory_order_seq_cst);  // even: every entry that left has left
    const std::size_t moved = freed->size() - before;
    if (moved == 0) return;
    io::before_free();  // the unlinks durable before any node is marked or freed
    add(merged_keys_, moved);
    add(keys_, -moved);
    add(versions_, -moved);
    add(live_keys_, -live);
    add(tier_live_keys_, live);
  }

  // The merge the thread makes once writes pause: the tier's small runs into its large
  // run, counted and noted for Stats; its status, with the pool's path. REQUIRES:
  // merge_mutex_.
  Status merge_tier() {
    Status s = tier_->merge();
    ++tier_merges_;
    if (!s.ok()) s = with_path(s);
    note_merge(s);
    return s;
  }

  // Frees the nodes a merge unlinked, once no reader can read them: every reader pinned
  // when they left the index has unpinned after the epoch advanced twice (reclamation.hpp,
  // the settled mark's argument). Each gets the uncommitted marker first, fenced, so that
  // repair's scan of the heap does not take a freed node for a version. REQUIRES: not
  // pinned; their unlinks durable.
  void free_after_readers(const std::vector<node_offset>& freed) {
    if (freed.empty()) return;
    auto& epochs = storage_->epochs();
    std::atomic_thread_fence(std::memory_order_seq_cst);  // the unlinks come first
    const std::uint64_t stamp = epochs.epoch();
    while (true) {
      epochs.collect();
      if (epochs.epoch() >= stamp + 2) break;
      std::this_thread::yield();
    }
    for (const node_offset off : freed) recovery_t::mark_uncommitted(*storage_, off);
    io::before_free();
    for (const node_offset off : freed) storage_->free(off);
    io::complete();
  }

  // Counts the keys live in the packed tier alone (the newest record a value, no entry in
  // the list): Stats::live_keys adds them to the list's live keys. Walks the tier, asking
  // the index of each key. REQUIRES: no writer (recovery; TEST_tier_write).
  Status count_tier_live() {
    std::uint64_t n = 0;
    if (tier_ != nullptr && !tier_->empty()) {
      auto pinned = pin();
      typename tier_t::cursor c(*tier_, false);
      Status s = c.seek_to_first();
      for (; s.ok() && c.valid(); s = c.next()) {
        if (index_->find(c.key()) == nullptr) ++n;
      }
      if (!s.ok()) return with_path(s);
    }
    tier_live_keys_.store(n, std::memory_order_relaxed);
    return Status::OK();
  }

  // The merge thread (Options::merge_interval): at each interval, merges of kMergeKeys
  // keys while they find a full batch (at most kMergeRounds in a row, so that the close
  // never waits long), keeping the kMergeLag newest versions in the list while writes go
  // on (keys written again soon stay where an update costs least), none once they pause;
  // then, with writes paused, the tier's small runs merged into its large run.
  void start_merger(std::chrono::milliseconds interval) {
    merges_keep_up_.store(true, std::memory_order_release);
    merger_ = std::thread([this, interval] {
      name_thread("flintkv-merge");
      std::unique_lock lock(merger_mutex_);
      std::uint64_t seen = UINT64_MAX;
      // Over the list's bound with merges moving keys, the thread merges on without
      // waiting for the interval: writers are waiting for it (await_merges).
      while (true) {
        merger_cv_.wait_for(lock, interval, [this] {
          return stop_merger_ || pressing() || merge_wanted();
        });
        if (stop_merger_) break;
        const std::uint64_t pass = ++merge_passes_;
        lock.unlock();
        while (test_hold_merges_.load(std::memory_order_acquire) && !stop_requested()) {
          std::this_thread::yield();
        }
        const std::uint64_t now = visible_version_.load(std::memory_order_acquire);
        const std::uint64_t lag = now == seen ? 0 : kMergeLag;
        seen = now;
        {
          std::lock_guard merging(merge_mutex_);
          const std::uint64_t tier_merges = tier_merges_;
          const std::uint64_t gathers = tier_->gathers();
          std::vector<node_offset> unlinked;
          std::size_t moved_in_pass = 0;
          bool every_version = true;  // each walk's mark covered every durable version
          const bool from_head = merge_from_.empty();
          Status pass_status;
          for (int round = 0; round < kMergeRounds; ++round) {
            std::size_t moved = 0;
            const Status s = merge_round(kMergeKeys, lag, &moved, &unlinked);
            note_merge(s);
            note_progress(s.ok() && moved != 0);
            moved_in_pass += moved;
            every_version = every_version && choice_saw_every_version_;
            if (!s.ok()) pass_status = s;
            if (unlinked.size() >= kMergeFreeAfter) {
              free_after_readers(unlinked);
              unlinked.clear();
            }
            if (!s.ok()) break;
            if (moved < kMergeKeys / 2 && merge_from_.empty()) break;
            if (stop_requested()) break;
          }
          free_after_readers(unlinked);
          // Writes paused: the small runs go into the large run, so that reads meet one run.
          if (lag == 0 && tier_->small_runs() != 0 && !stop_requested()) {
            if (Status s = merge_tier(); !s.ok()) pass_status = s;
          }
          if (tier_merges_ != tier_merges || tier_->gathers() != gathers) return_free_dram();
          // For WaitForMerges: a pass made with writes paused that walked the whole list
          // with every durable version settled, found nothing to move, and left one run.
          const bool settled = pass_status.ok() && lag == 0 && moved_in_pass == 0 &&
                               from_head && merge_from_.empty() && every_version &&
                               tier_->small_runs() == 0;
          lock.lock();
          if (!pass_status.ok()) {
            failed_pass_ = pass;
            failed_pass_status_ = pass_status;
          } else if (settled) {
            settled_pass_ = pass;
          }
          lock.unlock();
          merger_cv_.notify_all();
        }
        lock.lock();
      }
      lock.unlock();
      note_progress(false);  // writers no longer wait for a thread that stopped
    });
  }

  // Back-pressure: a writer that finds the list holding more than kListBound keys while
  // the merge thread moves keys waits until it holds no more, or the thread's last merge
  // moved none (a snapshot or an old iterator keeps the rest, the pool is full, or the
  // tier is damaged: the list then grows as without merges) or the thread stopped. So a
  // fill that outruns the merges leaves at most about kListBound keys for them to move
  // afterwards, while its readers run. REQUIRES: not pinned, no lock held.
  void await_merges() {
    if (!pressing()) return;
    write_stalls_.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock lock(pressure_mutex_);
    pressure_cv_.wait(lock, [this] { return !pressing(); });
  }
  bool pressing() const {
    return keys_.load(std::memory_order_relaxed) > kListBound &&
           merges_keep_up_.load(std::memory_order_acquire);
  }
  // After each merge of the thread: whether it moved keys; waiting writers look again.
  void note_progress(bool moved) {
    merges_keep_up_.store(moved, std::memory_order_release);
    { std::lock_guard lock(pressure_mutex_); }  // a writer between its look and its wait
    pressure_cv_.notify_all();
  }
  // What a merge of the thread came to, for Stats: a failure is counted, and its error is
  // Stats::merge_error until a merge succeeds.
  void note_merge(const Status& s) {
    std::lock_guard lock(merge_error_mutex_);
    if (!s.ok()) merge_errors_.fetch_add(1, std::memory_order_relaxed);
    merge_error_ = s.ok() ? std::string() : s.ToString();
  }
  // A WaitForMerges caller waits for a pass that has not settled or failed yet.
  // REQUIRES: merger_mutex_.
  bool merge_wanted() const {
    return wanted_pass_ > settled_pass_ && wanted_pass_ > failed_pass_;
  }
  bool stop_requested() {
    std::lock_guard lock(merger_mutex_);
    return stop_merger_;
  }
  void stop_merger() {
    if (!merger_.joinable()) return;
    {
      std::lock_guard lock(merger_mutex_);
      stop_merger_ = true;
    }
    merger_cv_.notify_all();
    merger_.join();
  }

  // A merge or a gather of the tier frees what it held in DRAM (a chunk of records, as
  // views; the indexes it published), but glibc's malloc keeps the freed pages in the merge
  // thread's arena, about 25 MB after a million keys: given back to the system after each
  // pass that merged or gathered.
  static void return_free_dram() {
#if defined(__GLIBC__)
    ::malloc_trim(0);
#endif
  }

  std::uint64_t moves() const { return moves_.load(std::memory_order_seq_cst); }

  // ---- reads -----------------------------------------------------------------------------

  std::string_view value_of(const inode* n, const version_ref& v) const {
    return value_after(v, n->key_size);
  }
  // The value of version v, whose key has key_size bytes: read from its node alone (an
  // iterator that took the key from the node has not read the entry).
  std::string_view value_after(const version_ref& v, std::size_t key_size) const {
    return {at(node_offset{v.pnode})->body() + key_size, v.value_size};
  }

  // Requests the first two lines of the node at offset `pnode` (a node of up to 128 bytes,
  // in its block of 128: all of it), reading nothing of its entry: the iterator's
  // read-ahead issues a dozen at once, and a lighter request keeps more of them in flight.
  // Any offset in the pool will do, a stale one too: a prefetch reads nothing and cannot
  // fault.
  void prefetch_node_start(std::uint64_t pnode) const {
    const char* p = reinterpret_cast<const char*>(storage_->pointer(node_offset{pnode}));
    __builtin_prefetch(p);
    __builtin_prefetch(p + 64);
  }
  // Requests the cache lines of version v's node of entry n (an iterator reads its size
  // word, key and value ahead of time), as prefetch_node_start does.
  void prefetch_node(const inode* n, const version_ref& v) const {
    const char* p = reinterpret_cast<const char*>(storage_->pointer(node_offset{v.pnode}));
    const std::size_t bytes = std::min<std::size_t>(node::size_for(n->key_size, v.value_size),
                                                    kPrefetchNodeBytes);
    for (std::size_t i = 0; i < bytes; i += 64) __builtin_prefetch(p + i);
    __builtin_prefetch(p + bytes - 1);
  }

  // A Get the list has no version for (no entry, or every version newer than the Get's):
  // the packed tier's answer (docs/engine-design.md, "The engine over the packed tier":
  // the tier holds, of every key, a value older than every version the list keeps).
  // REQUIRES: pinned.
  Status get_from_tier(std::string_view key, std::string* value, bool verify) const {
    return get_from_tier(key, key_hash(key), value, verify);
  }
  // The same, for a key of key_hash `key_hashed`.
  Status get_from_tier(std::string_view key, std::uint32_t key_hashed, std::string* value,
                       bool verify) const {
    if (tier_ == nullptr) return Status::NotFound(key.substr(0, 64));
    Status s = tier_->get(key, key_hashed, value, verify);
    if (s.ok()) {
      io::complete();
      return s;
    }
    if (s.IsNotFound()) return Status::NotFound(key.substr(0, 64));
    return with_path(s);
  }
  // The value of `key` at version vv, read again (an iterator's value() after a merge moved
  // keys): the list's newest version at or below vv, else the tier's. REQUIRES: pinned; the
  // key has a value at vv (the iterator stands on it, and vv is registered).
  Status value_at(std::string_view key, std::uint64_t vv, bool verify, std::string* value) const {
    const inode* n = index_->find(key);
    const std::optional<version_ref> v = n != nullptr ? n->visible_at(vv) : std::nullopt;
    if (!v) return get_from_tier(key, value, verify);
    if (v->tombstone) return Status::NotFound(key.substr(0, 64));
    if (verify) {
      if (Status s = this->verify(n, *v); !s.ok()) return s;
    }
    value->assign(value_of(n, *v));
    return Status::OK();
  }
  // A packed run's error (whose messages name offsets, not the pool), naming the pool.
  Status with_path(const Status& s) const {
    const std::string message = storage_->path() + ": " + s.message();
    return s.IsCorruption() ? Status::Corruption(message) : Status::IOError(message);
  }
  const tier_t* tier() const { return tier_.get(); }

  // A Get answered from the point table's newest word (index.hpp, point_table invariant
  // (3)): true if it named a node of `key` at a version at or below `vv` (the value then
  // assigned to *value, if not nullptr), with its checksum matching if `verify`; false if
  // the entry must answer (no word, a delete, another key's node, a newer version, or a
  // node that fails a check, which the entry's path then reports). REQUIRES: pinned, and
  // the visible version read after pinning, before this call.
  bool get_newest(std::string_view key, std::uint64_t hash, std::uint64_t vv, std::string* value,
                  bool verify) const {
    const std::uint64_t word = index_->newest(hash);
    if (word == 0) return false;
    const node_offset at{point_table::newest_node(word)};
    const node* p = this->at(at);
    std::uint64_t version = 0;
    if (!committed_at_or_below(at, vv, &version)) return false;
    const version_ref newest{version, at.value, point_table::newest_value_size(word), false};
    // The node's sizes before its key bytes: a word of another key (its hash bits alike)
    // names a node whose block may end before key.size() bytes of body.
    if (!node_matches(key.size(), newest, verify) ||
        std::memcmp(p->body(), key.data(), key.size()) != 0) {
      return false;
    }
    if (value != nullptr) value->assign(p->body() + key.size(), newest.value_size);
    return true;
  }

  // A scan's step without the entry (iterator.hpp): the node that `a`'s tag names, if
  // update_marks shows no version of the entry after the tagged one, the node holds a key
  // of a's size and prefix, is committed at a version at or below `vv`, is not a delete,
  // and (if `verify`) matches its checksum. Then *key is its key and *v its version, and
  // that version is the key's newest at vv (update_marks). Else false: the entry must
  // answer (it reports damage too). The node is not freed while the iterator's version is
  // registered, as the newest version at vv of a live key. REQUIRES: pinned, and vv read
  // from visible_version before a's entry was read from the tree.
  bool node_by_tag(const key_index::ahead& a, std::uint64_t vv, bool verify, std::string_view* key,
                   version_ref* v) const {
    if (a.tag == 0 || !index_->tag_current(a.entry)) return false;
    const node_offset at{entry_node_tag::node(a.tag)};
    std::uint64_t version = 0;
    if (!committed_at_or_below(at, vv, &version)) return false;
    // The value's size from the node itself, bounded by the pool before node_matches
    // reads that far (a hole in update_marks' argument could name any block).
    const node* p = this->at(at);
    const auto value_size =
        static_cast<std::uint32_t>(value_size_of(p->sizes.load(flit::volatile_, flit::private_)));
    if (at.value + node::size_for(a.key_size, value_size) > storage_->size()) return false;
    const version_ref found{version, at.value, value_size, false};
    const std::string_view k(p->body(), a.key_size);
    if (!node_matches(a.key_size, found, verify) || btree_layout::prefix_of(k) != a.pre) {
      return false;
    }
    *key = k;
    *v = found;
    return true;
  }

  // Whether the node at `at` holds a committed version at or below vv, in *version.
  bool committed_at_or_below(node_offset at, std::uint64_t vv, std::uint64_t* version) const {
    const stored_version sv = read_version_word(
        this->at(at)->version.load(flit::volatile_, flit::private_), in_node(at, word_field::version));
    *version = sv.version;
    return sv.kind == version_kind::committed && sv.version <= vv;
  }

  // Whether version v's node, of a key of key_size bytes, has v's sizes and delete flag in
  // its size word, and (if `checksum`) its content matches its checksum. The node is
  // immutable once linked, so a plain load of its size word suffices.
  bool node_matches(std::size_t key_size, const version_ref& v, bool checksum) const {
    const node* p = at(node_offset{v.pnode});
    const word63 sizes = p->sizes.load(flit::volatile_, flit::private_);
    if (key_size_of(sizes) != key_size || value_size_of(sizes) != v.value_size ||
        ((flags_of(sizes) & kTombstone) != 0) != v.tombstone) {
      return false;
    }
    const std::string_view key(p->body(), key_size);
    const std::string_view value(p->body() + key_size, v.value_size);
    return !checksum ||
           node_check_of(sizes) == node_checksum(node_offset{v.pnode}, sizes.bits, key, value, v.version);
  }

  // Checks the persistent node of version v of entry n against the index's copy of its
  // sizes and its checksum: Corruption if its content was damaged since the store was
  // opened.
  Status verify(const inode* n, const version_ref& v) const {
    if (test_on_verify_) test_on_verify_(n->key(), v.tombstone);
    if (node_matches(n->key_size, v, true)) return Status::OK();
    return Status::Corruption(storage_->path() + ": node at offset " + std::to_string(v.pnode) +
                              " (key '" + recovery_t::printable(n->key()) +
                              "'): checksum mismatch: its content was damaged");
  }

  // ---- transactions (transaction_host) ----------------------------------------------------

  Status commit_transaction(const WriteBatch& writes, const WriteOptions& options, txn_validation& v,
                            std::uint64_t* version) override {
    return guarded([&] {
      if (read_only_) return refuse_write("Transaction::Commit");
      Status s = write_batch(writes, !options.sync, &v);
      if (s.ok()) *version = last_write_version_;
      return s;
    });
  }

  Status writable(std::string_view what) const override {
    return read_only_ ? refuse_write(what) : Status::OK();
  }

  Status refuse_write(std::string_view what) const {
    return Status::InvalidArgument(storage_->path() + ": opened read-only (Options::read_only): " +
                                   std::string(what) + " refused");
  }


  // ---- state -----------------------------------------------------------------------------

  static constexpr unsigned kCheckEvery = 16;    // combining passes between watermark checks
  // Weak windows exist in manual mode only: in automatic mode every store is durable.
  static constexpr bool kWeakWindows = M::explicit_flushes;
  // Ranges a weak update notes: its node (a batch entry's: its version and size words), its
  // link.
  static constexpr std::size_t kWordsPerUpdate = 2;
  static constexpr std::uint64_t kLeaseStep = 4096;  // versions a lease fence covers
  // The words a weak window notes at most: then it is closed (its writes made durable), so
  // that waiting writes take bounded DRAM and recovery drops a bounded number of them.
  static constexpr std::size_t kWeakWords = 8192;
  static constexpr std::size_t kPrefetchNodeBytes = 256;  // prefetch_node: the lines it asks
  static constexpr int kReclaimRounds = 8;       // reclaim_now: enough for a mark to settle
  static constexpr int kFullPoolRounds = 8;      // a write that finds the pool full
  // Merges (merge_round): keys a merge moves at most (a small run of the tier), entries it
  // looks at per key it may move, versions it leaves in the list while writes go on, and
  // merges the thread makes in a row.
  static constexpr std::size_t kMergeKeys = 4096;
  static constexpr std::size_t kMergeLookFactor = 8;
  static constexpr std::uint64_t kMergeLag = 16384;
  static constexpr int kMergeRounds = 64;
  // Keys the list holds at most before writers wait for the merge thread (await_merges).
  static constexpr std::uint64_t kListBound = 65536;
  static_assert(kListBound >= 2 * kMergeLag, "merges move keys while the list is over the bound");
  static constexpr std::size_t kMergeAhead = 8;  // choose_for_merge: entries requested ahead
  // Keys a merge unlinks per hold of the combiner lock (unlink_merged): their lines,
  // requested before (request_unlink_lines), fit in a core's L2 cache.
  static constexpr std::size_t kUnlinkStep = 256;
  // merge_bytes_ is kept between merges up to this capacity (a merge of 4096 keys of 16
  // bytes with 64-byte values takes 320 KiB), let go beyond it (large values).
  static constexpr std::size_t kMergeBytesKept = std::size_t{1} << 20;
  // The thread frees the nodes of the keys its merges moved once this many wait, or its
  // merges stop: each freeing waits for the readers to unpin (free_after_readers), which
  // after every merge took a fifth of the thread's time, in yields, behind a fill.
  static constexpr std::size_t kMergeFreeAfter = 8 * kMergeKeys;

  std::unique_ptr<Storage> storage_;
  std::unique_ptr<key_index> index_;
  // The packed tier behind the list (recovery.hpp; null only for a read-only store of
  // format 3, which has none).
  std::unique_ptr<tier_t> tier_;
  combiner_t combiner_;
  // What every pass writes, on one line: a pass runs on whichever writer holds the combiner
  // lock, so at two threads almost every pass finds the lines the last one wrote in the
  // other core's cache, and pays a miss for each of them under the lock. Readers read
  // visible_version_, which every pass writes anyway: the others cost them no more misses.
  alignas(64) std::atomic<std::uint64_t> visible_version_{0};
  std::uint64_t next_version_ = 0;  // written only under the combiner lock
  std::uint64_t lease_ = 0;         // the root's durable lease; the combiner's
  std::uint64_t fenced_ = UINT64_MAX;  // the root's fenced version as last stored; the combiner's
  // Every version up to this is durably linked with its node (manual mode): the newest
  // version at the last fence that covered every link and node so far (a pass's, a window's
  // opening or closing, fence_before_relinking's). The combiner's.
  std::uint64_t durable_through_ = 0;
  // The combiner's: the pass linked sync puts it has not fenced yet.
  bool group_unfenced_ = false;
  unsigned passes_since_reclaim_ = 0, passes_since_check_ = 0;  // the combiner's
  std::atomic<std::uint64_t> live_keys_{0}, keys_{0}, versions_{0};  // the combiner's
  // The weak window (open: batch_mode active in the pool). Written under the combiner lock;
  // read without it by Persist() and by stats.
  alignas(64) std::atomic<bool> weak_open_{false};
  struct noted_word {
    const void* address;
    std::size_t size;
  };
  std::vector<noted_word> weak_words_;  // the window's unwritten-back words; the combiner's
  // The words noted since the window opened (the window's bound, kWeakWords, counts these:
  // so are its writes, which recovery drops while it is open); the combiner's.
  std::size_t window_words_ = 0;
  std::atomic<std::uint64_t> unpersisted_writes_{0}, weak_persists_{0};
  striped_counter weak_writes_, persist_calls_;
  std::thread persister_;  // Options::persist_interval
  std::mutex persister_mutex_;
  std::condition_variable persister_cv_;
  bool stop_persister_ = false;  // under persister_mutex_
  std::thread merger_;  // Options::merge_interval
  std::mutex merger_mutex_;
  std::condition_variable merger_cv_;
  bool stop_merger_ = false;  // under merger_mutex_
  // WaitForMerges, under merger_mutex_: the merge thread's passes counted from 1, the last
  // that found nothing to do, the last that failed (and how), and the pass the newest
  // caller waits for (or a later one).
  std::uint64_t merge_passes_ = 0, settled_pass_ = 0, failed_pass_ = 0, wanted_pass_ = 0;
  Status failed_pass_status_;
  // Whether the last choice of keys for a merge (choose_for_merge) had every durable
  // version settled (else the keys of the newest ones could not move yet). Under
  // merge_mutex_.
  bool choice_saw_every_version_ = false;
  // Back-pressure (await_merges): the merge thread's last merge moved keys.
  std::atomic<bool> merges_keep_up_{false};
  std::atomic<std::uint64_t> write_stalls_{0};
  std::mutex pressure_mutex_;
  std::condition_variable pressure_cv_;
  std::mutex merge_mutex_;    // one merge at a time (the tier has one writer)
  std::string merge_from_;    // where the next merge looks first ("": the first key); merge_mutex_
  std::string merge_bytes_;   // the keys and values of a merge's picks; merge_mutex_
  std::uint64_t tier_merges_ = 0;  // merges of the tier's small runs into its large run; merge_mutex_
  std::mutex merge_error_mutex_;
  std::string merge_error_;   // the thread's last merge's error, if it failed; merge_error_mutex_
  // Raised by every merge before it removes an entry, to an odd value, and again once the
  // last has left, to an even one (iterator.hpp, invariant (3)); on a line of its own, as
  // every iterator's move reads it twice.
  alignas(64) std::atomic<std::uint64_t> moves_{0};
  // Keys live in the packed tier alone (Stats::live_keys): the combiner's, or recovery's.
  alignas(64) std::atomic<std::uint64_t> tier_live_keys_{0};
  std::atomic<std::uint64_t> merges_{0};  // merge_mutex_
  std::atomic<std::uint64_t> merged_keys_{0};  // the combiner's
  std::atomic<std::uint64_t> merge_errors_{0};             // the merge thread's
  alignas(64) reclaimer_t reclaimer_;
  mutable snapshot_registry registry_;
  std::atomic<unsigned> test_reclaim_every_{0};
  std::atomic<bool> test_skip_validation_{false};
  std::atomic<bool> test_skip_newest_{false};
  std::atomic<bool> test_skip_marks_{false};
  // A bit per locate by this thread (in any store), the newest lowest: 1 where the key was
  // new to the store (locate's guess).
  static inline thread_local std::uint32_t recent_new_keys_ = 0;
  std::function<void()> test_in_pass_;  // the combiner's, once set
  std::function<void(std::size_t)> test_in_unlinks_;  // the merging thread's
  std::function<void()> test_before_claims_;  // the merging thread's
  std::function<void()> test_between_steps_;  // the merging thread's
  std::size_t unlink_step_ = kUnlinkStep;     // merge_mutex_
  std::atomic<bool> test_hold_merges_{false};
  std::function<void(std::string_view, bool)> test_on_verify_;  // readers
  // Some entry was ever made that the storage's destruction does not release (make_entry):
  // the destructor then frees every entry itself.
  std::atomic<bool> large_entries_{false};
  striped_counter puts_, deletes_, batches_, gets_, iterators_;
  std::uint64_t recovered_versions_ = 0;
  double recovery_seconds_ = 0;
  const bool read_only_;  // Options::read_only: nothing is written, by recovery either
  bool recovered_ = false;  // open succeeded: the store may be written
  static inline thread_local std::uint64_t last_write_version_ = 0;
};

}  // namespace flintkv::internal
