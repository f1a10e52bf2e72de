// Reclamation: the versions no reader can see any more are unlinked from the persistent list
// and the index, and their space is freed.
//
// Readers are of three kinds:
//  - snapshots and iterators (implicit snapshots) register their version in the registry
//    (snapshot_registry): snapshots under its lock, which reads the visible version;
//    iterators at the visible version in a slot of their own, pinned while they enter;
//  - Gets in flight take no lock: each runs pinned in the storage's epoch domain, and reads
//    the visible version after pinning. A visible version V published by the combiner
//    becomes a mark stamped with the epoch; once the epoch has advanced twice past the
//    stamp, every reader pinned before the mark has finished, so every reader in flight
//    read a visible version of at least V (the argument of epoch-based reclamation, with
//    the publication of V in the place of an unlink). The newest such V is the settled
//    mark M: every unregistered reader, now or later, reads at M or above;
//  - writers read no version older than the newest of a key.
// A version v of a key, whose next newer version is n, is what the readers at [v, n) read.
// So it is garbage when n <= M and no registered reader lies in [v, n): a snapshot keeps
// exactly the versions it reads. A key whose newest version is a delete at or below M, with
// no older version kept, disappears entirely, unless the packed tier holds a value of it
// (set_tier_holds). The watermark (statistics) is the oldest
// version any reader may read: min(M, the oldest registered reader).
//
// Which keys have garbage: every write that gives a key a second version, or a delete, notes
// (key, version) in a queue, in version order. A pass takes the entries at or below M and
// drops each key's garbage; a key that still keeps a version for a registered reader is
// parked, and parked keys are looked at again once a reader has left the registry.
//
// Thread safety: note(), settled() and pass() run under the combiner lock; the registry
// has its own lock and slots; the statistics may be read from any thread.
// Invariants:
//  (1) No live reader ever reaches a dropped version: a reader at version r walks its key's
//      versions from the newest and stops at the newest one at or below r, which is kept
//      (r is registered, or r >= M).
//  (2) An entry's `queued` counts the queue and parked references to it; an entry is removed
//      from the index only when that count is 0, so no reference names a removed entry.
//  (3) A removed index entry and every dropped chain record are retired through the epoch
//      domain (readers may stand on them, or walk past them on a chain link read before the
//      pass); dropped persistent blocks are freed at once (by (1), no reader reads them).
// Persistence (one fence per pass):
//  (1) Unlink: each run of dropped versions of a key is skipped by one successor word (of
//      the version kept before it); a removed key's predecessor (the previous key's oldest
//      version) skips its node. Each is one link (store_link: prior, link_version and
//      successor, in one line) written back.
//  (2) durable::before_free(): the unlinks are durable before any block is freed, so a
//      freed block is never linked in the durable list, and a crash leaves each run either
//      linked (recovery rebuilds it, and a later pass drops it again) or not.
//  (3) Then each dropped node's version word becomes the uncommitted marker, written back
//      and left to the thread's next fence, so a freed block does not look like a version
//      to repair's scan of the heap; a crash before that fence leaves a freed node that
//      looks committed, which only repair reads.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "flintkv/internal/index.hpp"
#include "flintkv/internal/layout.hpp"
#include "flintkv/internal/mode.hpp"
#include "flintkv/internal/recovery.hpp"

namespace flintkv::internal {

// The versions of live snapshots and iterators, in two kinds of registration:
//  - snapshots (and transactions, and iterators over a snapshot) in a map under the
//    registry's lock, which a pass copies whole (versions());
//  - an iterator at the visible version, the one every scan makes, in a slot: a line of its
//    own that only the threads entering and leaving through it write, so concurrent scans
//    share no lock and no line (one compare-and-swap to enter, two stores to leave). Its
//    entry runs pinned in the epoch domain, like a Get: a pass's mark settles only once every
//    reader pinned before the mark was published has unpinned, by which time the slot holds
//    its version; a reader still pinned reads a visible version at or above the mark
//    (enter_reader). When every slot is taken, the reader goes to the map.
// An iterator over a snapshot registers an old version, which no pin protects: only the
// map's lock orders it against the snapshot's release and a pass's copy, so it stays there.
class snapshot_registry {
 public:
  // An iterator's registration: its version, and its slot (kInMap: the map).
  struct registration {
    std::uint64_t version = 0;
    std::uint32_t slot = kInMap;
  };
  static constexpr std::uint32_t kInMap = UINT32_MAX;
  static constexpr std::uint32_t kSlots = 64;

