// The packed tier: a large packed run and up to kPackedSmallRuns small ones in front of it,
// what the planned packed tier of the engine is to hold (docs/engine-design.md, "The packed
// tier"). The write tier is to hand it sorted batches of keys that stopped changing: each
// batch becomes a small run of its own (written once, with a key filter), and the small
// runs are merged into the large run together, so that the large run's nodes are rewritten
// once per many batches, not once per batch.
//
// A key's record is the one in the newest run that holds one: the small runs newest first
// (a higher slot is newer), then the large run. A record is a value or an erasure
// (packed.hpp): a batch's erasure becomes an erasure record in the batch's small run, which
// hides the key's records in older runs, so a flush writes its own run and changes no
// other (a gathering flush, invariant (6), empties runs whose keys its run answers for). A
// merge takes each key's newest record into the large run: a value is written, an
// erasure removes the key. The large run is the bottom: no older run is left for an
// erasure to hide, so it holds values only.
//
// Invariants (of the durable state, at every persistence event):
//  (1) No small run at or above slot `end` holds a key: a flush fills slot end (and then
//      end moves up), a merge empties every slot from the oldest up (and end goes to 0).
//      Slots below end may be empty: a gathering flush (6) empties those it gathered.
//  (2) Each key's answer is the newest run's record: a merge writes into the large run the
//      newest small run's record of each key (its value, or its removal for an erasure)
//      before it empties any small run, and empties the oldest first, so a crash inside it
//      leaves each key the answer it had.
//  (3) A crash inside a flush leaves the tier as before the flush or as after it: the batch,
//      values and erasure records, is written whole as a new small run, then named by one
//      store of its head. (The engine's write tier is to keep a batch's keys until the
//      flush is durable all the same.)
//  (4) The large run holds no erasure record.
//  (5) Every run is a packed run (packed_run.hpp), with its invariants.
//  (6) A gathering flush (the one into slot kPackedGather - 1, 2 * kPackedGather - 1, ...)
//      writes as its new run the batch together with, for each key the batch lacks, the
//      newest record (a value or an erasure) of the runs in the slots below since the last
//      such slot, and only then empties those runs. The new run is newer than all of them,
//      so from its head's store on each of their keys answers from it as it did from them,
//      and a crash or a reader finds each key's answer unchanged whichever of them are left.
//      So readers meet at most nine small runs (two gathered and seven others), not 24.
//
// Errors: as a packed run's. A flush into a tier whose slots are all taken is Busy: merge
// first. After an error, each key is as (2) and (3) say, and the tier is usable.
//
// Thread safety: one writer (recover, flush, merge) at a time; with an epoch domain, readers
// (get, cursors) on any threads beside it, each pinned for its call, as a run's are. A get
// or a cursor that meets a merge still answers each key as the tier did throughout (it
// looks in the small runs newest first, then in the large run, and a merge empties small
// runs only after the large run holds their keys' values and has let go of their erased
// keys).
// Persistence: flush's and merge's changes are durable when they return.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flintkv/internal/key_filter.hpp"
#include "flintkv/internal/keys.hpp"
#include "flintkv/internal/packed_run.hpp"

namespace flintkv::internal {

inline constexpr std::size_t kPackedSmallRuns = 24;  // at most 32: slots are bits of a word
// A flush into slot kPackedGather - 1, 2 * kPackedGather - 1, ... gathers the runs below it
// since the last such slot (invariant (6)).
inline constexpr std::size_t kPackedGather = 8;
static_assert(kPackedSmallRuns % kPackedGather == 0);

// The tier's words in the pool: each run's head, and the size of the nodes its runs were
// written with (a checked word), which recovery compares with the size it is opened with:
// a run's blocks are marked live at that size (packed_run.hpp).
template <class Policy>
struct packed_tier_root {
  flit::persist<stored_offset, Policy> large;
  std::array<flit::persist<stored_offset, Policy>, kPackedSmallRuns> small;
  flit::persist<word63, Policy> node_bytes;
};

template <class Policy, class Mode>
class packed_tier {
 public:
  using run = packed_run<Policy, Mode>;
  using change = typename run::change;
  using root = packed_tier_root<Policy>;

