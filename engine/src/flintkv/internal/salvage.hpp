// Salvage of a damaged store: what DB::Repair reads from the damaged pool. It works on an
// image of the pool file read into DRAM (repair.cpp), never on a mapping: the damaged file
// is not changed. Unlike recovery (recovery.hpp), which refuses a store at its first
// problem, salvage goes on past damage: it walks the list from the root as far as the list
// is intact, and where it is broken (a damaged node, successor offset or root word) it
// scans the heap's blocks for nodes that validate on their own. A store of format 4 also has
// a packed tier behind the list (packed_tier.hpp), whose runs salvage_tier.hpp reads along
// their chains: a key the list has no version of is answered by the tier, as the engine
// answers it.
//
// Thread safety: single-threaded; the image is private to the call.
// Invariants (what run() guarantees):
//  (1) Every key-value it returns was read from a node whose sizes, key and value match the
//      node's checksum, whose version word is an intact committed version (not the
//      uncommitted marker), and, when the root's batch_mode and commit_version are readable
//      and a batch was being attached, whose version is not above commit_version.
//  (2) Each key gets its newest such version. For the keys the intact part of the list
//      covers (RepairReport::list_covered_to), the list decides: a node of such a key found
//      anywhere else in the heap is not a version of the store and is ignored. For the
//      other keys, the newest version found by the scan.
//  (3) A key whose newest version is a delete is left out (counted in keys_deleted).
//  (4) Every walk and scan is bounded: the list walk by its strict order and by the number
//      of nodes the heap can hold, the scan by the heap's size, the tier's walks as
//      salvage_tier.hpp says.
//  (5) The packed tier answers only the keys of which (2) found no committed version (a
//      value or a delete): the engine's precedence (docs/engine-design.md, "The engine over
//      the packed tier"), by which the tier holds of every key a value older than every
//      version the list keeps. Such a key gets the tier's newest record (salvage_tier.hpp,
//      invariant (2)); an erasure record leaves it out (counted in keys_deleted). The tier is
//      read when the root's tier word (format 4) is an intact offset inside the heap; a
//      damaged word is noted and the list salvaged all the same. A format-3 store has no
//      tier.
// Assumption (the scan depends on it; version reclamation must keep it true): a committed
// node is never unlinked from the list except by recovery, which first gives the nodes of an
// unfinished batch the uncommitted marker and then links around them. So a node with a
// committed version word anywhere in the heap is a real version of its key, and the newest
// of them is the key's newest version.
// Known exception: a crash between a write's version write-back and its link write-back
// (they share one fence) can leave a node with a committed version word that was never
// linked; recovery does not see it (it is not in the list) and frees its block. The list
// ignores it; a scan, where the list is broken, may take it for the key's newest version
// until its block is reused. Such a write was never acknowledged.
// The tier's merges, once the engine makes them, unlink a key's moved versions from the list
// (docs/engine-design.md, "Order of a merge"); the assumption then needs them scrubbed as
// reclamation scrubs its dropped nodes, or a scan may take a moved version for a newer one
// than the tier's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "allocators/internal/heap_core.hpp"
#include "allocators/internal/pool_format.hpp"
#include "flintkv/db.hpp"
#include "flintkv/internal/index.hpp"
#include "flintkv/internal/layout.hpp"
#include "flintkv/internal/recovery.hpp"
#include "flintkv/internal/salvage_tier.hpp"

namespace flintkv::internal {

// A pool file's bytes in DRAM, as repair.cpp read them, with the geometry it settled on.
struct pool_image {
  std::string path;              // for messages
  const std::byte* base = nullptr;  // 4096-byte aligned, as a mapping would be
  std::uint64_t size = 0;        // bytes at base (zero past the end of a truncated file)
  std::uint64_t heap_begin = 0;  // the first chunk
  std::uint64_t chunk_count = 0;
};

// A salvaged key-value: views into the image, or, for a key the packed tier answered, its key
// into the salvage object (a packed record's key is not contiguous in the image).
struct salvaged {
  std::string_view key, value;
};

template <class Policy, class Mode>
class salvage {
  using node = pnode<Policy>;
  using root_t = root<Policy>;
  using classes = alloc::detail::pmem_classes;
  using tier_t = salvage_tier<Policy>;
  static constexpr std::uint64_t kChunk = alloc::format::chunk_size;
  static_assert(layout_pinned<Policy>());

