// The engine's iterator: the keys whose newest version at or below its version is not a
// delete, in key order, each with that version's value; and, behind the list, the packed
// tier's keys (docs/engine-design.md, "The engine over the packed tier").
//
// With a tier that holds records, the iterator merges two sides by key: the list's entries
// that have a version at or below the iterator's (a delete too: it hides the tier's key),
// and the tier's cursor. On a tie the list answers; a key whose list versions are all newer
// than the iterator's is not on the list's side, so the tier answers it. Forward moves step
// the side that answered (both on a tie); backward moves seek both sides again below the
// key. Keys are copied when either side answers, and the value at the first value() after
// a move, from the node the move read while it is still allocated, else read again: the
// tier's node may go with a merge beside the iterator, and a merge may move the list's key
// to the tier and free its entry and node. The list's side never rests between calls on
// the entry of a delete (reclamation may remove it): it keeps the key instead, and finds
// its place again when it moves. With an empty tier the iterator is the list's alone, as before.
//
// Thread safety: one iterator is used by one thread at a time; any number of iterators and
// writers run at once.
// Invariants:
//  (1) The iterator's version is registered (snapshot_registry) from construction to
//      destruction, so the watermark never passes it: reclamation never drops the version
//      it stands on, nor removes its entry (a key is removed only when its newest version is
//      a delete at or below the watermark, and the iterator stands only on live keys).
//      Refresh registers the newer version before the older one leaves, and stands nowhere
//      after it.
//  (2) Each move runs pinned in the epoch domain: entries it passes may be removed
//      meanwhile, and are freed only after it unpins.
//  (3) Merges do remove entries the iterator stands on (they move keys to the tier): each
//      raises the engine's moves() to an odd value before the first entry leaves and to an
//      even one after the last. A move that finds moves() changed since the last one, or
//      the last one's odd (it may have landed on an entry that left after it), finds its
//      place again by key, reading nothing it kept from before (moving).
// Persistence: reads only.
#pragma once

#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "flintkv/iterator.hpp"
#include "flintkv/options.hpp"
#include "flintkv/status.hpp"
#include "flintkv/internal/index.hpp"
#include "flintkv/internal/inline_string.hpp"
#include "flintkv/internal/reclamation.hpp"

namespace flintkv::internal {

// The keys an iterator copies: inline up to 48 bytes, so that a scan of short keys
// allocates nothing (each seekrandom op makes an iterator).
using held_key = inline_string<48>;

// Engine provides: index() -> const key_index&, pin(), registry() -> snapshot_registry&,
// enter_reader() -> snapshot_registry::registration (throws std::bad_alloc),
// moves() -> std::uint64_t, tier() -> const tier_t* (null: none), value_at(key, version,
// verify, std::string*) -> Status,
// value_after(const version_ref&, std::size_t key_size), verify(const inode*, const
// version_ref&) -> Status,
// prefetch_node(const inode*, const version_ref&), prefetch_node_start(std::uint64_t pnode),
// node_by_tag(const key_index::ahead&, std::uint64_t version, bool verify, std::string_view*,
// version_ref*) -> bool.
template <class Engine>
class engine_iterator final : public Iterator {
  using tier_cursor = typename Engine::tier_t::cursor;

 public:
  // Reads at the registration's version (made by the caller: the iterator takes it over).
  engine_iterator(const Engine* e, const snapshot_registry::registration& r,
                  const ReadOptions& options)
      : engine_(e), registration_(r), at_snapshot_(options.snapshot != nullptr),
        verify_(options.verify_checksums), lower_(options.lower_bound),
        upper_(options.upper_bound) {}

  ~engine_iterator() override { engine_->registry().leave(registration_); }

  bool Valid() const override { return tiered_ ? answer_ != side::none : current_ != nullptr; }

  void SeekToFirst() override {
    auto pinned = engine_->pin();
    moving([&](bool) { seek_to_first(); });
  }

  void SeekToLast() override {
    auto pinned = engine_->pin();
    moving([&](bool) { seek_to_last(); });
  }

