// The volatile index: a sorted list in DRAM with one entry per key, ordered by key ascending
// (bytewise), a B+tree over it for searches (btree.hpp), and a hash table for point lookups.
// Each entry holds its key's versions, newest first: the newest in the entry itself, the older
// ones in a chain of version records (JellyFish's vertical list). The persistent list holds
// the same versions, sorted by key, then version descending.
//
// Thread safety: the structure (the list's links, the tree, the point table, entries' newest
// versions, chains) is written only by the combiner, under its lock, and by recovery before
// the index is shared. Readers take no lock: they read an entry's newest version under its
// sequence lock, the tree and the table optimistically, and follow links and chains with
// acquire loads. Unlinked entries, version records and replaced tree nodes are freed only
// when no reader can hold them (engine.hpp, reclamation.hpp).
// Invariants:
//  (1) The list is the truth: every live entry is on it, in key order. The tree and the
//      point table are accelerators: an entry they lack (they had no DRAM for it) or a stale
//      answer costs a search steps, never a wrong result.
//  (2) An entry's key never changes; a removed entry keeps its successor link, so a reader
//      standing on it walks on to live entries.
//  (3) A chain is sorted by version, descending, and every version in it is below the
//      entry's newest. Records are immutable once published, except `older`, which only
//      the reclamation shortens.
//  (4) tail_pnode() is the persistent offset of the key's oldest version in the index: the
//      persistent predecessor of the next key's versions. Written by the combiner only;
//      writers preparing a node read it as a hint, which the combiner checks again.
//  (5) A linked entry's prev() is its predecessor on the list (the head for the first key).
//      Written by the combiner only; writers updating a key they found in the point table
//      take it as their located predecessor, a hint the combiner checks again (engine.hpp).
//  (6) An entry leaves the tree and the point table before it is unlinked and retired, so
//      neither names an entry that may have been freed.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include <sys/mman.h>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "allocators/epoch.hpp"
#include "allocators/helper_thread.hpp"
#include "flintkv/internal/btree.hpp"
#include "flintkv/internal/checksum.hpp"
#include "flintkv/internal/keys.hpp"
#include "flintkv/internal/layout.hpp"
#include "flintkv/options.hpp"

namespace flintkv::internal {

// One version of a key, as readers take it.
struct version_ref {
  std::uint64_t version = 0;
  std::uint64_t pnode = 0;  // offset of the persistent node
  std::uint32_t value_size = 0;
  bool tombstone = false;
};

// An older version of a key, in its entry's chain.
struct vrec {
  std::uint64_t version;
  std::uint64_t pnode;
  std::uint32_t value_size;
  bool tombstone;
  std::atomic<vrec*> older{nullptr};

  version_ref ref() const { return {version, pnode, value_size, tombstone}; }
};

// An index entry: a 16-byte header (sequence lock, key size, removed flag, successor), its
// key, then its state. A search that walks the list reads the header and the key of each
// entry it passes: for keys up to 48 bytes one cache line when the entry starts one. The
// state follows: the newest version (what a Get and a scan read) packed in two words, then
// the offset of the key's oldest node (which a writer locating its predecessor needs) and
// the list predecessor. An entry for a 16-byte key is 80 bytes.
struct inode {
  // The newest version's sequence lock: odd while the combiner rewrites it.
  std::atomic<std::uint32_t> seq{0};
  std::uint16_t key_size = 0;
  // Unlinked from the index. Written by the combiner; read by the combiner and by readers
  // that reached the entry through the point table (which then search instead).
  std::atomic<bool> removed{false};
  std::atomic<inode*> next_{nullptr};  // the successor on the list (nullptr: the last)

  // The newest version in two words: versions and node offsets are persistent words'
  // payloads (below 2^48, layout.hpp), so the bits above them hold the value size (below
  // 2^21: its low 16 bits with the version, the rest with the offset) and the delete flag.
  struct state {
    std::atomic<std::uint64_t> version_word{0};  // version | value size's low bits << 48
    std::atomic<std::uint64_t> node_word{0};     // pnode | value size's high bits | kDeletedBit
    // Invariant (4): written by the combiner only; read by writers that prepare a node to
    // follow it (a hint, checked again under the lock).
    std::atomic<std::uint64_t> tail{0};
    // Invariant (5): a new key's entry sets its own and its successor's.
    std::atomic<inode*> prev{nullptr};
    std::atomic<vrec*> older{nullptr};   // the chain of older versions, newest first
    std::uint32_t queued = 0;            // combiner only: reclamation references to the entry
  };

  static constexpr unsigned kHigh = kCheckShift;  // where the value size's bits start
  static constexpr std::uint64_t kLow = kPayloadMask;
  static constexpr std::uint64_t kDeletedBit = std::uint64_t{1} << 63;
  static_assert(kMaxValueSize < std::uint64_t{1} << (2 * (64 - kHigh) - 1),
                "the value size fits the bits above two payloads, less the delete flag");

  struct packed {
    std::uint64_t version_word, node_word;
  };
  static packed pack(const version_ref& v) {
    assert(v.version <= kLow && v.pnode <= kLow && v.value_size <= kMaxValueSize);
    const std::uint64_t size = v.value_size;
    return {v.version | (size & 0xffff) << kHigh,
            v.pnode | (size >> 16) << kHigh | (v.tombstone ? kDeletedBit : 0)};
  }
  static version_ref unpack(std::uint64_t version_word, std::uint64_t node_word) {
    const std::uint64_t size = version_word >> kHigh | ((node_word & ~kDeletedBit) >> kHigh) << 16;
    return {version_word & kLow, node_word & kLow, static_cast<std::uint32_t>(size),
            (node_word & kDeletedBit) != 0};
  }

  std::string_view key() const { return {reinterpret_cast<const char*>(this + 1), key_size}; }
  inode* load_next() const { return next_.load(std::memory_order_acquire); }
  // For prefetching only: the pointer may not be dereferenced.
  inode* next_relaxed() const { return next_.load(std::memory_order_relaxed); }
  // REQUIRES: the combiner lock (or the index is not shared yet).
  void set_next(inode* n) { next_.store(n, std::memory_order_release); }

  std::atomic<vrec*>& older() const { return st().older; }
  std::uint64_t tail_pnode() const { return st().tail.load(std::memory_order_relaxed); }
  void set_tail_pnode(std::uint64_t off) { st().tail.store(off, std::memory_order_relaxed); }
  std::uint32_t& queued() { return st().queued; }
  inode* prev() const { return st().prev.load(std::memory_order_acquire); }
  void set_prev(inode* p) { st().prev.store(p, std::memory_order_release); }

  // The newest version and, if it is above `chain_above`, the chain below it (else
  // nullptr), read consistently. Lock-free for readers. The chain's link may lie on the
  // entry's next cache line: a reader the newest version suits does not touch it.
  version_ref newest(vrec** chain, std::uint64_t chain_above = 0) const {
    const state& t = st();
    while (true) {
      const std::uint32_t s = seq.load(std::memory_order_acquire);
      if ((s & 1) == 0) {
        const version_ref r = unlocked_newest();
        vrec* o = r.version > chain_above ? t.older.load(std::memory_order_relaxed) : nullptr;
        std::atomic_thread_fence(std::memory_order_acquire);
        if (seq.load(std::memory_order_relaxed) == s) {
          *chain = o;
          return r;
        }
      }
      _mm_pause();
    }
  }

