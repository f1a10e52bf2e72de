// An ordered index in DRAM: a B+tree from keys (byte strings, bytewise order, 0 to 64 KiB,
// the empty key included) to entries the caller owns. Leaves hold up to kLeafSlots entries
// with each key's first 16 bytes inline, so that a search compares words in one node per
// level instead of following one entry per comparison; leaves are linked both ways, so a
// scan reads a leaf's entries from one node and an ordered neighbour is one step away.
//
// A slot holds the key's first 16 bytes, zero-padded, as two big-endian words, and its size.
// Two keys whose padded prefixes differ are ordered by them; with equal prefixes, a key of
// at most 16 bytes is a prefix of the other and orders by size; only two longer keys with
// the same first 16 bytes need the rest, read through KeyOf (a leaf) or the separator's
// owned copy (an inner node).
//
// Thread safety: insert, erase and build by one writer at a time (the caller serializes
// them, as the combiner lock does in the engine); readers (find, lower_bound, last_below,
// first, last, following) take no lock and run pinned in the epochs that Memory::retire
// uses, concurrently with the writer. Each node has a version word: the writer makes it odd
// before it changes the node and even (and larger) after. A reader reads a node's version,
// its fields (all atomic, relaxed), then the version again, and starts over from the root
// when it changed; it dereferences a pointer read from a node only after that check.
// Invariants:
//  (1) Keys in a leaf are strictly increasing; every key under child i of an inner node is
//      at or above separator i (i >= 1) and below separator i + 1. Slot 0's separator is
//      unused: the node's own lower bound applies.
//  (2) The leaves, linked by next from the first and by prev from the last, are the leaves
//      of the tree in key order; no node in the tree is empty, and a root inner node has at
//      least two children (an emptied node is removed, a root with one child replaced by it).
//  (3) A writer makes odd, at once, every node whose fields it is about to change, and makes
//      them even again only after all of them are written: a change that spans nodes (a
//      split, a removal) is seen by a reader whole or not at all. A node removed from the
//      tree stays odd (obsolete) until it is freed.
//  (4) A node's range only shrinks by its own split, which changes it; a reader that reached
//      a leaf for a key, with its parent unchanged from before it read the leaf's version
//      until after, has the leaf whose range holds the key for as long as the leaf's
//      version does not change.
//  (5) A removed node, and a separator copy whose separator was removed, go to
//      Memory::retire: pinned readers may still hold them.
// Persistence: none. The tree is rebuilt from the persistent list at recovery (build()).
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "allocators/epoch.hpp"
#include "allocators/node_allocator.hpp"
#include "flintkv/internal/btree_node.hpp"
#include "flintkv/internal/keys.hpp"

namespace flintkv::internal {

// What the tree needs of its memory:
//  (1) allocate(bytes): bytes aligned to 16 (a cache line for a multiple of 64 is better),
//      or nullptr or std::bad_alloc when there is none.
//  (2) free(p, bytes): gives back at once memory that no reader has seen. Does not throw.
//  (3) retire(p, bytes): gives it back once no reader pinned now can hold it. Does not
//      throw.
//  (4) reserve(bytes, n): makes the calling thread's next n allocate(bytes) cheap (no new
//      pages to fault in, no lock), where it can. A hint: allocate works without it. Does
//      not throw.
template <class M>
concept btree_memory = requires(M m, void* p, std::size_t bytes, std::uint32_t n) {
  { m.allocate(bytes) } -> std::same_as<void*>;
  m.free(p, bytes);
  m.retire(p, bytes);
  m.reserve(bytes, n);
};

// Memory from a node_allocator, retired through an epoch_domain: the engine's DRAM for the
// index (storage.hpp) as a btree_memory. Both outlive the tree.
struct epoch_dram {
  alloc::node_allocator* nodes;
  alloc::epoch_domain* epochs;

  void* allocate(std::size_t bytes) { return nodes->allocate(bytes); }
  void free(void* p, std::size_t bytes) { nodes->deallocate(p, bytes); }
  void reserve(std::size_t bytes, std::uint32_t n) noexcept { (void)nodes->reserve(bytes, n); }
  // The epochs keep a list of what they hold, in DRAM too: without DRAM for it, the node
  // stays allocated (a reader may hold it).
  void retire(void* p, std::size_t bytes) noexcept {
    try {
      epochs->retire(*nodes, p, bytes);
    } catch (const std::bad_alloc&) {
    }
  }
};

// How the writer publishes a change:
//  (1) kVersioned: nodes' versions are bumped as invariant (3) says. Only a test turns it
//      off, to show that the readers' checks catch the torn reads that follow.
//  (2) TEST_mid_split(): called by the writer in the middle of a leaf split, with the
//      split leaf rewritten and its parent not yet. A no-op outside tests.
template <class P>
concept btree_protocol = requires {
  { P::kVersioned } -> std::convertible_to<bool>;
  P::TEST_mid_split();
};

// The protocol of every build.
struct btree_versions {
  static constexpr bool kVersioned = true;
  static void TEST_mid_split() noexcept {}
};

// A leaf slot keeps, beside its entry, the 32-bit tag that TagOf gave the entry when it
// was inserted (or built): the tree never reads it, and hands it to following() and
// at_or_after() readers with the entry, who may use it without reading the entry (the
// engine keeps there where the key's newest node was, for a scan's read-ahead).
template <class Entry, class KeyOf, class TagOf, class Memory, class Protocol = btree_versions>
  requires btree_memory<Memory> && btree_protocol<Protocol> &&
           requires(const Entry* e) {
             { KeyOf{}(e) } -> std::convertible_to<std::string_view>;
             { TagOf{}(e) } -> std::convertible_to<std::uint32_t>;
           }
class btree {
 public:
  static constexpr std::size_t kInlineKey = btree_layout::kInlineKey;
  static constexpr std::size_t kLeafSlots = btree_layout::kLeafSlots;
  static constexpr std::size_t kInnerSlots = btree_layout::kInnerSlots;
  // build() fills nodes to about 90%, so the first inserts after it do not split them all.
  static constexpr std::size_t kBuildLeafFill = 28;
  static constexpr std::size_t kBuildInnerFill = 22;
  static constexpr std::size_t kBuildPrefetch = 16;  // entries build() reads ahead
  // A node splits only when full, and each of its halves, or the one-child node an append
  // split starts, must gain at least 11 children before it splits again: a level splits at
  // most about 1/8 as often as the one below, so 24 levels are out of reach of any count of
  // inserts.
  static constexpr int kMaxDepth = 24;
  // Nodes reserve() readies: a leaf and an inner node for each of two inserts (a pass of
  // the engine's combiner serves one insert per writer thread).
  static constexpr std::uint32_t kReservedNodes = 4;