  // Writes an empty tier's heads and its node size, written back; the caller fences.
  static void make_empty(const alloc::pool& pool, root* r, std::size_t node_bytes) {
    run::make_empty(&r->large, place_of(pool, &r->large));
    for (auto& head : r->small) run::make_empty(&head, place_of(pool, &head));
    durable<Policy, Mode>::put(r->node_bytes,
                               word63{checked_word(node_bytes, size_place(pool, &r->node_bytes))});
    durable<Policy, Mode>::flush(r->node_bytes);
  }

  // The tier whose heads are *r, with nodes of `node_bytes` and key filters of
  // `filter_bits_per_key`: each small run's, remade when it is written, and the large run's,
  // grown by each merge (packed_run::filter_upkeep), so that a Get of a key the tier does
  // not hold (most of a write tier's new keys) reads no node. Call recover() before
  // anything else. With `epochs`, readers may run beside the writer (thread safety, above).
  packed_tier(const alloc::pool& pool, typename run::heap& h, root* r, std::size_t node_bytes,
              alloc::epoch_domain* epochs = nullptr, unsigned filter_bits_per_key = 10)
      : pool_(pool),
        root_(r),
        node_bytes_(node_bytes),
        large_(pool, h, &r->large, place_of(pool, &r->large), node_bytes, epochs,
               filter_bits_per_key, run::filter_upkeep::grown),
        epochs_(epochs),
        filter_bits_per_key_(filter_bits_per_key) {
    for (auto& head : r->small) {
      small_.push_back(std::make_unique<run>(pool, h, &head, place_of(pool, &head), node_bytes,
                                             epochs, filter_bits_per_key));
    }
  }
  ~packed_tier() { delete front_.load(std::memory_order_relaxed); }
  packed_tier(const packed_tier&) = delete;
  packed_tier& operator=(const packed_tier&) = delete;

  // Recovers every run (packed_run::recover); the first Corruption met is returned. A tier
  // written with another node size is InvalidArgument, its node size word damaged is
  // Corruption; then no run is read and no block marked.
  Status recover(bool mark_live) {
    const auto written = checked_payload(durable<Policy, Mode>::get(root_->node_bytes).bits,
                                         size_place(pool_, &root_->node_bytes));
    if (!written) return Status::Corruption("packed tier: a damaged node size word");
    if (*written != node_bytes_) {
      return Status::InvalidArgument("packed tier: written with nodes of " +
                                     std::to_string(*written) + " bytes, opened with " +
                                     std::to_string(node_bytes_));
    }
    Status first = large_.recover(mark_live);
    end_ = 0;
    std::uint32_t occupied = 0;
    for (std::size_t i = 0; i < kPackedSmallRuns; ++i) {
      Status s = small_[i]->recover(mark_live);
      if (!s.ok() && first.ok()) first = s;
      if (small_[i]->nodes() != 0) {
        end_ = i + 1;
        occupied |= slot_bit(i);
      }
    }
    // The front filter, from the small runs' records (none if one cannot be read: Gets then
    // ask each run, and meet the damage).
    front_hashes_.clear();
    bool readable = first.ok();
    for (std::size_t i = 0; i < end_ && readable; ++i) {
      typename run::cursor c(*small_[i], true);
      Status s = c.seek_to_first();
      for (; s.ok() && c.valid(); s = c.next()) front_hashes_.push_back(key_hash(c.key()));
      readable = s.ok();
    }
    retire_front(front_.exchange(nullptr, std::memory_order_acq_rel));
    if (readable && !front_hashes_.empty()) publish_front(front_hashes_.size());
    occupied_.store(occupied, std::memory_order_release);
    return first;
  }

