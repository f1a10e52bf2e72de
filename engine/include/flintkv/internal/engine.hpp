// The FlintKV engine: a DRAM skiplist index over a sorted persistent list of versioned
// nodes, updated in four phases (locate, prepare, attach by flat combining, promote).
// See docs/engine-design.md for the algorithm and the recovery argument.
//
// Thread safety: every public member may be called by any number of threads at once.
//  - locate, prepare and promote run lock-free on the calling thread;
//  - attach runs under the combiner lock, by whichever thread holds it, for every thread
//    that advertised a prepared update in its slot;
//  - readers take visible_version once and ignore newer versions; they take no lock.
// Invariants:
//  (1) visible_version is written only by the combiner, and only after every node with a
//      version at or below it is durably linked.
//  (2) Level 0 of the index and the persistent list are written only under the combiner
//      lock (or by recovery before the engine is shared).
//  (3) Every node in the index is durably linked, or is being attached by the current
//      combiner with a version above visible_version.
// Persistence (manual mode; automatic mode makes every access a p-instruction instead):
//  (1) prepare: node body and successor written back and fenced before advertising.
//  (2) attach (put): version and predecessor's link written back, then one fence, then
//      visible_version; a crash between leaves at most a linked node with the uncommitted marker.
//  (3) attach (batch): commit_version and batch_mode active fenced first; all nodes get one
//      version; links written back; one fence; batch_mode idle fenced; then visible_version.
//  (4) Recovery validates the whole store before it writes (recovery.hpp), then rebuilds the
//      index, visible_version and the allocator's free space.
//  (5) Every word written is self-checking and every node carries its checksum (layout.hpp),
//      computed from the caller's bytes and written in the node's own lines: no extra
//      write-back or fence.
//  (6) With Options::read_only nothing is written to the pool, by recovery either.
//  (7) Hand-offs: advertising a slot, publishing visible_version and marking a slot done
//      are stores outside the P-V layer that let other threads reach persistent data, so
//      each is preceded by io::hand_off() (mode.hpp): in automatic mode the fence of the
//      calling thread's pending write-backs; in manual mode (1)-(3) have fenced them. Without
//      it, in automatic mode, a combiner links a node whose bytes are still in flight, and a
//      reader or the writer sees a version whose link is not durable.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "flintkv/db.hpp"
#include "flintkv/internal/counter.hpp"
#include "flintkv/internal/index.hpp"
#include "flintkv/internal/layout.hpp"
#include "flintkv/internal/mode.hpp"
#include "flintkv/internal/recovery.hpp"
#include "flintkv/internal/no_memory_iterator.hpp"