 public:
  // REQUIRES: image.base holds image.size bytes and outlives the result; the root area and
  // the chunk table of image.chunk_count chunks lie inside it. This object outlives the
  // result too (keys the tier answered).
  salvage(const pool_image& image, RepairReport* report)
      : image_(image),
        report_(*report),
        heap_begin_(image.heap_begin),
        heap_end_(image.heap_begin + image.chunk_count * kChunk),
        tier_(image.base, heap_begin_, heap_end_, report) {}

  // Reads the root, walks the list, scans the heap where the list is broken, reads the
  // packed tier. Returns the live key-values in key order, and fills the report's counts,
  // dropped nodes, doubtful keys and notes (not keys_salvaged: what the caller writes).
  std::vector<salvaged> run() {
    read_root();
    if (root_.head) {
      walk(*root_.head);
    } else {
      report_.list_break = "at the root: no intact head node to start from";
    }
    if (!report_.list_intact) scan();
    if (root_.tier) {
      tier_.read(*root_.tier);
      add_tier();
    }
    return finish();
  }

  // True if anything in the image looked like a store: an intact root or any node.
  bool found_a_store() const {
    return root_.head.has_value() || nodes_seen_ > 0 || tier_.nodes_read() > 0;
  }

 private:
  // ---- reading the image -------------------------------------------------------------------

  template <class Word>
  static auto read(const Word& w) {
    return w.load(flit::volatile_, flit::private_);
  }
  bool contains(std::uint64_t off, std::uint64_t n) const {
    return off >= heap_begin_ && off <= heap_end_ && n <= heap_end_ - off;
  }
  const node* at(std::uint64_t off) const {
    return reinterpret_cast<const node*>(image_.base + off);
  }
  alloc::format::chunk_tag tag_of(std::uint64_t chunk) const {
    alloc::format::chunk_tag tag;
    std::memcpy(&tag, image_.base + alloc::format::chunk_table_offset + chunk * sizeof tag,
                sizeof tag);
    return tag;
  }
  static std::string key_text(std::string_view key) {
    return "'" + recovery<Policy, Mode>::printable(key) + "'";
  }

  // ---- one node ------------------------------------------------------------------------

  enum class found { nothing, sentinel, committed, uncommitted, damaged };
  // How sure a candidate offset is to be a node: in the list; at the start of a block its
  // chunk tag describes; or any 16-byte offset of a chunk whose tag cannot be trusted,
  // where only what is almost surely a node counts.
  enum class where { list, block, anywhere };

  struct probe {
    found kind = found::nothing;
    std::uint64_t size = 0;   // bytes of the node (0 if its size word is unreadable)
    std::string_view key;     // committed, uncommitted; damaged when the sizes are readable
    std::string_view value;   // committed, uncommitted
    bool key_verified = false;
    bool tombstone = false;
    bool marker = false;        // the version word is the uncommitted marker
    std::uint64_t version = 0;  // committed, or uncommitted by an unfinished batch
    std::optional<node_offset> next;
    std::string reason;  // damaged
  };