  explicit btree(Memory memory) : memory_(std::move(memory)) {}
  btree(const btree&) = delete;
  btree& operator=(const btree&) = delete;
  // Retires every node: readers still pinned may finish.
  ~btree() {
    if (node* root = root_.load(std::memory_order_relaxed)) give_back_subtree(root, seen::maybe);
  }

  // ---- Readers. REQUIRES: pinned in the epochs of Memory::retire. ----

  // The entry of `key`, or nullptr.
  Entry* find(std::string_view key) const {
    return answer(key, [](const leaf* l, std::uint64_t v, std::size_t n, std::size_t pos,
                          const probe& p, Entry** e) {
      int c = 1;
      if (pos < n && !compare_leaf(l, v, pos, p, &c)) return false;
      *e = c == 0 ? l->slots[pos].ptr.load(std::memory_order_relaxed) : nullptr;
      return validate(l, v);
    });
  }

  // The least entry whose key is at or above `key`, or nullptr.
  Entry* lower_bound(std::string_view key) const {
    return answer(key, [](const leaf* l, std::uint64_t v, std::size_t n, std::size_t pos,
                          const probe&, Entry** e) {
      return pos < n ? at(l, v, pos, e) : beside(l, v, side::next, e);
    });
  }

  // The greatest entry whose key is below `key`, or nullptr.
  Entry* last_below(std::string_view key) const { return last_below(key, nullptr); }

  // Where a reader found that a key goes: its leaf, the leaf's version then, and the slot.
  // While the leaf keeps that version it is in the tree and unchanged, so the key still
  // goes there (invariant (4)). Valid as long as the reader that took it stays pinned.
  struct place {
    const void* leaf = nullptr;
    std::uint64_t version = 0;
    std::size_t pos = 0;
  };

  // last_below(key), and in *where (if not nullptr) where `key` goes, for insert(e, where).
  Entry* last_below(std::string_view key, place* where) const {
    return answer(key, [where](const leaf* l, std::uint64_t v, std::size_t n, std::size_t pos,
                               const probe&, Entry** e) {
      if (where != nullptr) *where = place{l, v, pos};
      // The answer and the entry after it, which a caller walking on from it reads next:
      // their first two lines (an entry of a short key is 80 bytes at 16-byte alignment, so
      // its state sits on the second), requested together, so that their misses overlap.
      if (pos < n) prefetch_entry(l->slots[pos].ptr.load(std::memory_order_relaxed));
      if (pos > 0) prefetch_entry(l->slots[pos - 1].ptr.load(std::memory_order_relaxed));
      return pos > 0 ? at(l, v, pos - 1, e) : beside(l, v, side::prev, e);
    });
  }

  // The entry of the least key, or nullptr.
  Entry* first() const { return edge(side::prev); }
  // The entry of the greatest key, or nullptr.
  Entry* last() const { return edge(side::next); }

  // An entry as following() and at_or_after() give it: with its key's size, its key's
  // first kInlineKey bytes (zero-padded, as btree_layout::prefix_of gives them) and its
  // tag, read from its slot.
  struct ahead {
    Entry* entry;
    std::uint32_t key_size;
    std::uint32_t tag;
    btree_layout::prefix pre;
  };

  // following()'s and at_or_after()'s default on_leaf: nothing.
  struct no_leaf_action {
    void operator()(std::size_t, std::size_t) const {}
  };

  // Up to `n` entries with keys above `key`, in key order, into `out`; returns how many.
  // The leaves after the first are read one by one, and a change to one of them ends the
  // list early. Every entry returned was in the tree at some time during the call, and
  // none is left out: an entry that is in the tree throughout the call, with a key above
  // `key` and below the last one returned, is returned. (Each leaf is read whole at one
  // version. Entries move between leaves only when a leaf splits, and then to the new leaf
  // on its right, which changes the split leaf's version; a leaf is removed only when it
  // is empty. So the next leaf of a leaf read at one version holds, once read at one
  // version itself, every entry that stayed in the tree between them.)
  // `on_leaf(from, to)` is called as soon as out[from .. to) are read from one leaf and
  // found consistent, before the next leaf is read: a caller can request what it will
  // read of those entries while this call waits on the next leaf.
  template <class OnLeaf = no_leaf_action>
  std::size_t following(std::string_view key, ahead* out, std::size_t n,
                        OnLeaf&& on_leaf = {}) const {
    return collect<true>(key, out, n, on_leaf);
  }
  // The same from `key` on: the entry of `key` first if it has one (a seek, and the
  // entries a scan from it will read, in one descent).
  template <class OnLeaf = no_leaf_action>
  std::size_t at_or_after(std::string_view key, ahead* out, std::size_t n,
                          OnLeaf&& on_leaf = {}) const {
    return collect<false>(key, out, n, on_leaf);
  }

  // Entries in the tree. Exact for the writer; for others, a recent count.
  std::size_t size() const { return size_.load(std::memory_order_relaxed); }
  // Levels: 0 when empty, 1 for a single leaf.
  int height() const {
    const node* root = root_.load(std::memory_order_acquire);
    return root == nullptr ? 0 : static_cast<int>(root->level) + 1;
  }
  // Bytes of DRAM the tree holds: nodes and separator copies (0 when empty).
  std::size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

  // Makes the nodes that the next inserts' splits are likely to take (a leaf and an inner
  // node for each of a few inserts) ready on the calling thread, so that a writer that
  // serializes inserts under a lock of its own, and calls this before taking it, allocates
  // under the lock without faulting in memory. Any thread may call it, at any time.
  void reserve() noexcept { memory_.reserve(sizeof(leaf), kReservedNodes); }

  // ---- The writer. REQUIRES: the one writer (the caller serializes these). ----