  void Seek(std::string_view target) override {
    auto pinned = engine_->pin();
    if (lower_ && compare_keys(target, *lower_) < 0) target = *lower_;
    from_.assign(target);  // target may be this iterator's key(), which the move changes
    moving([&](bool) { seek(from_); });
  }

  void SeekForPrev(std::string_view target) override {
    auto pinned = engine_->pin();
    from_.assign(target);
    moving([&](bool) { seek_for_prev(from_); });
  }

  // REQUIRES (Next, Prev): Valid().
  void Next() override {
    auto pinned = engine_->pin();
    bool kept = tiered_;  // left_key holds the key the move leaves
    std::string_view left_key = kept ? leave() : std::string_view();
    const inode* left = current_;
    int attempt = 0;  // attempts that moved the list's side
    moving([&](bool stale) {
      if (stale) {
        keep_key_left(attempt, left, &kept, &left_key);
        enter_tier();
        seek_forward(left_key, true);
        return;
      }
      ++attempt;
      if (!tiered_) {
        step_list_forward();
        return;
      }
      if (backward_) {
        seek_forward(left_key, true);
        return;
      }
      if (answer_ == side::tier) {
        if (Status s = tier_->next(); !s.ok()) return fail(s);
      } else {
        step_list_forward();
      }
      merge_forward();
    });
  }

  void Prev() override {
    auto pinned = engine_->pin();
    bool kept = tiered_;  // left_key holds the key the move leaves
    std::string_view left_key = kept ? leave() : std::string_view();
    const inode* left = current_;
    int attempt = 0;  // attempts that moved the list's side
    moving([&](bool stale) {
      if (stale || tiered_) {
        keep_key_left(attempt, left, &kept, &left_key);
        enter_tier();
        seek_backward(left_key, false);
        return;
      }
      ++attempt;
      settle_backward_from(current_);
    });
  }

  std::string_view key() const override {
    return tier_answers() ? tier_keys_[tier_at_].view() : key_.view();
  }
  // The value is copied at the first call after a move (a scan that reads only keys copies
  // none), from the node the move read it in while that node is still allocated, else read
  // again at the iterator's version, from the list or the tier. The list's node: while no
  // merge moved keys since the move (moving); a merge may have moved the key and freed its
  // node, and the tier then holds the same value. The tier's node: while its run published
  // no index since (packed_run's cursor, value_readable); a merge may have rewritten the
  // key's node, with the same value. If that read fails, value() is empty and status() says
  // why.
  std::string_view value() const override {
    if (!value_copied_) copy_value();
    return value_;
  }
  // Corruption once the iterator met a damaged node (it is then not Valid), until the next
  // seek; OK otherwise.
  Status status() const override { return status_; }

  // The visible version is registered before the iterator's leaves (invariant (1)); the
  // buffers, the tier's cursor and its parts are kept for the seeks to come. On an error
  // nothing changes.
  Status Refresh() override {
    if (at_snapshot_) return Status::NotSupported("Refresh: the iterator reads a snapshot");
    snapshot_registry::registration r;
    try {
      r = engine_->enter_reader();
    } catch (const std::bad_alloc&) {
      return Status::NoSpace("out of DRAM");  // within std::string's inline room
    }
    engine_->registry().leave(registration_);
    registration_ = r;
    stop();
    status_ = Status::OK();
    return Status::OK();
  }

 private:
  const key_index& index() const { return engine_->index(); }

  // value(), copied (above).
  void copy_value() const {
    auto pinned = engine_->pin();
    value_copied_ = true;
    if (tier_answers()) {
      if (tier_->value_readable()) {
        value_.assign(tier_->value());
        return;
      }
    } else if (!unsettled() && engine_->moves() == moves_) {
      value_.assign(engine_->value_after(version_ref_, key_.size()));
      return;
    }
    if (Status s = engine_->value_at(key(), registration_.version, verify_, &value_); !s.ok()) {
      value_.clear();
      status_ = std::move(s);
    }
  }
  bool tier_answers() const { return tiered_ && answer_ == side::tier; }