  probe examine(std::uint64_t off, where w) const {
    probe p;
    if (!contains(off, node::header_size())) {
      if (w == where::list) {
        p.kind = found::damaged;
        p.reason = "lies outside the heap";
      }
      return p;
    }
    const node* n = at(off);
    const word63 sizes = read(n->sizes);
    const stored_version version =
        read_version_word(read(n->version), in_node({off}, word_field::version));
    p.next = read_offset_word(read(n->next), in_node({off}, word_field::next));
    if (w == where::anywhere && version.kind == version_kind::damaged && !p.next) return p;
    if (sizes == sizes_word({off}, {}, {}, 0, 0) && version.kind == version_kind::committed &&
        version.version == 0) {
      p.kind = found::sentinel;
      p.size = node::size_for(0, 0);
      return p;
    }
    const std::size_t ks = key_size_of(sizes), vs = value_size_of(sizes);
    p.tombstone = (flags_of(sizes) & kTombstone) != 0;
    const bool sizes_ok = ks != 0 && ks <= kMaxKeySize && vs <= kMaxValueSize &&
                          (flags_of(sizes) & ~std::uint64_t{kTombstone}) == 0 &&
                          !(p.tombstone && vs != 0) && contains(off, node::size_for(ks, vs));
    // Where blocks are not known, only a node with both of its self-checking words intact
    // is reported as damaged: anything else is taken for the bytes of something else.
    const bool plausible = w != where::anywhere ||
                           (version.kind != version_kind::damaged && p.next.has_value());
    if (!sizes_ok) {
      if (version.kind == version_kind::committed && plausible) {
        p.kind = found::damaged;
        p.reason = "damaged size word " + std::to_string(sizes.bits);
      }
      if (w == where::list && p.kind == found::nothing) {
        p.kind = found::damaged;
        p.reason = "not a node (damaged size word " + std::to_string(sizes.bits) + ")";
      }
      return p;
    }
    p.size = node::size_for(ks, vs);
    p.key = std::string_view(n->body(), ks);
    const std::string_view value(n->body() + ks, vs);
    // The checksum covers the version: a committed one; the payload of a damaged word (its
    // check bits may be what was damaged); for the uncommitted marker, either none yet
    // (kUnassigned) or the one the attach was assigning.
    const std::uint64_t covered = version.kind == version_kind::committed ? version.version
                                  : version.kind == version_kind::damaged
                                      ? read(n->version).bits & kPayloadMask
                                      : kUnassigned;
    const bool uncommitted_unverified = version.kind == version_kind::uncommitted;
    if (!uncommitted_unverified &&
        node_check_of(sizes) != node_checksum({off}, sizes.bits, p.key, value, covered)) {
      if (version.kind == version_kind::uncommitted && w == where::block) {
        p.kind = found::uncommitted;  // a write interrupted while its node was being filled
      } else if (w == where::list || (version.kind == version_kind::committed && plausible)) {
        p.kind = found::damaged;
        p.reason = "checksum mismatch (its key or value is damaged)";
      }
      return p;
    }
    p.key_verified = !uncommitted_unverified;
    if (version.kind == version_kind::damaged) {
      p.kind = found::damaged;
      p.reason = "damaged version word";
      return p;
    }
    p.value = value;
    p.marker = version.kind == version_kind::uncommitted;
    p.kind = p.marker ? found::uncommitted : found::committed;
    p.version = version.version;
    if (p.kind == found::committed && batch_active_ && p.version > commit_version_) {
      p.kind = found::uncommitted;  // of the batch that was being attached
    }
    return p;
  }

  // ---- the root ------------------------------------------------------------------------

  struct root_words {
    std::optional<node_offset> head;  // of an intact head sentinel
    std::optional<node_offset> tier;  // the packed tier's root block, inside the heap
  };

