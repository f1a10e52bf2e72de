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
//  (2) Every node reachable from the head has intact words and checksum, lies in the heap,
//      and occupies a block whose chunk tag describes a block of its size.
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
};

template <class Policy, class Mode>
class recovery {
  using io = durable<Policy, Mode>;
  using node = pnode<Policy>;
  using root_t = root<Policy>;

 public:
  struct found {
    std::uint64_t format = kFormatBlank;
    node_offset head{0};
    std::uint64_t versions = 0, keys = 0, live_keys = 0, uncommitted = 0;
    std::uint64_t newest_version = 0;  // of committed nodes and the root's commit_version
    bool batch_in_progress = false;
  };

  // The writes recovery makes once the store validated.
  struct plan {
    std::vector<std::pair<node_offset, node_offset>> link_around;  // predecessor, successor
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
    if (out->format != kFormat) {
      if (out->format < 16) {
        return Status::InvalidArgument(
            s.path() + ": a store of layout format " + std::to_string(out->format) +
            " (an earlier FlintKV); this build reads format " + std::to_string(kFormatVersion));
      }
      return bad("the root's format word", root_at(&r.format),
                 "damaged (" + std::to_string(out->format) + ")");
    }

    // The root's other words.
    for (const auto* w : {&r.commit_version, &r.batch_mode}) {
      if (w->needs_reset()) repairs->reset_root = true;
    }
    if (r.head.needs_reset()) repairs->reset_root = true;
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
    out->newest_version = commit.version;
    const auto head = read_offset_word(read(r.head), in_root(word_field::head));
    if (!head || !s.contains(*head, node::size_for(0, 0))) {
      return bad("the root's head offset", root_at(&r.head), "damaged or outside the heap");
    }
    out->head = *head;

    // The head sentinel: a node with no key, version 0.
    const node* h = static_cast<const node*>(s.pointer(*head));
    if (read(h->sizes) != sizes_word(*head, {}, {}, 0) ||
        read(h->version) != version_word(0, in_node(*head, word_field::version))) {
      return bad("the head node", head->value, "damaged size or version word");
    }
    if (needs_reset(*h)) repairs->reset.push_back(*head);
    s.mark_live(*head, node::size_for(0, 0));
    visitor.head(*head);

    // The list. Bounded twice: the order is strict (no cycle), and no more nodes than fit.
    const std::uint64_t max_nodes = s.heap_bytes() / kNodeAlignment;
    std::uint64_t count = 0;
    node_offset prev_off = *head;  // the last node kept (or the head)
    bool skipping = false;         // the nodes since prev_off were of unfinished writes
    std::string_view prev_key;     // of the previous node, kept or not
    std::uint64_t prev_rank = 0;   // its version; a node dropped ranks above all
    std::string_view kept_key;     // of the last node kept
    std::optional<node_offset> off =
        read_offset_word(read(h->next), in_node(*head, word_field::next));
    if (!off) return bad("the head node", head->value, "damaged successor offset");
    while (off->value != 0) {
      const std::string after =
          count == 0 ? "the first node" : "the node after key '" + printable(prev_key) + "'";
      if (++count > max_nodes) {
        return bad("node", off->value, "the list has more nodes than the heap can hold");
      }
      if (!s.contains(*off, node::header_size())) {
        return bad("node", off->value, after + " lies outside the heap");
      }
      const node* n = static_cast<const node*>(s.pointer(*off));
      const word63 sizes = read(n->sizes);
      const std::size_t ks = key_size_of(sizes), vs = value_size_of(sizes);
      const bool tombstone = (flags_of(sizes) & kTombstone) != 0;
      if (ks == 0 || ks > kMaxKeySize || vs > kMaxValueSize ||
          (flags_of(sizes) & ~std::uint64_t{kTombstone}) != 0 || (tombstone && vs != 0) ||
          !s.contains(*off, node::size_for(ks, vs))) {
        return bad("node", off->value, after + ": damaged size word " + std::to_string(sizes.bits));
      }
      const std::string_view key(n->body(), ks);
      if (node_check_of(sizes) != node_checksum(*off, sizes.bits, key, {n->body() + ks, vs})) {
        return bad("node", off->value, after + ": checksum mismatch (its key or value is damaged)");
      }
      const stored_version version =
          read_version_word(read(n->version), in_node(*off, word_field::version));
      if (version.kind == version_kind::damaged) {
        return bad("node", off->value, "key '" + printable(key) + "': damaged version word");
      }
      const std::optional<node_offset> next =
          read_offset_word(read(n->next), in_node(*off, word_field::next));
      if (!next) {
        return bad("node", off->value, "key '" + printable(key) + "': damaged successor offset");
      }
      // The walk is a pointer chase through the pool: request the successor's line now, so
      // that its miss overlaps the work on this node. (Only offsets inside the heap: the
      // pointer arithmetic of a garbage offset is itself undefined.)
      if (s.contains(*next, node::header_size())) __builtin_prefetch(s.pointer(*next));
      const bool uncommitted = version.kind == version_kind::uncommitted ||
                               (out->batch_in_progress && version.version > commit.version);
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
          repairs->link_around.push_back({prev_off, *off});
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
      off = next;
    }
    if (skipping) repairs->link_around.push_back({prev_off, node_offset{0}});
    repairs->clear_batch = out->batch_in_progress;
    return s.finish_recovery();
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
    }
    for (node_offset off : repairs.reset) {
      node* n = at(off);
      n->next.reset_metadata();
      n->version.reset_metadata();
      n->sizes.reset_metadata();
    }
    for (node_offset off : repairs.dead) mark_uncommitted(s, off);
    for (auto [pred, succ] : repairs.link_around) link(s, pred, succ);
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
  // Points the node at `from` to `to`: written back, not fenced.
  template <recovery_storage Storage>
  static void link(Storage& s, node_offset from, node_offset to) {
    io::flush(store_link(s, from, to));
  }
  // Points the node at `from` to `to` and returns the word it stored: neither written back
  // nor fenced (a weak write's link, written back when its window closes).
  template <recovery_storage Storage>
  static const flit::persist<stored_offset, Policy>& store_link(Storage& s, node_offset from,
                                                          node_offset to) {
    node* n = static_cast<node*>(s.pointer(from));
    io::put(n->next, offset_word(to, in_node(from, word_field::next)));
    return n->next;
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
  static Status initialise(Storage& s) {
    root_t& r = *static_cast<root_t*>(s.root_area());
    io::put(r.format, word63{kFormatInitialising});
    io::flush(r.format);
    io::fence();
    node_offset head{0};
    if (Status st = s.allocate(node::size_for(0, 0), &head); !st.ok()) return st;
    node* h = static_cast<node*>(s.pointer(head));
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
    return n.next.needs_reset() || n.version.needs_reset() || n.sizes.needs_reset();
  }
};

}  // namespace flintkv::internal
