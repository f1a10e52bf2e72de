// Validation and repair of a store's persistent state: what DB::Open's recovery and
// DB::Check share. Validation reads the root, walks the whole persistent list checking every
// word and every node's checksum, and has the allocator check every node's block; it writes
// nothing. Only once all of it passed does recovery repair what a crash left (repair()), so a
// refused open, like a check, leaves the file as it was.
//
// Thread safety: single-threaded: recovery runs before the engine is shared; Check on a pool
// it opened itself.
// Invariants (what validate() guarantees when it returns OK):
//  (1) The root's words are intact, its format is this layout's (or the store is blank, and
//      then the heap was never used).
//  (2) Every node the walk keeps or drops has intact words and checksum, lies in the heap,
//      and occupies a block whose chunk tag describes a block of its size. A link newer than
//      the root's `fenced` version (layout invariant (3)) is followed only to a whole node
//      of the version it names; otherwise (a sync put's node torn by the crash, or its
//      link durable before its version word) the walk follows the link's `prior`, which a
//      crash cannot have torn, and the node is dropped unread. Older links name whole nodes,
//      or the store is damaged.
//  (3) The list is ordered by (key ascending, version descending), strictly among the nodes
//      it keeps; a node it drops (the uncommitted marker, or a version above commit_version
//      of an unfinished batch or weak window) counts as newer than every version, and the
//      dropped nodes of a key may come in any order among themselves (a weak window's
//      version words are durable in any order). The walk also stops after more nodes than
//      the heap can hold. Every walk is bounded.
//  (4) visitor.kept() was called for each node of a completed write, in list order.
// Persistence (repair; initialise() lays out a new store with its own fences):
//  (1) Placement metadata left in the image is cleared first (not persisted: it is a hint).
//  (2) Nodes of an unfinished batch get the uncommitted marker and every run of unfinished
//      nodes is linked around: written back, then one fence.
//  (3) Then batch_mode is cleared, written back and fenced. A crash anywhere in between leaves
//      an image that validates and repairs to the same store (EngineRecoveryCrashTest).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flintkv/internal/index.hpp"
#include "flintkv/internal/layout.hpp"
#include "flintkv/internal/mode.hpp"
#include "flintkv/internal/packed_tier.hpp"
#include "flintkv/options.hpp"
#include "flintkv/status.hpp"

namespace flintkv::internal {

// What recovery and Check need of the pool. Implemented by storage<Policy> (storage.hpp).
template <class S>
concept recovery_storage = requires(S& s, const S& cs, node_offset off, std::size_t n) {
  { s.root_area() } -> std::same_as<void*>;
  { cs.pointer(off) } -> std::same_as<void*>;
  { cs.contains(off, n) } -> std::same_as<bool>;
  { cs.heap_bytes() } -> std::convertible_to<std::uint64_t>;
  s.mark_live(off, n);
  { s.finish_recovery() } -> std::same_as<Status>;
  { cs.untouched() } -> std::same_as<bool>;
  { cs.path() } -> std::convertible_to<std::string>;
  s.pool();
  s.heap();
  s.epochs();
};

// The packed tier's nodes: a 16-byte key with a 64-byte value takes about 77 bytes in them
// (docs/engine-design.md, "The packed tier"). Recorded in the tier's root: a store written
// with another size is refused (packed_tier::recover).
inline constexpr std::size_t kTierNodeBytes = 4096;

template <class Policy, class Mode>
class recovery {
  using io = durable<Policy, Mode>;
  using node = pnode<Policy>;
  using root_t = root<Policy>;

 public:
  using tier_t = packed_tier<Policy, Mode>;

  struct found {
    std::uint64_t format = kFormatBlank;
    node_offset head{0};
    std::uint64_t versions = 0, keys = 0, live_keys = 0, uncommitted = 0;
    // Of committed nodes, the root's commit_version and its lease: the version the engine
    // goes on from (no version at or below it is assigned again).
    std::uint64_t newest_version = 0;
    bool batch_in_progress = false;
    // The packed tier, recovered (its blocks marked live); null for a blank store or one of
    // format 3, which has none yet.
    std::unique_ptr<tier_t> tier;
  };

  // The writes recovery makes once the store validated.
  struct plan {
    struct around {
      node_offset pred, succ;
      std::uint64_t succ_version;
    };
    std::vector<around> link_around;
    std::vector<node_offset> dead;   // nodes of an unfinished batch: marked uncommitted
    std::vector<node_offset> reset;  // nodes with placement metadata in the pool
    bool reset_root = false;
    bool clear_batch = false;
  };