  void read_root() {
    const root_t& r = *reinterpret_cast<const root_t*>(image_.base + alloc::format::root_offset);
    const std::uint64_t format = read(r.format).bits;
    const stored_version commit =
        read_version_word(read(r.commit_version), in_root(word_field::commit_version));
    const word63 batch = read(r.batch_mode);
    const auto head = read_offset_word(read(r.head), in_root(word_field::head));
    auto root_note = [&](const std::string& what, std::size_t field, const std::string& why) {
      report_.notes.push_back("the root's " + what + " at offset " +
                              std::to_string(alloc::format::root_offset + field) + ": " + why);
    };
    constexpr std::size_t w = sizeof(r.format);
    bool intact = true;
    if (format != kFormat && format != kFormatV3) {
      intact = false;
      root_note("format word", 0,
                format == kFormatBlank          ? "0 (a store never initialised)"
                : format == kFormatInitialising ? "an initialisation that did not finish"
                                                : "damaged (" + std::to_string(format) + ")");
    }
    if (commit.kind != version_kind::committed) {
      intact = false;
      root_note("commit_version", 2 * w, "damaged word");
    }
    if (batch != kBatchIdle && batch != kBatchActive) {
      intact = false;
      root_note("batch_mode", 3 * w,
                "damaged word: whether a batch was being attached is unknown, so the nodes "
                "of an unfinished batch, if there was one, may be salvaged as committed");
    } else if (batch == kBatchActive) {
      if (commit.kind == version_kind::committed) {
        batch_active_ = true;
        commit_version_ = commit.version;
        report_.notes.push_back("a batch was being attached when the pool was last used: its "
                                "versions (above " + std::to_string(commit.version) +
                                ") are not kept");
      } else {
        root_note("batch_mode", 3 * w,
                  "a batch was being attached, but commit_version is damaged: its nodes may "
                  "be salvaged as committed");
      }
    }
    if (!head || !contains(head->value, node::size_for(0, 0))) {
      intact = false;
      root_note("head offset", w, "damaged or outside the heap");
    } else if (examine(head->value, where::list).kind != found::sentinel) {
      intact = false;
      report_.notes.push_back("the head node at offset " + std::to_string(head->value) +
                              ": damaged size or version word");
    } else {
      root_.head = *head;
    }
    // The packed tier's root block (format 4; a format-3 root has no tier word). Where the
    // format word is damaged the store may be of either format: the tier word is read if it
    // checks (a zeroed word never does), and noted only if the store may have had one.
    if (format != kFormatV3 && format != kFormatBlank && format != kFormatInitialising) {
      const auto tier = read_offset_word(read(r.tier), in_root(word_field::tier));
      if (tier && contains(tier->value, tier_t::root_bytes())) {
        root_.tier = *tier;
      } else {
        intact = false;
        root_note("tier offset", 6 * w,
                  (format == kFormat ? std::string("damaged or outside the heap")
                                     : std::string("does not read either (a store of format 3 "
                                                   "has none)")) +
                      ": the keys only the packed tier held are lost");
      }
    }
    report_.root_intact = intact;
  }

  // ---- the list ------------------------------------------------------------------------

  void walk(node_offset head) {
    const std::uint64_t max_nodes = (heap_end_ - heap_begin_) / kNodeAlignment;
    std::uint64_t count = 0;
    std::string_view prev_key;
    std::uint64_t prev_rank = 0;
    auto broke = [&](std::uint64_t off, const std::string& why) {
      report_.list_break = "at offset " + std::to_string(off) + ", " +
                           (count <= 1 ? std::string("the first node")
                                       : "the node after key " + key_text(prev_key)) +
                           ": " + why;
    };
    std::optional<node_offset> off = examine(head.value, where::list).next;
    if (!off) {
      report_.list_break = "at offset " + std::to_string(head.value) +
                           ", the head node: damaged successor offset";
      return;
    }
    while (off->value != 0) {
      if (++count > max_nodes) {
        broke(off->value, "the list has more nodes than the heap can hold");
        return;
      }
      const probe p = examine(off->value, where::list);
      if (p.kind == found::sentinel || p.kind == found::damaged) {
        broke(off->value, p.kind == found::sentinel ? "a second head node" : p.reason);
        if (p.kind == found::damaged) drop(off->value, p);
        return;
      }
      // Nodes of unfinished writes rank above every version, in any order among themselves
      // (recovery.hpp, invariant (3)).
      const std::uint64_t rank = p.kind != found::committed ? UINT64_MAX : p.version;
      if (count > 1) {
        const int c = compare_keys(prev_key, p.key);
        if (c > 0 || (c == 0 && prev_rank <= rank && prev_rank != UINT64_MAX)) {
          broke(off->value, "key " + key_text(p.key) +
                                " is out of order (a damaged successor offset, a cycle or a "
                                "misplaced node)");
          return;
        }
      }
      ++nodes_seen_;
      check_tag(off->value, p.size);
      // The list covers this key once its newest committed version was seen.
      if (!cover_ || compare_keys(cover_key_, p.key) != 0) cover_inclusive_ = false;
      cover_ = true;
      cover_key_ = p.key;
      if (p.kind == found::committed) {
        cover_inclusive_ = true;
        keep(off->value, p, false);
      } else {
        ++report_.uncommitted;
      }
      prev_key = p.key;
      prev_rank = rank;
      if (!p.next) {
        report_.list_break = "at offset " + std::to_string(off->value) + " (key " +
                             key_text(p.key) + "): damaged successor offset";
        return;
      }
      off = p.next;
    }
    report_.list_intact = true;
  }