  // Registers a reader at the visible version, read under the registry's lock (so a pass
  // that read the registry before sees the reader at a version it has not passed).
  // Throws std::bad_alloc.
  std::uint64_t enter(const std::atomic<std::uint64_t>& visible) {
    std::lock_guard lock(mutex_);
    const std::uint64_t v = visible.load(std::memory_order_acquire);
    ++held_[v];
    return v;
  }
  // Registers a reader at a version already held (an iterator over a snapshot).
  void enter_at(std::uint64_t v) {
    std::lock_guard lock(mutex_);
    ++held_[v];
  }
  void leave(std::uint64_t v) {
    std::lock_guard lock(mutex_);
    auto it = held_.find(v);
    if (it != held_.end() && --it->second == 0) {
      held_.erase(it);
      generation_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Registers a reader at the visible version in a free slot (the one this thread took last
  // if it is free), else in the map. REQUIRES: the caller is pinned in the epoch domain of
  // the marks (see above) from before this call until it returns. Throws std::bad_alloc
  // (the map only).
  registration enter_reader(const std::atomic<std::uint64_t>& visible) {
    thread_local std::uint32_t hint = 0;
    const std::uint64_t v = visible.load(std::memory_order_seq_cst);
    for (std::uint32_t k = 0; k < kSlots; ++k) {
      const std::uint32_t i = (hint + k) % kSlots;
      slot& s = slots_[i];
      std::uint64_t expected = 0;
      if (s.held.load(std::memory_order_relaxed) == 0 &&
          s.held.compare_exchange_strong(expected, v + 1, std::memory_order_seq_cst)) {
        hint = i;
        return {v, i};
      }
    }
    return {enter(visible), kInMap};
  }
  void leave(const registration& r) {
    if (r.slot == kInMap) {
      leave(r.version);
      return;
    }
    slot& s = slots_[r.slot];
    // The slot's holder alone writes `leaves`; the count comes before the release (a pass
    // that finds the slot free also finds the count that tells it a reader left).
    s.leaves.store(s.leaves.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    s.held.store(0, std::memory_order_release);
  }

  // The registered versions, ascending, each once. Throws std::bad_alloc.
  std::vector<std::uint64_t> versions() const {
    std::vector<std::uint64_t> out;
    {
      std::lock_guard lock(mutex_);
      out.reserve(held_.size() + kSlots);
      for (const auto& [v, c] : held_) out.push_back(v);
    }
    const std::size_t in_map = out.size();
    for (const slot& s : slots_) {
      if (const std::uint64_t h = s.held.load(std::memory_order_seq_cst); h != 0) {
        out.push_back(h - 1);
      }
    }
    if (out.size() > in_map) {
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
    }
    return out;
  }
  // Changes each time a version stops being registered (a map version's last reader, or a
  // slot's reader, leaves).
  std::uint64_t generation() const {
    std::uint64_t g = generation_.load(std::memory_order_relaxed);
    for (const slot& s : slots_) g += s.leaves.load(std::memory_order_acquire);
    return g;
  }
  std::uint64_t count() const {
    std::uint64_t n = 0;
    for (const slot& s : slots_) n += s.held.load(std::memory_order_relaxed) != 0 ? 1 : 0;
    std::lock_guard lock(mutex_);
    for (const auto& [v, c] : held_) n += c;
    return n;
  }

 private:
  struct alignas(64) slot {
    std::atomic<std::uint64_t> held{0};    // the reader's version + 1; 0: free
    std::atomic<std::uint64_t> leaves{0};  // readers that left through this slot
  };

  mutable std::mutex mutex_;
  std::map<std::uint64_t, std::uint64_t> held_;  // version -> readers
  std::atomic<std::uint64_t> generation_{0};
  std::array<slot, kSlots> slots_;
};

// What a pass changed, for the engine's counters.
struct reclaimed {
  std::uint64_t versions = 0;  // versions dropped (each one persistent node)
  std::uint64_t keys = 0;      // keys removed from the index
  std::uint64_t bytes = 0;     // node bytes freed
};

template <class Policy, class Mode, class Storage>
class reclaimer {
  using io = durable<Policy, Mode>;
  using node = pnode<Policy>;
  using list = recovery<Policy, Mode>;  // the list's words

 public:
  // Queue entries a pass takes at most (a pass runs inside a combiner pass: keep it short).
  static constexpr std::size_t kBudget = 1024;
  // Queue entries at or below W that make a pass due (one fence per pass, so at most
  // 1/kBatch fence per dropped version).
  static constexpr std::size_t kBatch = 64;

  explicit reclaimer(Storage& s) : storage_(s) {
    pending_.reserve(kBudget);
    retired_.reserve(kBudget);
  }

  // Notes that `entry` got `version` (its second or later version, or a delete).
  // REQUIRES: the combiner lock (or recovery).
  void note(inode* entry, std::uint64_t version) noexcept {
    try {
      queue_.push_back({entry, version});
      ++entry->queued();
    } catch (...) {
      // Out of DRAM: the key's garbage stays until the store is opened again.
    }
  }

  std::size_t queued() const { return queue_.size(); }

  // Whether the packed tier behind the list holds a value of a key (the engine's): a delete
  // of such a key stays in the list, since removing it would bring the tier's value back
  // (docs/engine-design.md, "The engine over the packed tier", Deletes). REQUIRES: set
  // before the engine is shared; called under the combiner lock, pinned.
  void set_tier_holds(std::function<bool(std::string_view)> holds) {
    tier_holds_ = std::move(holds);
  }

  // True if a pass with settled mark m would find at least `n` queue entries to take.
  bool due(std::uint64_t m, std::size_t n) const {
    return queue_.size() >= n && queue_[n - 1].version <= m;
  }

  // The settled mark M: every Get in flight, and every reader to come, reads at M or above.
  // From the visible version last published (`visible`); nullopt while no mark has settled.
  // REQUIRES: the combiner lock.
  std::optional<std::uint64_t> settled(std::uint64_t visible) {
    auto& epochs = storage_.epochs();
    epochs.collect();
    if ((marks_.empty() || marks_.back().version != visible) && marks_.size() < kMaxMarks) {
      std::atomic_thread_fence(std::memory_order_seq_cst);  // the publication comes first
      marks_.push_back({visible, epochs.epoch()});
    }
    const std::uint64_t now = epochs.epoch();
    while (!marks_.empty() && marks_.front().epoch + 2 <= now) {
      settled_ = marks_.front().version;
      marks_.pop_front();
    }
    return settled_;
  }

  // Drops every version no reader can see: readers are the registered versions `readers`
  // (ascending, read after M settled) and every reader at `m` or above. Takes at most
  // `budget` queue entries, then, if the registry changed since the last look (or `all`),
  // that many parked keys. REQUIRES: the combiner lock.
  reclaimed pass(key_index& index, std::uint64_t m, const std::vector<std::uint64_t>& readers,
                 std::uint64_t generation, std::size_t budget, bool all = false) {
    reclaimed done;
    last_watermark_.store(readers.empty() ? m : std::min(m, readers.front()),
                          std::memory_order_relaxed);
    prefetch(m, budget);
    std::size_t left = budget;
    while (!queue_.empty() && left > 0 && queue_.front().version <= m) {
      inode* entry = queue_.front().entry;
      if (!room_for(entry)) break;  // out of DRAM for the bookkeeping: stop here
      queue_.pop_front();
      --left;
      settle(index, entry, m, readers, &done);
    }
    if (all || generation != parked_generation_) {
      parked_generation_ = generation;
      for (std::size_t n = std::min(parked_.size(), budget); n > 0; --n) {
        inode* entry = parked_.front();
        if (!room_for(entry)) break;
        parked_.pop_front();
        settle(index, entry, m, readers, &done);
      }
    }
    if (!pending_.empty()) {
      io::before_free();  // (2)
      for (const dropped& d : pending_) list::mark_uncommitted(storage_, d.offset);
      for (const dropped& d : pending_) storage_.free(d.offset);
      pending_.clear();
    }
    storage_.retire_dram(retired_);
    retired_.clear();
    passes_.fetch_add(1, std::memory_order_relaxed);
    versions_.fetch_add(done.versions, std::memory_order_relaxed);
    bytes_.fetch_add(done.bytes, std::memory_order_relaxed);
    return done;
  }

  // A merge's removal of a key the packed tier now holds (docs/engine-design.md, "The engine
  // over the packed tier", Order of a merge (c)): `entry`, whose only version is its newest,
  // leaves the index, and its predecessor's oldest node skips its node (one link, written
  // back, not fenced). The entry goes to *retiring, for the caller to retire through the
  // epoch domain with the rest of the merge's (one fence for all: Storage::retire_dram); the
  // node is returned: readers pinned now may still read either, so the caller frees the node
  // only after a fence and once they are gone. REQUIRES: the combiner lock;
  // entry->queued() == 0; no older version; room in *retiring.
  node_offset move_out(key_index& index, inode* entry, std::vector<alloc::node_block>* retiring) {
    const node_offset moved{entry->unlocked_newest().pnode};
    inode* pred = index.remove(entry);
    link(node_offset{pred->tail_pnode()}, successor(moved));  // (1)
    retiring->push_back({entry, entry->size()});
    return moved;
  }

  // Keys that keep versions only for registered readers.
  std::size_t parked() const { return parked_.size(); }

  std::uint64_t reclaimed_versions() const { return versions_.load(std::memory_order_relaxed); }
  std::uint64_t reclaimed_bytes() const { return bytes_.load(std::memory_order_relaxed); }
  std::uint64_t passes() const { return passes_.load(std::memory_order_relaxed); }
  std::uint64_t last_watermark() const { return last_watermark_.load(std::memory_order_relaxed); }

  // The entries still queued, for the engine's destructor (which frees the index); frees
  // the entries TEST_keep_removed_entries kept.
  void clear() {
    queue_.clear();
    parked_.clear();
    for (const alloc::node_block& b : kept_removed_) storage_.dram_free(b.node, b.bytes);
    kept_removed_.clear();
  }

  // Test hook: entries removed from the index are kept until clear() instead of retired, so
  // that a broken variant whose scans stand on such an entry (the engine's
  // TEST_skip_update_marks) reads stale memory, not freed memory.
  void TEST_keep_removed_entries(bool keep) {
    keep_removed_.store(keep, std::memory_order_relaxed);
  }

 private:
  static constexpr std::size_t kMaxMarks = 256;
  static constexpr std::size_t kPrefetch = 256;  // queue entries a pass requests ahead

  struct queued_key {
    inode* entry;
    std::uint64_t version;
  };
  struct mark {
    std::uint64_t version;
    std::uint64_t epoch;
  };
  struct dropped {
    node_offset offset;
  };

  // Makes room in the bookkeeping for everything `entry` may drop, before anything is
  // written; false if out of DRAM.
  bool room_for(const inode* entry) {
    std::size_t n = 1;
    for (const vrec* r = entry->older().load(std::memory_order_relaxed); r != nullptr;
         r = r->older.load(std::memory_order_relaxed)) {
      ++n;
    }
    try {
      pending_.reserve(pending_.size() + n);
      retired_.reserve(retired_.size() + n);
      if (keep_removed_.load(std::memory_order_relaxed) &&
          kept_removed_.size() == kept_removed_.capacity()) {
        kept_removed_.reserve(2 * kept_removed_.size() + 64);
      }
      return true;
    } catch (...) {
      return false;
    }
  }

  node_offset successor(node_offset off) const { return list::successor(storage_, off); }
  // Links `from` to `to`, recording `to`'s version (read from the pool if not given).
  void link(node_offset from, node_offset to, std::optional<std::uint64_t> version = {}) {
    list::link(storage_, from, to, version ? *version : list::version_of(storage_, to));
  }

  // A pass touches, per key, its entry and its oldest node (whose successor the unlink
  // takes, and whose version word gets the marker): nearly always two cache misses. The
  // entries of the batch are requested first, then their oldest nodes, so that the misses
  // overlap instead of following each other.
  void prefetch(std::uint64_t m, std::size_t budget) const {
    const std::size_t n = std::min({queue_.size(), budget, kPrefetch});
    std::size_t due = 0;
    while (due < n && queue_[due].version <= m) __builtin_prefetch(queue_[due++].entry);
    for (std::size_t i = 0; i < due; ++i) {
      __builtin_prefetch(storage_.pointer(node_offset{queue_[i].entry->tail_pnode()}), 1);
    }
  }

  // Takes one queue (or parked) reference of `entry` and drops its garbage; parks the key
  // again if it keeps versions only for registered readers.
  void settle(key_index& index, inode* entry, std::uint64_t m,
              const std::vector<std::uint64_t>& readers, reclaimed* done) {
    --entry->queued();
    if (drop_garbage(index, entry, m, readers, done)) {
      try {
        parked_.push_back(entry);
        ++entry->queued();
      } catch (...) {
        // Out of DRAM: what the readers keep stays until the store is opened again.
      }
    }
  }

  // True if some registered reader reads at a version in [from, to).
  static bool read_between(const std::vector<std::uint64_t>& readers, std::uint64_t from,
                           std::uint64_t to) {
    auto it = std::lower_bound(readers.begin(), readers.end(), from);
    return it != readers.end() && *it < to;
  }

  // Drops the versions of `entry` no reader can see. A version v whose next newer version
  // is n is read by the readers at [v, n): it is garbage if n <= m (no reader at m or above
  // reads it) and no registered reader lies in [v, n). The newest version is never garbage;
  // the key goes entirely when it is a delete at or below m with nothing older kept.
  // Returns true if a version is kept for registered readers only (the key is parked).
  bool drop_garbage(key_index& index, inode* entry, std::uint64_t m,
                    const std::vector<std::uint64_t>& readers, reclaimed* done) {
    const version_ref newest = entry->unlocked_newest();
    const std::size_t key_size = entry->key_size;
    node_offset kept{newest.pnode};                 // the last version kept, so far
    std::atomic<vrec*>* kept_link = &entry->older();  // its link to the next one kept
    std::uint64_t newer = newest.version;           // the version just newer than r
    bool in_run = false;                            // versions since `kept` were dropped
    bool for_readers = false;
    for (vrec* r = entry->older().load(std::memory_order_relaxed); r != nullptr;) {
      vrec* older = r->older.load(std::memory_order_relaxed);
      const bool in_flight = newer > m;
      if (in_flight || read_between(readers, r->version, newer)) {
        for_readers = for_readers || !in_flight;
        if (in_run) {
          link(kept, node_offset{r->pnode}, r->version);  // (1)
          kept_link->store(r, std::memory_order_release);
          in_run = false;
        }
        kept = node_offset{r->pnode};
        kept_link = &r->older;
      } else {
        pending_.push_back({node_offset{r->pnode}});
        retired_.push_back({r, sizeof(vrec)});
        ++done->versions;
        done->bytes += node::size_for(key_size, r->value_size);
        in_run = true;
      }
      newer = r->version;
      r = older;
    }
    if (in_run) {  // the dropped run reaches the key's oldest version
      link(kept, successor(node_offset{entry->tail_pnode()}));  // (1)
      kept_link->store(nullptr, std::memory_order_release);
      entry->set_tail_pnode(kept.value);
    }
    if (newest.tombstone && newest.version <= m && entry->queued() == 0 &&
        entry->older().load(std::memory_order_relaxed) == nullptr &&
        !(tier_holds_ && tier_holds_(entry->key()))) {
      inode* pred = index.remove(entry);
      link(node_offset{pred->tail_pnode()}, successor(node_offset{newest.pnode}));  // (1)
      pending_.push_back({node_offset{newest.pnode}});
      if (keep_removed_.load(std::memory_order_relaxed)) {
        kept_removed_.push_back({entry, entry->size()});  // room_for reserved it
      } else {
        retired_.push_back({entry, entry->size()});
      }
      ++done->versions;
      ++done->keys;
      done->bytes += node::size_for(key_size, 0);
      return false;
    }
    return for_readers;
  }

  Storage& storage_;
  std::function<bool(std::string_view)> tier_holds_;
  std::deque<queued_key> queue_;
  std::deque<inode*> parked_;  // keys that keep versions only for registered readers
  std::uint64_t parked_generation_ = 0;
  std::deque<mark> marks_;
  std::optional<std::uint64_t> settled_;
  std::vector<dropped> pending_;
  std::vector<alloc::node_block> retired_;
  std::vector<alloc::node_block> kept_removed_;  // TEST_keep_removed_entries
  std::atomic<bool> keep_removed_{false};
  std::atomic<std::uint64_t> versions_{0}, bytes_{0}, passes_{0}, last_watermark_{0};
};

}  // namespace flintkv::internal