  // Next and Prev with the tier: the key the move leaves, kept through the move. The
  // tier's answer stays in its buffer, which the move's answers do not write
  // (answer_from_tier); the list's is copied, since its side lands anew. REQUIRES: Valid().
  std::string_view leave() {
    tier_keep_ = tier_at_;
    if (answer_ == side::tier) return tier_keys_[tier_at_].view();
    from_.assign(key_);
    return from_.view();
  }
  // Next and Prev with the list alone: the key the move leaves, in from_ (*key), once the
  // move needs it (a merge moved keys). Before any attempt moved the list's side, key_
  // still holds it; after one, the entry the iterator left does, allocated while the move
  // is pinned (that attempt found moves() unchanged since the last move: moving).
  void keep_key_left(int attempts, const inode* left, bool* kept, std::string_view* key) {
    if (*kept) return;
    from_.assign(attempts == 0 ? std::string_view(key_) : left->key());
    *key = from_.view();
    *kept = true;
  }

  // ---- moves -----------------------------------------------------------------------------

  // Runs a move, `move(stale)`, again until no merge moved keys out of the list while it
  // ran (the engine's moves() unchanged from before it to after it). `stale`: a merge moved
  // keys since the iterator's last move (or during the attempt before), or was removing
  // entries during the last move (moves() odd then), so the entries the iterator stands on
  // and its read-ahead may be gone; a move that goes on from its place then finds it again
  // by key (from_). A move that overlapped a merge may have read the tier before the merge
  // published its keys and the list after it removed them, and missed them: the attempt
  // after it meets none, as merges are milliseconds apart (so this is lock-free, not
  // wait-free, as the tier cursor's positioning is). A move during a merge's removals
  // (moves() odd and unchanged throughout) reads the tier after the merge published it, so
  // it misses nothing, but the entry it lands on may leave right after: the next move takes
  // it as stale. REQUIRES: pinned.
  // A merge raises moves() before it removes any entry and after the last, and retires
  // what it removes through the epoch domain: an attempt that read the same even moves()
  // after pinning as the last move did, which read it at its start and end, stands only on
  // entries that were in the index when it began and stay allocated until it unpins.
  template <class Move>
  void moving(Move&& move) {
    value_copied_ = false;  // whichever side answers, its value is copied anew
    for (bool again = false;; again = true) {
      const std::uint64_t moves = engine_->moves();
      const bool stale = again || moves != moves_ || unsettled();
      moves_ = moves;
      move(stale);
      if (engine_->moves() == moves) return;
    }
  }
  // The last move ran while a merge was removing entries (moves() odd).
  bool unsettled() const { return (moves_ & 1) != 0; }

  void seek_to_first() {
    status_ = Status::OK();
    if (use_tier()) {
      if (lower_) {
        seek_forward(*lower_, false);
      } else {
        whole_ = false;
        settle_forward(index().head()->load_next());
        if (!status_.ok()) return stop();
        if (Status s = tier_->seek_to_first(); !s.ok()) return fail(s);
        merge_forward();
      }
      return;
    }
    if (lower_) {
      settle_forward(index().seek(*lower_));
      return;
    }
    settle_forward(index().head()->load_next());
  }

  void seek_to_last() {
    status_ = Status::OK();
    if (use_tier()) {
      if (upper_) {
        seek_backward(*upper_, false);
        return;
      }
      backward_ = true;
      whole_ = false;
      inode* last = index().last();
      if (last == index().head()) {
        current_ = nullptr;
      } else if (!accept_backward(last)) {
        settle_backward_below(last->key());
      }
      if (!status_.ok()) return stop();
      if (Status s = tier_->seek_to_last(); !s.ok()) return fail(s);
      merge_backward();
      return;
    }
    if (upper_) {
      settle_backward_below(*upper_);
      return;
    }
    inode* last = index().last();
    if (last == index().head()) {
      current_ = nullptr;
      return;
    }
    if (!accept_backward(last)) settle_backward_below(last->key());
  }

  void seek(std::string_view target) {
    status_ = Status::OK();
    if (use_tier()) {
      seek_forward(target, false);
      return;
    }
    inode* n = index().seek_ahead(target, ahead_, kAhead, &ahead_end_, requester());
    ahead_at_ = 0;
    whole_ = ahead_end_ > 0;
    if (land_by_tag()) return;
    settle_forward(n, true);
  }

