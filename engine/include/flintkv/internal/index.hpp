// The volatile index: a skiplist in DRAM over every version of every key, ordered by key
// ascending (bytewise), then version descending, mirroring the persistent list.
//
// Thread safety: level 0 is written only by the combiner (under its lock) and by recovery;
// levels 1 and up are linked lock-free with CAS by the thread that promotes its own node.
// Readers need no lock. Nodes are never unlinked while the index lives, so a reader may hold
// any node it reached.
// Invariants:
//  (1) A node is linked at level i only if it is linked at level i - 1.
//  (2) A node's key, version, height and persistent offset are immutable once it is linked
//      at level 0 (the link is a release store; traversals load with acquire).
//  (3) Each node has exactly `height` successor pointers (nodes are sized to their height).
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string_view>

namespace flintkv::internal {

inline constexpr int kMaxHeight = 32;  // enough for 2^32 versions at branching factor 2

struct inode {
  std::uint64_t version;
  std::uint64_t pnode;  // offset of the persistent node
  std::uint32_t value_size;
  std::uint32_t key_size;
  std::uint8_t height;
  bool tombstone;

  std::string_view key() const {
    return {reinterpret_cast<const char*>(links() + height), key_size};
  }
  std::atomic<inode*>& next(int level) { return links()[level]; }
  inode* load_next(int level) const { return links()[level].load(std::memory_order_acquire); }
  // For prefetching only: the pointer may not be dereferenced.
  inode* next_relaxed(int level) const { return links()[level].load(std::memory_order_relaxed); }

  static std::size_t size_for(int height, std::size_t key_size) {
    return sizeof(inode) + sizeof(std::atomic<inode*>) * static_cast<std::size_t>(height) +
           key_size;
  }
  std::size_t size() const { return size_for(height, key_size); }

  // Builds a node in `memory` (size_for(height, key.size()) bytes).
  static inode* make(void* memory, int height, std::string_view key, std::uint64_t pnode,
                     bool tombstone) {
    auto* n = new (memory) inode();
    n->version = 0;
    n->pnode = pnode;
    n->value_size = 0;
    n->key_size = static_cast<std::uint32_t>(key.size());
    n->height = static_cast<std::uint8_t>(height);
    n->tombstone = tombstone;
    for (int i = 0; i < height; ++i) new (&n->links()[i]) std::atomic<inode*>(nullptr);
    if (!key.empty()) {
      std::memcpy(reinterpret_cast<char*>(n->links() + height), key.data(), key.size());
    }
    return n;
  }

 private:
  // The node is followed by `height` successors, then the key bytes.
  std::atomic<inode*>* links() const {
    return reinterpret_cast<std::atomic<inode*>*>(const_cast<inode*>(this) + 1);
  }
};
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

// Orders (key, version) positions: key ascending, then version descending.
inline bool before(const inode* n, std::string_view key, std::uint64_t version) {
  int c = compare_keys(n->key(), key);
  return c < 0 || (c == 0 && n->version > version);
}

class skiplist {
 public:
  // REQUIRES: head_memory holds inode::size_for(kMaxHeight, 0) bytes.
  explicit skiplist(void* head_memory, std::uint64_t head_pnode)
      : head_(inode::make(head_memory, kMaxHeight, {}, head_pnode, false)) {}

  inode* head() const { return head_; }

  // One above the highest level any node is linked at (at least 1). Searches start below it:
  // the levels above hold only the head. It only grows; a reader that sees an older value
  // starts lower, which skips no node (every node is linked at level 0).
  int height() const { return height_.load(std::memory_order_relaxed); }

  // Neighbours of the position (key, version) at every level: preds[i] is the last node
  // before it, succs[i] the first at or after it (nullptr: the end). With version =
  // UINT64_MAX this is where a new version of `key` goes: before every existing version.
  void locate(std::string_view key, std::uint64_t version, inode** preds, inode** succs) const {
    inode* pred = head_;
    const int top = height();
    for (int level = kMaxHeight - 1; level >= top; --level) {
      preds[level] = head_;  // a hint only: promote walks on from it
      succs[level] = nullptr;
    }
    for (int level = top - 1; level >= 0; --level) {
      inode* curr = next_prefetched(pred, level);
      while (curr != nullptr && before(curr, key, version)) {
        pred = curr;
        curr = next_prefetched(pred, level);
      }
      preds[level] = pred;
      succs[level] = curr;
    }
  }

  // The first node at or after (key, version) at level 0, or nullptr.
  inode* seek(std::string_view key, std::uint64_t version) const {
    inode* pred = head_;
    inode* curr = nullptr;
    for (int level = height() - 1; level >= 0; --level) {
      curr = next_prefetched(pred, level);
      while (curr != nullptr && before(curr, key, version)) {
        pred = curr;
        curr = next_prefetched(pred, level);
      }
    }
    return curr;
  }

  // The last node whose key is below `key` (head_ if none).
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

  // The last node of the list (head_ if empty).
  inode* last() const {
    inode* pred = head_;
    for (int level = height() - 1; level >= 0; --level) {
      for (inode* curr = pred->load_next(level); curr != nullptr; curr = pred->load_next(level)) {
        pred = curr;
      }
    }
    return pred;
  }

  // Links `n` at level 0 after `pred`. REQUIRES: the combiner lock; n->next(0) is already
  // pred's successor; n->version is assigned.
  static void link_leaf(inode* pred, inode* n) { pred->next(0).store(n, std::memory_order_release); }

  // Links `n` into levels 1 .. height-1, lock-free. `preds` are hints from locate
  // and are refreshed when stale. REQUIRES: n is linked at level 0.
  void promote(inode* n, inode** preds) {
    raise_height(n->height);
    for (int level = 1; level < n->height; ++level) {
      while (true) {
        inode* pred = preds[level];
        // The hint may be stale: walk forward from pred to n's position at this level.
        for (inode* c = pred->load_next(level); c != nullptr && before(c, n->key(), n->version);
             c = pred->load_next(level)) {
          pred = c;
        }
        inode* succ = pred->load_next(level);
        n->next(level).store(succ, std::memory_order_relaxed);
        if (pred->next(level).compare_exchange_strong(succ, n, std::memory_order_release,
                                                     std::memory_order_relaxed)) {
          break;
        }
        preds[level] = pred;
      }
    }
  }

  // Bulk building, for recovery: appends nodes in list order. REQUIRES: single thread,
  // nodes arrive sorted. Call finish_build() at the end.
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

  // Raised before a node is linked above level 0.
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
