// A packed run: a sorted map kept in packed nodes (packed.hpp) chained from a head word, with
// a DRAM index of each node's first key. It is the planned packed tier's store
// (docs/engine-design.md, "The packed tier"): changes reach it in sorted batches, merged
// node by node; a node is never changed in place except for its successor word.
//
// A batch (apply) goes through the nodes its keys fall in, in key order. For each: its
// records and the batch's changes to it are merged, the result is packed into new nodes
// (none if every key was erased; several if it outgrew one), the new nodes are written and
// fenced, and one store to the predecessor's successor word (or the head) swaps them in for
// the old node, which is freed once that swap is durable. A node whose changes are all
// removals of keys it does not hold is left as it is.
//
// A record is a key's value or its erasure (packed.hpp). A batch's erasure of a key either
// removes the key's record (what a run that is the bottom of its tier does), or records the
// erasure: a tier's newer run keeps it to hide the key's records in older runs. get answers
// as a map (an erasure record is NotFound); find and cursors report erasure records, for
// the tier.
//
// Invariants (of the durable state, at every persistence event):
//  (1) The chain from the head names whole nodes, each written and fenced before the store
//      that first named it, in ascending key order across nodes.
//  (2) Each node holds, for the keys of its range, the records (values, erasures) of the
//      batches applied before its swap: a crash inside a batch leaves each key with its
//      record before the batch or after it (a batch is atomic per node, not as a whole; a
//      tier's flush writes an empty run, named by one store of its head, and the engine's
//      per-key list is to keep every key of a merge until the merge is durable, so the
//      tier needs no more).
//  (3) A block is freed only after the swap that unlinked it is durable, and every block
//      the chain names is marked live at recovery: the allocator's contract (U1)-(U3).
//
// Errors: a damaged node or successor word is reported as Corruption (at recovery, or by
// the get that meets it), never read as data; no space is NoSpace, after which the run is
// what the swaps before it made of it, and still usable.
//
// Thread safety: one writer (recover, apply, clear) at a time. Without an epoch domain, no
// reader beside it: one thread at a time. With one (the constructor's `epochs`), readers
// (get, locate, cursors, for_each, nodes, block_bytes) run on any threads beside the writer,
// each pinned in that domain from the call until it is done with what the call returned; the
// writer is not pinned. Readers see the run as a batch left it at its end, or after one of
// its slices (of its old nodes; a batch is atomic per node, invariant (2)): the index
// is an immutable object, replaced whole then and retired to the domain, and a node unlinked
// by a batch is retired to the domain once the index that named it is replaced, so a
// reader's node is never freed under it. A cursor unpinned between moves
// carries on by its key across batches (cursor, below).
// Persistence: apply's changes are durable when it returns.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "allocators/epoch.hpp"
#include "allocators/persistent_allocator.hpp"
#include "allocators/pool.hpp"
#include "flintkv/internal/btree_node.hpp"
#include "flintkv/internal/inline_string.hpp"
#include "flintkv/internal/key_filter.hpp"
#include "flintkv/internal/packed.hpp"
#include "flintkv/status.hpp"

namespace flintkv::internal {

// An object no reader can reach any more (readers beside a writer read the one it replaced):
// to the epoch domain, which deletes it once no reader is pinned, or deleted at once without
// one (no reader runs beside the writer then).
template <class T>
void retire_object(alloc::epoch_domain* epochs, const T* old) {
  if (old == nullptr) return;
  if (epochs != nullptr) {
    epochs->retire(const_cast<T*>(old));
  } else {
    delete old;
  }
}

template <class Policy, class Mode>
class packed_run {
 public:
  using head_word = flit::persist<stored_offset, Policy>;
  using heap = alloc::persistent_allocator<Policy>;
  using view = packed_view<Policy, Mode>;

  // With readers, a batch publishes the run as it stands after each slice of old nodes, so
  // that old nodes come back while it runs (apply): a slice is a sixteenth of the run's
  // bytes, or kSliceBytes if more. Each publication copies the index (about a millisecond
  // at a million keys), so a batch over the whole run publishes a bounded number of times,
  // and holds at most a slice's old and new nodes at once.
  static constexpr std::size_t kSliceBytes = std::size_t{2} << 20;
  static constexpr std::size_t kSlicesPerRun = 16;
  // Touched nodes a batch packs together at most (apply): their records are held in DRAM
  // as views, and their old and new nodes are in the pool at once, until the swap (128 KiB
  // each). A group's last new node may be part full, so this bounds the run's slack: with
  // 8, 1M keys of 16 bytes with 64-byte values filled in random order (the engine's merges,
  // then DB::WaitForMerges) took 85 to 92 bytes a key of pool, with 32 79 to 81, with 64
  // 78 to 80; the records need 76.
  static constexpr std::size_t kGroupNodes = 32;

  // A seek's search of a node compares its key with the node's samples first, in DRAM:
  // the records at its thirds, each as its key's prefix and size (btree_node.hpp), its index
  // and where it begins. They bound the records the search compares to a third of the
  // node, so that a seek requests the lines of the header and of that third on, not the
  // whole node's (cursor::search). Three samples (quarters) seeked no faster and cost the
  // peer benchmark's readrandom about 9 MiB more of peak resident memory.
  struct sample {
    btree_layout::prefix pre;
    std::uint32_t size = 0;
    std::uint16_t index = 0;
    std::uint16_t offset = 0;
  };
  static constexpr std::size_t kSamples = 2;
  static_assert(kPackedRecordsWithin <= std::size_t{1} << 16 && kPackedMaxKeys < 1u << 16,
                "a sample's index and offset fit 16 bits");
  // The records a search of a key compares, as a node's samples bound them: record lo - 1
  // is below the key (if lo > 0) and record hi at least the key (unless hi is SIZE_MAX, the
  // node's end), in the node as written; `from` is where record lo - 1 begins (the node's
  // records, for lo 0) and `to` where record hi does (the block's end, for the node's end).
  struct bounds {
    std::size_t lo = 0, hi = SIZE_MAX, from = 0, to = 0;
  };