  bool covered(std::string_view key) const {
    if (!cover_) return false;
    const int c = compare_keys(key, cover_key_);
    return c < 0 || (c == 0 && cover_inclusive_);
  }

  // Notes a chunk tag that does not describe the block of a node that validated (the tag
  // is what is damaged: the allocator would hand out the node's block again).
  void check_tag(std::uint64_t off, std::uint64_t bytes) {
    const std::uint64_t chunk = (off - heap_begin_) / kChunk;
    const std::uint64_t within = off - heap_begin_ - chunk * kChunk;
    const alloc::format::chunk_tag tag = tag_of(chunk);
    bool fits = false;
    if (tag.kind() == alloc::format::chunk_kind::small) {
      const unsigned c = classes::exact(tag.argument());
      fits = c != classes::count && within % classes::sizes[c] == 0 &&
             bytes <= classes::max && classes::of(bytes) == c;
    } else if (tag.kind() == alloc::format::chunk_kind::large_head) {
      fits = within == 0 && bytes > classes::max && tag.argument() == chunks_for(bytes);
    }
    if (!fits && noted_chunks_.insert(chunk).second) {
      report_.notes.push_back("chunk " + std::to_string(chunk) + ": its tag (" +
                              std::to_string(tag.bits) + ") does not describe the node at offset " +
                              std::to_string(off) + " (" + std::to_string(bytes) +
                              " bytes): the tag is damaged");
    }
  }
  static std::uint64_t chunks_for(std::uint64_t bytes) { return (bytes + kChunk - 1) / kChunk; }

  // ---- the heap ------------------------------------------------------------------------

  // Scans every chunk for nodes: at the block starts its tag describes, or, where the tag is
  // damaged or disagrees with the nodes found, at every 16-byte offset.
  void scan() {
    using alloc::format::chunk_kind;
    std::uint64_t skip_until = heap_begin_;  // the end of the last node or block taken
    for (std::uint64_t i = 0; i < image_.chunk_count; ++i) {
      const std::uint64_t begin = heap_begin_ + i * kChunk, end = begin + kChunk;
      if (skip_until >= end) continue;
      const alloc::format::chunk_tag tag = tag_of(i);
      const std::uint64_t from = std::max(begin, skip_until);
      if (tag.kind() == chunk_kind::unassigned && all_zero(from, end)) continue;
      ++report_.chunks_scanned;
      if (from != begin) {  // a node that validated runs into this chunk
        skip_until = scan_anywhere(from, end);
        continue;
      }
      if (tag.kind() == chunk_kind::small) {
        const unsigned c = classes::exact(tag.argument());
        if (c != classes::count && scan_blocks(begin, classes::sizes[c], c)) continue;
      } else if (tag.kind() == chunk_kind::large_head && tag.argument() != 0 &&
                 tag.argument() <= image_.chunk_count - i) {
        // A large block whose node validates, or is a damaged node: the rest of the block
        // (its value, which may hold anything) is not scanned.
        const probe p = examine(begin, where::block);
        const bool whole = p.kind == found::committed || p.kind == found::uncommitted;
        if ((whole && p.size > classes::max && chunks_for(p.size) == tag.argument()) ||
            p.kind == found::damaged) {
          take(begin, p);
          skip_until = begin + tag.argument() * kChunk;
          continue;
        }
      }
      skip_until = scan_anywhere(begin, end);
    }
  }