  // The newest version at or below `version`, if any.
  std::optional<version_ref> visible_at(std::uint64_t version) const {
    vrec* chain = nullptr;
    const version_ref n = newest(&chain, version);
    if (n.version <= version) return n;
    for (const vrec* r = chain; r != nullptr; r = r->older.load(std::memory_order_acquire)) {
      if (r->version <= version) return r->ref();
    }
    return std::nullopt;
  }

  // The newest version, read by the combiner (which alone writes it) or before sharing; by
  // anyone else only as a hint that may be mid-rewrite (the iterator's prefetching).
  version_ref unlocked_newest() const {
    const state& t = st();
    return unpack(t.version_word.load(std::memory_order_relaxed),
                  t.node_word.load(std::memory_order_relaxed));
  }

  // Makes `v` the newest version with `chain` below it. REQUIRES: the combiner lock (or the
  // index is not shared yet).
  void publish(const version_ref& v, vrec* chain) {
    state& t = st();
    const std::uint32_t s = seq.load(std::memory_order_relaxed);
    seq.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    const packed w = pack(v);
    t.version_word.store(w.version_word, std::memory_order_relaxed);
    t.node_word.store(w.node_word, std::memory_order_relaxed);
    t.older.store(chain, std::memory_order_relaxed);
    seq.store(s + 2, std::memory_order_release);
  }

  static constexpr std::size_t state_offset(std::size_t key_size) {
    const std::size_t end = sizeof(inode) + key_size;
    return (end + alignof(state) - 1) / alignof(state) * alignof(state);
  }
  // Where the newest version's two words end: a reader of the newest version and the key
  // reads the entry's bytes before it.
  static constexpr std::size_t newest_end(std::size_t key_size) {
    return state_offset(key_size) + 2 * sizeof(std::uint64_t);
  }
  static constexpr std::size_t size_for(std::size_t key_size) {
    return state_offset(key_size) + sizeof(state);
  }
  std::size_t size() const { return size_for(key_size); }

  // Builds an entry in `memory` (size_for(key.size()) bytes) whose newest version is `v`,
  // with no older ones.
  static inode* make(void* memory, std::string_view key, const version_ref& v) {
    auto* n = new (memory) inode();
    n->key_size = static_cast<std::uint16_t>(key.size());
    new (&n->st()) state();
    n->publish(v, nullptr);
    n->set_tail_pnode(v.pnode);
    if (!key.empty()) std::memcpy(reinterpret_cast<char*>(n + 1), key.data(), key.size());
    return n;
  }

 private:
  // The entry is followed by the key bytes, then its state.
  state& st() const {
    return *reinterpret_cast<state*>(reinterpret_cast<char*>(const_cast<inode*>(this)) +
                                     state_offset(key_size));
  }
};
static_assert(sizeof(inode) == 16);
static_assert(inode::size_for(16) == 80, "a 16-byte key's entry fills five 16-byte units");
static_assert(alignof(inode) >= 2);  // the point table's erased marker is no entry's address

// Point lookups beside the list and its tree: an open-addressed hash table (linear probing)
// from key to index entry, so a Get finds its entry in a probe or two instead of a descent
// of the tree. It is an accelerator, never the truth: a lookup that finds nothing (or finds
// a removed entry) is answered by a search, so a slot the table could not take, a probe
// that raced an erase or a reader still on a replaced table cost time, not correctness.
// Except where the miss is sure (find's `absent`): while every live entry has a slot and no
// slot moved during the probe, a miss means the index has no live entry of the key, and a
// Get of a key only the packed tier holds (most keys, once merges run) skips the descent.
//
// A slot is two words, in one 16-byte unit:
//  - the entry word: the top 21 bits of the key's hash, then the entry's address divided by
//    16 (43 bits: user-space addresses below 2^47, entries 16-byte aligned); 0 is empty, 1
//    erased. A probe reads a key only where the hash bits match, and the home slot is a
//    function of those bits alone, so growing the table moves slots without reading an
//    entry.
//  - the newest word: the persistent node of the key's newest version and its value size
//    (newest_word()), or 0 when that version is a delete or its value too large to fit.
//    A Get reads it beside the entry word and goes to the node directly, without reading
//    the entry (newest()): one dependent cache miss fewer. The word is an accelerator too:
//    the reader checks the node's key and version, and otherwise asks the entry.
//
// Growing moves the slots into a table twice the size, a few at a time: the grown table
// becomes the current one, where inserts go, and the old one drains into it, kDrainSlots
// slots (in index order) at each insert, erase and newest-word store, all under the
// combiner lock, until it is empty and retired. Lookups probe the current table, then the
// draining one. So no write waits for every slot to move (about 7 ms for a million keys'
// table, and ten times that for ten million). Growing again before the drain is done (which
// the sizes rule out unless keys are erased and inserted in bulk) moves both tables' slots
// at once. The new table's pages are zeroed by the kernel when they are first mapped, which
// takes longer than moving the slots; so once the table is near its grow point, the insert
// asks for a spare of the size it will grow to, made before the lock is taken; growing then
// takes the spare.
// A spare of kHelperBytes or more is made by the table's helper, a thread of its own that
// a writer wakes (prepare_growth(); alloc::helper_thread): mapping and zeroing one takes
// milliseconds (3 to 65 ms for the spare of a million keys' table on the machine of
// docs/engine-performance.md, as its host backs fresh pages), which a writer making it
// would add to one put. Smaller spares a writer makes itself, before it takes the lock. If
// the grow point comes while the helper is still making the spare, growing waits for it
// rather than make a second table under the lock.
//
// Thread safety: insert, erase and build run under the combiner lock (or before the index
// is shared); find is lock-free and runs pinned in the epoch domain, which frees a replaced
// table once no reader can still probe it; prepare_growth runs on any thread; the helper
// touches only the spare it makes and the request counters.
// Invariants:
//  (1) A live (not removed) entry has at most one slot in the current and the draining
//      table together (a reader may see it in both while the combiner moves it: copied,
//      then erased from the draining table; both name the same entry), and every slot
//      names an entry that is not yet retired: erase comes before the entry's removal.
//  (2) Lookups start at the key's home slot and stop at an empty one; a table is grown or
//      rebuilt before its used and erased slots together exceed kMaxLoad / kLoadDen of it,
//      so an empty slot always ends a probe, and every slot between an entry's home and
//      its slot is taken or erased (linear probing). A draining table takes no new slots.
//  (3) A slot's newest word, if not 0, names the newest version of its entry's key as
//      the key's entry had it when the word was stored: the combiner stores it (set_newest,
//      insert) before it publishes the version's visibility, and a key's later versions
//      are stored in the same slot, or in the one it moved to in the table that replaced
//      this one. (A reader that finds no slot of the key in the current table, and then
//      one in the draining table, reads that slot's word as it was when the slot moved or
//      later: had a version at or below V been stored after the move, the move would have
//      happened before V's publication, and the reader would have found the moved slot in
//      the current table.) So a reader
//      that read the visible version V, then a newest word naming a node of its key at a
//      version at or below V, reads the newest version at V: every later version of the
//      key is above V. No such version is dropped while the reader is pinned (its next
//      newer version is above V, which is at or above every settled mark:
//      reclamation.hpp), so the node it names is still allocated and unchanged.
class point_table {
 public:
  point_table() = default;
  ~point_table() {
    helper_.stop();  // before the tables go: its job may be making the spare
    destroy(table_.load(std::memory_order_relaxed));
    destroy(draining_.load(std::memory_order_relaxed));
    destroy(spare_.load(std::memory_order_relaxed));
  }
  point_table(const point_table&) = delete;
  point_table& operator=(const point_table&) = delete;