  // A node of the index: its first key and its block, and its samples. In a published index,
  // `first` views the index's own copy of the key; in the refs a batch or a recovery gathers,
  // the base index's, or its own (made_keys_).
  struct ref {
    std::string_view first;  // the node's first key
    node_offset at;
    std::size_t bytes;  // its block's
    std::array<sample, kSamples> samples{};
    std::uint16_t records_at = 0;  // where the node's records begin
    bool sampled = false;  // samples and records_at are the node's (else no bound is known)

    // REQUIRES: p is `key`'s probe.
    bounds bound(const btree_layout::probe& p) const {
      bounds b{0, SIZE_MAX, records_at, bytes};
      if (!sampled) return b;
      std::size_t k = 0;
      // The samples below the key come first, then those its prefix cannot order against
      // (a tie of longer keys: they bound nothing), then those at least the key.
      for (; k < kSamples; ++k) {
        const sample& x = samples[k];
        if (btree_layout::compare_prefixed(x.pre, x.size, p.pre, p.size) != -1) break;
        b.lo = std::size_t{x.index} + 1;
        b.from = x.offset;
      }
      for (; k < kSamples; ++k) {
        const sample& x = samples[k];
        const int c = btree_layout::compare_prefixed(x.pre, x.size, p.pre, p.size);
        if (c == 0 || c == 1) {
          b.hi = x.index;
          b.to = x.offset;
          break;
        }
      }
      return b;
    }
  };

  // What a batch's erasure leaves in the run: no record of the key, or a record of its
  // erasure.
  enum class erase_as : std::uint8_t { removal, record };

  // How a run with a key filter keeps it. `remade`: from every record at each publication,
  // for a run written once (a small run of the tier), whose filter then holds its keys
  // alone. `grown`: each batch copies the filter and adds the keys its records bring, and
  // makes one anew from every record (with room for half as many again) only when the adds
  // would pass what it was made for, for a run batched into again and again (the tier's
  // large run): a batch's cost stays its own keys', not the run's, and keys the run let go
  // of pass until the next remaking (a filter only has to pass every key the run holds).
  enum class filter_upkeep : std::uint8_t { remade, grown };

  // A change of a batch: a value for the key, or its erasure (`as` says which kind).
  struct change {
    std::string_view key;
    std::string_view value;
    bool erase = false;
    erase_as as = erase_as::removal;  // for an erasure
  };

  // The DRAM index: each node's ref, in key order, and each node's first key as the search
  // compares it first, its first 16 bytes and its size (btree_node.hpp's prefix), with the
  // node's block, kept apart so that the search's steps read 32 bytes each, not a ref and
  // its key's bytes, and a Get finds the block it reads in the head its search ended at,
  // whose line the search's last steps read, not in the ref (a miss of its own: a Get's
  // search spent about three fifths of its time waiting on the ref's line). The first
  // keys are copied into one buffer of the index's own, so that publishing an index costs
  // no allocation per node. Immutable once published; `generation` counts the indexes the
  // run has published.
  struct index_type {
    struct head {
      btree_layout::prefix pre;
      std::uint32_t size;
      std::uint32_t bytes;  // the node's block's (the ref's)
      node_offset at;       // the node's block (the ref's)
    };
    static_assert(sizeof(head) == 32, "two heads a line");
    std::vector<ref> refs;
    std::vector<head> heads;
    std::uint64_t generation = 0;
    // Over every record's key (and, grown, keys the run held since it was made), if the
    // run keeps one; the indexes a batch publishes share its filter.
    std::shared_ptr<const key_filter> filter;
    std::string keys;                  // the first keys the refs view, back to back

    index_type() = default;
    // `r`'s first keys are copied: they need to last only through the call.
    index_type(std::vector<ref> r, std::uint64_t g) : refs(std::move(r)), generation(g) {
      std::size_t bytes = 0;
      for (const ref& x : refs) bytes += x.first.size();
      keys.reserve(bytes);
      for (const ref& x : refs) keys.append(x.first);
      heads.resize(refs.size());
      for (std::size_t i = 0, at = 0; i < refs.size(); at += refs[i].first.size(), ++i) {
        refs[i].first = std::string_view(keys.data() + at, refs[i].first.size());
        heads[i] = {btree_layout::prefix_of(refs[i].first),
                    static_cast<std::uint32_t>(refs[i].first.size()),
                    static_cast<std::uint32_t>(refs[i].bytes), refs[i].at};
      }
    }
    static constexpr std::size_t kRefsAhead = 4;  // node_for
    index_type(const index_type&) = delete;  // the refs view keys
    index_type& operator=(const index_type&) = delete;
    // The index of the node whose range holds `key`: the last whose first key is at most
    // `key`, or the first; `with_ref`: the caller reads its ref next, not only its head.
    // REQUIRES: !refs.empty().
    std::size_t node_for(std::string_view key, bool with_ref = true) const {
      const btree_layout::probe p = btree_layout::probe_of(key);
      std::size_t lo = 0, hi = heads.size();  // the first node whose first key is above `key`
      while (lo < hi) {
        // A seek reads refs[lo - 1] next (its samples): once a few heads are left, its
        // line is requested, so that it comes with the last steps' instead of after them.
        if (with_ref && hi - lo <= kRefsAhead) __builtin_prefetch(&refs[lo == 0 ? 0 : lo - 1]);
        const std::size_t mid = lo + (hi - lo) / 2;
        int c = btree_layout::compare_prefixed(p.pre, p.size, heads[mid].pre, heads[mid].size);
        if (c == btree_layout::kTie) c = btree_layout::compare_rest(p.key, refs[mid].first);
        if (c < 0) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      return lo == 0 ? 0 : lo - 1;
    }
  };

