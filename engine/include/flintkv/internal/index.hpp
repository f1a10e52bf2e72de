// The volatile index: a skiplist in DRAM with one entry per key, ordered by key ascending
// (bytewise). Each entry holds its key's versions, newest first: the newest in the entry
// itself, the older ones in a chain of version records (JellyFish's vertical list). The
// persistent list holds the same versions, sorted by key, then version descending.
//
// Thread safety: the structure (links at every level, entries' newest versions, chains) is
// written only by the combiner, under its lock, and by recovery before the index is shared.
// Readers take no lock: they read an entry's newest version under its sequence lock, and
// follow links and chains with acquire loads. Unlinked entries and version records are freed
// only when no reader can hold them (engine.hpp, reclamation.hpp).
// Invariants:
//  (1) An entry is linked at level i only if it is linked at level i - 1, or was removed.
//  (2) An entry's key and height never change; a removed entry keeps its links, so a reader
//      standing on it walks on to live entries.
//  (3) A chain is sorted by version, descending, and every version in it is below the
//      entry's newest. Records are immutable once published, except `older`, which only
//      the reclamation shortens.
//  (4) tail_pnode() is the persistent offset of the key's oldest version in the index: the
//      persistent predecessor of the next key's versions. Written by the combiner only;
//      writers preparing a node read it as a hint, which the combiner checks again.
#pragma once

#include <immintrin.h>

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <string_view>

namespace flintkv::internal {

inline constexpr int kMaxHeight = 32;  // enough for 2^32 keys at branching factor 2

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

// An index entry: a small header, its successors, its key, then its versions' state. A
// search reads the header, one successor and the key of each entry it passes: for short keys
// and low entries these share the entry's first cache line, and so does the offset of the
// key's oldest node, which a writer locating its predecessor needs. The state (read once, on
// the entry a search stops at) follows the key.
struct inode {
  // The newest version's sequence lock: odd while the combiner rewrites it.
  std::atomic<std::uint32_t> seq{0};
  std::uint16_t key_size = 0;
  std::uint8_t height = 0;
  bool removed = false;  // unlinked from the index; combiner only
  // Invariant (4): written by the combiner only; read by writers that prepare a node to
  // follow it (a hint, checked again under the lock).
  std::atomic<std::uint64_t> tail{0};

  struct state {
    std::atomic<std::uint64_t> version{0};
    std::atomic<std::uint64_t> pnode{0};
    std::atomic<std::uint64_t> meta{0};  // value size, and kTombstoneBit
    std::atomic<vrec*> older{nullptr};   // the chain of older versions, newest first
    std::uint32_t queued = 0;            // combiner only: reclamation references to the entry
  };

  static constexpr std::uint64_t kTombstoneBit = std::uint64_t{1} << 32;

  std::string_view key() const {
    return {reinterpret_cast<const char*>(links() + height), key_size};
  }
  std::atomic<inode*>& next(int level) { return links()[level]; }
  inode* load_next(int level) const { return links()[level].load(std::memory_order_acquire); }
  // For prefetching only: the pointer may not be dereferenced.
  inode* next_relaxed(int level) const { return links()[level].load(std::memory_order_relaxed); }

  std::atomic<vrec*>& older() const { return st().older; }
  std::uint64_t tail_pnode() const { return tail.load(std::memory_order_relaxed); }
  void set_tail_pnode(std::uint64_t off) { tail.store(off, std::memory_order_relaxed); }
  std::uint32_t& queued() { return st().queued; }

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

  // The newest version, read by the combiner (which alone writes it) or before sharing.
  version_ref unlocked_newest() const {
    const state& t = st();
    const std::uint64_t m = t.meta.load(std::memory_order_relaxed);
    return {t.version.load(std::memory_order_relaxed), t.pnode.load(std::memory_order_relaxed),
            static_cast<std::uint32_t>(m), (m & kTombstoneBit) != 0};
  }

  // Makes `v` the newest version with `chain` below it. REQUIRES: the combiner lock (or the
  // index is not shared yet).
  void publish(const version_ref& v, vrec* chain) {
    state& t = st();
    const std::uint32_t s = seq.load(std::memory_order_relaxed);
    seq.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    t.version.store(v.version, std::memory_order_relaxed);
    t.pnode.store(v.pnode, std::memory_order_relaxed);
    t.meta.store(v.value_size | (v.tombstone ? kTombstoneBit : 0), std::memory_order_relaxed);
    t.older.store(chain, std::memory_order_relaxed);
    seq.store(s + 2, std::memory_order_release);
  }