  // The blocks of `size` bytes tiling the chunk at `begin`. False (nothing taken) when the
  // tag does not fit what is there: a node of another class at a block start, or bytes but
  // no node at any block start.
  bool scan_blocks(std::uint64_t begin, std::uint64_t size, unsigned c) {
    std::vector<std::pair<std::uint64_t, probe>> found_here;
    for (std::uint64_t off = begin; off + size <= begin + kChunk; off += size) {
      probe p = examine(off, where::block);
      if (p.kind == found::nothing) continue;
      if (p.size != 0 && (p.size > classes::max || classes::of(p.size) != c)) return false;
      found_here.emplace_back(off, std::move(p));
    }
    if (found_here.empty() && !all_zero(begin, begin + kChunk)) return false;
    for (auto& [off, p] : found_here) take(off, p);
    return true;
  }

  // Every 16-byte offset of [from, end), past each node found. Returns where the last node
  // found ends (or end).
  std::uint64_t scan_anywhere(std::uint64_t from, std::uint64_t end) {
    ++report_.chunks_scanned_fully;
    std::uint64_t off = from;
    while (off < end) {
      const probe p = examine(off, where::anywhere);
      if (p.kind == found::committed || p.kind == found::uncommitted ||
          p.kind == found::sentinel) {
        take(off, p);
        off = alloc::format::align_up(off + p.size, kNodeAlignment);
        continue;
      }
      if (p.kind == found::damaged) take(off, p);
      off += kNodeAlignment;
    }
    return off;
  }

  // REQUIRES: begin and end are multiples of 16 (chunk and node boundaries).
  bool all_zero(std::uint64_t begin, std::uint64_t end) const {
    std::uint64_t any = 0;
    for (std::uint64_t at = begin; at < end; at += 8) {
      std::uint64_t w;
      std::memcpy(&w, image_.base + at, sizeof w);
      any |= w;
      if ((at & 4095) == 4088 && any != 0) return false;
    }
    return any == 0;
  }

  // A node the scan found.
  void take(std::uint64_t off, const probe& p) {
    if (p.kind == found::nothing || p.kind == found::sentinel) return;
    ++nodes_seen_;
    if (p.kind == found::damaged) {
      if (p.key_verified && covered(p.key)) return;  // not a version of the store
      drop(off, p);
      return;
    }
    if (covered(p.key)) return;
    if (p.kind == found::uncommitted) {
      ++report_.uncommitted;
      return;
    }
    keep(off, p, true);
  }

  // ---- what is kept and dropped --------------------------------------------------------

  struct version_found {
    std::uint64_t version = 0;
    std::uint64_t offset = 0;
    std::string_view value;
    bool tombstone = false;
    bool from_scan = false;
    bool from_tier = false;  // the packed tier's record (no version or offset): invariant (5)
    std::optional<std::uint64_t> twin;  // another node with the same version
  };

  void keep(std::uint64_t off, const probe& p, bool from_scan) {
    ++report_.versions_examined;
    if (from_scan) ++report_.versions_from_scan;
    auto [it, fresh] = newest_.try_emplace(p.key);
    version_found& v = it->second;
    if (!fresh) {
      if (!from_scan) return;  // the list's first committed version of a key is its newest
      if (p.version < v.version) return;
      if (p.version == v.version) {
        v.twin = off;
        return;
      }
    }
    v = {p.version, off, p.value, p.tombstone, from_scan, false, std::nullopt};
  }