  // The bits of `key`'s hash that the table keeps.
  static std::uint64_t hash_of(std::string_view key) { return hash_of(key_hash(key)); }
  // The same, from the key's key_hash (a caller that needs both hashes it once).
  static std::uint64_t hash_of(std::uint32_t key_hash) { return key_hash >> (32 - kHashBits); }

  // The entry of `key` if the table holds it and it is not removed, else nullptr (the
  // caller searches). With `absent`, *absent tells whether the miss is sure: every live
  // entry of the index has a slot (none was left out), no slot moved between the tables
  // while the lookup probed (moves_), and no slot of the key named a removed entry. Then no
  // search can find a live entry of the key either: one linked before the caller read the
  // visible version has its slot already (insert), and one on its way out has left the
  // table first (invariant (6)), its key answered elsewhere (the tier, or its delete).
  // REQUIRES: pinned in the epoch domain given to insert().
  inode* find(std::string_view key, std::uint64_t hash, bool* absent = nullptr) const {
    const std::uint64_t moves = moves_.load(std::memory_order_acquire);
    bool removed = false;
    inode* n = nullptr;
    if (const table* t = table_.load(std::memory_order_acquire); t != nullptr) {
      n = find_in(t, key, hash, &removed);
      if (n == nullptr) {
        const table* d = draining_.load(std::memory_order_acquire);
        if (d != nullptr) n = find_in(d, key, hash, &removed);
      }
    }
    if (absent != nullptr) {
      std::atomic_thread_fence(std::memory_order_acquire);  // the probes before the re-read
      *absent = n == nullptr && !removed && (moves & 1) == 0 &&
                moves_.load(std::memory_order_relaxed) == moves &&
                complete_.load(std::memory_order_relaxed);
    }
    return n;
  }

  // The newest word of `key`'s slot, or 0 if the table has none (the caller asks the
  // entry). The first slot whose hash bits match answers: the caller checks that the node
  // it names holds `key`, and that its version is one it may read (invariant (3)).
  // REQUIRES: pinned in the epoch domain given to insert(), and the visible version read
  // before this call.
  std::uint64_t newest(std::uint64_t hash) const {
    const table* t = table_.load(std::memory_order_acquire);
    if (t == nullptr) return 0;
    if (const std::size_t i = first_match(t, hash); i != kNowhere) {
      return t->newest(i).load(std::memory_order_acquire);
    }
    const table* d = draining_.load(std::memory_order_acquire);
    if (d == nullptr) return 0;
    const std::size_t i = first_match(d, hash);
    return i == kNowhere ? 0 : d->newest(i).load(std::memory_order_acquire);
  }

  // The newest word of version v: its node and value size, or 0 (a delete, or a value
  // whose size does not fit the word's 15 bits).
  static std::uint64_t newest_word(const version_ref& v) {
    if (v.tombstone || v.value_size >= kNewestSizeLimit) return 0;
    return v.pnode | std::uint64_t{v.value_size} << kNewestSizeShift;
  }
  static std::uint64_t newest_node(std::uint64_t word) { return word & kPayloadMask; }
  static std::uint32_t newest_value_size(std::uint64_t word) {
    return static_cast<std::uint32_t>(word >> kNewestSizeShift);
  }

  // Stores `n`'s newest version in its slot's newest word (invariant (3)). REQUIRES: the
  // combiner lock; before the version is visible.
  void set_newest(const inode* n, alloc::epoch_domain& epochs) {
    if (const slot_ref s = slot_of_entry(n); s.t != nullptr) {
      s.t->newest(s.i).store(newest_word(n->unlocked_newest()), std::memory_order_release);
    }
    drain(epochs);
  }

  // Whether n's slot holds n's newest version in its newest word, as set_newest() leaves
  // it (true if the table does not hold n). For tests. REQUIRES: no writer.
  bool newest_matches(const inode* n) const {
    const slot_ref s = slot_of_entry(n);
    return s.t == nullptr ||
           s.t->newest(s.i).load(std::memory_order_relaxed) == newest_word(n->unlocked_newest());
  }

  // Adds `n`, a new live entry (no live entry of its key is in the table), with its
  // newest version. REQUIRES: the combiner lock. Without DRAM to grow the table, or at an
  // address a slot cannot hold, `n` is left out (lookups of it fall back to the search).
  void insert(inode* n, alloc::epoch_domain& epochs) {
    if (!holdable(n)) return leave_out();
    drain(epochs);
    table* t = table_.load(std::memory_order_relaxed);
    if (t == nullptr || (t->used + t->erased + 1) * kLoadDen > t->capacity * kMaxLoad) {
      t = regrow(epochs, size() + 1);
      if (t == nullptr) return leave_out();
    }
    place(*t, slot_of(n, hash_of(n->key())), newest_word(n->unlocked_newest()));
    if (spare_wanted_.load(std::memory_order_relaxed) == 0 &&
        (t->used + t->erased) * kLoadDen * kEarlyDen >= t->capacity * kMaxLoad * (kEarlyDen - 1)) {
      want_spare(t->capacity * kMaxLoad / kLoadDen - t->erased + 1);
    }
    if (retired_ && ++since_collect_ >= kCollectEvery) collect(epochs);
  }

  // Readies the spare table the next growth asked for, if it did and nobody made it yet: a
  // spare of kHelperBytes or more by handing the request to the helper (started here the
  // first time), a smaller one (or any, where no thread can be started) by making it on
  // the calling thread, which waits for the kernel to map and zero its pages (a table of
  // twice the entries: about 32 bytes per entry). Any thread; never under the combiner
  // lock.
  void prepare_growth() noexcept {
    const std::size_t capacity = spare_wanted_.load(std::memory_order_relaxed);
    if (capacity == 0 || spare_.load(std::memory_order_relaxed) != nullptr) return;
    if (table::bytes_for(capacity) >= kHelperBytes) {
      // One writer per request wakes the helper; the others go on.
      const std::uint64_t asked = asked_.load(std::memory_order_acquire);
      if (handed_.exchange(asked, std::memory_order_acq_rel) == asked || helper_.ask()) return;
    }
    install_spare(make(capacity), writers_made_);
  }

  // Removes `n` (before the entry is unlinked and retired). Once the table holds fewer
  // than 1/kShrinkDen of its capacity, it is rebuilt at the size its entries need, so that
  // deleting most keys gives the DRAM back (without DRAM for the smaller table, the larger
  // stays). REQUIRES: the combiner lock.
  void erase(const inode* n, alloc::epoch_domain& epochs) {
    if (const slot_ref s = slot_of_entry(n); s.t != nullptr) erase_at(*s.t, s.i);
    drain(epochs);
    const table* t = table_.load(std::memory_order_relaxed);
    if (t != nullptr && draining_.load(std::memory_order_relaxed) == nullptr &&
        t->capacity > kMinCapacity && t->used * kShrinkDen < t->capacity) {
      (void)regrow(epochs, t->used);
    }
    if (retired_ && ++since_collect_ >= kCollectEvery) collect(epochs);
  }