  static std::size_t state_offset(int height, std::size_t key_size) {
    const std::size_t end =
        sizeof(inode) + sizeof(std::atomic<inode*>) * static_cast<std::size_t>(height) + key_size;
    return (end + alignof(state) - 1) / alignof(state) * alignof(state);
  }
  static std::size_t size_for(int height, std::size_t key_size) {
    return state_offset(height, key_size) + sizeof(state);
  }
  std::size_t size() const { return size_for(height, key_size); }

  // Builds an entry in `memory` (size_for(height, key.size()) bytes) whose newest version is
  // `v`, with no older ones.
  static inode* make(void* memory, int height, std::string_view key, const version_ref& v) {
    auto* n = new (memory) inode();
    n->key_size = static_cast<std::uint16_t>(key.size());
    n->height = static_cast<std::uint8_t>(height);
    new (&n->st()) state();
    n->publish(v, nullptr);
    n->set_tail_pnode(v.pnode);
    for (int i = 0; i < height; ++i) new (&n->links()[i]) std::atomic<inode*>(nullptr);
    if (!key.empty()) {
      std::memcpy(reinterpret_cast<char*>(n->links() + height), key.data(), key.size());
    }
    return n;
  }

 private:
  // The entry is followed by `height` successors, then the key bytes, then its state.
  std::atomic<inode*>* links() const {
    return reinterpret_cast<std::atomic<inode*>*>(const_cast<inode*>(this) + 1);
  }
  state& st() const {
    return *reinterpret_cast<state*>(reinterpret_cast<char*>(const_cast<inode*>(this)) +
                                     state_offset(height, key_size));
  }
};
static_assert(sizeof(inode) == 16);
static_assert(sizeof(inode) % alignof(std::atomic<inode*>) == 0);

// Three-way bytewise comparison, eight bytes at a time (searches compare a key at every node
// they pass, and the library memcmp call costs more than the comparison of a short key).
inline int compare_keys(std::string_view a, std::string_view b) {
  const std::size_t n = a.size() < b.size() ? a.size() : b.size();
  const char* x = a.data();
  const char* y = b.data();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t u, v;
    std::memcpy(&u, x + i, 8);
    std::memcpy(&v, y + i, 8);
    if (u != v) {
      if constexpr (std::endian::native == std::endian::little) {
        u = __builtin_bswap64(u);
        v = __builtin_bswap64(v);
      }
      return u < v ? -1 : 1;
    }
  }
  for (; i < n; ++i) {
    const auto c = static_cast<unsigned char>(x[i]);
    const auto d = static_cast<unsigned char>(y[i]);
    if (c != d) return c < d ? -1 : 1;
  }
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

inline bool same_key(std::string_view a, std::string_view b) {
  return a.size() == b.size() && compare_keys(a, b) == 0;
}

class skiplist {
 public:
  // REQUIRES: head_memory holds inode::size_for(kMaxHeight, 0) bytes.
  explicit skiplist(void* head_memory, std::uint64_t head_pnode)
      : head_(inode::make(head_memory, kMaxHeight, {}, {0, head_pnode, 0, false})) {}

  inode* head() const { return head_; }

  // One above the highest level any entry is linked at (at least 1). Searches start below
  // it: the levels above hold only the head. It only grows.
  int height() const { return height_.load(std::memory_order_relaxed); }

  // Neighbours of `key` at every level: preds[i] is the last entry before it, succs[i] the
  // first at or after it (nullptr: the end). succs[0] is the key's own entry if it has one.
  void locate(std::string_view key, inode** preds, inode** succs) const {
    inode* pred = head_;
    const int top = height();
    for (int level = kMaxHeight - 1; level >= top; --level) {
      preds[level] = head_;
      succs[level] = nullptr;
    }
    for (int level = top - 1; level >= 0; --level) {
      inode* curr = next_prefetched(pred, level);
      while (curr != nullptr && compare_keys(curr->key(), key) < 0) {
        pred = curr;
        curr = next_prefetched(pred, level);
      }
      preds[level] = pred;
      succs[level] = curr;
    }
  }