  // Writes an empty run's head (null), written back; the caller fences.
  static void make_empty(head_word* head, word_place head_place) {
    durable<Policy, Mode>::put(*head, offset_word(node_offset{0}, head_place));
    durable<Policy, Mode>::flush(*head);
  }

  // The run whose head is `*head` (at `head_place`), with nodes of `node_bytes` (records too
  // large for one take a block of their own). Call recover() before anything else. The node
  // size is part of the run's format: recovery marks each block live as that size (or the
  // node's own, if larger), so a run is always opened with the size it was written with.
  // With `epochs`, readers may run beside the writer (thread safety, above); the domain must
  // outlive the run and the heap must outlive the domain's reclamation. With
  // `filter_bits_per_key`, the run keeps a key filter (key_filter.hpp) of that many bits a
  // key, kept as `upkeep` says, so that a Get of a key the run does not hold passes it
  // mostly on the filter's line.
  packed_run(const alloc::pool& pool, heap& h, head_word* head, word_place head_place,
             std::size_t node_bytes, alloc::epoch_domain* epochs = nullptr,
             unsigned filter_bits_per_key = 0,
             filter_upkeep upkeep = filter_upkeep::remade)
      : pool_(pool),
        heap_(h),
        head_(head),
        head_place_(head_place),
        node_bytes_(node_bytes),
        filter_bits_per_key_(filter_bits_per_key),
        upkeep_(upkeep),
        epochs_(epochs),
        index_(new index_type{}) {}
  packed_run(const packed_run&) = delete;
  packed_run& operator=(const packed_run&) = delete;
  ~packed_run() { delete index_.load(std::memory_order_relaxed); }

  // Walks the chain: checks every node (its successor word, its header and every record,
  // erasures too),
  // that the keys ascend across nodes and that each block lies in the heap; rebuilds the
  // index; marks each block live when `mark_live` (the allocator's recovery; the caller
  // calls finish_recovery after). Corruption names the node's offset, and leaves the run
  // empty: a damaged run is repaired or set aside, not used.
  Status recover(bool mark_live) {
    std::vector<ref> refs;
    Status s = walk(mark_live, &refs);
    if (!s.ok()) refs.clear();
    if (grows()) grown_ = filter_of(refs, 0);
    publish(std::move(refs));
    made_keys_.clear();
    return s;
  }

  // Empties the run: one store of a null head, made durable, then every node freed. What a
  // small run merged whole into a larger one does. A crash leaves the run whole or empty.
  void clear() {
    durable<Policy, Mode>::put(*head_, offset_word(node_offset{0}, head_place_));
    durable<Policy, Mode>::flush(*head_);
    for (const ref& r : current().refs) retired_.push_back(r.at);
    settle();
    durable<Policy, Mode>::complete();
    grown_.reset();
    publish({});
  }

  std::size_t nodes() const { return current().refs.size(); }
  // Counts the indexes the run has published: it changes whenever the run's keys may have.
  std::uint64_t generation() const { return current().generation; }
  // The blocks' bytes, for space accounting.
  std::size_t block_bytes() const {
    std::size_t n = 0;
    for (const ref& r : current().refs) n += r.bytes;
    return n;
  }

  // The node whose range holds `key` (its block's offset and bytes), or nullopt if the run is
  // empty.
  std::optional<std::pair<node_offset, std::size_t>> locate(std::string_view key) const {
    const index_type& ix = current();
    if (ix.refs.empty()) return std::nullopt;
    const ref& r = ix.refs[ix.node_for(key)];
    return std::pair{r.at, r.bytes};
  }

  // Whether the run may hold a key of key_hash `hash`: false only if its filter says it
  // does not (true without a filter). prefetch_filter requests the line it reads, so that a
  // Get that asks several runs fetches their filters' lines side by side.
  bool may_hold(std::uint32_t hash) const {
    const index_type& ix = current();
    return !ix.refs.empty() && (!ix.filter || ix.filter->may_contain(hash));
  }
  void prefetch_filter(std::uint32_t hash) const {
    if (const index_type& ix = current(); ix.filter) ix.filter->prefetch(hash);
  }

  // The value of `key` into *value: OK, NotFound (no record of the key, or a record of its
  // erasure), or Corruption.
  Status get(std::string_view key, std::string* value, bool verify = true) const {
    return get(key, key_hash(key), value, verify);
  }
  // The same, for a key of key_hash `hash` (a Get that asks several runs hashes it once).
  Status get(std::string_view key, std::uint32_t hash, std::string* value,
             bool verify = true) const {
    packed_kind kind{};
    Status s = find(key, hash, value, &kind, verify);
    return s.ok() && kind == packed_kind::erasure ? Status::NotFound("") : s;
  }
  // The record of `key`: OK with its kind into *kind and its value (empty for an erasure)
  // into *value, NotFound if the run holds no record of the key, or Corruption.
  Status find(std::string_view key, std::string* value, packed_kind* kind,
              bool verify = true) const {
    return find(key, key_hash(key), value, kind, verify);
  }
  Status find(std::string_view key, std::uint32_t hash, std::string* value, packed_kind* kind,
              bool verify = true) const {
    const index_type& ix = current();
    if (ix.refs.empty()) return Status::NotFound("");
    if (ix.filter && !ix.filter->may_contain(hash)) return Status::NotFound("");
    return find_in(ix, key, value, kind, verify);
  }
  // The same, for a key that may_hold(key_hash(key)) passed: without the filter's test.
  Status find_past_filter(std::string_view key, std::string* value, packed_kind* kind,
                          bool verify = true) const {
    const index_type& ix = current();
    if (ix.refs.empty()) return Status::NotFound("");
    return find_in(ix, key, value, kind, verify);
  }