  // Replaces the table with one sized for `entries` entries, filled from `first` along
  // level 0 (recovery, after the bulk build). REQUIRES: the index is not shared yet.
  void build(const inode* first, std::size_t entries) {
    table* t = make(capacity_for(entries));
    if (t == nullptr) return leave_out();
    bool complete = true;
    // Each slot's home is a miss in a table of 32 bytes per entry: requested kAhead
    // entries before the slot is placed, so that the misses overlap.
    constexpr std::size_t kAhead = 16;
    struct pending {
      std::uint64_t slot, newest;
    } ring[kAhead];
    std::size_t queued = 0;
    for (const inode* n = first; n != nullptr; n = n->load_next()) {
      if (!holdable(n)) {
        complete = false;
        continue;
      }
      const std::uint64_t slot = slot_of(n, hash_of(n->key()));
      __builtin_prefetch(t->address_of(t->home(slot >> kAddressBits)), 1);
      pending& p = ring[queued % kAhead];
      if (queued >= kAhead) place(*t, p.slot, p.newest);
      p = {slot, newest_word(n->unlocked_newest())};
      ++queued;
    }
    for (std::size_t i = queued > kAhead ? queued - kAhead : 0; i < queued; ++i) {
      place(*t, ring[i % kAhead].slot, ring[i % kAhead].newest);
    }
    destroy(draining_.exchange(nullptr, std::memory_order_acq_rel));
    destroy(table_.exchange(t, std::memory_order_acq_rel));
    complete_.store(complete, std::memory_order_relaxed);
  }

  // Notes that a live entry has no slot (insert could not place it): from then on no miss
  // is sure (find's `absent`), until recovery builds a new table. REQUIRES: the combiner
  // lock, before the entry's version is visible (or no reader yet).
  void leave_out() noexcept { complete_.store(false, std::memory_order_relaxed); }
  // Whether every live entry has a slot (no insert left one out).
  bool complete() const { return complete_.load(std::memory_order_relaxed); }

  // The home slot of `hash`, for prefetching before a lookup. May be nullptr.
  const void* home_of(std::uint64_t hash) const {
    const table* t = table_.load(std::memory_order_acquire);
    return t == nullptr ? nullptr : t->address_of(t->home(hash));
  }

  // Entries held. REQUIRES: the combiner lock (or no writer).
  std::size_t size() const {
    const table* t = table_.load(std::memory_order_relaxed);
    const table* d = draining_.load(std::memory_order_relaxed);
    return (t == nullptr ? 0 : t->used) + (d == nullptr ? 0 : d->used);
  }
  // For tests: the table and the spare (either may be nullptr).
  std::pair<const void*, const void*> TEST_tables() const {
    return {table_.load(std::memory_order_relaxed), spare_.load(std::memory_order_relaxed)};
  }
  // For tests: the draining table's entries (0 if none drains).
  std::size_t TEST_draining_entries() const {
    const table* d = draining_.load(std::memory_order_relaxed);
    return d == nullptr ? 0 : d->used;
  }
  // For tests: spares the helper made, and writers (prepare_growth's callers).
  std::pair<std::size_t, std::size_t> TEST_spares_made() const {
    return {helper_made_.load(std::memory_order_relaxed),
            writers_made_.load(std::memory_order_relaxed)};
  }
  // For tests: waits until the helper has answered every request handed to it.
  void TEST_await_helper() const { helper_.await(); }

  // The tables' bytes: the current, the draining and the spare, those that exist.
  std::size_t bytes() const {
    std::size_t b = 0;
    for (const table* t : {table_.load(std::memory_order_relaxed),
                           draining_.load(std::memory_order_relaxed),
                           spare_.load(std::memory_order_relaxed)}) {
      if (t != nullptr) b += t->bytes();
    }
    return b;
  }

 private:
  static constexpr int kHashBits = 21;
  static constexpr int kAddressBits = 64 - kHashBits;
  static constexpr int kAlignBits = 4;
  static constexpr std::uint64_t kAlignMask = (std::uint64_t{1} << kAlignBits) - 1;
  static constexpr std::uint64_t kEmpty = 0;
  static constexpr std::uint64_t kErased = 1;  // the address 16: never an entry's
  // Grown past 3/4 full (used and erased slots), to twice the entries: a probe for a key
  // the table lacks (every new key's) reads a few slots, mostly within one cache line.
  static constexpr std::size_t kMaxLoad = 3;
  static constexpr std::size_t kLoadDen = 4;
  static constexpr std::size_t kMinCapacity = 64;
  // A spare is asked for once the used and erased slots reach (kEarlyDen - 1) / kEarlyDen
  // of the grow point: an eighth of the entries before it, so the spare (twice the table's
  // size) is rarely held for long, and the helper has the time of about 100,000 inserts
  // to make the spare of a million keys' table.
  static constexpr std::size_t kEarlyDen = 8;
  // Rebuilt smaller below 1/16 full, at twice its entries (capacity_for): it grows again
  // only after its entries grew by half, and shrinks again only after 7/8 of them went, so
  // each rebuild follows as many inserts or erases as it copies slots.
  static constexpr std::size_t kShrinkDen = 16;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  static constexpr std::size_t kCollectEvery = 256;
  // Slots of the draining table moved per call of insert, erase or set_newest: the grown
  // table holds twice the entries, so it reaches its own grow point after the old table's
  // capacity times 3/8 inserts, by which time 64 slots per insert have long drained it.
  static constexpr std::size_t kDrainSlots = 64;
  // The smallest spare the helper makes (smaller ones a writer makes).
  static constexpr std::size_t kHelperBytes = std::size_t{1} << 20;

  // Slots per cache line: a key's home is the first slot of a line, so a probe reads the
  // line it missed on before it needs another.
  static constexpr std::size_t kLine = 64 / (2 * sizeof(std::uint64_t));
  // The newest word: the node's offset in its low 48 bits, the value size above.
  static constexpr unsigned kNewestSizeShift = 48;
  static constexpr std::uint32_t kNewestSizeLimit = std::uint32_t{1} << (63 - kNewestSizeShift);
  static_assert(kPayloadMask == (std::uint64_t{1} << kNewestSizeShift) - 1,
                "node offsets are persistent words' payloads");

  struct alignas(64) table {
    std::size_t capacity;  // a multiple of kLine; read by every probe
    // Written at every insert and erase: on a line of their own, away from capacity.
    alignas(64) std::size_t used = 0;  // combiner only
    std::size_t erased = 0;            // combiner only

    // `capacity` slots follow the struct, in zero-filled pages (kEmpty, no newest word),
    // each word accessed atomically: slot i's entry word, then its newest word.
    std::atomic_ref<std::uint64_t> slot(std::size_t i) const { return word(2 * i); }
    std::atomic_ref<std::uint64_t> newest(std::size_t i) const { return word(2 * i + 1); }
    const void* address_of(std::size_t i) const {
      return reinterpret_cast<const std::uint64_t*>(this + 1) + 2 * i;
    }
    std::size_t bytes() const { return bytes_for(capacity); }
    static std::size_t bytes_for(std::size_t capacity) {
      return sizeof(table) + capacity * 2 * sizeof(std::uint64_t);
    }
    std::atomic_ref<std::uint64_t> word(std::size_t i) const {
      return std::atomic_ref<std::uint64_t>(
          reinterpret_cast<std::uint64_t*>(const_cast<table*>(this) + 1)[i]);
    }
    // The hash bits scaled onto the lines: no power of two needed, no modulo.
    std::size_t home(std::uint64_t hash) const {
      return static_cast<std::size_t>((hash * (capacity / kLine)) >> kHashBits) * kLine;
    }
    std::size_t after(std::size_t i) const { return i + 1 == capacity ? 0 : i + 1; }
  };