  void seek_for_prev(std::string_view target) {
    status_ = Status::OK();
    if (use_tier()) {
      if (upper_ && compare_keys(target, *upper_) >= 0) {
        seek_backward(*upper_, false);
      } else {
        seek_backward(target, true);
      }
      return;
    }
    if (upper_ && compare_keys(target, *upper_) >= 0) {
      settle_backward_below(*upper_);
      return;
    }
    inode* n = index().find(target);
    if (n != nullptr && accept_backward(n)) return;
    settle_backward_below(target);
  }

  // ---- the packed tier's side ------------------------------------------------------------

  enum class side : std::uint8_t { none, list, tier };

  bool tier_empty() const {
    return engine_->tier() == nullptr || engine_->tier()->empty();
  }
  // At a positioning move: whether the tier holds records, so that both sides are read
  // (the cursor is made the first time). REQUIRES: pinned.
  bool use_tier() {
    backward_ = false;
    list_pending_ = false;
    answer_ = side::none;
    tiered_ = false;
    if (!tier_empty()) enter_tier();
    return tiered_;
  }
  void enter_tier() {
    tiered_ = true;
    if (!tier_) tier_.emplace(*engine_->tier(), verify_);
  }

  // Both sides at the first key at or after `key` (past it, with `past`), then the merge.
  void seek_forward(std::string_view key, bool past) {
    backward_ = false;
    list_pending_ = false;
    whole_ = false;
    settle_forward(index().seek(key));
    if (past && current_ != nullptr && key_.view() == key) step_list_forward();
    if (!status_.ok()) return stop();
    if (Status s = tier_->seek(key); !s.ok()) return fail(s);
    if (past && tier_->valid() && tier_->key() == key) {
      if (Status s = tier_->next(); !s.ok()) return fail(s);
    }
    merge_forward();
  }

  // Both sides at the last key before `key` (at or before it, with `inclusive`), then the
  // merge.
  void seek_backward(std::string_view key, bool inclusive) {
    backward_ = true;
    list_pending_ = false;
    whole_ = false;
    list_at_or_below(key, inclusive);
    if (!status_.ok()) return stop();
    Status s = Status::OK();
    if (inclusive) {
      s = tier_->seek(key);
      if (s.ok() && !(tier_->valid() && tier_->key() == key)) s = tier_->seek_before(key);
    } else {
      s = tier_->seek_before(key);
    }
    if (!s.ok()) return fail(s);
    merge_backward();
  }

  // The list's side at its last entry before `key` (or at `key`, with `inclusive`) that
  // has a version at or below the iterator's.
  void list_at_or_below(std::string_view key, bool inclusive) {
    if (inclusive) {
      inode* n = index().find(key);
      if (n != nullptr && accept_backward(n)) return;
    }
    settle_backward_below(key);
  }

  // The list's side one entry on, forward (its prefetching path).
  void step_list_forward() {
    if (whole_ && ahead_at_ == ahead_end_) {
      ahead_end_ = index().following(key_, ahead_, kAhead, requester());
      ahead_at_ = 0;
    }
    if (land_by_tag()) return;
    settle_forward(current_->load_next(), true);
  }

  // Picks the answer of the two sides, forward: the smaller key; on a tie the list's, and
  // the tier's side steps past it; a delete on the list's side is stepped past (with the
  // tier's key it hides). The tier's side counts as done at the upper bound.
  void merge_forward() {
    while (true) {
      if (list_pending_) {
        list_pending_ = false;
        settle_forward(index().seek(list_key_));
      }
      if (!status_.ok()) return stop();
      const bool on_tier = tier_->valid() && (!upper_ || compare_keys(tier_->key(), *upper_) < 0);
      if (current_ == nullptr && !on_tier) {
        answer_ = side::none;
        return;
      }
      const int c = current_ == nullptr ? 1 : !on_tier ? -1 : compare_keys(key_, tier_->key());
      if (c > 0) {
        answer_from_tier();
        return;
      }
      if (c == 0) {
        if (Status s = tier_->next(); !s.ok()) return fail(s);
      }
      if (!list_deleted_) {
        answer_ = side::list;
        return;
      }
      step_list_forward();
    }
  }