  // Adds `e`, whose key is not in the tree. Returns false, with the tree unchanged, if
  // memory ran out.
  [[nodiscard]] bool insert(Entry* e) {
    const probe p = btree_layout::probe_of(KeyOf{}(e));
    node* root = root_.load(std::memory_order_relaxed);
    if (root == nullptr) {
      leaf* l = new_leaf();
      if (l == nullptr) return false;
      store(l->slots[0], leaf_slot(p, e));
      l->count.store(1, std::memory_order_relaxed);
      root_.store(l, std::memory_order_release);
      size_.store(size() + 1, std::memory_order_relaxed);
      return true;
    }
    path_step path[kMaxDepth];
    int depth = 0;
    std::size_t pos = 0;
    leaf* l = descend_writer(p, path, &depth, &pos);
    const std::size_t n = count_of(l);
    if (n < kLeafSlots) {
      put(l, n, pos, leaf_slot(p, e));
    } else if (!split_insert(path, depth, l, pos, leaf_slot(p, e))) {
      return false;
    }
    size_.store(size() + 1, std::memory_order_relaxed);
    return true;
  }

  // insert(e), without a descent where `where` (from last_below of e's key, by a reader
  // still pinned) still holds: its leaf unchanged since and not full. REQUIRES: as insert.
  [[nodiscard]] bool insert(Entry* e, const place& where) {
    if (where.leaf != nullptr) {
      leaf* l = static_cast<leaf*>(const_cast<void*>(where.leaf));
      const std::size_t n = count_of(l);
      if (version_of(l) == where.version && n < kLeafSlots) {
        const probe p = btree_layout::probe_of(KeyOf{}(e));
        put(l, n, where.pos, leaf_slot(p, e));
        size_.store(size() + 1, std::memory_order_relaxed);
        return true;
      }
    }
    return insert(e);
  }

  // Removes `e`. An emptied leaf is unlinked and retired, and so is every inner node that
  // loses its last child. REQUIRES: `e` is in the tree.
  void erase(const Entry* e) {
    const probe p = btree_layout::probe_of(KeyOf{}(e));
    path_step path[kMaxDepth];
    int depth = 0;
    std::size_t pos = 0;
    leaf* l = descend_writer(p, path, &depth, &pos);
    const std::size_t n = count_of(l);
    if (n > 1) {
      lock(l);
      for (std::size_t i = pos; i + 1 < n; ++i) store(l->slots[i], load(l->slots[i + 1]));
      l->count.store(static_cast<std::uint32_t>(n - 1), std::memory_order_relaxed);
      unlock(l);
    } else {
      remove_leaf(path, depth, l);
    }
    size_.store(size() - 1, std::memory_order_relaxed);
  }

  // Loads `n` entries, sorted by key with no key twice, into the empty tree, filling nodes
  // to about 90%. Returns false, with the tree still empty, if memory ran out. REQUIRES:
  // the tree is empty and not shared yet (or the one writer, and no reader).
  [[nodiscard]] bool build(Entry* const* sorted, std::size_t n) {
    if (n == 0) return true;
    std::vector<node*> level;
    std::vector<flat_child> bounds;  // bounds[i]: the separator below level[i] (i >= 1)
    try {
      build_leaves(sorted, n, &level, &bounds);
      while (level.size() > 1) build_level(&level, &bounds);
    } catch (const std::bad_alloc&) {
      for (node* x : level) give_back_subtree(x, seen::never);
      for (const flat_child& f : bounds) {
        if (f.copy != nullptr) free_unseen(const_cast<char*>(f.copy), f.size);
      }
      return false;
    }
    root_.store(level[0], std::memory_order_release);
    size_.store(n, std::memory_order_relaxed);
    return true;
  }

  // For tests: the first broken invariant (1, 2, 3) or miscount of size() and bytes(),
  // described, or "" if none. REQUIRES: no writer.
  std::string check() const {
    const node* root = root_.load(std::memory_order_acquire);
    if (root == nullptr) {
      return size() == 0 && bytes() == 0 ? ""
                                         : "empty, with size " + std::to_string(size()) +
                                               " and bytes " + std::to_string(bytes());
    }
    if (root->level != 0 && count_of(root) < 2) return "the root inner node has one child";
    std::vector<const leaf*> leaves;
    std::size_t entries = 0, held = 0;
    if (std::string e = check_node(root, root->level, nullptr, nullptr, &leaves, &entries, &held);
        !e.empty()) {
      return e;
    }
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      const leaf* want_prev = i == 0 ? nullptr : leaves[i - 1];
      const leaf* want_next = i + 1 == leaves.size() ? nullptr : leaves[i + 1];
      if (leaves[i]->prev.load(std::memory_order_relaxed) != want_prev ||
          leaves[i]->next.load(std::memory_order_relaxed) != want_next) {
        return "leaf " + std::to_string(i) + " of " + std::to_string(leaves.size()) +
               ": its prev or next is not its neighbour in key order";
      }
      if (i > 0 && compare_keys(KeyOf{}(leaves[i - 1]->slots[count_of(leaves[i - 1]) - 1].ptr),
                                KeyOf{}(leaves[i]->slots[0].ptr)) >= 0) {
        return "leaf " + std::to_string(i) + " starts at or below the end of the one before";
      }
    }
    if (entries != size()) {
      return "size() is " + std::to_string(size()) + ", the leaves hold " + std::to_string(entries);
    }
    if (held != bytes()) {
      return "bytes() is " + std::to_string(bytes()) + ", the nodes and copies take " +
             std::to_string(held);
    }
    return "";
  }

 private:
  // ---- Layout (btree_node.hpp) ----

  using prefix = btree_layout::prefix;
  template <class P>
  using slot = btree_layout::slot<P>;
  using node = btree_layout::node;
  using leaf = btree_layout::leaf<Entry>;
  using inner = btree_layout::inner;
  template <class P>
  using flat = btree_layout::flat<P>;
  using flat_slot = flat<Entry*>;
  using flat_child = flat<node*>;
  using probe = btree_layout::probe;

  // Entry e's slot, p the probe of its key.
  static flat_slot leaf_slot(const probe& p, Entry* e) {
    return {p.pre, p.size, e, nullptr, static_cast<std::uint32_t>(TagOf{}(e))};
  }

  struct path_step {
    inner* node;
    std::size_t child;  // the index of the child the descent took
  };

  static void pause() { __builtin_ia32_pause(); }