  // The index of n's slot in t, or kNowhere (no table, or n is not in it).
  static constexpr std::size_t kNowhere = SIZE_MAX;

  // The live entry of `key` in t, or nullptr (none, or it is removed: *removed set).
  static inode* find_in(const table* t, std::string_view key, std::uint64_t hash,
                        bool* removed) {
    for (std::size_t i = t->home(hash);; i = t->after(i)) {
      const std::uint64_t w = t->slot(i).load(std::memory_order_acquire);
      if (w == kEmpty) return nullptr;
      if (w == kErased || (w >> kAddressBits) != hash) continue;
      inode* n = entry_of(w);
      if (same_key(n->key(), key)) {
        if (!n->removed.load(std::memory_order_acquire)) return n;
        *removed = true;
        return nullptr;
      }
    }
  }
  // The first slot of t whose hash bits are `hash`, or kNowhere.
  static std::size_t first_match(const table* t, std::uint64_t hash) {
    for (std::size_t i = t->home(hash);; i = t->after(i)) {
      const std::uint64_t w = t->slot(i).load(std::memory_order_acquire);
      if (w == kEmpty) return kNowhere;
      if (w != kErased && (w >> kAddressBits) == hash) return i;
    }
  }

  // n's slot: in the current table, else in the draining one; t == nullptr if neither
  // holds n. REQUIRES: the combiner lock (or no writer).
  struct slot_ref {
    table* t = nullptr;
    std::size_t i = 0;
  };
  slot_ref slot_of_entry(const inode* n) const {
    for (table* t : {table_.load(std::memory_order_relaxed),
                     draining_.load(std::memory_order_relaxed)}) {
      if (const std::size_t i = index_of(t, n); i != kNowhere) return {t, i};
    }
    return {};
  }

  // Erases slot i of t. The newest word stays: probes skip an erased slot, and place()
  // rewrites both words.
  static void erase_at(table& t, std::size_t i) {
    t.slot(i).store(kErased, std::memory_order_release);
    --t.used;
    ++t.erased;
  }
  static std::size_t index_of(const table* t, const inode* n) {
    if (t == nullptr || !holdable(n)) return kNowhere;
    const std::uint64_t want = slot_of(n, hash_of(n->key()));
    for (std::size_t i = t->home(want >> kAddressBits);; i = t->after(i)) {
      const std::uint64_t w = t->slot(i).load(std::memory_order_relaxed);
      if (w == kEmpty) return kNowhere;
      if (w == want) return i;
    }
  }

  // Whether a slot can hold n's address (below 2^47, 16-byte aligned).
  static bool holdable(const inode* n) {
    const auto address = reinterpret_cast<std::uint64_t>(n);
    return (address >> (kAddressBits + kAlignBits)) == 0 && (address & kAlignMask) == 0;
  }
  static std::uint64_t slot_of(const inode* n, std::uint64_t hash) {
    return hash << kAddressBits | reinterpret_cast<std::uint64_t>(n) >> kAlignBits;
  }
  static inode* entry_of(std::uint64_t w) {
    return reinterpret_cast<inode*>((w & ((std::uint64_t{1} << kAddressBits) - 1)) << kAlignBits);
  }
  static std::size_t capacity_for(std::size_t entries) {
    return std::max(kMinCapacity, (entries * 2 + kLine - 1) / kLine * kLine);
  }

  // Puts an entry word and its newest word in the first free slot from its home.
  static void place(table& t, std::uint64_t slot, std::uint64_t newest) {
    for (std::size_t i = t.home(slot >> kAddressBits);; i = t.after(i)) {
      const std::uint64_t w = t.slot(i).load(std::memory_order_relaxed);
      if (w == kEmpty || w == kErased) {
        if (w == kErased) --t.erased;
        ++t.used;
        t.newest(i).store(newest, std::memory_order_relaxed);
        t.slot(i).store(slot, std::memory_order_release);
        return;
      }
    }
  }

  // A table in pages of its own (zero-filled: every slot empty, and nothing to write before
  // use), given back to the system when destroyed. nullptr without memory.
  static table* make(std::size_t capacity) noexcept {
    const std::size_t bytes = table::bytes_for(capacity);
    void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return nullptr;
    if (bytes >= kHugePage) (void)::madvise(memory, bytes, MADV_HUGEPAGE);  // fewer TLB misses
    // Pages mapped writable now. Else the first touch of a page is a probe's read, which
    // maps the shared zero page, and the store after it faults again and flushes the TLBs
    // of every thread of the process, under the combiner lock.
    alloc::touch_pages(memory, bytes);
    return new (memory) table{capacity};
  }
  static void destroy(table* t) noexcept {
    if (t != nullptr) ::munmap(t, t->bytes());
  }

  // A new table for `entries` live entries, published in the current one's place; the
  // current one drains into it (drain()). If a table is still draining, both move into the
  // new one now and are retired through the epochs. nullptr (and the tables kept) if DRAM
  // runs out. The slots move as they are: no entry is read.
  table* regrow(alloc::epoch_domain& epochs, std::size_t entries) noexcept {
    table* current = table_.load(std::memory_order_relaxed);
    table* draining = draining_.load(std::memory_order_relaxed);
    if (spare_wanted_.load(std::memory_order_relaxed) == capacity_for(entries)) {
      helper_.await();  // the spare may be on its way
    }
    table* t = take_spare(capacity_for(entries));
    if (t == nullptr) t = make(capacity_for(entries));
    if (t == nullptr) return nullptr;
    const moving m(*this);  // a probe of the old tables and then the new ones is not sure
    if (current == nullptr) {
      table_.store(t, std::memory_order_release);
      return t;
    }
    if (draining == nullptr) {
      draining_.store(current, std::memory_order_release);  // before readers can see t
      drained_to_ = 0;
      table_.store(t, std::memory_order_release);
      return t;
    }
    move_slots(*t, *current, 0);
    move_slots(*t, *draining, drained_to_);
    table_.store(t, std::memory_order_release);
    draining_.store(nullptr, std::memory_order_release);
    retire(epochs, current);
    retire(epochs, draining);
    return t;
  }

  // Moves the next kDrainSlots slots of the draining table into the current one: each is
  // copied, then erased, so a reader finds it in one or both. The drained table is retired.
  // REQUIRES: the combiner lock.
  void drain(alloc::epoch_domain& epochs) noexcept {
    table* d = draining_.load(std::memory_order_relaxed);
    if (d == nullptr) return;
    table& t = *table_.load(std::memory_order_relaxed);
    const moving m(*this);  // each slot leaves d after it reached t: a probe between misses
    const std::size_t end = std::min(d->capacity, drained_to_ + kDrainSlots);
    for (std::size_t i = drained_to_; i < end; ++i) {
      const std::uint64_t w = d->slot(i).load(std::memory_order_relaxed);
      if (w <= kErased) continue;
      if ((t.used + t.erased + 1) * kLoadDen > t.capacity * kMaxLoad) {
        // Full before the drain is done (keys inserted in bulk into a table rebuilt small):
        // both tables move into one for them all now.
        drained_to_ = i;
        (void)regrow(epochs, size() + 1);
        return;
      }
      place(t, w, d->newest(i).load(std::memory_order_relaxed));
      erase_at(*d, i);
    }
    drained_to_ = end;
    if (end == d->capacity) {
      draining_.store(nullptr, std::memory_order_release);
      retire(epochs, d);
    }
  }

