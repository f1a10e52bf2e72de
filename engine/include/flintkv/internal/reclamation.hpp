// Reclamation: the versions no reader can see any more are unlinked from the persistent list
// and the index, and their space is freed.
//
// The watermark W is the oldest version a reader may still read. A version is garbage once a
// newer version of its key is at or below W; a key whose newest version is a delete at or
// below W disappears entirely. Readers are of three kinds:
//  - snapshots and iterators (implicit snapshots) register their version in the registry
//    (snapshot_registry), which reads the visible version under its own lock;
//  - Gets in flight take no lock: each runs pinned in the storage's epoch domain, and reads
//    the visible version after pinning. A visible version V published by the combiner
//    becomes a mark stamped with the epoch; once the epoch has advanced twice past the
//    stamp, every reader pinned before the mark has finished, so every reader in flight
//    read a visible version of at least V (the argument of epoch-based reclamation, with
//    the publication of V in the place of an unlink);
//  - writers read no version older than the newest of a key.
// So W = min(the newest settled mark, the oldest registered snapshot or iterator).
//
// Which keys have garbage: every write that gives a key a second version, or a delete, notes
// (key, version) in a queue, in version order. A pass takes the entries whose version is at
// or below W, and for each key keeps the newest version at or below W and everything newer,
// and drops the rest.
//
// Thread safety: note(), watermark() and pass() run under the combiner lock; the registry
// has its own lock; the statistics may be read from any thread.
// Invariants:
//  (1) W never exceeds the version any live reader reads at, so no reader ever reaches a
//      dropped version: a reader at version r >= W stops at the newest version <= r, which
//      is at or above the kept one.
//  (2) An entry's `queued` counts the queue entries naming it; an entry is removed from the
//      index only when that count is 0, so no queue entry names a removed entry.
//  (3) A removed index entry and every dropped chain record are retired through the epoch
//      domain (readers may stand on them); dropped persistent blocks are freed at once
//      (by (1), no reader reads them).
// Persistence (one fence per pass):
//  (1) Unlink: the kept version's successor becomes the node after the key's dropped run
//      (one word per key); a removed key's predecessor (the previous key's oldest version)
//      skips its node. Each is one self-checking word written back.
//  (2) durable::before_free(): the unlinks are durable before any block is freed, so a
//      freed block is never linked in the durable list, and a crash leaves each key with
//      its run either linked (recovery rebuilds it, and a later pass drops it again) or not.
//  (3) Then each dropped node's version word becomes the uncommitted marker, written back
//      and left to the thread's next fence, so a freed block does not look like a version
//      to repair's scan of the heap; a crash before that fence leaves a freed node that
//      looks committed, which only repair reads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "flintkv/internal/index.hpp"
#include "flintkv/internal/layout.hpp"
#include "flintkv/internal/mode.hpp"