  // The writer's side of the versions (invariant 3).
  static void lock(node* n) {
    if constexpr (Protocol::kVersioned) {
      n->version.store(version_of(n) + 1, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_release);
    }
  }
  static void unlock(node* n) {
    if constexpr (Protocol::kVersioned) {
      n->version.store(version_of(n) + 1, std::memory_order_release);
    }
  }
  // ---- Reading nodes. Each returns false when the node changed (the caller restarts). ----

  // Sign of (probe - key in slot i of leaf l, read at version v).
  static bool compare_leaf(const leaf* l, std::uint64_t v, std::size_t i, const probe& p, int* c) {
    const slot<Entry*>& s = l->slots[i];
    *c = compare_prefixed(p.pre, p.size, prefix_in(s), s.size.load(std::memory_order_relaxed));
    if (*c != btree_layout::kTie) return true;
    const Entry* e = s.ptr.load(std::memory_order_relaxed);
    if (!validate(l, v)) return false;  // e is an entry of the tree: readable
    *c = btree_layout::compare_rest(p.key, KeyOf{}(e));
    return true;
  }
  // Sign of (probe - separator i of inner node in, read at version v).
  static bool compare_separator(const inner* in, std::uint64_t v, std::size_t i, const probe& p,
                                int* c) {
    const slot<node*>& s = in->slots[i];
    const std::uint32_t size = s.size.load(std::memory_order_relaxed);
    *c = compare_prefixed(p.pre, p.size, prefix_in(s), size);
    if (*c != btree_layout::kTie) return true;
    const char* copy = in->copies[i].load(std::memory_order_relaxed);
    if (!validate(in, v)) return false;  // copy holds `size` bytes
    *c = btree_layout::compare_rest(p.key, {copy, size});
    return true;
  }

  // The first of slots [lo, hi) whose key is at or above the probe (Upper: above it), by
  // compare(i, &sign of (probe - key i)), which returns false when the node changed.
  template <bool Upper, class Compare>
  static bool bisect(std::size_t lo, std::size_t hi, Compare compare, std::size_t* pos) {
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      int c;
      if (!compare(mid, &c)) return false;
      if (c > 0 || (Upper && c == 0)) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    *pos = lo;
    return true;
  }

  // The first of l's n slots at or above the probe (Upper: above it).
  template <bool Upper>
  static bool search_leaf(const leaf* l, std::uint64_t v, std::size_t n, const probe& p,
                          std::size_t* pos) {
    return bisect<Upper>(
        0, n, [&](std::size_t i, int* c) { return compare_leaf(l, v, i, p, c); }, pos);
  }

  // The child whose range holds the probe: the last with a separator at or below it.
  static bool search_inner(const inner* in, std::uint64_t v, std::size_t n, const probe& p,
                           std::size_t* child) {
    std::size_t above;  // the first separator above the probe
    auto compare = [&](std::size_t i, int* c) { return compare_separator(in, v, i, p, c); };
    if (!bisect<true>(1, n, compare, &above)) return false;
    *child = above - 1;
    return true;
  }

  // Which child a descent takes.
  static auto by_key(const probe& p) {
    return [&p](const inner* in, std::uint64_t v, std::size_t n, std::size_t* child) {
      return search_inner(in, v, n, p, child);
    };
  }
  enum class side { prev, next };
  static auto by_side(side s) {
    return [s](const inner*, std::uint64_t, std::size_t n, std::size_t* child) {
      *child = s == side::prev || n == 0 ? 0 : n - 1;
      return true;
    };
  }

  enum class descent { leaf, empty, restart };

  // From the root to a leaf, each child taken as `pick` says; the leaf, its version and its
  // slot count. Invariant (4): each child's version is read while its parent is unchanged.
  template <class Pick>
  descent descend(Pick pick, const leaf** out, std::uint64_t* out_version,
                  std::size_t* count) const {
    const node* n = root_.load(std::memory_order_acquire);
    if (n == nullptr) return descent::empty;
    std::uint64_t v;
    if (!read_version(n, &v) || root_.load(std::memory_order_relaxed) != n) return descent::restart;
    while (n->level != 0) {
      const auto* in = static_cast<const inner*>(n);
      std::size_t i;
      if (!pick(in, v, count_of(in), &i)) return descent::restart;
      const node* c = in->slots[i].ptr.load(std::memory_order_relaxed);
      if (!validate(in, v)) return descent::restart;
      prefetch_node_lines(c);
      std::uint64_t cv;
      if (!read_version(c, &cv) || !validate(in, v)) return descent::restart;
      n = c;
      v = cv;
    }
    *out = static_cast<const leaf*>(n);
    *out_version = v;
    *count = count_of(n);
    return descent::leaf;
  }

  // The answer of a query at `key`: `in_leaf(l, v, n, pos, probe, &entry)` answers from
  // the leaf whose range holds the key (read at version v, with n slots, pos the first at
  // or above the key), or returns false when the leaf changed, and the query starts over.
  template <class InLeaf>
  Entry* answer(std::string_view key, InLeaf in_leaf) const {
    const probe p = btree_layout::probe_of(key);
    for (;; pause()) {
      const leaf* l;
      std::uint64_t v;
      std::size_t n, pos;
      const descent d = descend(by_key(p), &l, &v, &n);
      if (d == descent::empty) return nullptr;
      Entry* e;
      if (d == descent::leaf && search_leaf<false>(l, v, n, p, &pos) &&
          in_leaf(l, v, n, pos, p, &e)) {
        return e;
      }
    }
  }

  // Requests all of a node's lines at once: the search in it then waits on about one miss,
  // not one per step of its bisection.
  static void prefetch_node_lines(const node* n) { prefetch_lines(n, sizeof(leaf)); }
  // The lines of a leaf's header and first `slots` slots, which collect reads.
  static void prefetch_slot_lines(const leaf* l, std::size_t slots) {
    const auto* end = reinterpret_cast<const char*>(l->slots + std::min(slots, kLeafSlots));
    prefetch_lines(l, static_cast<std::size_t>(end - reinterpret_cast<const char*>(l)));
  }
  static void prefetch_lines(const void* from, std::size_t bytes) {
    const char* p = static_cast<const char*>(from);
    for (std::size_t i = 0; i < bytes; i += 64) __builtin_prefetch(p + i);
  }

  // Entry i of l, read at version v.
  static bool at(const leaf* l, std::uint64_t v, std::size_t i, Entry** e) {
    *e = l->slots[i].ptr.load(std::memory_order_relaxed);
    return validate(l, v);
  }