  // Copies the live slots of `from`, from index `first` on, into t (which nobody reads
  // yet).
  static void move_slots(table& t, const table& from, std::size_t first) {
    for (std::size_t i = first; i < from.capacity; ++i) {
      const std::uint64_t w = from.slot(i).load(std::memory_order_relaxed);
      if (w > kErased) place(t, w, from.newest(i).load(std::memory_order_relaxed));
    }
  }

  // Frees t once no reader can still probe it (kept, if there is no DRAM to note it).
  void retire(alloc::epoch_domain& epochs, table* t) noexcept {
    try {
      epochs.retire(t, [](void* p) { destroy(static_cast<table*>(p)); });
      retired_ = true;
    } catch (const std::bad_alloc&) {
      // No DRAM to remember it: the table stays allocated (readers may hold it).
    }
  }

  // Asks writers for a spare table for `entries` entries, the one made for an earlier
  // request dropped if it has another size. REQUIRES: the combiner lock.
  void want_spare(std::size_t entries) noexcept {
    const std::size_t capacity = capacity_for(entries);
    table* s = spare_.load(std::memory_order_relaxed);
    if (s != nullptr && s->capacity != capacity) destroy(spare_.exchange(nullptr));
    spare_wanted_.store(capacity, std::memory_order_relaxed);
    asked_.fetch_add(1, std::memory_order_release);
  }

  // The spare, if one was made with `capacity` slots (another size is dropped), else
  // nullptr; either way, none is wanted any more. REQUIRES: the combiner lock.
  table* take_spare(std::size_t capacity) noexcept {
    spare_wanted_.store(0, std::memory_order_relaxed);
    table* s = spare_.exchange(nullptr, std::memory_order_acquire);
    if (s != nullptr && s->capacity != capacity) {
      destroy(s);
      return nullptr;
    }
    return s;
  }

  // A retired table is freed once the epochs have advanced twice past it, which only
  // collecting does; writes that retire nothing else (a fill) would never collect, so the
  // inserts do, now and then, until nothing retired is left.
  void collect(alloc::epoch_domain& epochs) noexcept {
    since_collect_ = 0;
    try {
      (void)epochs.collect();
    } catch (const std::bad_alloc&) {
      return;
    }
    retired_ = epochs.pending() != 0;
  }

  // Puts a made spare in place, unless one is there (the spare is destroyed then).
  void install_spare(table* s, std::atomic<std::size_t>& made) noexcept {
    if (s == nullptr) return;
    table* none = nullptr;
    if (spare_.compare_exchange_strong(none, s, std::memory_order_release)) {
      made.fetch_add(1, std::memory_order_relaxed);
    } else {
      destroy(s);
    }
  }

  // The helper's job: the spare the combiner wants, unless one is there.
  void make_wanted_spare() noexcept {
    const std::size_t capacity = spare_wanted_.load(std::memory_order_relaxed);
    if (capacity != 0 && spare_.load(std::memory_order_relaxed) == nullptr) {
      install_spare(make(capacity), helper_made_);
    }
  }

  // While slots move between tables (drain, regrow), odd: the lookups that ran meanwhile
  // may have missed a slot on its way (find's `absent`). Nested windows count as one.
  class moving {
   public:
    explicit moving(point_table& p) noexcept : p_(p) {
      if (p_.moving_depth_++ == 0) {
        p_.moves_.store(p_.moves_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);  // odd before any slot moves
      }
    }
    ~moving() {
      if (--p_.moving_depth_ == 0) {
        p_.moves_.store(p_.moves_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
      }
    }
    moving(const moving&) = delete;
    moving& operator=(const moving&) = delete;

   private:
    point_table& p_;
  };

  std::atomic<table*> table_{nullptr};
  // Read by every sure lookup beside table_, and written only while a table grows.
  std::atomic<std::uint64_t> moves_{0};
  // Whether every live entry has a slot (leave_out()); written rarely.
  std::atomic<bool> complete_{true};
  // The spare's capacity that the combiner asked for (0: none), and the spare once a writer
  // or the helper made it: both change about once per growth, and sit beside table_, read
  // by every probe.
  std::atomic<std::size_t> spare_wanted_{0};
  std::atomic<table*> spare_{nullptr};
  // The table draining into the current one (nullptr: none), read by probes that miss in
  // the current one, and the index of the first slot that has not moved (combiner only).
  std::atomic<table*> draining_{nullptr};
  std::size_t drained_to_ = 0;

  // Spares asked for (by the combiner, want_spare()), and the newest request a writer
  // handed to the helper: a line of their own, away from the probes' words.
  alignas(64) std::atomic<std::uint64_t> asked_{0};
  std::atomic<std::uint64_t> handed_{0};
  std::atomic<std::size_t> helper_made_{0}, writers_made_{0};  // for tests
  alloc::helper_thread helper_{[this] { make_wanted_spare(); }};
  unsigned moving_depth_ = 0;     // combiner only: moving windows open
  bool retired_ = false;         // combiner only: a table was retired since the last collect
  std::size_t since_collect_ = 0;  // combiner only
};

struct entry_key {
  std::string_view operator()(const inode* n) const { return n->key(); }
};

// An entry's tag in the tree: where its key's newest node was when the entry went into the
// tree (an insert, or recovery's build), in 64-byte units (nodes start on a line,
// layout.hpp), or 0 for a node beyond 2^38 bytes or a delete. Later versions of the key do
// not change it. A scan requests the node beside the entry instead of after it, and where
// update_marks says the entry has had no version since, reads the key and value from the
// node without reading the entry at all (iterator.hpp).
struct entry_node_tag {
  static constexpr unsigned kShift = 6;
  std::uint32_t operator()(const inode* n) const {
    const version_ref v = n->unlocked_newest();
    return v.tombstone ? 0 : of(v.pnode);
  }
  static std::uint32_t of(std::uint64_t pnode) {
    return pnode >> (32 + kShift) == 0 ? static_cast<std::uint32_t>(pnode >> kShift) : 0;
  }
  static std::uint64_t node(std::uint32_t tag) { return std::uint64_t{tag} << kShift; }
};

// Which entries may have had a version published since they went into the tree: a bit
// per entry address (hashed; several entries share a bit), set by a writer that located
// the entry to update it, before any version of that update is published, and cleared
// only by starting over with a new index (recovery, which tags every entry anew). A clear
// bit, read by a reader at version V (read with acquire from visible_version, before the
// bit), means that no version of the entry's key above its tag's and at or below V exists:
// such a version was published before V was, so its bit was set before. Bits only fill
// up: once most are set, scans read entries as if there were no marks.
//
// Thread safety: mark() by any writer, clear() by any reader, lock-free.
class update_marks {
 public:
  static constexpr unsigned kBits = 18;  // 32 KiB: read by every scan step, so kept small
  update_marks() : words_(new std::atomic<std::uint64_t>[kWords]()) {}
  // A read first: most marks of a store being overwritten find their bit set, and then
  // write nothing.
  void mark(const inode* n) const {
    const std::uint64_t b = bit_of(n);
    std::atomic<std::uint64_t>& word = words_[b / 64];
    const std::uint64_t bit = std::uint64_t{1} << (b % 64);
    if ((word.load(std::memory_order_relaxed) & bit) == 0) {
      word.fetch_or(bit, std::memory_order_relaxed);
    }
  }
  bool clear(const inode* n) const {
    const std::uint64_t b = bit_of(n);
    return (words_[b / 64].load(std::memory_order_relaxed) & (std::uint64_t{1} << (b % 64))) == 0;
  }