  // A position in the run's records, in key order: what a scan of the packed tier walks. It
  // stops on erasure records too (erased()), so that the tier can hide the key in older
  // runs. Every record it reads is checked when `verify` is set; a damaged one stops it with
  // Corruption.
  // Backward, it positions only: seek_before and seek_to_last each search the index and
  // decode a node (two when the record sought is the last of the node before), and a walk
  // back seeks before each key in turn. next() carries on forward from where they left it.
  // Beside a writer (an epoch domain), each move, and the use of key() and value() after it,
  // is made pinned; between moves the cursor may be unpinned: a move that finds the index
  // replaced since the last carries on from the cursor's key in the new one, at the first
  // key above it that the run holds now. Without a domain, the same holds across apply.
  class cursor {
   public:
    cursor(const packed_run& run, bool verify) : run_(&run), verify_(verify) {}

    // At the first key at least `key` (!valid() if there is none).
    Status seek(std::string_view key) {
      load();
      return seek_in(key);
    }
    Status seek_to_first() {
      load();
      if (ix_->refs.empty()) return stop();
      node_ = 0;
      if (Status s = open(); !s.ok()) return s;
      i_ = 0;
      return settle();
    }
    // At the last key below `key` (!valid() if there is none: "" is below every key). `key`
    // may be the cursor's own key().
    Status seek_before(std::string_view key) {
      load();
      if (ix_->refs.empty()) return stop();
      if (Status s = search(key); !s.ok()) return s;
      return settle_back();
    }
    // At the last key (!valid() if the run is empty).
    Status seek_to_last() {
      load();
      if (ix_->refs.empty()) return stop();
      node_ = ix_->refs.size() - 1;
      if (Status s = open(); !s.ok()) return s;
      i_ = view_->size();
      return settle_back();
    }
    // REQUIRES: valid().
    Status next() {
      // The key it leaves stays in keys_[left_]: a read copies into the other buffer.
      left_ = at_;
      if (run_->current().generation != generation_) {
        // The index was replaced: find the cursor's key again, and step past it if it is
        // still there (else the seek is already at the key after it). The seek reads into
        // the other buffer; when it found the same key, that copy is the one kept, since
        // the step reads into this buffer.
        load();
        if (Status s = seek_in(keys_[left_]); !s.ok() || !valid_ || key() != keys_[left_].view()) {
          return s;
        }
        left_ = at_;
      }
      ++i_;
      return settle();
    }
    bool valid() const { return valid_; }
    // REQUIRES: valid(). Until the next move (and, beside a writer, while pinned).
    std::string_view key() const { return keys_[at_].view(); }
    std::string_view value() const { return value_; }  // empty for an erasure
    bool erased() const { return kind_ == packed_kind::erasure; }
    // The key the cursor was at before its last move, until its next move, so that a
    // caller that must seek again from there need not copy every key it steps past.
    // REQUIRES: the last move was a next().
    std::string_view left_key() const { return keys_[left_].view(); }
    // Whether value() still lies in an allocated node: no index was published since the
    // move that read it (the node is retired only once one that does not name it is).
    // REQUIRES: pinned, and valid(); then the node stays allocated until unpinned.
    bool value_readable() const { return run_->current().generation == generation_; }

   private:
    void load() {
      ix_ = &run_->current();
      generation_ = ix_->generation;
    }
    Status seek_in(std::string_view key) {
      if (ix_->refs.empty()) return stop();
      if (Status s = search(key); !s.ok()) return s;
      return settle();
    }
    // Opens the node whose range holds `key`, at its first record at least `key` (i_, which
    // may be the node's size). The node's samples bound the records the search compares;
    // the lines of its header and of those records on, and kSeekAheadBytes more for the
    // steps after a seek, are requested together first, not the whole node's. A node whose
    // header disagrees with its samples is damaged.
    Status search(std::string_view key) {
      node_ = ix_->node_for(key);
      const ref& r = ix_->refs[node_];
      const bounds b = r.bound(btree_layout::probe_of(key));
      if (r.sampled) {
        run_->prefetch_lines(r, 0, r.records_at);
        run_->prefetch_lines(r, b.from, b.to + kSeekAheadBytes);
      } else {
        run_->prefetch_node(r);
      }
      view_ = view::open(run_->node(r.at), r.at, r.bytes, verify_);
      if (!view_) return fail();
      const std::size_t hi = std::min(b.hi, view_->size());
      if (b.lo > hi) return fail();
      const auto position = view_->lower_bound(key, verify_, b.lo, hi);
      if (!position) return fail();
      i_ = *position;
      return Status::OK();
    }
    static constexpr std::size_t kSeekAheadBytes = 512;
    // Opens node_, its lines requested together first: a seek's search reads records all
    // over the node, and the steps after it those that follow, so each would otherwise wait
    // on a miss of its own.
    Status open() {
      const ref& r = ix_->refs[node_];
      run_->prefetch_node(r);
      view_ = view::open(run_->node(r.at), r.at, r.bytes, verify_);
      return view_ ? Status::OK() : fail();
    }
    // Reads record i_ of the node, or the first of the next node once past the last.
    Status settle() {
      while (i_ == view_->size()) {
        if (++node_ == ix_->refs.size()) return stop();
        if (Status s = open(); !s.ok()) return s;
        i_ = 0;
      }
      return read();
    }
    // Reads the record before i_ of the node, or the last of the node before when i_ is 0
    // (keys ascend across nodes: the record before a node's first is the previous node's
    // last).
    Status settle_back() {
      while (i_ == 0) {
        if (node_ == 0) return stop();
        --node_;
        if (Status s = open(); !s.ok()) return s;
        i_ = view_->size();
      }
      --i_;
      return read();
    }
    // Reads record i_ of the node. REQUIRES: i_ < view_->size().
    Status read() {
      const auto r = view_->record(i_, verify_);
      if (!r) return fail();
      at_ ^= 1;
      keys_[at_].assign(view_->prefix(), r->suffix);
      value_ = r->value;
      kind_ = r->kind;
      valid_ = true;
      return Status::OK();
    }
    Status stop() {
      valid_ = false;
      return Status::OK();
    }
    Status fail() {
      valid_ = false;
      return damaged(ix_->refs[node_].at);
    }