  // Validates the store in `s` and feeds the index builder: visitor.head(offset) once, then
  // visitor.kept(offset, key, version, tombstone, value_size) per node of a completed write.
  // Writes nothing. Errors: Corruption naming the place (offset, and the key where known);
  // InvalidArgument for a store of another layout version; NoSpace when out of DRAM.
  template <recovery_storage Storage, class Visitor>
  static Status validate(Storage& s, Visitor&& visitor, found* out, plan* repairs) {
    root_t& r = *static_cast<root_t*>(s.root_area());
    auto bad = [&](std::string_view what, std::uint64_t offset, const std::string& why) {
      return Status::Corruption(s.path() + ": " + std::string(what) + " at offset " +
                                std::to_string(offset) + ": " + why);
    };
    const std::uint64_t root_offset =
        static_cast<std::uint64_t>(static_cast<char*>(s.root_area()) -
                                   static_cast<char*>(s.pointer(node_offset{0})));
    auto root_at = [&](const void* field) {
      return root_offset + static_cast<std::uint64_t>(static_cast<const char*>(field) -
                                                      reinterpret_cast<const char*>(&r));
    };
    out->format = read(r.format).bits;
    if (r.format.needs_reset()) repairs->reset_root = true;
    if (out->format == kFormatBlank || out->format == kFormatInitialising) {
      if (Status st = s.finish_recovery(); !st.ok()) return st;
      if (out->format == kFormatBlank && !s.untouched()) {
        return bad("the root's format word", root_at(&r.format),
                   "0 (a store never initialised), but the heap has blocks in use: the root "
                   "is damaged");
      }
      return Status::OK();
    }
    if (out->format != kFormat && out->format != kFormatV3) {
      if (out->format == kFormatV2) {
        return Status::InvalidArgument(
            s.path() + ": a store of layout format 2 (an earlier FlintKV); this build reads "
            "format " + std::to_string(kFormatVersion));
      }
      if (out->format < 16) {
        return Status::InvalidArgument(
            s.path() + ": a store of layout format " + std::to_string(out->format) +
            " (an earlier FlintKV); this build reads format " + std::to_string(kFormatVersion));
      }
      return bad("the root's format word", root_at(&r.format),
                 "damaged (" + std::to_string(out->format) + ")");
    }

    // The root's other words.
    for (const auto* w : {&r.commit_version, &r.batch_mode, &r.fenced, &r.lease}) {
      if (w->needs_reset()) repairs->reset_root = true;
    }
    if (r.head.needs_reset()) repairs->reset_root = true;
    if (out->format == kFormat && r.tier.needs_reset()) repairs->reset_root = true;
    const stored_version commit =
        read_version_word(read(r.commit_version), in_root(word_field::commit_version));
    if (commit.kind != version_kind::committed) {
      return bad("the root's commit_version", root_at(&r.commit_version), "damaged word");
    }
    const word63 batch = read(r.batch_mode);
    if (batch != kBatchIdle && batch != kBatchActive) {
      return bad("the root's batch_mode", root_at(&r.batch_mode),
                 "damaged word " + std::to_string(batch.bits));
    }
    out->batch_in_progress = batch == kBatchActive;
    const stored_version fenced = read_version_word(read(r.fenced), in_root(word_field::fenced));
    if (fenced.kind != version_kind::committed) {
      return bad("the root's fenced version", root_at(&r.fenced), "damaged word");
    }
    const stored_version lease = read_version_word(read(r.lease), in_root(word_field::lease));
    if (lease.kind != version_kind::committed) {
      return bad("the root's version lease", root_at(&r.lease), "damaged word");
    }
    out->newest_version = std::max(commit.version, lease.version);
    const auto head = read_offset_word(read(r.head), in_root(word_field::head));
    if (!head || !s.contains(*head, node::size_for(0, 0))) {
      return bad("the root's head offset", root_at(&r.head), "damaged or outside the heap");
    }
    out->head = *head;

    // The head sentinel: a node with no key, version 0.
    const node* h = static_cast<const node*>(s.pointer(*head));
    if (read(h->sizes) != sizes_word(*head, {}, {}, 0, 0) ||
        read(h->version) != version_word(0, in_node(*head, word_field::version))) {
      return bad("the head node", head->value, "damaged size or version word");
    }
    if (needs_reset(*h)) repairs->reset.push_back(*head);
    s.mark_live(*head, node::size_for(0, 0));
    visitor.head(*head);
    std::optional<link_words> from = read_link(h, *head);
    if (!from) return bad("the head node", head->value, "damaged successor, prior or link version");

    // The list. Bounded twice: the order is strict (no cycle), and no more nodes than fit.
    const std::uint64_t max_nodes = s.heap_bytes() / kNodeAlignment;
    std::uint64_t count = 0;
    node_offset prev_off = *head;  // the last node kept (or the head)
    bool skipping = false;         // the nodes since prev_off were of unfinished writes
    std::string_view prev_key;     // of the previous node, kept or not
    std::uint64_t prev_rank = 0;   // its version; a node dropped ranks above all
    std::string_view kept_key;     // of the last node kept
    std::optional<node_offset> off = from->next;
    bool trusted = false;  // `off` is a prior: named by a link that was durable before
    // Where the node the walk stands on is, for a message (once count counts it); made only
    // for a message: a string per node would cost a tenth of the walk.
    auto after = [&] {
      return count == 1 ? std::string("the first node")
                        : "the node after key '" + printable(prev_key) + "'";
    };
    while (off->value != 0) {
      if (++count > max_nodes) {
        return bad("node", off->value, "the list has more nodes than the heap can hold");
      }
      if (!trusted && from->version > fenced.version &&
          !whole(s, *off, from->version)) {
        // A link the last fences may not have covered, to a node that is not the one it
        // was written for: the write did not complete. Its predecessor's prior names the
        // node that followed before it.
        ++out->uncommitted;
        skipping = true;
        off = from->prior;
        trusted = true;
        continue;
      }
      trusted = false;
      if (!s.contains(*off, node::header_size())) {
        return bad("node", off->value, after() + " lies outside the heap");
      }
      const node* n = static_cast<const node*>(s.pointer(*off));
      const word63 sizes = read(n->sizes);
      const std::size_t ks = key_size_of(sizes), vs = value_size_of(sizes);
      const bool tombstone = (flags_of(sizes) & kTombstone) != 0;
      if (ks == 0 || ks > kMaxKeySize || vs > kMaxValueSize ||
          (flags_of(sizes) & ~std::uint64_t{kTombstone}) != 0 || (tombstone && vs != 0) ||
          !s.contains(*off, node::size_for(ks, vs))) {
        return bad("node", off->value,
                   after() + ": damaged size word " + std::to_string(sizes.bits));
      }
      const std::string_view key(n->body(), ks);
      const stored_version version =
          read_version_word(read(n->version), in_node(*off, word_field::version));
      if (version.kind == version_kind::damaged) {
        return bad("node", off->value, "key '" + printable(key) + "': damaged version word");
      }
      const bool uncommitted = version.kind == version_kind::uncommitted ||
                               (out->batch_in_progress && version.version > commit.version);
      // A node the walk drops is not checked against its checksum: the attach rewrites the
      // size word with the checksum of the version, and where the two words lie in two lines
      // (adjacent counters) a crash inside a batch or a weak window may keep the version
      // word and lose the size word; the window's fence makes both durable before it closes.
      if (!uncommitted &&
          node_check_of(sizes) !=
              node_checksum(*off, sizes.bits, key, {n->body() + ks, vs}, version.version)) {
        return bad("node", off->value,
                   after() + ": checksum mismatch (its key or value is damaged)");
      }
      const std::optional<link_words> link = read_link(n, *off);
      if (!link) {
        return bad("node", off->value,
                   "key '" + printable(key) + "': damaged successor, prior or link version");
      }
      const node_offset next = link->next;
      // The walk is a pointer chase through the pool: request the successor's line now, so
      // that its miss overlaps the work on this node. (Only offsets inside the heap: the
      // pointer arithmetic of a garbage offset is itself undefined.)
      if (s.contains(next, node::header_size())) __builtin_prefetch(s.pointer(next));
      const std::uint64_t rank = uncommitted ? UINT64_MAX : version.version;
      if (count > 1) {
        const int c = compare_keys(prev_key, key);
        if (c > 0 || (c == 0 && prev_rank <= rank && prev_rank != UINT64_MAX)) {
          return bad("node", off->value,
                     "key '" + printable(key) + "': list out of order after key '" +
                         printable(prev_key) + "' (a cycle or a misplaced node)");
        }
      }
      if (needs_reset(*n)) repairs->reset.push_back(*off);
      if (uncommitted) {
        ++out->uncommitted;
        if (version.kind == version_kind::committed) repairs->dead.push_back(*off);
        skipping = true;
      } else {
        if (skipping) {
          repairs->link_around.push_back({prev_off, *off, version.version});
          skipping = false;
        }
        if (out->versions == 0 || compare_keys(kept_key, key) != 0) {
          ++out->keys;  // the first kept node of a key is its newest committed version
          if (!tombstone) ++out->live_keys;
        }
        kept_key = key;
        ++out->versions;
        out->newest_version = std::max(out->newest_version, version.version);
        s.mark_live(*off, node::size_for(ks, vs));
        visitor.kept(*off, key, version.version, tombstone, vs);
        prev_off = *off;
      }
      prev_key = key;
      prev_rank = rank;
      from = link;
      off = next;
    }
    if (skipping) repairs->link_around.push_back({prev_off, node_offset{0}, 0});
    repairs->clear_batch = out->batch_in_progress;

    // The packed tier (format 4): its root block, then its runs, whose blocks it marks.
    if (out->format == kFormat) {
      const auto tier = read_offset_word(read(r.tier), in_root(word_field::tier));
      if (!tier || tier->value % kNodeAlignment != 0 ||
          !s.contains(*tier, sizeof(typename tier_t::root))) {
        return bad("the root's tier offset", root_at(&r.tier), "damaged or outside the heap");
      }
      s.mark_live(*tier, sizeof(typename tier_t::root));
      if (Status st = open_tier(s, *tier, true, out); !st.ok()) return st;
    }
    return s.finish_recovery();
  }