  // The entry beside leaf l (read at version v) on side s: the last of its previous leaf or
  // the first of its next, nullptr at the end. Read while l is unchanged, so the neighbour
  // is l's neighbour when its entry is read.
  static bool beside(const leaf* l, std::uint64_t v, side s, Entry** e) {
    const leaf* b = (s == side::prev ? l->prev : l->next).load(std::memory_order_relaxed);
    if (!validate(l, v)) return false;
    if (b == nullptr) {
      *e = nullptr;
      return true;
    }
    std::uint64_t bv;
    if (!read_version(b, &bv)) return false;
    const std::size_t n = count_of(b);
    if (n == 0) return false;  // only a torn read: a leaf in the tree is never empty
    *e = b->slots[s == side::prev ? n - 1 : 0].ptr.load(std::memory_order_relaxed);
    return validate(b, bv) && validate(l, v);
  }

  Entry* edge(side s) const {
    for (;; pause()) {
      const leaf* l;
      std::uint64_t v;
      std::size_t n;
      const descent d = descend(by_side(s), &l, &v, &n);
      if (d == descent::empty) return nullptr;
      Entry* e;
      if (d == descent::leaf && n > 0 && at(l, v, s == side::prev ? 0 : n - 1, &e)) return e;
    }
  }

  // following() (Upper) and at_or_after().
  template <bool Upper, class OnLeaf>
  std::size_t collect(std::string_view key, ahead* out, std::size_t n, OnLeaf& on_leaf) const {
    if (n == 0) return 0;
    const probe p = btree_layout::probe_of(key);
    const leaf* l;
    std::uint64_t v;
    std::size_t count, pos;
    for (;; pause()) {
      const descent d = descend(by_key(p), &l, &v, &count);
      if (d == descent::empty) return 0;
      if (d == descent::restart || !search_leaf<Upper>(l, v, count, p, &pos)) continue;
      std::size_t got = copy_entries(l, pos, count, out, n);
      const leaf* next = l->next.load(std::memory_order_relaxed);
      if (!validate(l, v)) continue;
      if (got > 0) on_leaf(0, got);
      while (got < n && next != nullptr) {
        l = next;
        prefetch_slot_lines(l, n - got);
        if (!read_version(l, &v)) break;
        count = count_of(l);
        const std::size_t more = copy_entries(l, 0, count, out + got, n - got);
        next = l->next.load(std::memory_order_relaxed);
        if (!validate(l, v)) break;
        if (more > 0) on_leaf(got, got + more);
        got += more;
      }
      return got;
    }
  }

  static std::size_t copy_entries(const leaf* l, std::size_t from, std::size_t count, ahead* out,
                                  std::size_t n) {
    std::size_t got = 0;
    for (std::size_t i = from; i < count && got < n; ++i) {
      const slot<Entry*>& s = l->slots[i];
      out[got++] = {s.ptr.load(std::memory_order_relaxed), s.size.load(std::memory_order_relaxed),
                    s.tag.load(std::memory_order_relaxed), prefix_in(s)};
    }
    return got;
  }

  // ---- The writer ----

  // The descent of insert and erase: the leaf whose range holds the probe, the path of
  // inner nodes taken, and in *pos the first slot at or above the probe.
  // Puts slot f at pos of leaf l, which holds n < kLeafSlots slots.
  void put(leaf* l, std::size_t n, std::size_t pos, const flat_slot& f) {
    lock(l);
    for (std::size_t i = n; i > pos; --i) store(l->slots[i], load(l->slots[i - 1]));
    store(l->slots[pos], f);
    l->count.store(static_cast<std::uint32_t>(n + 1), std::memory_order_relaxed);
    unlock(l);
  }

  leaf* descend_writer(const probe& p, path_step* path, int* depth, std::size_t* pos) const {
    node* n = root_.load(std::memory_order_relaxed);
    while (n->level != 0) {
      auto* in = static_cast<inner*>(n);
      std::size_t i = 0;
      (void)search_inner(in, version_of(in), count_of(in), p, &i);
      path[(*depth)++] = {in, i};
      n = in->slots[i].ptr.load(std::memory_order_relaxed);
    }
    auto* l = static_cast<leaf*>(n);
    (void)search_leaf<false>(l, version_of(l), count_of(l), p, pos);
    return l;
  }

  // Requests an entry's first two lines (a hint: `e` may be stale; prefetching never
  // faults).
  static void prefetch_entry(const Entry* e) {
    const char* p = reinterpret_cast<const char*>(e);
    __builtin_prefetch(p);
    __builtin_prefetch(p + 64);
  }