    const packed_run* run_;
    bool verify_;
    bool valid_ = false;
    const index_type* ix_ = nullptr;  // the index of the last move; generation_ is its
    std::uint64_t generation_ = 0;
    std::size_t node_ = 0, i_ = 0;
    std::optional<view> view_;
    // The key of the record read last is keys_[at_]; next() leaves its key in keys_[left_].
    std::array<inline_string<48>, 2> keys_;
    unsigned at_ = 0, left_ = 0;
    std::string_view value_;
    packed_kind kind_ = packed_kind::value;
  };

  // Calls fn(key, value) for every key with a value, in order (a cursor's walk, past the
  // erasure records); Corruption if a record is damaged.
  template <class Fn>
  Status for_each(Fn&& fn) const {
    cursor c(*this, true);
    for (Status s = c.seek_to_first(); c.valid() || !s.ok(); s = c.next()) {
      if (!s.ok()) return s;
      if (!c.erased()) fn(c.key(), c.value());
    }
    return Status::OK();
  }

  // Lets go of the DRAM a batch keeps for the next one (its merge buffers, up to a few
  // groups' worth): for a run written seldom, such as a tier's small run, whose buffers
  // would otherwise stay, one set a run, all the time.
  void release_buffers() {
    std::vector<merged_record>().swap(merged_);
    std::string().swap(keys_);
  }

  // Sets the bytes of old nodes in a slice of a batch with readers, instead of the share of
  // the run above (the readers' tests set small slices, so that batches publish between
  // nodes; SIZE_MAX publishes only at the batch's end).
  void set_slice_bytes(std::size_t bytes) { slice_bytes_ = bytes; }

  // Applies `changes` (sorted by key, no key twice): durable when it returns OK. Errors:
  // NoSpace (the changes to the nodes not reached yet are not applied), Corruption (a node
  // met is damaged; nothing of it is applied).
  Status apply(std::span<const change> changes) {
    // The index the batch starts from. Readers may be reading it, so it is copied, not
    // changed; it stays the batch's own until the batch ends, whatever it publishes.
    const index_type* base = &current();
    const std::vector<ref>& index = base->refs;
    // Before any publication of the batch: its indexes name its records' nodes.
    if (grows()) grown_ = grow(*base, changes);
    std::vector<ref> out;
    out.reserve(index.size() + 1);
    Status status;
    head_word* pred = head_;
    word_place pred_place = head_place_;
    std::size_t c = 0;
    std::size_t j = 0;
    std::size_t sliced = 0;  // bytes of old nodes unlinked since the last publication
    std::size_t slice = slice_bytes_;
    if (slice == 0) {
      slice = std::max(kSliceBytes, block_bytes() / kSlicesPerRun);
    }
    if (index.empty() && !changes.empty()) {
      // No node yet: every change is a key of the first nodes.
      status = replace({}, changes, node_offset{0}, &pred, &pred_place, &out);
      c = changes.size();
    }
    // The changes of node k, from `from` on: below the next node's first key (all that are
    // left for the last node; node 0 also takes those below its first key).
    const auto changes_end = [&](std::size_t k, std::size_t from) {
      if (k + 1 == index.size()) return changes.size();
      while (from < changes.size() && compare_keys(changes[from].key, index[k + 1].first) < 0) {
        ++from;
      }
      return from;
    };
    const auto untouched = [&](std::size_t k, std::size_t from, std::size_t to) {
      return to == from || removes_nothing(index[k], changes.subspan(from, to - from));
    };
    while (j < index.size() && status.ok()) {
      const ref& r = index[j];
      std::size_t e = changes_end(j, c);
      if (untouched(j, c, e)) {
        c = e;
        pred = &node(r.at)->next;
        pred_place = in_node(r.at, word_field::packed_next);
        out.push_back(r);
        ++j;
        continue;
      }
      // Node j and the touched nodes right after it, up to kGroupNodes, are packed together,
      // so that only the group's last new node may be part full: node by node, a node that
      // took a few keys would become a full node and a nearly empty one, and a run merged
      // into again and again would fill its nodes about half.
      std::size_t k = j + 1;
      while (k < index.size() && k - j < kGroupNodes) {
        const std::size_t f = changes_end(k, e);
        if (untouched(k, e, f)) break;
        e = f;
        ++k;
      }
      const std::span<const ref> group(index.data() + j, k - j);
      const auto next = packed_next<Policy, Mode>(node(group.back().at), group.back().at);
      if (!next) {
        status = damaged(group.back().at);
        break;
      }
      status = replace(group, changes.subspan(c, e - c), *next, &pred, &pred_place, &out);
      if (status.IsNoSpace() && epochs_ != nullptr && !(retired_.empty() && unlinked_.empty())) {
        // The blocks this batch unlinked may be enough: give them back now and try again.
        publish_so_far(out, *base, j);
        status = replace(group, changes.subspan(c, e - c), *next, &pred, &pred_place, &out);
      }
      if (!status.ok()) break;
      for (const ref& g : group) {
        retired_.push_back(g.at);
        sliced += g.bytes;
      }
      c = e;
      j = k;
      if (epochs_ != nullptr && sliced >= slice) {
        // A slice's old nodes go back before the batch goes on, so that a batch over the
        // whole run holds a slice's old and new nodes at once, not the run's twice over.
        publish_so_far(out, *base, j);
        sliced = 0;
      }
    }
    out.insert(out.end(), index.begin() + static_cast<std::ptrdiff_t>(j), index.end());
    settle();
    durable<Policy, Mode>::complete();
    publish(std::move(out), base);
    made_keys_.clear();
    retire(base);
    return status;
  }