  // Gives a store of format 3 its packed tier: the tier's root block, written and fenced,
  // then the root's tier word, then the format word, each fenced. A crash in between leaves
  // a store of format 3 (its block unreached, freed by the next recovery), which the next
  // read-write open upgrades again. REQUIRES: validate() returned OK for it (the allocator
  // is recovered), and the pool is writable.
  template <recovery_storage Storage>
  static Status upgrade(Storage& s, found* out) {
    root_t& r = *static_cast<root_t*>(s.root_area());
    node_offset tier{0};
    if (Status st = make_tier(s, &tier); !st.ok()) return st;
    io::put(r.tier, offset_word(tier, in_root(word_field::tier)));
    io::flush(r.tier);
    io::fence();
    io::put(r.format, word63{kFormat});
    io::flush(r.format);
    io::fence();
    out->format = kFormat;
    return open_tier(s, tier, false, out);
  }

  // Makes the writes `repairs` lists. REQUIRES: validate() returned OK for the same image,
  // and the pool is writable.
  template <recovery_storage Storage>
  static void repair(Storage& s, const plan& repairs) {
    root_t& r = *static_cast<root_t*>(s.root_area());
    auto at = [&](node_offset off) { return static_cast<node*>(s.pointer(off)); };
    if (repairs.reset_root) {
      r.format.reset_metadata();
      r.head.reset_metadata();
      r.commit_version.reset_metadata();
      r.batch_mode.reset_metadata();
      r.fenced.reset_metadata();
      r.lease.reset_metadata();
      r.tier.reset_metadata();
    }
    for (node_offset off : repairs.reset) {
      node* n = at(off);
      n->next.reset_metadata();
      n->prior.reset_metadata();
      n->link_version.reset_metadata();
      n->version.reset_metadata();
      n->sizes.reset_metadata();
    }
    for (node_offset off : repairs.dead) mark_uncommitted(s, off);
    for (const auto& a : repairs.link_around) link_around(s, a.pred, a.succ, a.succ_version);
    if (!repairs.dead.empty() || !repairs.link_around.empty()) io::fence();
    if (repairs.clear_batch) {
      io::put(r.batch_mode, kBatchIdle);
      io::flush(r.batch_mode);
      io::fence();
    }
  }