namespace flintkv::internal {

// What the engine needs of the pool: implemented by storage<Policy> (storage.hpp).
template <class S>
concept engine_storage = recovery_storage<S> &&
                         requires(S& s, const S& cs, std::size_t n, node_offset off, void* p) {
  { s.allocate(n, &off) } -> std::same_as<Status>;
  s.free(off);
  { s.dram_allocate(n) } -> std::same_as<void*>;
  s.dram_free(p, n);
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
class engine final : public DB {
  using P = typename Config::policy;
  using M = typename Config::mode;
  using io = durable<P, M>;
  using node = pnode<P>;
  using root_t = root<P>;
  using recovery_t = recovery<P, M>;
  static_assert(layout_pinned<P>());

 public:
  // Opens the engine on `storage`, recovering or initialising the store in it.
  static Status open(std::unique_ptr<Storage> storage, const Options& options,
                     std::unique_ptr<DB>* db) {
    try {
      auto e = std::unique_ptr<engine>(new engine(std::move(storage), options));
      Status s = e->recover();
      if (!s.ok()) return s;
      *db = std::move(e);
      return Status::OK();
    } catch (const std::bad_alloc&) {
      return Status::NoSpace("out of DRAM while opening the store");
    }
  }

  ~engine() override {
    // Every version is durable already; only DRAM is released here.
    inode* n = index_ ? index_->head() : nullptr;  // none if recovery failed
    while (n != nullptr) {
      inode* next = n->load_next(0);
      storage_->dram_free(n, n->size());
      n = next;
    }
  }

  // ---- writes ----------------------------------------------------------------------------

  Status Put(std::string_view key, std::string_view value, const WriteOptions&) override {
    return guarded([&] { return read_only_ ? refuse_write("Put") : write_one(key, value, false); });
  }

  Status Delete(std::string_view key, const WriteOptions&) override {
    return guarded([&] { return read_only_ ? refuse_write("Delete") : write_one(key, {}, true); });
  }

  Status Write(const WriteBatch& batch, const WriteOptions&) override {
    return guarded([&] { return read_only_ ? refuse_write("Write") : write_batch(batch); });
  }

  // ---- reads -----------------------------------------------------------------------------

  Status Get(std::string_view key, std::string* value, const ReadOptions& options) override {
    return guarded([&]() -> Status {
      if (Status s = check_key(key); !s.ok()) return s;
      std::uint64_t vv = read_version(options);
      gets_.add();
      inode* n = index_->seek(key, vv);
      if (n == nullptr || !same_key(n->key(), key) || n->tombstone) {
        return Status::NotFound(key.substr(0, 64));
      }
      if (options.verify_checksums) {
        if (Status s = verify(n); !s.ok()) return s;
      }
      if (value != nullptr) {
        std::string_view v = value_of(n);
        value->assign(v.data(), v.size());
      }
      io::complete();
      return Status::OK();
    });
  }

  // A snapshot is its version: readers through it ignore every newer one. (Nothing else
  // needs to know which versions are held until old versions are garbage-collected.)
  // nullptr when out of DRAM.
  const Snapshot* GetSnapshot() override {
    return new (std::nothrow) snapshot_impl(visible_version_.load(std::memory_order_acquire));
  }

  void ReleaseSnapshot(const Snapshot* snapshot) override {
    delete static_cast<const snapshot_impl*>(snapshot);
  }

  // Out of DRAM: an iterator over nothing whose status() is NoSpace.
  std::unique_ptr<Iterator> NewIterator(const ReadOptions& options) override {
    try {
      auto it = std::make_unique<iterator_impl>(this, read_version(options), options);
      iterators_.add();
      return it;
    } catch (const std::bad_alloc&) {
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
    flit::counts c = flit::all_threads();
    s.pwb = c.pwb;
    s.pfence = c.pfence;
    s.visible_version = visible_version_.load(std::memory_order_acquire);
    s.live_keys = live_keys_.load(std::memory_order_relaxed);
    s.versions = versions_.load(std::memory_order_relaxed);
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

  // Test hook: the version the calling thread's last successful write was given.
  static std::uint64_t TEST_last_write_version() { return last_write_version_; }

  // Test hook: the newest visible version of `key` (nullopt if none or deleted), with its
  // version number, read as Get reads it.
  std::optional<std::pair<std::string, std::uint64_t>> TEST_read(std::string_view key) const {
    inode* n = index_->seek(key, visible_version_.load(std::memory_order_acquire));
    if (n == nullptr || !same_key(n->key(), key) || n->tombstone) return std::nullopt;
    return std::pair{std::string(value_of(n)), n->version};
  }

  // Test hook: every live key with its newest visible value and version, in key order.
  struct TEST_entry {
    std::string key, value;
    std::uint64_t version;
  };
  std::vector<TEST_entry> TEST_state() const {
    std::vector<TEST_entry> out;
    const std::uint64_t vv = visible_version_.load(std::memory_order_acquire);
    std::string_view last_key;
    bool have_key = false;
    for (inode* n = index_->head()->load_next(0); n != nullptr; n = n->load_next(0)) {
      if (n->version > vv || (have_key && same_key(n->key(), last_key))) continue;
      last_key = n->key();
      have_key = true;
      if (!n->tombstone) out.push_back({std::string(n->key()), std::string(value_of(n)), n->version});
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
    inode* index_node = nullptr;
    node* persistent = nullptr;
    node_offset offset{0};
    inode* preds[kMaxHeight];
    inode* succs[kMaxHeight];
  };

  // failed: stale neighbours, locate and prepare again; exhausted: no version is left.
  enum class slot_state : std::uint8_t { idle, ready, done, failed, exhausted };

  struct alignas(64) slot {
    std::atomic<bool> owned{false};
    std::atomic<slot_state> state{slot_state::idle};
    update* one = nullptr;                 // a put or delete
    std::vector<update>* batch = nullptr;  // or a batch
  };

  // ---- construction and recovery ---------------------------------------------------------

  engine(std::unique_ptr<Storage> storage, const Options& options)
      : storage_(std::move(storage)),
        slots_(std::max(1u, std::min(options.thread_slots, kMaxThreadSlots))),
        read_only_(options.read_only) {}

  root_t& root_ref() const { return *static_cast<root_t*>(storage_->root_area()); }
  node* at(node_offset off) const { return static_cast<node*>(storage_->pointer(off)); }

  // Validates the store (writing nothing), then repairs what a crash left and, for a new
  // store, initialises it. See recovery.hpp.
  Status recover() {
    auto start = std::chrono::steady_clock::now();
    struct index_builder {
      engine& e;
      void head(node_offset h) { e.make_index(h); }
      void kept(node_offset off, std::string_view key, std::uint64_t version, bool tombstone,
                std::size_t value_size) {
        inode* in = e.make_index_node(key, off, tombstone, value_size);
        in->version = version;
        e.index_->append(in);
      }
    };
    // The index is built during the walk, in list order; on an error the destructor frees
    // what was built.
    typename recovery_t::found found;
    typename recovery_t::plan repairs;
    if (Status s = recovery_t::validate(*storage_, index_builder{*this}, &found, &repairs);
        !s.ok()) {
      return s;
    }
    if (!read_only_) recovery_t::repair(*storage_, repairs);
    if (found.format != kFormat && read_only_) {
      make_index(node_offset{0});  // never initialised: an empty store, left as it is
    } else if (found.format != kFormat) {
      // A new pool (or one whose initialisation was interrupted: start it again).
      if (Status s = initialise(root_ref()); !s.ok()) return s;
      make_index(*read_offset_word(io::get(root_ref().head), in_root(word_field::head)));
    }
    index_->finish_build();
    visible_version_.store(found.newest_version, std::memory_order_release);
    next_version_ = found.newest_version;
    live_keys_.store(found.live_keys, std::memory_order_relaxed);
    versions_.store(found.versions, std::memory_order_relaxed);
    recovered_versions_ = found.versions;
    io::complete();
    recovery_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return Status::OK();
  }

  void make_index(node_offset head) {
    void* head_memory = storage_->dram_allocate(inode::size_for(kMaxHeight, 0));
    index_ = std::make_unique<skiplist>(head_memory, head.value);
  }

  // Lays out an empty store: the format word says "initialising" before the head is
  // allocated, and this layout's format only once the rest is durable.
  Status initialise(root_t& r) {
    io::put(r.format, word63{kFormatInitialising});
    io::flush(r.format);
    io::fence();
    node_offset head{0};
    if (Status s = storage_->allocate(node::size_for(0, 0), &head); !s.ok()) return s;
    node* h = at(head);
    io::put(h->next, offset_word(node_offset{0}, in_node(head, word_field::next)));
    io::put(h->version, version_word(0, in_node(head, word_field::version)));
    io::put(h->sizes, sizes_word(head, {}, {}, 0));
    io::flush(h, node::size_for(0, 0));
    io::put(r.head, offset_word(head, in_root(word_field::head)));
    io::put(r.commit_version, version_word(0, in_root(word_field::commit_version)));
    io::put(r.batch_mode, kBatchIdle);
    io::flush(&r, sizeof(root_t));
    io::fence();
    io::put(r.format, word63{kFormat});  // last: the store is initialised
    io::flush(r.format);
    io::fence();
    return Status::OK();
  }

 private:
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

  Status write_one(std::string_view key, std::string_view value, bool tombstone) {
    if (Status s = check_key(key); !s.ok()) return s;
    if (Status s = check_value(value); !s.ok()) return s;
    update u;
    u.key = key;
    u.value = value;
    u.tombstone = tombstone;
    Status s;
    while (true) {
      index_->locate(key, UINT64_MAX, u.preds, u.succs);
      s = prepare(u);
      if (!s.ok()) break;
      io::fence();
      slot_lease me(*this);
      me->one = &u;
      me->batch = nullptr;
      const slot_state outcome = attach(*me);
      if (outcome == slot_state::done) break;
      if (outcome == slot_state::exhausted) {
        discard(u);
        s = exhausted_versions();
        break;
      }
    }
    if (s.ok()) {
      index_->promote(u.index_node, u.preds);
      (tombstone ? deletes_ : puts_).add();
      last_write_version_ = u.index_node->version;
    }
    io::complete();
    return s;
  }

  Status write_batch(const WriteBatch& batch) {
    // One entry per key, the batch's last; sorted, so neighbours rarely go stale.
    std::map<std::string_view, const WriteBatch::Entry*> last;
    for (const WriteBatch::Entry& e : batch.entries()) {
      if (Status s = check_key(e.key); !s.ok()) return s;
      if (Status s = check_value(e.value); !s.ok()) return s;
      last[e.key] = &e;
    }
    if (last.empty()) return Status::OK();
    std::vector<update> updates(last.size());
    std::size_t i = 0;
    Status s;
    try {
      for (auto& [key, e] : last) {
        update& u = updates[i++];
        u.key = key;
        u.value = e->value;
        u.tombstone = e->kind == WriteBatch::Kind::kDelete;
        index_->locate(u.key, UINT64_MAX, u.preds, u.succs);
        s = prepare(u);
        if (!s.ok()) break;
      }
    } catch (...) {
      for (update& u : updates) discard(u);
      throw;
    }
    if (!s.ok()) {
      for (update& u : updates) discard(u);
      io::complete();
      return s;
    }
    io::fence();  // one fence for every node of the batch
    {
      slot_lease me(*this);
      me->one = nullptr;
      me->batch = &updates;
      // A batch is never sent back for stale neighbours (attach_batch retries them).
      if (attach(*me) == slot_state::exhausted) {
        for (update& u : updates) discard(u);
        io::complete();
        return exhausted_versions();
      }
    }
    for (update& u : updates) index_->promote(u.index_node, u.preds);
    batches_.add();
    last_write_version_ = updates.front().index_node->version;
    io::complete();
    return Status::OK();
  }

  Status exhausted_versions() const {
    return Status::NoSpace(storage_->path() + ": every version number up to " +
                           std::to_string(kMaxVersion) + " has been used");
  }

  // Allocates and fills the persistent node (first call) and points it at the located
  // successor. The caller fences before advertising it.
  Status prepare(update& u) {
    const node_offset succ{u.succs[0] != nullptr ? u.succs[0]->pnode : 0};
    if (u.persistent == nullptr) {
      const std::size_t size = node::size_for(u.key.size(), u.value.size());
      if (Status s = storage_->allocate(size, &u.offset); !s.ok()) return s;
      node* n = at(u.offset);
      io::put(n->next, offset_word(succ, in_node(u.offset, word_field::next)));
      io::put(n->version, uncommitted_word(in_node(u.offset, word_field::version)));
      io::put(n->sizes, sizes_word(u.offset, u.key, u.value,
                                   u.tombstone ? std::uint64_t{kTombstone} : 0));
      io::put_bytes(n->body(), u.key.data(), u.key.size());
      io::put_bytes(n->body() + u.key.size(), u.value.data(), u.value.size());
      io::flush(n, size);
      u.persistent = n;
      try {
        u.index_node = make_index_node(u.key, u.offset, u.tombstone, u.value.size());
      } catch (...) {
        storage_->free(u.offset);
        u.persistent = nullptr;
        throw;
      }
    } else {
      io::put(u.persistent->next, offset_word(succ, in_node(u.offset, word_field::next)));
      io::flush(u.persistent->next);
    }
    u.index_node->next(0).store(u.succs[0], std::memory_order_relaxed);
    _mm_prefetch(reinterpret_cast<const char*>(u.persistent), _MM_HINT_T0);
    return Status::OK();
  }

  // Returns what prepare took, for an update that will never be attached.
  void discard(update& u) {
    if (u.persistent == nullptr) return;
    storage_->dram_free(u.index_node, u.index_node->size());
    storage_->free(u.offset);
    u.persistent = nullptr;
  }

  inode* make_index_node(std::string_view key, node_offset off, bool tombstone,
                         std::size_t value_size) {
    int height = random_height();
    void* memory = storage_->dram_allocate(inode::size_for(height, key.size()));
    inode* n = inode::make(memory, height, key, off.value, tombstone);
    n->value_size = static_cast<std::uint32_t>(value_size);
    return n;
  }

  static int random_height() {
    thread_local std::uint64_t state =
        std::hash<std::thread::id>{}(std::this_thread::get_id()) | 1;
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    // Branching factor 2: twice the levels of factor 4 but a third of the steps per level,
    // and each level's step down is prefetched (skiplist::next_prefetched), so a search
    // waits on fewer misses.
    const int height = 1 + std::countr_one(state);
    return std::min(height, kMaxHeight);
  }

  // ---- attach: flat combining ------------------------------------------------------------

  slot& lease_slot() {
    thread_local std::size_t hint = 0;
    while (true) {
      for (std::size_t k = 0; k < slots_.size(); ++k) {
        std::size_t i = (hint + k) % slots_.size();
        bool expected = false;
        if (!slots_[i].owned.load(std::memory_order_relaxed) &&
            slots_[i].owned.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
          hint = i;
          return slots_[i];
        }
      }
      std::this_thread::yield();  // every slot taken: wait for one
    }
  }

  void release_slot(slot& s) {
    s.state.store(slot_state::idle, std::memory_order_relaxed);
    s.owned.store(false, std::memory_order_release);
  }

  // A slot held for one attach.
  class slot_lease {
   public:
    explicit slot_lease(engine& e) : engine_(e), slot_(e.lease_slot()) {}
    ~slot_lease() { engine_.release_slot(slot_); }
    slot_lease(const slot_lease&) = delete;
    slot_lease& operator=(const slot_lease&) = delete;
    slot* operator->() { return &slot_; }
    slot& operator*() { return slot_; }

   private:
    engine& engine_;
    slot& slot_;
  };

  // Advertises the slot's update and waits until a combiner (maybe this thread) attached it
  // (done), found its neighbours stale (failed: locate and prepare again) or had no version
  // left to give it (exhausted).
  slot_state attach(slot& me) {
    io::hand_off();  // the combiner may link the node as soon as it sees the slot
    me.state.store(slot_state::ready, std::memory_order_release);
    for (unsigned spins = 0;; ++spins) {
      slot_state st = me.state.load(std::memory_order_acquire);
      if (st != slot_state::ready) return st;
      if (!combiner_lock_.load(std::memory_order_relaxed) &&
          !combiner_lock_.exchange(true, std::memory_order_acquire)) {
        combine();
        combiner_lock_.store(false, std::memory_order_release);
        continue;
      }
      if (spins % 64 == 63) {
        std::this_thread::yield();
      } else {
        _mm_pause();
      }
    }
  }

  // REQUIRES: the combiner lock.
  void combine() {
    for (slot& s : slots_) {
      if (s.state.load(std::memory_order_acquire) != slot_state::ready) continue;
      slot_state outcome = slot_state::exhausted;
      if (next_version_ < kMaxVersion) {
        const bool ok = s.batch != nullptr ? attach_batch(*s.batch) : attach_one(*s.one);
        outcome = ok ? slot_state::done : slot_state::failed;
      }
      s.state.store(outcome, std::memory_order_release);
    }
  }

  // REQUIRES: the combiner lock.
  bool attach_one(update& u) {
    std::uint64_t version = next_version_ + 1;
    if (!link(u, version)) return false;
    io::fence();  // the one fence of an attached put
    io::hand_off();  // covers the slot's `done` too
    next_version_ = version;
    visible_version_.store(version, std::memory_order_release);
    return true;
  }

  // REQUIRES: the combiner lock.
  bool attach_batch(std::vector<update>& updates) {
    root_t& r = root_ref();
    const std::uint64_t commit = next_version_;
    io::put(r.commit_version, version_word(commit, in_root(word_field::commit_version)));
    io::put(r.batch_mode, kBatchActive);
    io::flush(&r.commit_version, 2 * sizeof(r.commit_version));
    io::fence();
    const std::uint64_t version = commit + 1;
    for (update& u : updates) {
      if (link(u, version)) continue;
      // Stale neighbours: nothing else moves under the lock, so one retry suffices.
      index_->locate(u.key, UINT64_MAX, u.preds, u.succs);
      (void)prepare(u);  // only re-points the successor: cannot fail
      io::fence();       // the new successor is durable before the link
      bool linked = link(u, version);
      (void)linked;
    }
    io::fence();
    io::put(r.batch_mode, kBatchIdle);
    io::flush(r.batch_mode);
    io::fence();
    io::hand_off();  // covers the slot's `done` too
    next_version_ = version;
    visible_version_.store(version, std::memory_order_release);
    return true;
  }

  // Validates the cached neighbours and links the node into level 0 and the persistent
  // list, written back but not fenced. REQUIRES: the combiner lock.
  bool link(update& u, std::uint64_t version) {
    inode* pred = u.preds[0];
    inode* succ = u.succs[0];
    if (pred->load_next(0) != succ) return false;
    inode* n = u.index_node;
    n->version = version;
    io::put(u.persistent->version, version_word(version, in_node(u.offset, word_field::version)));
    io::flush(u.persistent->version);
    skiplist::link_leaf(pred, n);
    node* pred_node = at(node_offset{pred->pnode});
    io::put(pred_node->next,
            offset_word(u.offset, in_node(node_offset{pred->pnode}, word_field::next)));
    io::flush(pred_node->next);
    versions_.fetch_add(1, std::memory_order_relaxed);
    bool had_live = succ != nullptr && same_key(succ->key(), u.key) && !succ->tombstone;
    if (had_live != !u.tombstone) {
      live_keys_.fetch_add(u.tombstone ? std::uint64_t(-1) : 1, std::memory_order_relaxed);
    }
    return true;
  }

  // ---- reads -----------------------------------------------------------------------------

  std::uint64_t read_version(const ReadOptions& options) const {
    return options.snapshot != nullptr ? options.snapshot->version()
                                       : visible_version_.load(std::memory_order_acquire);
  }

  std::string_view value_of(const inode* n) const {
    const node* p = at(node_offset{n->pnode});
    return {p->body() + n->key_size, n->value_size};
  }

  // Checks the persistent node behind n against the index's copy of its sizes and its
  // checksum: Corruption if its content was damaged since the store was opened. The node is
  // immutable once linked, so a plain load of its size word suffices.
  Status verify(const inode* n) const {
    const node* p = at(node_offset{n->pnode});
    const word63 sizes = p->sizes.load(flit::volatile_, flit::private_);
    const std::string_view key(p->body(), n->key_size);
    if (key_size_of(sizes) == n->key_size && value_size_of(sizes) == n->value_size &&
        ((flags_of(sizes) & kTombstone) != 0) == n->tombstone &&
        node_check_of(sizes) ==
            node_checksum(node_offset{n->pnode}, sizes.bits, key, value_of(n))) {
      return Status::OK();
    }
    return Status::Corruption(storage_->path() + ": node at offset " + std::to_string(n->pnode) +
                              " (key '" + recovery_t::printable(n->key()) +
                              "'): checksum mismatch: its content was damaged");
  }

  Status refuse_write(std::string_view what) const {
    return Status::InvalidArgument(storage_->path() + ": opened read-only (Options::read_only): " +
                                   std::string(what) + " refused");
  }

  template <class F>
  static Status guarded(F&& f) noexcept {
    try {
      return f();
    } catch (const std::bad_alloc&) {
      return Status::NoSpace("out of DRAM");
    } catch (const std::exception& e) {
      return Status::IOError(std::string("internal error: ") + e.what());
    }
  }

  // Iterates the newest version at or below `version_` of each key, skipping deletes.
  class iterator_impl final : public Iterator {
   public:
    iterator_impl(const engine* e, std::uint64_t version, const ReadOptions& options)
        : engine_(e), version_(version), verify_(options.verify_checksums),
          lower_(options.lower_bound), upper_(options.upper_bound) {}

    bool Valid() const override { return current_ != nullptr; }

    void SeekToFirst() override {
      status_ = Status::OK();
      if (lower_) {
        Seek(*lower_);
        return;
      }
      settle_forward(engine_->index_->head()->load_next(0));
    }

    void SeekToLast() override {
      status_ = Status::OK();
      if (upper_) {
        settle_backward_below(*upper_);
        return;
      }
      inode* last = engine_->index_->last();
      if (last == engine_->index_->head()) {
        current_ = nullptr;
        return;
      }
      // The last node is the oldest version of the last key: find its visible version.
      settle_backward_at(last->key());
    }

    void Seek(std::string_view target) override {
      status_ = Status::OK();
      if (lower_ && compare_keys(target, *lower_) < 0) target = *lower_;
      settle_forward(engine_->index_->seek(target, version_));
    }

    void SeekForPrev(std::string_view target) override {
      status_ = Status::OK();
      if (upper_ && compare_keys(target, *upper_) >= 0) {
        settle_backward_below(*upper_);
        return;
      }
      settle_backward_at(target);
    }

    void Next() override { settle_forward(skip_key(current_)); }

    void Prev() override { settle_backward_below(current_->key()); }

    std::string_view key() const override { return current_->key(); }
    std::string_view value() const override { return engine_->value_of(current_); }
    // Corruption once the iterator met a damaged node (it is then not Valid), until the next
    // seek; OK otherwise.
    Status status() const override { return status_; }

   private:
    bool visible(const inode* n) const { return n->version <= version_; }

    // The first node after every version of n's key.
    static inode* skip_key(const inode* n) {
      inode* next = n->load_next(0);
      while (next != nullptr && same_key(next->key(), n->key())) next = next->load_next(0);
      return next;
    }

    // From node n (the first candidate), moves to the first key whose newest visible
    // version is not a delete.
    void settle_forward(inode* n) {
      while (n != nullptr) {
        if (upper_ && compare_keys(n->key(), *upper_) >= 0) break;
        if (!visible(n)) {
          n = n->load_next(0);  // a newer version than the snapshot: an older one may follow
          continue;
        }
        if (!n->tombstone) {
          land(n);
          return;
        }
        n = skip_key(n);
      }
      current_ = nullptr;
    }

    // The last visible, live key at or before `key`.
    void settle_backward_at(std::string_view key) {
      inode* n = engine_->index_->seek(key, version_);
      if (n != nullptr && same_key(n->key(), key)) {
        if (accept_backward(n)) return;
      }
      settle_backward_below(key);
    }

    // The last visible, live key strictly before `key`.
    void settle_backward_below(std::string_view key) {
      std::string_view bound = key;  // a caller's key or an index node's: both outlive this
      while (true) {
        inode* last = engine_->index_->last_below(bound);
        if (last == engine_->index_->head()) break;
        // `last` is the oldest version of its key; find the newest visible one.
        inode* n = engine_->index_->seek(last->key(), version_);
        if (n != nullptr && same_key(n->key(), last->key()) && accept_backward(n)) return;
        bound = last->key();
      }
      current_ = nullptr;
    }

    // Takes n if it is live and within the lower bound; false to keep looking back.
    bool accept_backward(inode* n) {
      if (lower_ && compare_keys(n->key(), *lower_) < 0) {
        current_ = nullptr;  // before the lower bound: iteration is over
        return true;
      }
      if (n->tombstone) return false;
      land(n);
      return true;
    }

    // Positions the iterator on n, once its node passed verification (if asked for).
    void land(inode* n) {
      if (verify_) {
        if (Status s = engine_->verify(n); !s.ok()) {
          status_ = std::move(s);
          current_ = nullptr;
          return;
        }
      }
      current_ = n;
    }

    const engine* engine_;
    const std::uint64_t version_;
    const bool verify_;
    std::optional<std::string> lower_, upper_;
    inode* current_ = nullptr;
    Status status_;
  };

  // ---- state -----------------------------------------------------------------------------

  std::unique_ptr<Storage> storage_;
  std::unique_ptr<skiplist> index_;
  std::vector<slot> slots_;
  alignas(64) std::atomic<bool> combiner_lock_{false};
  std::uint64_t next_version_ = 0;  // written only under the combiner lock
  alignas(64) std::atomic<std::uint64_t> visible_version_{0};
  striped_counter puts_, deletes_, batches_, gets_, iterators_;
  alignas(64) std::atomic<std::uint64_t> live_keys_{0}, versions_{0};  // the combiner's
  std::uint64_t recovered_versions_ = 0;
  double recovery_seconds_ = 0;
  const bool read_only_;  // Options::read_only: nothing is written, by recovery either
  static inline thread_local std::uint64_t last_write_version_ = 0;
};

}  // namespace flintkv::internal