  // Small runs that may hold keys (the occupied slots), and whether a flush has a slot left.
  std::size_t small_runs() const {
    return static_cast<std::size_t>(std::popcount(occupied_.load(std::memory_order_acquire)));
  }
  bool full() const { return end_ == kPackedSmallRuns; }
  // No run holds a record (for readers: pinned, or the writer's thread).
  bool empty() const {
    return occupied_.load(std::memory_order_acquire) == 0 && large_.nodes() == 0;
  }
  // The slices of a merge into the large run (packed_run::set_slice_bytes).
  void set_slice_bytes(std::size_t bytes) { large_.set_slice_bytes(bytes); }
  // The runs, for statistics (the writer's thread, or pinned).
  const run& large() const { return large_; }
  const run& small(std::size_t slot) const { return *small_[slot]; }
  // The blocks' bytes of every run, for space accounting.
  std::size_t block_bytes() const {
    std::size_t n = large_.block_bytes();
    for (const auto& r : small_) n += r->block_bytes();
    return n;
  }

  // Writes `changes` (sorted by key, no key twice; each erasure is recorded, whatever its
  // `as`) as a new small run (invariant (3)). Busy if every slot is taken (merge first);
  // otherwise as a run's apply (NoSpace writes nothing). The flush into each kPackedGather-th
  // slot (7, 15, 23) gathers the runs of the slots below it since the last such slot into
  // the new run too (invariant (6)), so that readers meet at most about a third as many
  // runs: a Seek positions a cursor in every run that holds keys.
  Status flush(std::span<const change> changes) {
    if (changes.empty()) return Status::OK();
    if (full()) return Status::Busy("packed tier: every small run is taken");
    std::vector<change> batch(changes.begin(), changes.end());
    for (change& c : batch) c.as = run::erase_as::record;
    const std::uint32_t gathered = end_ % kPackedGather == kPackedGather - 1
                                       ? occupied_.load(std::memory_order_relaxed) &
                                             (slot_bit(end_) - slot_bit(end_ + 1 - kPackedGather))
                                       : 0;
    std::string keys;  // the gathered records' keys: batch's keys point into it
    if (gathered != 0) {
      std::vector<change> older;
      if (Status s = newest_records(gathered, run::erase_as::record, &older, &keys); !s.ok()) {
        return s;
      }
      batch = newer_over_older(batch, older);
    }
    // An empty run takes a batch whole: its nodes, then one store of its head (a batch that
    // runs out of room frees the nodes it made and stores nothing).
    Status s = small_[end_]->apply(batch);
    if (small_[end_]->nodes() != 0) {
      // The front filter takes the run's keys before readers find its slot (front_); the
      // gathered runs' keys are in it already.
      for (const change& c : changes) front_hashes_.push_back(key_hash(c.key));
      publish_front(changes.size());
      occupied_.fetch_or(slot_bit(end_), std::memory_order_release);
      ++end_;
      // Each key of the gathered runs has its newest record of theirs, or a newer one, in
      // the new run, which readers find first: the gathered runs answer nothing any more
      // and go, in any order.
      for (std::uint32_t m = gathered; m != 0; m &= m - 1) {
        const auto i = static_cast<std::size_t>(std::countr_zero(m));
        small_[i]->clear();
        occupied_.fetch_and(~slot_bit(i), std::memory_order_release);
      }
    }
    return s;
  }

  // Merges every small run into the large run, then empties them (invariants (2), (4)).
  Status merge() {
    if (end_ == 0) return Status::OK();
    // The small runs' keys in order, each with the newest run's record. A newest erasure
    // removes the key from the large run; an erasure record never enters it, since no run
    // below it is left to hide.
    std::vector<change> changes;
    std::string keys;  // the merged keys: changes' keys point into it
    const std::uint32_t all = occupied_.load(std::memory_order_relaxed);
    if (Status s = newest_records(all, run::erase_as::removal, &changes, &keys); !s.ok()) {
      return s;
    }
    // The values point into the small runs, which stay until the large run is written. A
    // removal of a key the large run does not hold leaves its node as it is (packed_run).
    if (Status s = large_.apply(changes); !s.ok()) return s;
    // Oldest first: between two clears (a crash, or a reader), the runs left are the newest,
    // so each key's newest record is still the one the large run took. Emptied newest
    // first, the run of a key's newest record (a value, or an erasure the large run took as
    // a removal) could go before an older run of an older value, which would answer again.
    for (std::uint32_t m = all; m != 0; m &= m - 1) {  // the lowest slot first
      const auto i = static_cast<std::size_t>(std::countr_zero(m));
      small_[i]->clear();
      occupied_.fetch_and(~slot_bit(i), std::memory_order_release);
    }
    end_ = 0;
    front_hashes_.clear();
    retire_front(front_.exchange(nullptr, std::memory_order_acq_rel));
    return Status::OK();
  }