  // The list's words as every writer of the list (attach, reclamation, repair) writes them.
  // The successor recorded in the node at `off`; 0 if its word does not check itself.
  template <recovery_storage Storage>
  static node_offset successor(const Storage& s, node_offset off) {
    const node* n = static_cast<const node*>(s.pointer(off));
    const auto next = read_offset_word(io::get(n->next), in_node(off, word_field::next));
    return next ? *next : node_offset{0};
  }
  // The committed version of the node at `off` (0 for the list's end or a word that does
  // not check itself: what a link to it records as its link_version).
  template <recovery_storage Storage>
  static std::uint64_t version_of(const Storage& s, node_offset off) {
    if (off.value == 0) return 0;
    const node* n = static_cast<const node*>(s.pointer(off));
    const stored_version v =
        read_version_word(io::get(n->version), in_node(off, word_field::version));
    return v.kind == version_kind::committed ? v.version : 0;
  }
  // Points the node at `from` to `to`, whose version is `version`: written back, not fenced.
  template <recovery_storage Storage>
  static void link(Storage& s, node_offset from, node_offset to, std::uint64_t version) {
    io::flush(store_link(s, from, to, version));
  }
  // Points the node at `from` to `to` and returns its successor word, whose line holds the
  // three words stored: neither written back nor fenced (a weak write's link, written back
  // when its window closes). In line order (layout invariant (2)): prior = the successor
  // replaced (durably linked, so a crash that tears `to` leaves a way past it), then
  // link_version = `version`, then the successor.
  template <recovery_storage Storage>
  static const flit::persist<stored_offset, Policy>& store_link(Storage& s, node_offset from,
                                                                node_offset to,
                                                                std::uint64_t version) {
    node* n = static_cast<node*>(s.pointer(from));
    if (io::keeps_prior) {
      io::put(n->prior, offset_word(successor(s, from), in_node(from, word_field::prior)));
    }
    io::put(n->link_version, version_word(version, in_node(from, word_field::link_version)));
    io::put(n->next, offset_word(to, in_node(from, word_field::next)));
    return n->next;
  }
  // Recovery's link past dropped nodes: prior and successor = `to` first, then its version.
  // Every prefix of these stores leaves a walk that reaches `to`: while link_version still
  // names the dropped node's version, `to` is not that version and the walk takes the prior.
  template <recovery_storage Storage>
  static void link_around(Storage& s, node_offset from, node_offset to, std::uint64_t version) {
    node* n = static_cast<node*>(s.pointer(from));
    io::put(n->prior, offset_word(to, in_node(from, word_field::prior)));
    io::put(n->next, offset_word(to, in_node(from, word_field::next)));
    io::put(n->link_version, version_word(version, in_node(from, word_field::link_version)));
    io::flush(n->next);
  }
  // A new node's link words before it is linked: successor and prior `to`, link version 0
  // (its successor is durably linked: no crash tears it).
  static void init_link(node* n, node_offset at, node_offset to) {
    io::put(n->next, offset_word(to, in_node(at, word_field::next)));
    io::put(n->prior, offset_word(to, in_node(at, word_field::prior)));
    io::put(n->link_version, version_word(0, in_node(at, word_field::link_version)));
  }
  // Gives the node at `off` its uncommitted marker (it is no version any more): written
  // back, not fenced.
  template <recovery_storage Storage>
  static void mark_uncommitted(Storage& s, node_offset off) {
    node* n = static_cast<node*>(s.pointer(off));
    io::put(n->version, uncommitted_word(in_node(off, word_field::version)));
    io::flush(n->version);
  }