 private:
  static constexpr std::size_t kWords = (std::size_t{1} << kBits) / 64;
  static std::uint64_t bit_of(const inode* n) {
    return (reinterpret_cast<std::uintptr_t>(n) >> 4) * 0x9e3779b97f4a7c15ull >> (64 - kBits);
  }
  std::unique_ptr<std::atomic<std::uint64_t>[]> words_;
};

class key_index {
 public:
  using tree = btree<inode, entry_key, entry_node_tag, epoch_dram>;
  // An entry from the tree's read-ahead (following, seek_ahead), with its key's size and
  // tag.
  using ahead = tree::ahead;
  // Where a located new key goes in the tree (insert() puts it there without a descent
  // while that leaf is unchanged).
  using tree_place = tree::place;

  // REQUIRES: head_memory holds inode::size_for(0) bytes; every reader runs pinned in
  // `epochs` (which frees the point table's replaced tables and the tree's nodes); the
  // tree's nodes come from `dram`. Both outlive the index.
  key_index(void* head_memory, std::uint64_t head_pnode, alloc::node_allocator& dram,
            alloc::epoch_domain& epochs)
      : head_(inode::make(head_memory, {}, {0, head_pnode, 0, false})),
        epochs_(epochs),
        tree_(epoch_dram{&dram, &epochs}) {}

  inode* head() const { return head_; }

  // The neighbours of `key`: *pred the last entry before it (head() if none), *after the
  // first at or after it (nullptr: the end), which is the key's own entry if it has one.
  // REQUIRES: pinned.
  void locate(std::string_view key, inode** pred, inode** after,
              tree_place* where = nullptr) const {
    *pred = search(key, after, where);
  }

  // How a writer locates its key: through the point table first, or (a writer that expects
  // the key to be new) by the search alone.
  enum class locate_way { table_first, search_only };

  // For a writer: with table_first, if the point table holds `key`'s live entry, returns it
  // with *pred its predecessor and *after the entry itself (all an update of an existing key
  // needs); else nullptr and locate()'s neighbours. With search_only the table is not asked
  // (for a new key that is a miss the search would wait behind), only the line of the key's
  // slot requested, for the insert that follows; an existing key is then *after.
  // `hash`: hash_of(key). REQUIRES: pinned.
  inode* locate_for_update(std::string_view key, locate_way way, inode** pred, inode** after,
                           tree_place* where) const {
    return locate_for_update(key, hash_of(key), way, pred, after, where);
  }
  inode* locate_for_update(std::string_view key, std::uint64_t hash, locate_way way,
                           inode** pred, inode** after, tree_place* where) const {
    if (way == locate_way::search_only) {
      if (const void* home = points_.home_of(hash); home != nullptr) __builtin_prefetch(home, 1);
    } else if (inode* e = points_.find(key, hash); e != nullptr) {
      if (inode* p = e->prev(); p != nullptr) {
        *pred = p;
        *after = e;
        return e;
      }
    }
    locate(key, pred, after, where);
    return nullptr;
  }

  // The first entry whose key is at or after `key`, or nullptr: for a key the point table
  // holds, its own entry; else from a search. REQUIRES: pinned.
  inode* seek(std::string_view key) const {
    if (inode* n = lookup(key); n != nullptr) return n;
    inode* after = nullptr;
    (void)search(key, &after);
    return after;
  }

  // The entry of `key`, or nullptr: from the point table, or where it has none and its miss
  // is not sure (point_table::find), from a search. `hash`: hash_of(key), if the caller has
  // it. REQUIRES: pinned.
  inode* find(std::string_view key) const { return find(key, hash_of(key)); }
  inode* find(std::string_view key, std::uint64_t hash) const {
    bool absent = false;
    if (inode* n = points_.find(key, hash, &absent); n != nullptr || absent) return n;
    inode* after = nullptr;
    (void)search(key, &after);
    return after != nullptr && same_key(after->key(), key) ? after : nullptr;
  }

  // The live entry of `key` from the point table alone, or nullptr (it may still have one:
  // ask locate or find). REQUIRES: pinned.
  inode* lookup(std::string_view key) const {
    return points_.find(key, point_table::hash_of(key));
  }

  // The bits of a key's hash that the point table keeps (find's and newest's `hash`).
  static std::uint64_t hash_of(std::string_view key) { return point_table::hash_of(key); }
  static std::uint64_t hash_of(std::uint32_t key_hash) { return point_table::hash_of(key_hash); }

  // The point table's newest word for the key of hash_of `hash` (point_table::newest: 0
  // for none; else a node the caller checks holds the key). REQUIRES: pinned, and the
  // visible version read before.
  std::uint64_t newest(std::uint64_t hash) const { return points_.newest(hash); }

  // Records n's newest version, just published, in the point table (its invariant (3)).
  // REQUIRES: the combiner lock; before the version is visible.
  void set_newest(const inode* n) { points_.set_newest(n, epochs_); }

  // Notes that n may get a version after its first (update_marks). REQUIRES: before that
  // version is handed to a combiner. Any thread.
  void mark_updated(const inode* n) const { marks_.mark(n); }
  // Whether n has had no version after the one its tag names, as a reader at a version it
  // read from visible_version before this call sees it (update_marks). Reads nothing of n,
  // which may have been freed. REQUIRES: pinned.
  bool tag_current(const inode* n) const { return marks_.clear(n); }

  // Up to n entries that follow `key` on the list, from the tree (btree::following: none
  // that stayed in the tree is left out, but entries it lacks are, and the answer may be
  // stale by the time it is read). While tree_whole(), a reader finds every key it may see
  // in it (seek_ahead). REQUIRES: pinned.
  template <class OnLeaf = tree::no_leaf_action>
  std::size_t following(std::string_view key, ahead* out, std::size_t n,
                        OnLeaf&& on_leaf = {}) const {
    return tree_.following(key, out, n, on_leaf);
  }

  // For a reader at a version that visible_version had when the reader began: the first
  // entry at or after `key` that the reader may see, or one before it on the list (never
  // after it), or nullptr for none; and in out[0 .. *got) the entries from it on, from the
  // tree, as following() gives them (*got is 0 when the tree lacks an entry). One descent
  // of the tree instead of a point table probe and a descent. While the tree holds every
  // entry (no insert ran out of DRAM), it holds every entry the reader may see: an entry
  // is in the tree before its first version is visible, and leaves it only once no reader
  // may see the key (its newest version a delete at or below every reader's). So its first
  // answer at or after `key` is at or before the reader's, and the entries it gives leave
  // out no key the reader may see. Otherwise this asks seek(). REQUIRES: pinned.
  template <class OnLeaf = tree::no_leaf_action>
  inode* seek_ahead(std::string_view key, ahead* out, std::size_t n, std::size_t* got,
                    OnLeaf&& on_leaf = {}) const {
    if (tree_complete_.load(std::memory_order_relaxed)) {
      *got = tree_.at_or_after(key, out, n, on_leaf);
      return *got == 0 ? nullptr : out[0].entry;
    }
    *got = 0;
    return seek(key);
  }

  // Whether the tree holds every entry. Once false, it stays false until recovery builds
  // a new index; so a reader that sees true, at any time after it read visible_version,
  // finds every key it may see in the tree (seek_ahead).
  bool tree_whole() const { return tree_complete_.load(std::memory_order_relaxed); }

  // The point table's and the tree's bytes of DRAM.
  std::size_t point_table_bytes() const { return points_.bytes(); }
  std::size_t tree_bytes() const { return tree_.bytes(); }