  // The same, backward: the larger key; the tier's side counts as done below the lower
  // bound (the list's side stops there itself, accept_backward).
  void merge_backward() {
    while (true) {
      if (list_pending_) {
        list_pending_ = false;
        list_at_or_below(list_key_, true);
      }
      if (!status_.ok()) return stop();
      const bool on_tier = tier_->valid() && (!lower_ || compare_keys(tier_->key(), *lower_) >= 0);
      if (current_ == nullptr && !on_tier) {
        answer_ = side::none;
        return;
      }
      const int c = current_ == nullptr ? -1 : !on_tier ? 1 : compare_keys(key_, tier_->key());
      if (c < 0) {
        answer_from_tier();
        return;
      }
      if (c == 0) {
        resume_.assign(key_);
        if (Status s = tier_->seek_before(resume_); !s.ok()) return fail(s);
      }
      if (!list_deleted_) {
        answer_ = side::list;
        return;
      }
      resume_.assign(key_);
      settle_backward_below(resume_);
    }
  }

  // The tier's key answers: copied, into the buffer that does not hold the key a Next or
  // Prev leaves (leave), and its value once value() asks. A delete on the list's side is
  // kept as its key.
  void answer_from_tier() {
    tier_at_ = tier_keep_ ^ 1;
    tier_keys_[tier_at_].assign(tier_->key());
    answer_ = side::tier;
    if (current_ != nullptr && list_deleted_) {
      list_key_.assign(key_);
      list_pending_ = true;
      current_ = nullptr;
    }
  }

  // A move that met damage (the list's side set status_ itself): not Valid.
  void stop() {
    answer_ = side::none;
    current_ = nullptr;
  }
  // A tier's move that failed: its status, naming the pool.
  void fail(const Status& s) {
    status_ = engine_->with_path(s);
    stop();
  }

  // From entry n on, moves to the first key live at the iterator's version.
  // `from_tree`: Seek and Next, which prefetch from the tree (prefetch_ahead).
  void settle_forward(inode* n, bool from_tree = false) {
    for (; n != nullptr; n = n->load_next()) {
      if (upper_ && compare_keys(n->key(), *upper_) >= 0) break;
      const std::optional<version_ref> v = n->visible_at(registration_.version);
      if (v && (!v->tombstone || tiered_)) {
        land(n, *v, from_tree);
        return;
      }
    }
    current_ = nullptr;
  }

  // The last key live at the iterator's version before entry n (which is in the index: the
  // iterator stands on it), along the level-0 back links. A back link leads to the entry
  // that preceded its owner when the combiner last wrote it; an entry linked in between
  // later holds only versions above the iterator's, and an entry removed since held none it
  // can read (invariant (1)). So the walk passes no key the iterator reads, as long as each
  // entry it steps from is still in the index; at one that was removed meanwhile it
  // searches instead.
  void settle_backward_from(inode* n) {
    const inode* head = index().head();
    for (inode* p = n->prev(); p != nullptr; n = p, p = p->prev()) {
      if (p == head) {
        current_ = nullptr;
        return;
      }
      if (p->removed.load(std::memory_order_acquire)) break;
      if (accept_backward(p)) return;
    }
    settle_backward_below(n->key());
  }

  // The last key live at the iterator's version strictly before `key`.
  void settle_backward_below(std::string_view key) {
    std::string_view bound = key;  // a caller's key or an entry's: both outlive this call
    while (true) {
      inode* last = index().last_below(bound);
      if (last == index().head()) break;
      if (accept_backward(last)) return;
      bound = last->key();
    }
    current_ = nullptr;
  }

  // Takes n if it is live and within the lower bound; false to keep looking back.
  bool accept_backward(inode* n) {
    if (lower_ && compare_keys(n->key(), *lower_) < 0) {
      current_ = nullptr;  // before the lower bound: iteration is over
      return true;
    }
    const std::optional<version_ref> v = n->visible_at(registration_.version);
    if (!v || (v->tombstone && !tiered_)) return false;
    land(n, *v);
    return true;
  }