  // The value of `key` into *value (unless null): OK, NotFound (no run holds a record of it, or the
  // newest record is an erasure), or Corruption.
  Status get(std::string_view key, std::string* value, bool verify = true) const {
    return get(key, key_hash(key), value, verify);
  }
  // The same, for a key of key_hash `hash`.
  Status get(std::string_view key, std::uint32_t hash, std::string* value,
             bool verify = true) const {
    const std::uint32_t occupied = occupied_.load(std::memory_order_acquire);
    large_.prefetch_filter(hash);  // its line comes while the small runs are asked
    const key_filter* front = occupied != 0 ? front_.load(std::memory_order_acquire) : nullptr;
    if (occupied != 0 && (front == nullptr || front->may_contain(hash))) {
      for (std::uint32_t m = occupied; m != 0; m &= m - 1) {
        small_[static_cast<std::size_t>(std::countr_zero(m))]->prefetch_filter(hash);
      }
      for (std::uint32_t m = occupied; m != 0;) {  // the highest slot first
        const std::size_t i = 31 - static_cast<std::size_t>(std::countl_zero(m));
        m &= ~slot_bit(i);
        if (!small_[i]->may_hold(hash)) continue;
        packed_kind kind{};
        Status s = small_[i]->find_past_filter(key, value, &kind, verify);
        if (s.IsNotFound()) continue;
        // The newest record: an erasure hides the key in every older run.
        return s.ok() && kind == packed_kind::erasure ? Status::NotFound("") : s;
      }
    }
    return large_.get(key, hash, value, verify);
  }

  // Requests the lines a get() of a key of key_hash `hash` reads first: the front filter's
  // and the large run's filter's, for a caller that has a miss of its own to wait on
  // before it asks the tier (the engine's list). REQUIRES: pinned, as get().
  void prefetch_for_get(std::uint32_t hash) const {
    if (const key_filter* front = front_.load(std::memory_order_acquire); front != nullptr) {
      front->prefetch(hash);
    }
    large_.prefetch_filter(hash);
  }

  // The tier's keys in order, each with its value (the newest run's record), past the keys
  // whose newest record is an erasure. Moves as a run's cursor does (pinned per move,
  // beside a writer). A step that finds the tier changed since
  // the cursor last sought (a small run written or emptied, or any of its runs' indexes
  // replaced), before or after it moved the runs' cursors, seeks the runs again past the key
  // it left, the small runs newest first and the large run last, so that keys a merge moves
  // from a small run into the large one are not missed. With no small run holding keys (the
  // common case, between merges) a step is the large run's cursor's and two loads of the
  // occupied slots.
  // Backward, it positions only (seek_before, seek_to_last): each run's cursor goes to its
  // last key below the bound, and the largest of those keys answers from the newest run that
  // holds it; if that record is an erasure, the runs at that key go below it in turn. Each
  // backward move decodes a node or two of each run; the next() after it seeks every run
  // past its key, unless the large run alone holds keys.
  // A positioning, forward (seek, seek_to_first, and the seeking again of a step) or
  // backward, during which the tier changed is done again: a part read before a merge
  // emptied its run, beside one read after, could answer a key the tier never held (an
  // erased key with an older value). It is lock-free, not wait-free: a writer that publishes
  // (a flush, a merge's slice of the large run, a merge emptying the small runs) more often
  // than a positioning takes could have it done again without end. With the default slices
  // (packed_run::kSliceBytes at least, milliseconds apart) and flushes of whole batches, a
  // positioning (microseconds) rarely overlaps a publication, and the next attempt meets none.
  class cursor {
   public:
    cursor(const packed_tier& tier, bool verify) : tier_(&tier), verify_(verify) {}