 private:
  Status find_in(const index_type& ix, std::string_view key, std::string* value,
                 packed_kind* kind, bool verify) const {
    const typename index_type::head& h = ix.heads[ix.node_for(key, false)];
    // The lines of the header, offsets and fingerprints, requested together (four lines:
    // about 50 keys of 16 bytes with their prefix).
    prefetch_lines(h.at, h.bytes, 0, 4 * 64);
    const auto v = view::open(node(h.at), h.at, h.bytes, verify);
    if (!v) return damaged(h.at);
    const auto f = v->find(key, verify);
    if (f.kind == view::found::damaged) return damaged(h.at);
    if (f.kind == view::found::no) return Status::NotFound("");
    *kind = f.kind == view::found::erasure ? packed_kind::erasure : packed_kind::value;
    if (value != nullptr) value->assign(f.value);
    return Status::OK();
  }
  // Whether `changes` (node r's) are all removals of keys it holds no record of: then the
  // node is left as it is. False if the node cannot be read (replace reports the damage).
  bool removes_nothing(const ref& r, std::span<const change> changes) const {
    const auto is_removal = [](const change& c) { return c.erase && c.as == erase_as::removal; };
    if (!std::all_of(changes.begin(), changes.end(), is_removal)) return false;
    const auto v = view::open(node(r.at), r.at, r.bytes, true);
    if (!v) return false;
    return std::all_of(changes.begin(), changes.end(), [&](const change& c) {
      return v->find(c.key, true).kind == view::found::no;
    });
  }

  packed_node<Policy>* node(node_offset at) const {
    return reinterpret_cast<packed_node<Policy>*>(pool_.base() + at.value);
  }
  // Requests the lines of node r's first `bytes` (by default kPrefetchBytes: a cursor's
  // whole 4 KiB node; a block that holds one large record, its first bytes).
  void prefetch_node(const ref& r, std::size_t bytes = kPrefetchBytes) const {
    prefetch_lines(r, 0, bytes);
  }
  static constexpr std::size_t kPrefetchBytes = 4096;
  // Requests the lines of node r's bytes [from, to), within its block.
  void prefetch_lines(const ref& r, std::size_t from, std::size_t to) const {
    prefetch_lines(r.at, r.bytes, from, to);
  }
  // The same, for the node at `at` in a block of `bytes`.
  void prefetch_lines(node_offset at, std::size_t bytes, std::size_t from, std::size_t to) const {
    const char* n = reinterpret_cast<const char*>(node(at));
    for (std::size_t line = from & ~std::size_t{63}; line < to && line < bytes; line += 64) {
      __builtin_prefetch(n + line);
    }
  }
  // The index readers see. The writer reads it too; only publish replaces it.
  const index_type& current() const { return *index_.load(std::memory_order_acquire); }
  // Makes `refs` the index: the old one, and the nodes that swaps unlinked, go to the
  // epoch domain (or at once, without one), since no reader can reach them from the new one.
  // `keep` (a batch's base index, which the batch retires itself at its end) is not retired
  // here when it is the one replaced.
  void publish(std::vector<ref> refs, const index_type* keep = nullptr) {
    const index_type* old = index_.load(std::memory_order_relaxed);
    auto* made = new index_type(std::move(refs), old->generation + 1);
    if (grows()) {
      made->filter = grown_;
    } else if (filter_bits_per_key_ != 0) {
      made->filter = filter_of(made->refs, 0);
    }
    index_.store(made, std::memory_order_release);
    if (old != keep) retire(old);
    if (epochs_ == nullptr) return;
    for (node_offset at : unlinked_) epochs_->retire(heap_, alloc::pptr<>(at.value));
    unlinked_.clear();
    // Two advances, when no reader holds them back, reclaim what was retired so far.
    epochs_->collect();
    epochs_->collect();
  }
  // With readers, unlinked nodes come back only once an index that does not name them is
  // published: publishes the run as a batch's swaps so far left it (the nodes made, `out`,
  // then the base's from node `from` on), which gives back what the batch unlinked unless
  // a reader is still pinned. The base stays the batch's own.
  void publish_so_far(const std::vector<ref>& out, const index_type& base, std::size_t from) {
    settle();
    std::vector<ref> now;
    now.reserve(out.size() + base.refs.size() - from);
    now.insert(now.end(), out.begin(), out.end());
    now.insert(now.end(), base.refs.begin() + static_cast<std::ptrdiff_t>(from), base.refs.end());
    publish(std::move(now), &base);
  }
  // An index no longer published: to the epoch domain, or deleted without one.
  void retire(const index_type* old) { retire_object(epochs_, old); }
  bool grows() const { return filter_bits_per_key_ != 0 && upkeep_ == filter_upkeep::grown; }
  // Whether a change leaves a record of its key (a value, or a recorded erasure).
  static bool leaves_record(const change& c) { return !c.erase || c.as == erase_as::record; }
  // A grown filter for a batch from `base`: base's, copied, with the keys of the records
  // `changes` leave added; or, when those adds would pass what it was made for (or base has
  // none), one made anew from base's records and theirs. None if a node cannot be read.
  std::shared_ptr<const key_filter> grow(const index_type& base,
                                         std::span<const change> changes) const {
    const auto adds = static_cast<std::size_t>(std::count_if(changes.begin(), changes.end(),
                                                             leaves_record));
    std::shared_ptr<key_filter> made;
    if (base.filter && base.filter->has_room(adds)) {
      made = std::make_shared<key_filter>(*base.filter);
    } else if (!(made = filter_of(base.refs, adds))) {
      return nullptr;
    }
    for (const change& c : changes) {
      if (leaves_record(c)) made->add(key_hash(c.key));
    }
    return made;
  }
  // A filter over the keys of the records of the nodes `refs` names, erasures too (a tier's
  // Get must find an erasure to stop at it), or none if one of them cannot be read (then
  // Gets read the nodes, and report the damage where they meet it). Made for those keys,
  // or, grown, for them and `adds` more, and half as many again.
  std::shared_ptr<key_filter> filter_of(const std::vector<ref>& refs, std::size_t adds) const {
    std::vector<view> views;
    views.reserve(refs.size());
    std::size_t keys = 0;
    for (const ref& r : refs) {
      const auto v = view::open(node(r.at), r.at, r.bytes, false);
      if (!v) return nullptr;
      views.push_back(*v);
      keys += v->size();
    }
    const std::size_t room = grows() ? (keys + adds) + (keys + adds) / 2 : keys;
    auto filter = std::make_shared<key_filter>(room, filter_bits_per_key_);
    std::string key;
    for (const view& v : views) {
      for (std::size_t i = 0; i < v.size(); ++i) {
        const auto r = v.record(i, false);
        if (!r) return nullptr;
        key.assign(v.prefix()).append(r->suffix);
        filter->add(key_hash(key));
      }
    }
    return filter;
  }
  // Makes every write so far durable, then frees the blocks that swaps unlinked (invariant
  // (3)). Without an epoch domain, a batch frees each old node at its next swap, not at its
  // end, so that it needs room for one node's replacement at a time: a full pool still takes
  // erasures. With one, readers of the index in use may still read them: they go to the
  // domain when the batch publishes its index (at its end, or when the pool runs out: apply).
  void settle() {
    durable<Policy, Mode>::before_free();
    if (epochs_ != nullptr) {
      unlinked_.insert(unlinked_.end(), retired_.begin(), retired_.end());
    } else {
      for (node_offset at : retired_) heap_.free(alloc::pptr<>(at.value));
    }
    retired_.clear();
  }
  // recover's walk (above), into *refs.
  Status walk(bool mark_live, std::vector<ref>* refs) {
    auto at = read_offset_word(durable<Policy, Mode>::get(*head_), head_place_);
    std::string last, key;
    std::size_t walked = 0;
    while (true) {
      if (!at) return Status::Corruption("packed run: a damaged successor word");
      const node_offset here = *at;
      if (here.value == 0) return Status::OK();
      if (here.value < pool_.heap_begin() || here.value >= pool_.heap_end() || here.value % 64 != 0 ||
          ++walked > (pool_.heap_end() - pool_.heap_begin()) / 64) {
        return Status::Corruption("packed run: a node offset outside the heap, or a cycle: " +
                                  std::to_string(here.value));
      }
      const auto v = view::open(node(here), here, pool_.heap_end() - here.value, true);
      if (!v) return Status::Corruption("packed run: damaged node at " + std::to_string(here.value));
      // The block it was allocated as (apply): node_bytes, or its own size if larger.
      const std::size_t bytes = std::max(node_bytes_, v->bytes());
      if (bytes > pool_.heap_end() - here.value) {
        return Status::Corruption("packed run: the node at " + std::to_string(here.value) +
                                  " runs past the heap");
      }
      for (std::size_t i = 0; i < v->size(); ++i) {
        const auto r = v->record(i, true);
        if (!r) {
          return Status::Corruption("packed run: damaged record in the node at " +
                                    std::to_string(here.value));
        }
        key.assign(v->prefix()).append(r->suffix);
        if (!(refs->empty() && i == 0) && compare_keys(last, key) >= 0) {
          return Status::Corruption("packed run: keys out of order in the node at " +
                                    std::to_string(here.value));
        }
        if (i == 0) refs->push_back({made_keys_.emplace_back(key), here, bytes});
        last.swap(key);
      }
      sample_node(&refs->back(), *v);
      if (mark_live) {
        if (auto s = heap_.mark_live(alloc::pptr<>(here.value), bytes); !s) {
          return Status::Corruption("packed run: " + s.error().to_string());
        }
      }
      at = packed_next<Policy, Mode>(node(here), here);
    }
  }