  // Lays out an empty store: the format word says "initialising" before the head is
  // allocated, and this layout's format only once the rest is durable. REQUIRES: the pool
  // is writable; its root is blank or says "initialising".
  template <recovery_storage Storage>
  static Status initialise(Storage& s, found* out) {
    root_t& r = *static_cast<root_t*>(s.root_area());
    io::put(r.format, word63{kFormatInitialising});
    io::flush(r.format);
    io::fence();
    node_offset head{0};
    if (Status st = s.allocate(node::size_for(0, 0), &head); !st.ok()) return st;
    node* h = static_cast<node*>(s.pointer(head));
    init_link(h, head, node_offset{0});
    io::put(h->version, version_word(0, in_node(head, word_field::version)));
    io::put(h->sizes, sizes_word(head, {}, {}, 0, 0));
    io::flush(h, node::size_for(0, 0));
    io::put(r.head, offset_word(head, in_root(word_field::head)));
    io::put(r.commit_version, version_word(0, in_root(word_field::commit_version)));
    io::put(r.batch_mode, kBatchIdle);
    io::put(r.fenced, version_word(0, in_root(word_field::fenced)));
    io::put(r.lease, version_word(0, in_root(word_field::lease)));
    node_offset tier{0};
    if (Status st = make_tier(s, &tier); !st.ok()) return st;
    io::put(r.tier, offset_word(tier, in_root(word_field::tier)));
    io::flush(&r, sizeof(root_t));
    io::fence();
    io::put(r.format, word63{kFormat});  // last: the store is initialised
    io::flush(r.format);
    io::fence();
    out->format = kFormat;
    return open_tier(s, tier, false, out);
  }