    // At the first key at least `key` (!valid() if there is none). `key` may be the
    // cursor's own key().
    Status seek(std::string_view key) {
      bound_.assign(key);  // seek_all's key outlives the parts' moves
      return seek_all(bound_, false);
    }
    Status seek_to_first() { return seek_all({}, false); }
    // At the last key below `key` (!valid() if there is none: "" is below every key). `key`
    // may be the cursor's own key().
    Status seek_before(std::string_view key) { return seek_back(key, false); }
    // At the last key (!valid() if the tier holds none).
    Status seek_to_last() { return seek_back({}, true); }
    // REQUIRES: valid().
    Status next() {
      if (parts_.size() == 1) {
        // The large run alone: no small run held keys when the parts were made. Its cursor
        // carries on across the run's own batches, and it holds no erasure (invariant (4)),
        // so only a small run written since the parts were made calls for seeking again,
        // past the key left, which the run's cursor still holds after its step.
        // (After a backward move too: the run's cursor is at the cursor's key.)
        if (small_runs_changed()) {
          resume_.assign(key());
        } else {
          part& p = parts_[0];
          if (Status s = p.c.next(); !s.ok()) return fail(s);
          current_ = p.c.valid() ? &p : nullptr;
          if (!small_runs_changed()) return Status::OK();
          resume_.assign(p.c.left_key());
        }
        return seek_all(resume_, true);
      }
      // After a backward move the other parts are below the cursor's key, not at the first
      // key at least it: seek them all past it. Else the parts step, and the runs are
      // checked once, after: a run that changed before the step shows then too (the parts'
      // generations are those of the last positioning), and the runs' cursors carry on
      // across their runs' changes meanwhile.
      if (backward_) {
        resume_.assign(key());
        return seek_all(resume_, true);
      }
      if (below_runner_up(*current_)) {
        // No other part is at the key: the current one alone steps, and it stays the
        // answer while its key is below every other part's and holds no erasure, which is
        // how a scan mostly goes (the large run holds most keys): one comparison a step,
        // not two of every part's key. Its cursor keeps the key it left.
        part& p = *current_;
        if (Status s = p.c.next(); !s.ok()) return fail(s);
        if (p.c.valid() && below_runner_up(p) && !p.c.erased()) {
          if (!changed()) return Status::OK();
          resume_.assign(p.c.left_key());
          return seek_all(resume_, true);
        }
        resume_.assign(p.c.left_key());
      } else {
        resume_.assign(key());
        if (Status s = step_past(resume_); !s.ok()) return fail(s);
      }
      if (Status s = settle(); !s.ok()) return s;
      if (!changed()) return Status::OK();
      return seek_all(resume_, true);
    }
    bool valid() const { return current_ != nullptr; }
    // REQUIRES: valid(). key(): until the next move. value(): until the next move, while
    // pinned beside a writer, or once pinned again while value_readable().
    std::string_view key() const { return current_->c.key(); }
    std::string_view value() const { return current_->c.value(); }
    // Whether value() still lies in an allocated node (packed_run's cursor). REQUIRES:
    // pinned, and valid(); then it stays allocated until unpinned.
    bool value_readable() const { return current_->c.value_readable(); }