  static Status damaged(node_offset at) {
    return Status::Corruption("packed run: damaged node at " + std::to_string(at.value));
  }

  // Takes r's samples from its node as written (`v`), or leaves it unsampled if a record
  // cannot be read (a search of it then bounds nothing, and meets the damage itself).
  static void sample_node(ref* r, const view& v) {
    r->sampled = false;
    r->records_at = static_cast<std::uint16_t>(v.records_at());
    std::array<char, btree_layout::kInlineKey> key{};
    for (std::size_t k = 0; k < kSamples; ++k) {
      const std::size_t i = v.size() * (k + 1) / (kSamples + 1);
      const auto rec = v.record(i, false);
      if (!rec) return;
      // The prefix needs the key's first kInlineKey bytes only: of the node's prefix, then
      // of the suffix.
      const std::string_view pre = v.prefix();
      const std::size_t a = std::min(pre.size(), key.size());
      const std::size_t b = std::min(rec->suffix.size(), key.size() - a);
      std::memcpy(key.data(), pre.data(), a);
      std::memcpy(key.data() + a, rec->suffix.data(), b);
      r->samples[k] = {btree_layout::prefix_of(std::string_view(key.data(), a + b)),
                       static_cast<std::uint32_t>(pre.size() + rec->suffix.size()),
                       static_cast<std::uint16_t>(i), static_cast<std::uint16_t>(v.offset(i))};
    }
    r->sampled = true;
  }