namespace flintkv::internal {

// The versions of live snapshots and iterators.
class snapshot_registry {
 public:
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
    if (it != held_.end() && --it->second == 0) held_.erase(it);
  }
  std::optional<std::uint64_t> oldest() const {
    std::lock_guard lock(mutex_);
    if (held_.empty()) return std::nullopt;
    return held_.begin()->first;
  }
  std::uint64_t count() const {
    std::lock_guard lock(mutex_);
    std::uint64_t n = 0;
    for (const auto& [v, c] : held_) n += c;
    return n;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::uint64_t, std::uint64_t> held_;  // version -> readers
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
      ++entry->queued;
    } catch (...) {
      // Out of DRAM: the key's garbage stays until the store is opened again.
    }
  }

  std::size_t queued() const { return queue_.size(); }

  // True if a pass with watermark w would find at least `n` queue entries to take.
  bool due(std::uint64_t w, std::size_t n) const {
    return queue_.size() >= n && queue_[n - 1].version <= w;
  }

  // The watermark readers allow now, from the visible version last published (`visible`)
  // and the registry; nullopt while no mark has settled. REQUIRES: the combiner lock.
  std::optional<std::uint64_t> watermark(std::uint64_t visible, const snapshot_registry& reg) {
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
    if (!settled_) return std::nullopt;
    return std::min(*settled_, reg.oldest().value_or(UINT64_MAX));
  }

  // Drops what W allows, taking at most `budget` queue entries. REQUIRES: the combiner
  // lock; `w` came from watermark() (or no reader exists and w <= the visible version).
  reclaimed pass(skiplist& index, std::uint64_t w, std::size_t budget) {
    reclaimed done;
    last_watermark_.store(w, std::memory_order_relaxed);
    while (!queue_.empty() && budget-- > 0 && queue_.front().version <= w) {
      inode* entry = queue_.front().entry;
      if (!room_for(entry)) break;  // out of DRAM for the bookkeeping: stop here
      queue_.pop_front();
      --entry->queued;
      drop_garbage(index, entry, w, &done);
    }
    if (!pending_.empty()) {
      io::before_free();  // (2)
      for (const dropped& d : pending_) {
        node* n = at(d.offset);
        io::put(n->version, uncommitted_word(in_node(d.offset, word_field::version)));
        io::flush(n->version);
      }
      for (const dropped& d : pending_) storage_.free(d.offset);
      pending_.clear();
    }
    for (const retiree& r : retired_) storage_.retire_dram(r.memory, r.bytes);
    retired_.clear();
    passes_.fetch_add(1, std::memory_order_relaxed);
    versions_.fetch_add(done.versions, std::memory_order_relaxed);
    bytes_.fetch_add(done.bytes, std::memory_order_relaxed);
    return done;
  }

  std::uint64_t reclaimed_versions() const { return versions_.load(std::memory_order_relaxed); }
  std::uint64_t reclaimed_bytes() const { return bytes_.load(std::memory_order_relaxed); }
  std::uint64_t passes() const { return passes_.load(std::memory_order_relaxed); }
  std::uint64_t last_watermark() const { return last_watermark_.load(std::memory_order_relaxed); }

  // The entries still queued, for the engine's destructor (which frees the index).
  void clear() { queue_.clear(); }

 private:
  static constexpr std::size_t kMaxMarks = 256;

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
  struct retiree {
    void* memory;
    std::size_t bytes;
  };

  node* at(node_offset off) const { return static_cast<node*>(storage_.pointer(off)); }

  // Makes room in the bookkeeping for everything `entry` may drop, before anything is
  // written; false if out of DRAM.
  bool room_for(const inode* entry) {
    std::size_t n = 1;
    for (const vrec* r = entry->older.load(std::memory_order_relaxed); r != nullptr;
         r = r->older.load(std::memory_order_relaxed)) {
      ++n;
    }
    try {
      pending_.reserve(pending_.size() + n);
      retired_.reserve(retired_.size() + n);
      return true;
    } catch (...) {
      return false;
    }
  }

  node_offset successor(node_offset off) const {
    const auto next = read_offset_word(io::get(at(off)->next), in_node(off, word_field::next));
    return next ? *next : node_offset{0};
  }

  void link(node_offset from, node_offset to) {
    io::put(at(from)->next, offset_word(to, in_node(from, word_field::next)));
    io::flush(at(from)->next);
  }

  void drop_garbage(skiplist& index, inode* entry, std::uint64_t w, reclaimed* done) {
    const version_ref newest = entry->unlocked_newest();
    vrec* keep = nullptr;  // the kept version if it is in the chain (else the newest)
    vrec* first = entry->older.load(std::memory_order_relaxed);
    if (newest.version > w) {
      keep = first;
      while (keep != nullptr && keep->version > w) keep = keep->older.load(std::memory_order_relaxed);
      if (keep == nullptr) return;  // every version is newer than W
      first = keep->older.load(std::memory_order_relaxed);
    }
    const std::size_t node_key = entry->key_size;
    if (first != nullptr) {
      const node_offset kept{keep != nullptr ? keep->pnode : newest.pnode};
      link(kept, successor(node_offset{entry->tail_pnode}));  // (1)
      (keep != nullptr ? keep->older : entry->older).store(nullptr, std::memory_order_release);
      for (vrec* r = first; r != nullptr;) {
        vrec* older = r->older.load(std::memory_order_relaxed);
        pending_.push_back({node_offset{r->pnode}});
        retired_.push_back({r, sizeof(vrec)});
        ++done->versions;
        done->bytes += node::size_for(node_key, r->value_size);
        r = older;
      }
      entry->tail_pnode = kept.value;
    }
    if (keep == nullptr && newest.tombstone && entry->queued == 0) {
      inode* pred = index.remove(entry);
      link(node_offset{pred->tail_pnode}, successor(node_offset{newest.pnode}));  // (1)
      pending_.push_back({node_offset{newest.pnode}});
      retired_.push_back({entry, entry->size()});
      ++done->versions;
      ++done->keys;
      done->bytes += node::size_for(node_key, 0);
    }
  }

  Storage& storage_;
  std::deque<queued_key> queue_;
  std::deque<mark> marks_;
  std::optional<std::uint64_t> settled_;
  std::vector<dropped> pending_;
  std::vector<retiree> retired_;
  std::atomic<std::uint64_t> versions_{0}, bytes_{0}, passes_{0}, last_watermark_{0};
};

}  // namespace flintkv::internal