  void* allocate(std::size_t bytes) noexcept {
    void* m = nullptr;
    try {
      m = memory_.allocate(bytes);
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
    if (m != nullptr) {
      bytes_.store(bytes_.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
    }
    return m;
  }
  void release_bytes(std::size_t bytes) {
    bytes_.store(bytes_.load(std::memory_order_relaxed) - bytes, std::memory_order_relaxed);
  }
  void free_unseen(void* p, std::size_t bytes) {
    release_bytes(bytes);
    memory_.free(p, bytes);
  }
  void retire(void* p, std::size_t bytes) {
    release_bytes(bytes);
    memory_.retire(p, bytes);
  }
  static std::size_t node_bytes(const node* n) {
    return n->level == 0 ? sizeof(leaf) : sizeof(inner);
  }

  leaf* new_leaf() {
    void* m = allocate(sizeof(leaf));
    return m == nullptr ? nullptr : new (m) leaf();
  }
  inner* new_inner(std::uint32_t level) {
    void* m = allocate(sizeof(inner));
    if (m == nullptr) return nullptr;
    auto* in = new (m) inner();
    in->level = level;
    return in;
  }

  // Whether readers may hold memory the writer gives back.
  enum class seen { never, maybe };
  void give_back(void* p, std::size_t bytes, seen by) {
    if (by == seen::never) {
      free_unseen(p, bytes);
    } else {
      retire(p, bytes);
    }
  }

  // The subtree under n, with its separator copies: freed after a failed build (never
  // seen), retired by the destructor.
  void give_back_subtree(node* n, seen by) {
    if (n->level != 0) {
      auto* in = static_cast<inner*>(n);
      const std::size_t c = count_of(in);
      for (std::size_t i = 0; i < c; ++i) {
        give_back_subtree(in->slots[i].ptr.load(std::memory_order_relaxed), by);
        if (const char* copy = in->copies[i].load(std::memory_order_relaxed); i > 0 && copy) {
          give_back(const_cast<char*>(copy), in->slots[i].size.load(std::memory_order_relaxed), by);
        }
      }
    }
    give_back(n, node_bytes(n), by);
  }

  // The shortest separator between keys a < b: the shortest prefix of b above a.
  static std::string_view separator(std::string_view a, std::string_view b) {
    std::size_t i = 0;
    while (i < a.size() && a[i] == b[i]) ++i;
    return b.substr(0, i + 1);
  }

  // A separator as a child slot: its prefix and size, and a copy of its bytes when they
  // do not fit the slot (nullptr copy and false if there is no memory for it).
  bool separator_slot(std::string_view sep, flat_child* out) {
    *out = {btree_layout::prefix_of(sep), static_cast<std::uint32_t>(sep.size()), nullptr, nullptr};
    if (sep.size() <= kInlineKey) return true;
    void* m = allocate(sep.size());
    if (m == nullptr) return false;
    std::memcpy(m, sep.data(), sep.size());
    out->copy = static_cast<const char*>(m);
    return true;
  }

  void store_child(inner* in, std::size_t i, const flat_child& f) {
    store(in->slots[i], f);
    in->copies[i].store(f.copy, std::memory_order_relaxed);
  }
  flat_child load_child(const inner* in, std::size_t i) const {
    flat_child f = load(in->slots[i]);
    f.copy = in->copies[i].load(std::memory_order_relaxed);
    return f;
  }

  // Inserts `add` into the full leaf l at pos: l splits in two, and its parent takes the
  // new leaf, splitting in turn while full, up to a new root. Every node is allocated
  // first, so that running out of memory leaves the tree as it was. A key after every key
  // in the tree (an ascending load) is an append split: the full nodes stay full and the
  // new ones start with the key alone, so ascending inserts leave the tree packed instead
  // of half empty.
  bool split_insert(path_step* path, int depth, leaf* l, std::size_t pos, const flat_slot& add) {
    int splits = 0;  // inner nodes on the path that split too (the lowest ones)
    while (splits < depth && count_of(path[depth - 1 - splits].node) == kInnerSlots) ++splits;
    const bool new_root = splits == depth;

    flat_slot all[kLeafSlots + 1];
    for (std::size_t i = 0, j = 0; i <= kLeafSlots; ++i) {
      all[i] = i == pos ? add : load(l->slots[j++]);
    }
    const bool append = pos == kLeafSlots && l->next.load(std::memory_order_relaxed) == nullptr;
    const std::size_t left = append ? kLeafSlots : (kLeafSlots + 1) / 2;

    leaf* right = new_leaf();
    inner* siblings[kMaxDepth] = {};
    inner* root = nullptr;
    flat_child carry;
    const std::string_view sep = separator(KeyOf{}(all[left - 1].ptr), KeyOf{}(all[left].ptr));
    bool ok = right != nullptr && separator_slot(sep, &carry);
    for (int s = 0; ok && s < splits; ++s) {
      ok = (siblings[s] = new_inner(path[depth - 1 - s].node->level)) != nullptr;
    }
    if (ok && new_root) {
      ok = (root = new_inner(root_.load(std::memory_order_relaxed)->level + 1)) != nullptr;
    }
    if (!ok) {
      if (right != nullptr) free_unseen(right, sizeof(leaf));
      if (carry.copy != nullptr) free_unseen(const_cast<char*>(carry.copy), carry.size);
      for (inner* s : siblings) {
        if (s != nullptr) free_unseen(s, sizeof(inner));
      }
      if (root != nullptr) free_unseen(root, sizeof(inner));
      return false;
    }

    // The new leaf, not yet reachable.
    for (std::size_t i = left; i <= kLeafSlots; ++i) store(right->slots[i - left], all[i]);
    right->count.store(kLeafSlots + 1 - left, std::memory_order_relaxed);
    leaf* next = l->next.load(std::memory_order_relaxed);
    right->prev.store(l, std::memory_order_relaxed);
    right->next.store(next, std::memory_order_relaxed);

    // Invariant (3): every node that changes, odd before the first change.
    const int changed = new_root ? depth : splits + 1;  // inner nodes on the path that change
    lock(l);
    if (next != nullptr) lock(next);
    for (int d = depth - 1; d >= depth - changed; --d) lock(path[d].node);

    for (std::size_t i = 0; i < left; ++i) store(l->slots[i], all[i]);
    l->count.store(left, std::memory_order_relaxed);
    l->next.store(right, std::memory_order_relaxed);
    if (next != nullptr) next->prev.store(right, std::memory_order_relaxed);
    Protocol::TEST_mid_split();

    carry.ptr = right;
    for (int s = 0; s <= splits && s < depth; ++s) {
      const path_step& step = path[depth - 1 - s];
      if (s < splits) {
        carry = split_inner(step.node, step.child + 1, carry, siblings[s], append);
      } else {
        insert_child(step.node, step.child + 1, carry);
      }
    }
    if (new_root) {
      flat_child first{};
      first.ptr = root_.load(std::memory_order_relaxed);
      store_child(root, 0, first);
      store_child(root, 1, carry);
      root->count.store(2, std::memory_order_relaxed);
      root_.store(root, std::memory_order_release);
    }

    for (int d = depth - changed; d < depth; ++d) unlock(path[d].node);
    if (next != nullptr) unlock(next);
    unlock(l);
    return true;
  }

  // Puts `add` at slot i of in, which has room.
  void insert_child(inner* in, std::size_t i, const flat_child& add) {
    const std::size_t n = count_of(in);
    for (std::size_t j = n; j > i; --j) store_child(in, j, load_child(in, j - 1));
    store_child(in, i, add);
    in->count.store(static_cast<std::uint32_t>(n + 1), std::memory_order_relaxed);
  }

  // Puts `add` at slot i of the full node in, which keeps the lower half; `right` (new,
  // unreachable) takes the upper. Returns the separator between them, with `right`, for
  // the parent: its copy passes to the parent with it. In an append split (`add` goes
  // last), in keeps every child it had and `right` starts with `add` alone.
  flat_child split_inner(inner* in, std::size_t i, const flat_child& add, inner* right,
                         bool append) {
    flat_child all[kInnerSlots + 1];
    for (std::size_t j = 0, k = 0; j <= kInnerSlots; ++j) {
      all[j] = j == i ? add : load_child(in, k++);
    }
    const std::size_t left = append && i == kInnerSlots ? kInnerSlots : (kInnerSlots + 1) / 2;
    flat_child up = all[left];
    all[left] = {};
    all[left].ptr = up.ptr;
    for (std::size_t j = left; j <= kInnerSlots; ++j) store_child(right, j - left, all[j]);
    right->count.store(kInnerSlots + 1 - left, std::memory_order_relaxed);
    for (std::size_t j = 0; j < left; ++j) store_child(in, j, all[j]);
    in->count.store(left, std::memory_order_relaxed);
    up.ptr = right;
    return up;
  }

  // Unlinks the emptied leaf l and every ancestor left without children; the lowest
  // ancestor that keeps children loses one, and a root left with one child is replaced by
  // it, repeatedly (invariant 2). The removed nodes stay odd and are retired.
  void remove_leaf(path_step* path, int depth, leaf* l) {
    int empty = 0;  // ancestors on the path that lose their last child
    while (empty < depth && count_of(path[depth - 1 - empty].node) == 1) ++empty;
    leaf* prev = l->prev.load(std::memory_order_relaxed);
    leaf* next = l->next.load(std::memory_order_relaxed);
    // The lowest ancestor that keeps children (none if l is the root).
    inner* keeper = empty < depth ? path[depth - 1 - empty].node : nullptr;
    const std::size_t child = empty < depth ? path[depth - 1 - empty].child : 0;
    // If the keeper is the root and keeps one child: it, and each single-child node below
    // it, give way to the first node below with two children or more (or a leaf).
    inner* collapsed[kMaxDepth];
    int collapses = 0;
    node* new_root = nullptr;
    if (keeper != nullptr && keeper == root_.load(std::memory_order_relaxed) &&
        count_of(keeper) == 2) {
      collapsed[collapses++] = keeper;
      new_root = keeper->slots[1 - child].ptr.load(std::memory_order_relaxed);
      while (new_root->level != 0 && count_of(new_root) == 1) {
        collapsed[collapses++] = static_cast<inner*>(new_root);
        new_root = static_cast<inner*>(new_root)->slots[0].ptr.load(std::memory_order_relaxed);
      }
    }

    lock(l);
    if (prev != nullptr) lock(prev);
    if (next != nullptr) lock(next);
    for (int d = depth - 1; d >= depth - 1 - empty && d >= 0; --d) lock(path[d].node);
    for (int c = 1; c < collapses; ++c) lock(collapsed[c]);  // collapsed[0] is the keeper

    if (prev != nullptr) prev->next.store(next, std::memory_order_relaxed);
    if (next != nullptr) next->prev.store(prev, std::memory_order_relaxed);
    if (keeper != nullptr) remove_child(keeper, child);
    if (keeper == nullptr || collapses > 0) root_.store(new_root, std::memory_order_release);

    if (prev != nullptr) unlock(prev);
    if (next != nullptr) unlock(next);
    if (keeper != nullptr && collapses == 0) unlock(keeper);
    // l, the emptied ancestors and the replaced roots stay odd (invariant 3). None of them
    // owns a separator copy: a node with one child has none, and remove_child retired the
    // keeper's.
    retire(l, sizeof(leaf));
    for (int d = depth - 1; d > depth - 1 - empty; --d) retire(path[d].node, sizeof(inner));
    for (int c = 0; c < collapses; ++c) retire(collapsed[c], sizeof(inner));
  }

  // Removes child i of in (which has another): with it goes separator i, or for i = 0,
  // separator 1, which the new first child no longer needs.
  void remove_child(inner* in, std::size_t i) {
    const std::size_t n = count_of(in);
    const std::size_t gone = i == 0 ? 1 : i;
    if (const char* copy = in->copies[gone].load(std::memory_order_relaxed); copy != nullptr) {
      retire(const_cast<char*>(copy), in->slots[gone].size.load(std::memory_order_relaxed));
    }
    for (std::size_t j = i; j + 1 < n; ++j) store_child(in, j, load_child(in, j + 1));
    if (i == 0) {
      flat_child first{};
      first.ptr = in->slots[0].ptr.load(std::memory_order_relaxed);
      store_child(in, 0, first);
    }
    in->count.store(static_cast<std::uint32_t>(n - 1), std::memory_order_relaxed);
  }

  // ---- build() ----

  // Groups `n` items into nodes of at most `fill`, as evenly as possible: the size of group
  // g of `groups`.
  static std::size_t group_size(std::size_t n, std::size_t groups, std::size_t g) {
    return n / groups + (g < n % groups ? 1 : 0);
  }

  // The leaves of build(), linked, and the separator below each but the first. Throws
  // std::bad_alloc without memory, with what it made in *level and *bounds.
  void build_leaves(Entry* const* sorted, std::size_t n, std::vector<node*>* level,
                    std::vector<flat_child>* bounds) {
    const std::size_t groups = (n + kBuildLeafFill - 1) / kBuildLeafFill;
    level->reserve(groups);
    bounds->reserve(groups);
    leaf* prev = nullptr;
    std::string_view prev_key;
    for (std::size_t g = 0, at = 0; g < groups; ++g) {
      leaf* l = new_leaf();
      if (l == nullptr) throw std::bad_alloc();
      level->push_back(l);
      const std::size_t size = group_size(n, groups, g);
      for (std::size_t i = 0; i < size; ++i, ++at) {
        // The entries lie anywhere: their keys are requested ahead, the misses overlap.
        if (at + kBuildPrefetch < n) __builtin_prefetch(sorted[at + kBuildPrefetch]);
        const std::string_view key = KeyOf{}(sorted[at]);
        store(l->slots[i], leaf_slot(btree_layout::probe_of(key), sorted[at]));
        if (i == 0) {
          flat_child bound{};
          if (g > 0 && !separator_slot(separator(prev_key, key), &bound)) throw std::bad_alloc();
          bounds->push_back(bound);
        }
        prev_key = key;
      }
      l->count.store(static_cast<std::uint32_t>(size), std::memory_order_relaxed);
      l->prev.store(prev, std::memory_order_relaxed);
      if (prev != nullptr) prev->next.store(l, std::memory_order_relaxed);
      prev = l;
    }
  }

  // Replaces *level by the level above it: each new node takes the bounds of its children
  // but the first, whose bound becomes its own. Throws std::bad_alloc without memory,
  // with *level and *bounds as they were.
  void build_level(std::vector<node*>* level, std::vector<flat_child>* bounds) {
    const std::size_t n = level->size();
    const std::size_t groups = (n + kBuildInnerFill - 1) / kBuildInnerFill;
    std::vector<node*> up;
    std::vector<flat_child> up_bounds;
    const std::uint32_t height = (*level)[0]->level + 1;
    try {
      up.reserve(groups);
      up_bounds.reserve(groups);
      for (std::size_t g = 0, at = 0; g < groups; ++g) {
        inner* in = new_inner(height);
        if (in == nullptr) throw std::bad_alloc();
        up.push_back(in);
        const std::size_t size = group_size(n, groups, g);
        up_bounds.push_back((*bounds)[at]);
        for (std::size_t i = 0; i < size; ++i, ++at) {
          flat_child f = i == 0 ? flat_child{} : (*bounds)[at];
          f.ptr = (*level)[at];
          store_child(in, i, f);
        }
        in->count.store(static_cast<std::uint32_t>(size), std::memory_order_relaxed);
      }
    } catch (const std::bad_alloc&) {
      for (node* x : up) free_unseen(x, sizeof(inner));  // they own nothing yet
      throw;
    }
    *level = std::move(up);
    *bounds = std::move(up_bounds);
  }

  // The bytes of separator i of in.
  static std::string separator_bytes(const inner* in, std::size_t i) {
    const std::uint32_t size = in->slots[i].size.load(std::memory_order_relaxed);
    if (const char* copy = in->copies[i].load(std::memory_order_relaxed)) return {copy, size};
    const std::uint64_t words[2] = {in->slots[i].hi.load(std::memory_order_relaxed),
                                    in->slots[i].lo.load(std::memory_order_relaxed)};
    std::string s;
    for (std::uint32_t b = 0; b < size && b < kInlineKey; ++b) {
      s.push_back(static_cast<char>(words[b / 8] >> (56 - 8 * (b % 8))));
    }
    return s;
  }

  // check() for the subtree under n, whose keys lie in [lo, hi) (nullptr: unbounded).
  std::string check_node(const node* n, std::uint32_t level, const std::string* lo,
                         const std::string* hi, std::vector<const leaf*>* leaves,
                         std::size_t* entries, std::size_t* held) const {
    const std::string where = "level " + std::to_string(level) + " node " +
                              std::to_string(leaves->size()) + " leaves in";
    if (n->level != level) return where + ": has level " + std::to_string(n->level);
    if (version_of(n) % 2 != 0) return where + ": odd version (being written, or removed)";
    const std::size_t count = n->count.load(std::memory_order_relaxed);
    if (count == 0 || count > (level == 0 ? kLeafSlots : kInnerSlots)) {
      return where + ": holds " + std::to_string(count);
    }
    auto outside = [&](std::string_view k) {
      return (lo != nullptr && compare_keys(k, *lo) < 0) ||
             (hi != nullptr && compare_keys(k, *hi) >= 0);
    };
    if (level == 0) {
      const auto* l = static_cast<const leaf*>(n);
      *held += sizeof(leaf);
      *entries += count;
      leaves->push_back(l);
      for (std::size_t i = 0; i < count; ++i) {
        const Entry* e = l->slots[i].ptr.load(std::memory_order_relaxed);
        if (e == nullptr) return where + ": slot " + std::to_string(i) + " has no entry";
        const std::string_view k = KeyOf{}(e);
        const flat_slot f = load(l->slots[i]);
        if (f.pre != btree_layout::prefix_of(k) || f.size != k.size()) {
          return where + ": slot " + std::to_string(i) + "'s prefix or size is not its key's";
        }
        if (i > 0 && compare_keys(KeyOf{}(load(l->slots[i - 1]).ptr), k) >= 0) {
          return where + ": slot " + std::to_string(i) + " is not above the one before";
        }
        if (outside(k)) {
          return where + ": key of slot " + std::to_string(i) + " outside the separators";
        }
      }
      return "";
    }
    const auto* in = static_cast<const inner*>(n);
    *held += sizeof(inner);
    if (in->copies[0].load(std::memory_order_relaxed) != nullptr) {
      return where + ": slot 0 owns a copy";
    }
    std::vector<std::string> seps(count);
    for (std::size_t i = 1; i < count; ++i) {
      const std::uint32_t size = in->slots[i].size.load(std::memory_order_relaxed);
      const bool copied = in->copies[i].load(std::memory_order_relaxed) != nullptr;
      if (copied != (size > kInlineKey)) {
        return where + ": separator " + std::to_string(i) + " of " + std::to_string(size) +
               " bytes " + (copied ? "has" : "lacks") + " a copy";
      }
      if (copied) *held += size;
      seps[i] = separator_bytes(in, i);
      if (load(in->slots[i]).pre != btree_layout::prefix_of(seps[i])) {
        return where + ": separator " + std::to_string(i) + "'s prefix is not its bytes'";
      }
      if (outside(seps[i]) || (lo != nullptr && seps[i] == *lo) ||
          (i > 1 && compare_keys(seps[i - 1], seps[i]) >= 0)) {
        return where + ": separator " + std::to_string(i) + " out of order";
      }
    }
    for (std::size_t i = 0; i < count; ++i) {
      const node* c = in->slots[i].ptr.load(std::memory_order_relaxed);
      if (c == nullptr) return where + ": child " + std::to_string(i) + " missing";
      if (std::string e = check_node(c, level - 1, i == 0 ? lo : &seps[i],
                                     i + 1 == count ? hi : &seps[i + 1], leaves, entries, held);
          !e.empty()) {
        return e;
      }
    }
    return "";
  }

  Memory memory_;
  std::atomic<node*> root_{nullptr};  // nullptr when empty; written by the writer
  // Written at every insert: on a line of their own, so that the readers' line of root_
  // (every descent reads it) is not taken from their caches each time.
  alignas(64) std::atomic<std::size_t> size_{0};  // written by the writer
  std::atomic<std::size_t> bytes_{0};             // written by the writer
};

}  // namespace flintkv::internal