   private:
    struct part {
      part(const run* of, bool verify) : r(of), c(*of, verify) {}
      const run* r;
      typename run::cursor c;
      std::uint64_t generation = 0;  // of r's index when c last sought
    };
    bool small_runs_changed() const {
      return tier_->occupied_.load(std::memory_order_acquire) != occupied_;
    }
    bool changed() const {
      if (small_runs_changed()) return true;
      for (const part& p : parts_) {
        if (p.r->generation() != p.generation) return true;
      }
      return false;
    }
    // Seeks the runs at `key` (keys are never empty: "" is the first), the small runs that
    // hold keys newest first and the large run last (thread safety, above); with `past`,
    // then steps past `key` itself; then settles, and does it all again if any run changed
    // while it did (above). The parts' generations are read before any of them moves, so
    // that a change during any step of it shows.
    // REQUIRES: `key` is none of the parts' (it outlives their moves).
    Status seek_all(std::string_view key, bool past) {
      do {
        make_parts();
        backward_ = false;
        for (part& p : parts_) p.generation = p.r->generation();
        for (part& p : parts_) {
          Status s = p.c.seek(key);
          if (!s.ok()) return fail(s);
          if (past && p.c.valid() && p.c.key() == key) {
            if (s = p.c.next(); !s.ok()) return fail(s);
          }
        }
        if (Status s = settle(); !s.ok()) return s;
      } while (changed());
      return Status::OK();
    }
    // Seeks the runs before `key` (with `last`, at their last keys) and settles back, the
    // small runs that hold keys newest first and the large run last, as seek_all does, and
    // again while any run changed as it did.
    Status seek_back(std::string_view key, bool last) {
      bound_.assign(key);  // `key` may be the cursor's own, which the parts' moves change
      do {
        make_parts();
        backward_ = true;
        for (part& p : parts_) p.generation = p.r->generation();
        for (part& p : parts_) {
          Status s = last ? p.c.seek_to_last() : p.c.seek_before(bound_);
          if (!s.ok()) return fail(s);
        }
        if (Status s = settle_back(); !s.ok()) return s;
      } while (changed());
      return Status::OK();
    }
    // The parts for the tier's occupied slots, made again only when they changed, so that
    // their cursors keep their buffers.
    void make_parts() {
      const std::uint32_t occupied = tier_->occupied_.load(std::memory_order_acquire);
      if (!parts_.empty() && occupied == occupied_) return;
      // Room for every part at once, and each built in place: grown part by part, each
      // part built aside and moved in, the parts of 14 small runs and the large run took
      // five allocations and 30 moves of a cursor for each new iterator.
      parts_.clear();
      parts_.reserve(static_cast<std::size_t>(std::popcount(occupied)) + 1);
      for (std::uint32_t m = occupied; m != 0;) {
        const std::size_t i = 31 - static_cast<std::size_t>(std::countl_zero(m));
        m &= ~slot_bit(i);
        parts_.emplace_back(tier_->small_[i].get(), verify_);
      }
      parts_.emplace_back(&tier_->large_, verify_);
      occupied_ = occupied;
    }
    // Steps every part at `key` past it.
    Status step_past(std::string_view key) {
      for (part& p : parts_) {
        if (p.c.valid() && p.c.key() == key) {
          if (Status s = p.c.next(); !s.ok()) return s;
        }
      }
      return Status::OK();
    }
    // At the smallest key of the parts, from the newest part that holds it (parts are
    // newest first); a key whose newest record is an erasure is stepped past in every part.
    // The runner-up is the part of the smallest key among the others (at the same key, if
    // an older part holds it too).
    Status settle() {
      while (true) {
        current_ = runner_up_ = nullptr;
        for (part& p : parts_) {
          if (!p.c.valid()) continue;
          if (current_ == nullptr || p.c.key() < current_->c.key()) {
            runner_up_ = current_;
            current_ = &p;
          } else if (runner_up_ == nullptr || p.c.key() < runner_up_->c.key()) {
            runner_up_ = &p;
          }
        }
        if (current_ == nullptr || !current_->c.erased()) return Status::OK();
        erased_.assign(current_->c.key());
        if (Status s = step_past(erased_); !s.ok()) return fail(s);
      }
    }
    // At the largest key of the parts, each at its last key below a bound, from the newest
    // part that holds it (a newer part that held it would be at it too); a key whose newest
    // record is an erasure is the next bound, for the parts at it (the others are below it
    // already).
    Status settle_back() {
      while (true) {
        current_ = runner_up_ = nullptr;
        for (part& p : parts_) {
          if (p.c.valid() && (current_ == nullptr || p.c.key() > current_->c.key())) current_ = &p;
        }
        if (current_ == nullptr || !current_->c.erased()) return Status::OK();
        erased_.assign(current_->c.key());
        for (part& p : parts_) {
          if (p.c.valid() && p.c.key() == erased_) {
            if (Status s = p.c.seek_before(erased_); !s.ok()) return fail(s);
          }
        }
      }
    }
    Status fail(const Status& s) {
      current_ = runner_up_ = nullptr;
      return s;
    }
    bool below_runner_up(const part& p) const {
      return runner_up_ == nullptr || p.c.key() < runner_up_->c.key();
    }