  // Positions the iterator on n's version v, once its node passed verification (if asked).
  // A delete's node is not verified: the iterator reads nothing of it (the key is the
  // entry's copy, and there is no value), and a reclamation pass that removes the key frees
  // it at once, while this move may still stand on the entry (reclamation.hpp, (3)).
  void land(inode* n, const version_ref& v, bool from_tree = false) {
    if (verify_ && !v.tombstone) {
      if (Status s = engine_->verify(n, v); !s.ok()) {
        status_ = std::move(s);
        current_ = nullptr;
        return;
      }
    }
    current_ = n;
    key_.assign(n->key());
    version_ref_ = v;
    value_copied_ = false;
    list_deleted_ = v.tombstone;
    prefetch_ahead(n, from_tree);
  }

  // Seek and Next: takes the next entry from the tree, ahead_[ahead_at_], without reading
  // it, where its tag's node answers (Engine::node_by_tag: no version since the tag, at or
  // below the iterator's version, not a delete, within the upper bound). Then it is the
  // next key the iterator reads: whole_ says ahead_ came from a tree that held every
  // entry, and such a tree holds every key the iterator reads from before the iterator's
  // version was read until the iterator is gone (index.hpp, seek_ahead), so between the
  // key the iterator stands on and this one no key it reads was left out of ahead_
  // (btree.hpp, following). False leaves the step to the entries. The entry is not read
  // later either, except by a move that leaves this key (Next's fallback, Prev): as the
  // entry of a key the iterator reads, it stays in the index (invariant (1)).
  bool land_by_tag() {
    if (!whole_ || ahead_at_ == ahead_end_) return false;
    const key_index::ahead& a = ahead_[ahead_at_];
    std::string_view key;
    version_ref v;
    if (!engine_->node_by_tag(a, registration_.version, verify_, &key, &v)) return false;
    if (upper_ && compare_keys(key, *upper_) >= 0) {
      current_ = nullptr;
      return true;
    }
    current_ = a.entry;
    key_.assign(key);
    version_ref_ = v;
    value_copied_ = false;
    list_deleted_ = false;
    ++ahead_at_;
    return true;
  }

  // A scan waits on a miss per entry and per node. So that they overlap, Seek and Next take
  // the entries that follow from the tree, whose leaves hold them side by side (index.hpp,
  // seek_ahead and following), and request the lines of all of them, then their nodes
  // (request_ahead): the steps after find both in cache. Along the list the entries from
  // the tree are a hint, never followed: the walk still takes each entry's successor link,
  // and where the hint and the list part (a write, a skipped key) or the hint runs out, the
  // tree is asked again (land_by_tag follows them, by its own argument). Other moves
  // (SeekToFirst, Prev ...) request the next entry, its node and the entry after it.
  void prefetch_ahead(const inode* n, bool from_tree) {
    if (from_tree) {
      if (ahead_at_ < ahead_end_ && ahead_[ahead_at_].entry == n) {
        ++ahead_at_;
        return;
      }
      ahead_end_ = index().following(n->key(), ahead_, kAhead, requester());
      ahead_at_ = 0;
      whole_ = index().tree_whole();
      return;
    }
    whole_ = false;
    const inode* next = n->next_relaxed();
    if (next == nullptr) return;
    __builtin_prefetch(next);
    __builtin_prefetch(reinterpret_cast<const char*>(next) + 64);
    engine_->prefetch_node(next, next->unlocked_newest());
    if (const inode* after = next->next_relaxed(); after != nullptr) {
      __builtin_prefetch(after);
      __builtin_prefetch(reinterpret_cast<const char*>(after) + 64);
    }
  }