  // For tests: the first entry that breaks invariant (5), is missing from the point table
  // or the tree (unless an insert found no DRAM for it there), or whose newest version its slot's
  // newest word does not give, described, or "" if none.
  // REQUIRES: no writer; pinned.
  std::string check() const {
    const bool complete = tree_complete_.load(std::memory_order_relaxed);
    const bool points_complete = points_.complete();
    const inode* pred = head_;
    std::size_t entries = 0;
    for (const inode* n = head_->load_next(); n != nullptr; pred = n, n = n->load_next()) {
      ++entries;
      if (n->prev() != pred) {
        return "entry '" + std::string(n->key()) + "': prev() is not its predecessor";
      }
      if (points_complete && lookup(n->key()) != n) {
        return "entry '" + std::string(n->key()) + "' is not in the point table";
      }
      if (!points_.newest_matches(n)) {
        return "entry '" + std::string(n->key()) +
               "': the point table's newest word is not its newest version";
      }
      if (complete && tree_.find(n->key()) != n) {
        return "entry '" + std::string(n->key()) + "' is not in the tree";
      }
    }
    if (points_complete && points_.size() != entries) {
      return "the point table holds " + std::to_string(points_.size()) + " entries, the list " +
             std::to_string(entries);
    }
    if (complete && tree_.size() != entries) {
      return "the tree holds " + std::to_string(tree_.size()) + " entries, the list " +
             std::to_string(entries);
    }
    return tree_.check();
  }

  // The last entry whose key is below `key` (head_ if none). REQUIRES: pinned.
  inode* last_below(std::string_view key) const {
    inode* after = nullptr;
    return search(key, &after);
  }

  // The last entry (head_ if empty). REQUIRES: pinned.
  inode* last() const {
    inode* n = tree_.last();
    if (n == nullptr) n = head_;
    for (inode* next = n->load_next(); next != nullptr; next = n->load_next()) n = next;
    return n;
  }

  // Readies on the calling thread, before it takes the combiner lock, what inserts under
  // the lock would otherwise fault in there, stalling every writer: nodes for the tree's
  // splits, and the point table's next table once it is near growth. Any thread.
  void prepare_insert() noexcept {
    tree_.reserve();
    points_.prepare_growth();
  }

  // Links `n` after `pred` on the list and adds it to the tree (at `where`, from locate(),
  // while that still holds) and the point table (each only as its DRAM allows: they are
  // accelerators). REQUIRES: the combiner lock; pred is not removed, and n's key lies
  // between pred's and its successor's; the writer that located `where` is still pinned.
  void insert(inode* n, inode* pred, const tree_place& where = {}) {
    link_after(n, pred);
    if (!tree_.insert(n, where)) tree_complete_.store(false, std::memory_order_relaxed);
    points_.insert(n, epochs_);
  }

  // Test hook: the point table's current table and its spare (either may be nullptr).
  std::pair<const void*, const void*> TEST_point_tables() const { return points_.TEST_tables(); }
  std::pair<std::size_t, std::size_t> TEST_point_spares_made() const {
    return points_.TEST_spares_made();
  }
  void TEST_await_point_helper() const { points_.TEST_await_helper(); }
  std::size_t TEST_point_draining_entries() const { return points_.TEST_draining_entries(); }

  // Test hook: insert() as it goes when the point table has no DRAM for n.
  void TEST_insert_without_table(inode* n, inode* pred) {
    link_after(n, pred);
    if (!tree_.insert(n, {})) tree_complete_.store(false, std::memory_order_relaxed);
    points_.leave_out();
  }

  // Test hook: insert() as it goes when the tree has no DRAM for n.
  void TEST_insert_without_tree(inode* n, inode* pred) {
    link_after(n, pred);
    tree_complete_.store(false, std::memory_order_relaxed);
    points_.insert(n, epochs_);
  }

  // Requests what remove(n) of an entry of `key` reads first: the entry's line and its
  // slot's home in the point table, for a caller that removes many entries in a row (a
  // merge), so that their misses overlap. REQUIRES: pinned, or the combiner lock.
  void prefetch_removal(const inode* n, std::string_view key) const {
    __builtin_prefetch(n, 1);
    if (const void* home = points_.home_of(hash_of(key)); home != nullptr) {
      __builtin_prefetch(home, 1);
    }
  }

  // Unlinks `n`; readers standing on it walk on (invariant (2)). Returns its predecessor.
  // REQUIRES: the combiner lock; n is linked.
  inode* remove(inode* n) {
    points_.erase(n, epochs_);
    tree_.erase(n);
    inode* pred = n->prev();
    inode* succ = n->load_next();
    pred->set_next(succ);
    if (succ != nullptr) succ->set_prev(pred);
    n->removed.store(true, std::memory_order_release);
    return pred;
  }

  // Bulk building, for recovery: appends entries in key order. REQUIRES: single thread,
  // entries arrive sorted. Call finish_build() at the end.
  void append(inode* n) {
    inode* tail = built_.empty() ? head_ : built_.back();
    n->set_prev(tail);
    tail->set_next(n);
    built_.push_back(n);
  }
  // Entries from which finish_build makes the point table on a thread of its own.
  static constexpr std::size_t kParallelBuild = std::size_t{1} << 16;
  void finish_build() {
    // The tree and the point table are made from the same entries, which nothing changes
    // meanwhile. For a large store the table is made by a helper while this thread makes
    // the tree: both wait mostly on fresh pages and on misses (the table's home slots are
    // random), and at 10M keys they take a third of a recovery. Without a helper, or for a
    // store whose table takes less than starting a thread, one after the other.
    auto build_points = [this] { points_.build(head_->load_next(), built_.size()); };
    alloc::helper_thread helper(build_points);
    const bool aside = built_.size() >= kParallelBuild && helper.ask();
    if (!tree_.build(built_.data(), built_.size())) {
      tree_complete_.store(false, std::memory_order_relaxed);
    }
    if (aside) {
      helper.await();
    } else {
      build_points();
    }
    built_.clear();
    built_.shrink_to_fit();
    std::atomic_thread_fence(std::memory_order_release);
  }

 private:
  // Links n after pred on the list (both directions). REQUIRES: the combiner lock.
  void link_after(inode* n, inode* pred) {
    inode* succ = pred->load_next();
    n->set_next(succ);
    n->set_prev(pred);
    pred->set_next(n);
    if (succ != nullptr) succ->set_prev(n);
  }

  // The last entry below `key` (head_ if none), and in *after the first at or after it
  // (nullptr: the end): the tree's answer, then along the list past any entry the tree
  // lacks or that a racing write added (invariant (1)). *where: see locate().
  inode* search(std::string_view key, inode** after, tree_place* where = nullptr) const {
    inode* pred = tree_.last_below(key, where);
    if (pred == nullptr) pred = head_;
    inode* curr = pred->load_next();
    while (curr != nullptr && compare_keys(curr->key(), key) < 0) {
      pred = curr;
      curr = pred->load_next();
    }
    *after = curr;
    return pred;
  }

  inode* head_;
  alloc::epoch_domain& epochs_;
  tree tree_;
  // The tree holds every entry on the list: no insert found it out of DRAM (seek_ahead).
  // Written by the combiner (or recovery) only.
  std::atomic<bool> tree_complete_{true};
  point_table points_;
  update_marks marks_;
  std::vector<inode*> built_;  // recovery only: the entries appended, for the tree's build
};

}  // namespace flintkv::internal