  // Merges the consecutive nodes `olds` (none: the run is empty) with `changes`, writes the
  // result as new nodes whose last names `next`, fences them, and swaps them in at *pred
  // (which then names the last new node's successor word). Appends the new nodes to `out`.
  Status replace(std::span<const ref> olds, std::span<const change> changes, node_offset next,
                 head_word** pred, word_place* pred_place, std::vector<ref>* out) {
    // The merged records, in order, as views: values into the old node (freed only after the
    // swap) or the changes; keys into the changes or, for the old node's, into keys_ (prefix
    // and suffix put together), taken once keys_ has stopped growing.
    merged_.clear();
    keys_.clear();
    std::size_t c = 0;
    // A change's record: its value, its erasure, or none (a removal).
    const auto take_change = [&](const change& ch) {
      if (!ch.erase) {
        merged_.push_back({ch.key, ch.value, packed_kind::value});
      } else if (ch.as == erase_as::record) {
        merged_.push_back({ch.key, {}, packed_kind::erasure});
      }
    };
    const auto take_changes_below = [&](std::string_view key, bool all) {
      for (; c < changes.size() && (all || compare_keys(changes[c].key, key) < 0); ++c) {
        take_change(changes[c]);
      }
    };
    for (const ref& old : olds) {
      const auto v = view::open(node(old.at), old.at, old.bytes, true);
      if (!v) return damaged(old.at);
      for (std::size_t i = 0; i < v->size(); ++i) {
        const auto rec = v->record(i, true);
        if (!rec) return damaged(old.at);
        const std::size_t at = keys_.size();
        keys_.append(v->prefix()).append(rec->suffix);
        const std::string_view key(keys_.data() + at, keys_.size() - at);  // until keys_ grows
        take_changes_below(key, false);
        if (c < changes.size() && changes[c].key == key) {
          take_change(changes[c++]);
          keys_.resize(at);
        } else {
          merged_.push_back({{}, rec->value, rec->kind, at, keys_.size() - at});
        }
      }
    }
    take_changes_below({}, true);
    for (merged_record& r : merged_) {
      if (r.key_size != 0) r.key = std::string_view(keys_.data() + r.key_at, r.key_size);
    }

    // Packed in one pass: a node is written once the block of the node after it is known,
    // so that it names its successor (the last names `next`).
    std::vector<ref> made;
    const auto fail = [&](const auto& error) {
      for (const ref& r : made) heap_.free(alloc::pptr<>(r.at.value));
      return Status::NoSpace("packed run: " + error.to_string());
    };
    std::optional<node_offset> current;  // the block of the node being built
    const auto start = [&](std::size_t bytes) -> std::optional<Status> {
      auto block = heap_.allocate(bytes);
      if (!block) return fail(block.error());
      if (current) {
        store_packed<Policy, Mode>(node(*current), *current, builder_,
                                   node_offset{block->offset()}, &scratch_);
      }
      current = node_offset{block->offset()};
      builder_.reset(bytes);
      return std::nullopt;
    };
    for (const merged_record& r : merged_) {
      if (current && builder_.fits(r.key, r.value)) {
        builder_.add(r.key, r.value, r.kind);
        continue;
      }
      // A new node: of the usual size, or of the record's own if it fits no node of that.
      const std::size_t bytes =
          std::max(node_bytes_, packed_builder<Policy>::single_record_bytes(r.key, r.value));
      if (auto error = start(bytes)) return *error;
      made.push_back({made_keys_.emplace_back(r.key), *current, bytes});
      builder_.add(r.key, r.value, r.kind);
    }
    if (current) {
      store_packed<Policy, Mode>(node(*current), *current, builder_, next, &scratch_);
    }
    for (ref& r : made) {
      if (const auto v = view::open(node(r.at), r.at, r.bytes, false)) sample_node(&r, *v);
    }
    const node_offset successor = made.empty() ? next : made.front().at;
    // The new nodes are whole in the durable image before the swap names them (invariant (1)).
    settle();
    durable<Policy, Mode>::put(**pred, offset_word(successor, *pred_place));
    durable<Policy, Mode>::flush(**pred);
    if (!made.empty()) {
      *pred = &node(made.back().at)->next;
      *pred_place = in_node(made.back().at, word_field::packed_next);
    }
    out->insert(out->end(), made.begin(), made.end());
    release_large_buffers();
    return Status::OK();
  }
  // A replace into an empty run (apply) merges a whole batch at once, and a merge of the
  // tier's small runs into an empty large run is every record they hold: the buffers of
  // such a call are let go, not kept at that size for the groups of a few nodes that later
  // calls merge (about 56 bytes a record: a million records would keep 56 MB of DRAM).
  void release_large_buffers() {
    if (merged_.capacity() > kKeptRecords) std::vector<merged_record>().swap(merged_);
    if (keys_.capacity() > kKeptRecords * 32) std::string().swap(keys_);
  }
  static constexpr std::size_t kKeptRecords = 4 * kGroupNodes * 64;

  const alloc::pool& pool_;
  heap& heap_;
  head_word* head_;
  word_place head_place_;
  std::size_t node_bytes_;
  unsigned filter_bits_per_key_;
  filter_upkeep upkeep_;
  // Grown upkeep: the filter of the batch under way (or of the last), which its indexes
  // publish.
  std::shared_ptr<const key_filter> grown_;
  alloc::epoch_domain* epochs_;
  std::size_t slice_bytes_ = 0;  // set_slice_bytes's, or 0: a share of the run
  std::atomic<const index_type*> index_;  // owned; replaced by publish
  std::vector<node_offset> retired_;   // unlinked by a swap not yet known durable
  std::vector<node_offset> unlinked_;  // unlinked durably, named by the index in use (epochs)
  // The first keys of the nodes a batch made (or a recovery found), which its refs view until
  // it publishes them (a deque: a key stays where it is as more come).
  std::deque<std::string> made_keys_;
  packed_builder<Policy> builder_{0};
  std::vector<unsigned char> scratch_;
  // replace's: a record of the merge, and the old node's keys, whole.
  struct merged_record {
    std::string_view key, value;
    packed_kind kind{};
    std::size_t key_at = 0, key_size = 0;  // the key in keys_, if key_size > 0
  };
  std::string keys_;
  std::vector<merged_record> merged_;
};

}  // namespace flintkv::internal