    const packed_tier* tier_;
    bool verify_;
    std::vector<part> parts_;  // the occupied small runs, newest first, then the large run
    std::uint32_t occupied_ = 0;  // the tier's occupied slots when parts_ was made
    // The part that answers, and the runner-up (settle; none after a backward positioning,
    // which next() does not step from). Both name parts_, made again only by seek_all and
    // seek_back, which settle.
    part* current_ = nullptr;
    part* runner_up_ = nullptr;
    bool backward_ = false;  // whether the last positioning was backward
    inline_string<48> resume_;  // the key a step leaves
    inline_string<48> bound_;   // the key a seek starts from, or a backward positioning goes below
    inline_string<48> erased_;  // the erased key settle steps past, or settle_back below
  };

 private:
  // A head's place: its own offset in the pool (a root's word is never a node's, whose
  // holder is the node's offset). The node size word's: its offset, as a shape.
  static word_place place_of(const alloc::pool& pool, const void* word) {
    return {static_cast<std::uint64_t>(static_cast<const std::byte*>(word) - pool.base()),
            word_field::packed_next};
  }
  static word_place size_place(const alloc::pool& pool, const void* word) {
    return {place_of(pool, word).holder, word_field::packed_shape};
  }
  static constexpr std::uint32_t slot_bit(std::size_t i) { return std::uint32_t{1} << i; }
  // The keys the small runs of `slots` (a mask of slot bits) hold, in order, each with the
  // newest of those runs' records (an erasure as `as`), into *out; their keys are copied
  // into *keys, which out's keys view. The values view the runs' nodes, which stay while
  // the runs do. The runs' cursors sit in a binary heap whose top is the smallest key's
  // newest record (a tie goes to the higher slot): each key costs about two comparisons
  // per level, a few in all, where a look at every cursor for each key cost two
  // comparisons of each run's key (before gathering, two thirds of a merge behind a fill).
  Status newest_records(std::uint32_t slots, typename run::erase_as as, std::vector<change>* out,
                        std::string* keys) const {
    std::vector<typename run::cursor> cursors;
    cursors.reserve(static_cast<std::size_t>(std::popcount(slots)));
    for (std::uint32_t m = slots; m != 0; m &= m - 1) {  // the lowest slot first
      cursors.emplace_back(*small_[static_cast<std::size_t>(std::countr_zero(m))], true);
      if (Status s = cursors.back().seek_to_first(); !s.ok()) return s;
    }
    std::vector<std::size_t> heap;  // indexes of cursors: a higher index is a newer run
    const auto before = [&](std::size_t a, std::size_t b) {
      const int c = compare_keys(cursors[a].key(), cursors[b].key());
      return c < 0 || (c == 0 && a > b);
    };
    const auto sift_down = [&](std::size_t i) {
      while (true) {
        std::size_t least = i;
        for (std::size_t child = 2 * i + 1; child <= 2 * i + 2 && child < heap.size(); ++child) {
          if (before(heap[child], heap[least])) least = child;
        }
        if (least == i) return;
        std::swap(heap[i], heap[least]);
        i = least;
      }
    };
    // Steps the top's cursor; one at its end leaves the heap.
    const auto step_top = [&]() -> Status {
      if (Status s = cursors[heap.front()].next(); !s.ok()) return s;
      if (!cursors[heap.front()].valid()) {
        heap.front() = heap.back();
        heap.pop_back();
      }
      if (!heap.empty()) sift_down(0);
      return Status::OK();
    };
    for (std::size_t i = 0; i < cursors.size(); ++i) {
      if (cursors[i].valid()) heap.push_back(i);
    }
    for (std::size_t i = heap.size() / 2; i-- > 0;) sift_down(i);
    std::vector<std::size_t> key_ends;
    keys->clear();
    out->clear();
    while (!heap.empty()) {
      const typename run::cursor& newest = cursors[heap.front()];
      const std::size_t at = keys->size();
      keys->append(newest.key());
      key_ends.push_back(keys->size());
      out->push_back({{}, newest.value(), newest.erased(), as});
      const std::string_view key(keys->data() + at, keys->size() - at);  // until keys grows
      // The older runs' records of the key come to the top next: each is passed over.
      do {
        if (Status s = step_top(); !s.ok()) return s;
      } while (!heap.empty() && cursors[heap.front()].key() == key);
    }
    for (std::size_t i = 0, at = 0; i < out->size(); at = key_ends[i], ++i) {
      (*out)[i].key = std::string_view(keys->data() + at, key_ends[i] - at);
    }
    return Status::OK();
  }
  // The changes of `newer` and `older` (each sorted, no key twice) in order, newer's where
  // both have a key.
  static std::vector<change> newer_over_older(std::span<const change> newer,
                                              std::span<const change> older) {
    std::vector<change> both;
    both.reserve(newer.size() + older.size());
    std::size_t i = 0, j = 0;
    while (i < newer.size() || j < older.size()) {
      const int c = i == newer.size()   ? 1
                    : j == older.size() ? -1
                                        : compare_keys(newer[i].key, older[j].key);
      if (c <= 0) {
        if (c == 0) ++j;
        both.push_back(newer[i++]);
      } else {
        both.push_back(older[j++]);
      }
    }
    return both;
  }