  // Requests the node of each entry of ahead_[from .. to) whose tag is current
  // (update_marks) by the tag alone: land_by_tag will read it and not the entry. Of the
  // others, requests each entry up to its newest version's words (what a step reads of it),
  // then its newest node. Such a step waits on its entry and then its node, so the first
  // kTagged of their nodes are requested with the entries, from the tags, and again from the
  // entry where the tag is stale (a newer version since). The rest are requested from the
  // entries, which by then have arrived: requesting every node by its tag together with the
  // entries measured slower (docs/engine-design.md, "What bounds scans, space and memory").
  // The tree hands over the entries a leaf at a time (btree.hpp, on_leaf), and each leaf's
  // are requested before the tree reads the next: a Seek whose entries span two leaves waits
  // on the second leaf and its first nodes together, not one after the other.
  // REQUIRES: pinned since ahead_[from .. to) was filled (its entries are then safe to
  // read); the calls of one fill of ahead_ come in order, the first with from == 0.
  void request_ahead(std::size_t from, std::size_t to) {
    enum class asked : std::uint8_t { node, entry, entry_and_tag };
    asked what[kAhead];
    if (from == 0) untagged_ = 0;
    for (std::size_t i = from; i < to; ++i) {
      if (ahead_[i].tag != 0 && index().tag_current(ahead_[i].entry)) {
        what[i] = asked::node;
        engine_->prefetch_node_start(entry_node_tag::node(ahead_[i].tag));
        continue;
      }
      const char* e = reinterpret_cast<const char*>(ahead_[i].entry);
      __builtin_prefetch(e);
      __builtin_prefetch(e + inode::newest_end(ahead_[i].key_size) - 1);
      const bool early = untagged_++ < kTagged;
      what[i] = early && ahead_[i].tag != 0 ? asked::entry_and_tag : asked::entry;
      if (what[i] == asked::entry_and_tag) {
        engine_->prefetch_node_start(entry_node_tag::node(ahead_[i].tag));
      }
    }
    for (std::size_t i = from; i < to; ++i) {
      if (what[i] == asked::node) continue;
      const std::uint64_t pnode = ahead_[i].entry->unlocked_newest().pnode;
      if (what[i] == asked::entry || entry_node_tag::node(ahead_[i].tag) != pnode) {
        engine_->prefetch_node_start(pnode);
      }
    }
  }

  // The tree's on_leaf for a fill of ahead_.
  auto requester() {
    return [this](std::size_t from, std::size_t to) { request_ahead(from, to); };
  }

  // Entries that followed current_ when the tree was asked: compared and prefetched, never
  // dereferenced after the move that asked (they may have been removed and freed since).
  static constexpr std::size_t kAhead = 12;
  static constexpr std::size_t kTagged = 2;  // request_ahead
  key_index::ahead ahead_[kAhead];
  std::size_t untagged_ = 0;   // request_ahead: this fill's entries without a current tag
  std::size_t ahead_at_ = 0;   // ahead_[ahead_at_] is the entry expected next
  std::size_t ahead_end_ = 0;
  // Since the last Seek, ahead_ comes from a tree that held every entry, and
  // ahead_[ahead_at_ ..) are the entries that follow the key the iterator stands on.
  bool whole_ = false;

  const Engine* engine_;
  snapshot_registry::registration registration_;  // its version is the iterator's
  const bool at_snapshot_;  // made with ReadOptions::snapshot: Refresh is NotSupported
  const bool verify_;
  std::optional<std::string> lower_, upper_;
  inode* current_ = nullptr;
  // current_'s key, copied (a merge may move the key to the tier and free its entry and
  // node while the iterator rests on them, unpinned); its version, and its value once
  // value() asked for it.
  held_key key_;
  version_ref version_ref_;
  mutable std::string value_;
  mutable bool value_copied_ = false;
  mutable Status status_;
  std::uint64_t moves_ = 0;  // the engine's moves() at the iterator's last move
  held_key from_;            // the key a move starts from (or seeks)

  // The tier's side (above). tiered_: the last positioning move found records in the tier.
  bool tiered_ = false;
  bool backward_ = false;       // the last move went backward
  side answer_ = side::none;    // which side the iterator's key is from
  bool list_deleted_ = false;   // current_ stands on a delete (tiered_ only)
  bool list_pending_ = false;   // the list's side is at list_key_: find its entry again
  std::string list_key_;
  std::optional<tier_cursor> tier_;
  // The tier's answer is tier_keys_[tier_at_], copied; a Next or Prev keeps the key it
  // leaves in tier_keys_[tier_keep_] (leave).
  std::array<held_key, 2> tier_keys_;
  unsigned tier_at_ = 0, tier_keep_ = 0;
  std::string resume_;                 // a key a move leaves
};

}  // namespace flintkv::internal