  // The first entry whose key is at or after `key`, or nullptr.
  inode* seek(std::string_view key) const {
    inode* pred = head_;
    inode* curr = nullptr;
    for (int level = height() - 1; level >= 0; --level) {
      curr = next_prefetched(pred, level);
      while (curr != nullptr && compare_keys(curr->key(), key) < 0) {
        pred = curr;
        curr = next_prefetched(pred, level);
      }
    }
    return curr;
  }

  // The entry of `key`, or nullptr.
  inode* find(std::string_view key) const {
    inode* n = seek(key);
    return n != nullptr && same_key(n->key(), key) ? n : nullptr;
  }

  // The last entry whose key is below `key` (head_ if none).
  inode* last_below(std::string_view key) const {
    inode* pred = head_;
    for (int level = height() - 1; level >= 0; --level) {
      inode* curr = next_prefetched(pred, level);
      while (curr != nullptr && compare_keys(curr->key(), key) < 0) {
        pred = curr;
        curr = next_prefetched(pred, level);
      }
    }
    return pred;
  }

  // The last entry (head_ if empty).
  inode* last() const {
    inode* pred = head_;
    for (int level = height() - 1; level >= 0; --level) {
      for (inode* curr = pred->load_next(level); curr != nullptr; curr = pred->load_next(level)) {
        pred = curr;
      }
    }
    return pred;
  }

  // Links `n` at every level of its height. preds come from locate() and are hints above
  // level 0: the walk goes on from them (from a fresh locate if one was removed since).
  // REQUIRES: the combiner lock; preds[0] is n's predecessor and is not removed.
  void insert(inode* n, inode** preds) {
    raise_height(n->height);
    for (int level = 1; level < n->height; ++level) {
      if (preds[level]->removed) {
        inode* succs[kMaxHeight];
        locate(n->key(), preds, succs);
        break;
      }
    }
    for (int level = 0; level < n->height; ++level) {
      inode* pred = preds[level];
      for (inode* c = pred->load_next(level);
           level > 0 && c != nullptr && compare_keys(c->key(), n->key()) < 0;
           c = pred->load_next(level)) {
        pred = c;
      }
      n->next(level).store(pred->load_next(level), std::memory_order_relaxed);
      pred->next(level).store(n, std::memory_order_release);
    }
  }

  // Unlinks `n` from every level; readers standing on it walk on (invariant (2)). Returns
  // its predecessor at level 0. REQUIRES: the combiner lock.
  inode* remove(inode* n) {
    inode* preds[kMaxHeight];
    inode* succs[kMaxHeight];
    locate(n->key(), preds, succs);
    for (int level = n->height - 1; level >= 0; --level) {
      if (preds[level]->load_next(level) == n) {
        preds[level]->next(level).store(n->load_next(level), std::memory_order_release);
      }
    }
    n->removed = true;
    return preds[0];
  }

  // Bulk building, for recovery: appends entries in key order. REQUIRES: single thread,
  // entries arrive sorted. Call finish_build() at the end.
  void append(inode* n) {
    if (build_tail_[0] == nullptr) {
      for (auto& t : build_tail_) t = head_;
    }
    raise_height(n->height);
    for (int level = 0; level < n->height; ++level) {
      build_tail_[level]->next(level).store(n, std::memory_order_relaxed);
      build_tail_[level] = n;
    }
  }
  void finish_build() { std::atomic_thread_fence(std::memory_order_release); }

 private:
  // pred's successor at `level`. A search compares that successor next (one cache miss), and
  // if the successor is not before its target it goes down to pred's successor one level
  // below (another). Both are known now, so the second line is requested while the first is
  // compared: the two misses overlap instead of following each other.
  static inode* next_prefetched(const inode* pred, int level) {
    inode* n = pred->load_next(level);
    if (level > 0) {
      if (inode* below = pred->next_relaxed(level - 1); below != nullptr && below != n) {
        __builtin_prefetch(below);
      }
    }
    return n;
  }

  void raise_height(int h) {
    int seen = height_.load(std::memory_order_relaxed);
    while (seen < h && !height_.compare_exchange_weak(seen, h, std::memory_order_relaxed)) {
    }
  }

  inode* head_;
  std::atomic<int> height_{1};
  inode* build_tail_[kMaxHeight] = {};
};

}  // namespace flintkv::internal