  // Publishes a front filter over front_hashes_, whose last `added` are new since the last:
  // the last one's copy with them added, or, past its capacity, one made anew for at least
  // the small runs' worth of such flushes. Without key filters, none.
  void publish_front(std::size_t added) {
    if (filter_bits_per_key_ == 0) return;
    const key_filter* old = front_.load(std::memory_order_relaxed);
    key_filter* made;
    if (old != nullptr && old->has_room(added)) {
      made = new key_filter(*old);
      for (std::size_t i = front_hashes_.size() - added; i < front_hashes_.size(); ++i) {
        made->add(front_hashes_[i]);
      }
    } else {
      made = new key_filter(std::max(2 * front_hashes_.size(), kPackedSmallRuns * added),
                            filter_bits_per_key_);
      for (std::uint32_t hash : front_hashes_) made->add(hash);
    }
    front_.store(made, std::memory_order_release);
    retire_front(old);
  }
  // A front filter no longer published.
  void retire_front(const key_filter* old) { retire_object(epochs_, old); }

  const alloc::pool& pool_;
  root* root_;
  std::size_t node_bytes_;
  run large_;
  std::vector<std::unique_ptr<run>> small_;  // by slot: a higher slot is newer
  std::size_t end_ = 0;  // the writer's: the slot the next flush fills
  alloc::epoch_domain* epochs_;
  unsigned filter_bits_per_key_;
  // The slots whose runs may hold keys, for readers: a bit is set once its run is written
  // and cleared once it is emptied, so a reader that finds a bit clear finds the large run
  // holding what the run held (invariant (2)).
  std::atomic<std::uint32_t> occupied_{0};
  // The front filter: a key filter over every record of the small runs (null when they are
  // empty, or without key filters), so that a Get of a key no small run holds, most Gets,
  // passes them all on one line instead of one per run. Immutable once published; a flush
  // publishes the next before it sets its slot's bit, so a reader that finds the bit finds
  // a filter with the run's keys; a merge drops it only after emptying the small runs, so a
  // reader whose slots are stale and whose filter is newer finds the large run holding what
  // they held. The writer keeps the keys' hashes, to make the next.
  std::atomic<const key_filter*> front_{nullptr};
  std::vector<std::uint32_t> front_hashes_;
};

}  // namespace flintkv::internal