  // Allocates an empty packed tier's root block and writes it back (the caller fences).
  template <recovery_storage Storage>
  static Status make_tier(Storage& s, node_offset* out) {
    if (Status st = s.allocate(sizeof(typename tier_t::root), out); !st.ok()) return st;
    tier_t::make_empty(s.pool(), static_cast<typename tier_t::root*>(s.pointer(*out)),
                       kTierNodeBytes);
    return Status::OK();
  }

  // The packed tier whose root block is at `at`, recovered (marking its blocks live if
  // `mark_live`) into out->tier; its errors name the pool.
  template <recovery_storage Storage>
  static Status open_tier(Storage& s, node_offset at, bool mark_live, found* out) {
    out->tier = std::make_unique<tier_t>(s.pool(), s.heap(),
                                         static_cast<typename tier_t::root*>(s.pointer(at)),
                                         kTierNodeBytes, &s.epochs());
    if (Status st = out->tier->recover(mark_live); !st.ok()) {
      out->tier.reset();
      const std::string message = s.path() + ": " + st.message();
      return st.IsCorruption() ? Status::Corruption(message) : Status::InvalidArgument(message);
    }
    return Status::OK();
  }

  // A key as messages show it: printable ASCII as is, other bytes as \xNN, at most 64 bytes.
  static std::string printable(std::string_view key) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < key.size() && i < 64; ++i) {
      const auto c = static_cast<unsigned char>(key[i]);
      if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
        out.push_back(static_cast<char>(c));
      } else {
        out += "\\x";
        out.push_back(hex[c >> 4]);
        out.push_back(hex[c & 15]);
      }
    }
    if (key.size() > 64) out += "...";
    return out;
  }

 private:
  // Validation reads the image as it is: what a crash left is what memory holds now, so
  // there is nothing for a p-load to write back (and a p-load of a word tagged in the image
  // would issue a needless write-back).
  template <class Word>
  static auto read(const Word& w) {
    return w.load(flit::volatile_, flit::private_);
  }
  static bool needs_reset(const node& n) {
    return n.next.needs_reset() || n.prior.needs_reset() || n.link_version.needs_reset() ||
           n.version.needs_reset() || n.sizes.needs_reset();
  }

  // A node's link words, each checked.
  struct link_words {
    node_offset next, prior;
    std::uint64_t version;  // link_version: the version of the node `next` names
  };
  static std::optional<link_words> read_link(const node* n, node_offset at) {
    const auto next = read_offset_word(read(n->next), in_node(at, word_field::next));
    const auto prior = read_offset_word(read(n->prior), in_node(at, word_field::prior));
    const stored_version v =
        read_version_word(read(n->link_version), in_node(at, word_field::link_version));
    if (!next || !prior || v.kind != version_kind::committed) return std::nullopt;
    return link_words{*next, *prior, v.version};
  }

  // True if the node at `off` is whole and committed at `version`: what a link of that
  // version was written for. Reads only inside the heap; reports nothing.
  template <recovery_storage Storage>
  static bool whole(const Storage& s, node_offset off, std::uint64_t version) {
    if (!s.contains(off, node::header_size())) return false;
    const node* n = static_cast<const node*>(s.pointer(off));
    const stored_version v = read_version_word(read(n->version), in_node(off, word_field::version));
    if (v.kind != version_kind::committed || v.version != version) return false;
    const word63 sizes = read(n->sizes);
    const std::size_t ks = key_size_of(sizes), vs = value_size_of(sizes);
    if (ks == 0 || ks > kMaxKeySize || vs > kMaxValueSize ||
        !s.contains(off, node::size_for(ks, vs))) {
      return false;
    }
    // Its link words share the version word's line and were stored before it: if the
    // version is there, they are too, and damage to them is reported by the walk.
    return node_check_of(sizes) == node_checksum(off, sizes.bits, {n->body(), ks},
                                                 {n->body() + ks, vs}, version);
  }
};

}  // namespace flintkv::internal