  // The tier's answer of each key the list and the scan found no committed version of
  // (invariant (5)): a value, or an erasure (absent, as a delete is).
  void add_tier() {
    for (const auto& [key, a] : tier_.answers()) {
      version_found v;
      v.value = a.value;
      v.tombstone = a.erasure;
      v.from_tier = true;
      newest_.try_emplace(key, v);
    }
  }

  void drop(std::uint64_t off, const probe& p) {
    if (!dropped_offsets_.insert(off).second) return;
    report_.dropped.push_back({off, std::string(p.key), p.key_verified, p.reason});
  }

  std::vector<salvaged> finish() {
    if (!report_.list_intact && cover_) report_.list_covered_to = std::string(cover_key_);
    // Keys whose newest version may have been lost with a dropped node.
    for (const RepairReport::Dropped& d : report_.dropped) {
      if (d.key.empty()) continue;
      auto it = newest_.find(d.key);
      const std::string what =
          (d.key_verified ? "a node of this key" : "a damaged node that names this key") +
          std::string(" at offset ") + std::to_string(d.offset) + " was dropped: " + d.reason;
      if (it == newest_.end()) {
        if (!d.key_verified) continue;  // the key may be wrong: the dropped list shows it
        report_.doubtful.push_back({d.key, what + "; no other version was found, so the key "
                                                  "is absent"});
        continue;
      }
      if (it->second.from_tier) {
        report_.doubtful.push_back(
            {d.key, what + "; no other version was found in the list, and the packed tier's "
                           "record, older than any the list had, " +
                        (it->second.tombstone ? std::string("is an erasure, so the key is absent")
                                              : std::string("was kept"))});
        continue;
      }
      const std::string kept = "version " + std::to_string(it->second.version) + " (offset " +
                               std::to_string(it->second.offset) + ")";
      report_.doubtful.push_back(
          {d.key, what + "; it may have held a newer version than " + kept +
                      (it->second.tombstone ? ", a delete, so the key is absent"
                                            : ", which was kept")});
    }
    std::vector<salvaged> live;
    for (const auto& [key, v] : newest_) {
      if (v.twin) {
        report_.doubtful.push_back(
            {std::string(key), "two nodes have its newest version " +
                                   std::to_string(v.version) + " (offsets " +
                                   std::to_string(v.offset) + " and " +
                                   std::to_string(*v.twin) + "); the first was kept"});
      }
      if (v.tombstone) {
        ++report_.keys_deleted;
        continue;
      }
      if (v.from_scan) ++report_.keys_from_scan;
      if (v.from_tier) ++report_.keys_from_tier;
      live.push_back({key, v.value});
    }
    if (!report_.list_intact) {
      std::string from = cover_ ? "after key " + key_text(cover_key_) : "of every key";
      report_.notes.push_back(
          "the versions " + from + " come from a scan of the heap: a node destroyed beyond "
          "recognition cannot be found, so for those keys an older version may have been "
          "kept, or a key lost, without a trace in this report");
    }
    return live;
  }

  const pool_image& image_;
  RepairReport& report_;
  const std::uint64_t heap_begin_, heap_end_;
  root_words root_;
  bool batch_active_ = false;
  std::uint64_t commit_version_ = 0;
  // The last key of the intact part of the list, and whether its newest committed version
  // was in that part.
  bool cover_ = false;
  bool cover_inclusive_ = false;
  std::string_view cover_key_;
  std::uint64_t nodes_seen_ = 0;
  std::map<std::string_view, version_found> newest_;
  std::set<std::uint64_t> dropped_offsets_;
  std::set<std::uint64_t> noted_chunks_;
  tier_t tier_;  // after heap_begin_ and heap_end_, which it is made with
};

}  // namespace flintkv::internal
