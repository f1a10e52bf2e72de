// The packed tier: a large packed run and up to kPackedSmallRuns small ones in front of it,
// what the planned packed tier of the engine is to hold (docs/engine-design.md, "The packed
// tier"). The write tier is to hand it sorted batches of keys that stopped changing: each
// batch becomes a small run of its own (written once, with a key filter), small runs are
// gathered into larger ones level by level (invariant (6)), and the small runs are merged
// into the large run together when the slots are all taken (or the engine's writes pause),
// so that the large run's nodes are rewritten once per many batches, not once per batch.
//
// A key's record is the one in the newest run that holds one: the small runs newest first
// (a higher slot is newer), then the large run. A record is a value or an erasure
// (packed.hpp): a batch's erasure becomes an erasure record in the batch's small run, which
// hides the key's records in older runs, so a flush writes its own run and changes no
// other (a gather, invariant (6), empties runs whose keys an older run took). A
// merge takes each key's newest record into the large run: a value is written, an
// erasure removes the key. The large run is the bottom: no older run is left for an
// erasure to hide, so it holds values only.
//
// Invariants (of the durable state, at every persistence event):
//  (1) No small run at or above slot `end` holds a key: a flush fills slot end (and then
//      end moves up), a gather (6) empties the slots above its target (and end follows the
//      target), a merge empties every slot from the oldest up (and end goes to 0). Slots
//      below end may be empty after a crash inside a gather or a merge.
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
//  (6) A gather takes the newest kPackedGather small runs when they are of one level (a
//      flush's run is of level 0, a gathered run one level above its sources; DRAM only):
//      the oldest of them, in its own slot, takes for each key of the others the newest of
//      their records (a value or an erasure), in batches of its own, and only then are the
//      others emptied, oldest first. They are newer than it, so until each is emptied it
//      still answers its keys as before, and the target answers them as they did once the
//      newer ones holding a key are gone: a crash or a reader finds each key's answer
//      unchanged, whichever of them are left. Slot `end` then follows the target. So the
//      records of a run are rewritten about once a level (levels 0 to 3 hold the keys of
//      1, 8, 64 and 512 flushes), where a merge into the large run rewrites the whole large
//      run, and readers meet at most seven runs of each level and the newest.
//
// Errors: as a packed run's. A flush into a tier whose slots are all taken is Busy: merge
// first. After an error, each key is as (2) and (3) say, and the tier is usable.
//
// Thread safety: one writer (recover, flush, merge) at a time; with an epoch domain, readers
// (get, cursors) on any threads beside it, each pinned for its call, as a run's are. A get
// or a cursor that meets a merge or a gather still answers each key as the tier did
// throughout (it looks in the small runs newest first, then in the large run, and a merge
// or a gather empties small runs only after the run that takes their records holds each
// key's newest one, or, for the large run, has let go of their erased keys).
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
// The newest kPackedGather runs, when of one level, are gathered into one run of the next
// level (invariant (6)). With 24 slots, about 2,000 flushes fill the tier before a merge
// into the large run is needed: seven runs of each of levels 0 to 2 and three of level 3.
inline constexpr std::size_t kPackedGather = 8;
static_assert(kPackedGather >= 2 && kPackedGather <= kPackedSmallRuns);
// Keys a gather or a merge applies to its target at a time (packed_tier::apply_newest).
inline constexpr std::size_t kPackedChunk = 8192;

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
      // Grown, as the large run's: a gather adds its sources' keys batch by batch, where a
      // filter remade at each publication would walk the target's every record each time.
      small_.push_back(std::make_unique<run>(pool, h, &head, place_of(pool, &head), node_bytes,
                                             epochs, filter_bits_per_key,
                                             run::filter_upkeep::grown));
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
      level_[i] = kUnknownLevel;
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
  // otherwise as a run's apply (NoSpace writes nothing). Then, while the newest
  // kPackedGather runs are of one level, they are gathered into the oldest of them
  // (gather, invariant (6)), so that a run's records are rewritten about once a level,
  // not once per merge into the large run, and readers meet a few runs of each level. A
  // gather's error is returned after the flush's run is written: the tier answers as
  // before it, and the next flush gathers again.
  Status flush(std::span<const change> changes) {
    if (changes.empty()) return Status::OK();
    if (full()) return Status::Busy("packed tier: every small run is taken");
    std::vector<change> batch(changes.begin(), changes.end());
    for (change& c : batch) c.as = run::erase_as::record;
    // An empty run takes a batch whole: its nodes, then one store of its head (a batch that
    // runs out of room frees the nodes it made and stores nothing).
    Status s = small_[end_]->apply(batch);
    small_[end_]->release_buffers();  // a small run is written seldom: one set for all
    if (small_[end_]->nodes() == 0) return s;
    // The front filter takes the run's keys before readers find its slot (front_).
    for (const change& c : changes) front_hashes_.push_back(key_hash(c.key));
    publish_front(changes.size());
    occupied_.fetch_or(slot_bit(end_), std::memory_order_release);
    level_[end_] = 0;
    ++end_;
    return s.ok() ? gather() : s;
  }

  // Merges every small run into the large run, then empties them (invariants (2), (4)).
  Status merge() {
    if (end_ == 0) return Status::OK();
    // Each key's newest record of the small runs: a newest erasure removes the key from
    // the large run; an erasure record never enters it, since no run below it is left to
    // hide. The records go in chunks (apply_newest), whose values view the small runs'
    // nodes: those stay until the large run is written.
    const std::uint32_t all = occupied_.load(std::memory_order_relaxed);
    if (Status s = apply_newest(large_, all, run::erase_as::removal); !s.ok()) return s;
    clear_oldest_first(all);
    end_ = 0;
    front_hashes_.clear();
    retire_front(front_.exchange(nullptr, std::memory_order_acq_rel));
    return Status::OK();
  }

  // The level of the small run in `slot` (for tests and statistics; the writer's thread):
  // 0 for a flush's run, one more than its sources' for a gathered one, kUnknownLevel for a
  // run found at recovery. REQUIRES: the slot holds a run.
  std::uint8_t level(std::size_t slot) const { return level_[slot]; }
  static constexpr std::uint8_t kUnknownLevel = 0xff;
  // The gathers made since the tier was made (the writer's thread).
  std::uint64_t gathers() const { return gathers_; }

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
        const std::size_t i = highest_slot(m);
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
        const std::size_t i = highest_slot(m);
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
  // While the newest kPackedGather runs are of one level, they become one run of the next
  // level in the oldest one's slot (invariant (6)): that run takes, for each key of the
  // others, the newest of their records (values and erasures alike), and only then are the
  // others emptied, oldest first. A run of unknown level (found at recovery) is never
  // gathered; a merge takes it.
  Status gather() {
    while (true) {
      const std::uint32_t occupied = occupied_.load(std::memory_order_relaxed);
      if (static_cast<std::size_t>(std::popcount(occupied)) < kPackedGather) {
        return Status::OK();
      }
      const std::uint8_t level = level_[highest_slot(occupied)];
      if (level == kUnknownLevel) return Status::OK();
      std::uint32_t top = 0;
      std::size_t oldest = 0;
      for (std::uint32_t m = occupied; static_cast<std::size_t>(std::popcount(top)) < kPackedGather;) {
        oldest = highest_slot(m);
        if (level_[oldest] != level) return Status::OK();
        top |= slot_bit(oldest);
        m &= ~slot_bit(oldest);
      }
      const std::uint32_t sources = top & ~slot_bit(oldest);
      Status s = apply_newest(*small_[oldest], sources, run::erase_as::record);
      small_[oldest]->release_buffers();
      if (!s.ok()) return s;
      clear_oldest_first(sources);
      level_[oldest] = static_cast<std::uint8_t>(std::min<unsigned>(level + 1u, kUnknownLevel - 1u));
      end_ = oldest + 1;
      ++gathers_;
    }
  }

  // Applies to `target` the newest record of each key the small runs of `sources` (a mask
  // of slot bits, every one a slot above target's if target is a small run) hold, an
  // erasure as `as`, in chunks of kPackedChunk keys in key order: each chunk is a batch of
  // the target's (atomic per node), so a crash or a reader between two finds some keys
  // with their new record in the target and the rest with their old, while the sources,
  // newer, still answer for all of them. The chunks bound the DRAM a merge of a large
  // front holds: the keys and changes of one chunk, not of every key.
  Status apply_newest(run& target, std::uint32_t sources, typename run::erase_as as) {
    newest_records records(*this, sources);
    if (Status s = records.start(); !s.ok()) return s;
    std::vector<change> chunk;
    std::string keys;  // the chunk's keys: chunk's keys view it
    while (true) {
      if (Status s = records.next_chunk(kPackedChunk, as, &chunk, &keys); !s.ok()) return s;
      if (chunk.empty()) return Status::OK();
      if (Status s = target.apply(chunk); !s.ok()) return s;
    }
  }

  // Empties the small runs of `slots`, the lowest slot (the oldest run) first: between two
  // clears (a crash, or a reader), the runs left of them are the newest, so each key whose
  // newest record they held still answers as it did, from a newer run left or from the run
  // that took their records (a gather's target, or the large run). Emptied newest first,
  // the run of a key's newest record could go before an older run of an older value,
  // which would answer again.
  void clear_oldest_first(std::uint32_t slots) {
    for (std::uint32_t m = slots; m != 0; m &= m - 1) {
      const auto i = static_cast<std::size_t>(std::countr_zero(m));
      small_[i]->clear();
      occupied_.fetch_and(~slot_bit(i), std::memory_order_release);
    }
  }

  // The newest run's slot of a non-empty mask of slots.
  static std::size_t highest_slot(std::uint32_t slots) {
    return 31 - static_cast<std::size_t>(std::countl_zero(slots));
  }

  // The keys the small runs of a mask of slots hold, in order, each with the newest of
  // those runs' records, a chunk at a time (next_chunk). The values view the runs' nodes,
  // which stay while the runs do. The runs' cursors sit in a binary heap whose top is the
  // smallest key's newest record (a tie goes to the higher slot): each key costs about two
  // comparisons per level, a few in all, where a look at every cursor for each key cost two
  // comparisons of each run's key (before gathering, two thirds of a merge behind a fill).
  class newest_records {
   public:
    newest_records(const packed_tier& tier, std::uint32_t slots) {
      cursors_.reserve(static_cast<std::size_t>(std::popcount(slots)));
      for (std::uint32_t m = slots; m != 0; m &= m - 1) {  // the lowest slot first
        cursors_.emplace_back(*tier.small_[static_cast<std::size_t>(std::countr_zero(m))], true);
      }
    }
    // Positions every run's cursor at its first key.
    Status start() {
      for (auto& c : cursors_) {
        if (Status s = c.seek_to_first(); !s.ok()) return s;
      }
      for (std::size_t i = 0; i < cursors_.size(); ++i) {
        if (cursors_[i].valid()) heap_.push_back(i);
      }
      for (std::size_t i = heap_.size() / 2; i-- > 0;) sift_down(i);
      return Status::OK();
    }
    // The next (up to) `most` keys with their newest records (an erasure as `as`) into
    // *out, their keys copied into *keys, which out's keys view; none once every key was
    // taken.
    Status next_chunk(std::size_t most, typename run::erase_as as, std::vector<change>* out,
                      std::string* keys) {
      key_ends_.clear();
      keys->clear();
      out->clear();
      while (!heap_.empty() && out->size() < most) {
        const typename run::cursor& newest = cursors_[heap_.front()];
        const std::size_t at = keys->size();
        keys->append(newest.key());
        key_ends_.push_back(keys->size());
        out->push_back({{}, newest.value(), newest.erased(), as});
        const std::string_view key(keys->data() + at, keys->size() - at);  // until keys grows
        // The older runs' records of the key come to the top next: each is passed over.
        do {
          if (Status s = step_top(); !s.ok()) return s;
        } while (!heap_.empty() && cursors_[heap_.front()].key() == key);
      }
      for (std::size_t i = 0, at = 0; i < out->size(); at = key_ends_[i], ++i) {
        (*out)[i].key = std::string_view(keys->data() + at, key_ends_[i] - at);
      }
      return Status::OK();
    }

   private:
    bool before(std::size_t a, std::size_t b) const {
      const int c = compare_keys(cursors_[a].key(), cursors_[b].key());
      return c < 0 || (c == 0 && a > b);  // a higher index is a newer run
    }
    void sift_down(std::size_t i) {
      while (true) {
        std::size_t least = i;
        for (std::size_t child = 2 * i + 1; child <= 2 * i + 2 && child < heap_.size(); ++child) {
          if (before(heap_[child], heap_[least])) least = child;
        }
        if (least == i) return;
        std::swap(heap_[i], heap_[least]);
        i = least;
      }
    }
    // Steps the top's cursor; one at its end leaves the heap.
    Status step_top() {
      if (Status s = cursors_[heap_.front()].next(); !s.ok()) return s;
      if (!cursors_[heap_.front()].valid()) {
        heap_.front() = heap_.back();
        heap_.pop_back();
      }
      if (!heap_.empty()) sift_down(0);
      return Status::OK();
    }

    std::vector<typename run::cursor> cursors_;
    std::vector<std::size_t> heap_;  // indexes of cursors_
    std::vector<std::size_t> key_ends_;
  };

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
  // The writer's: each occupied slot's level (level()).
  std::array<std::uint8_t, kPackedSmallRuns> level_{};
  std::uint64_t gathers_ = 0;  // the writer's
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
