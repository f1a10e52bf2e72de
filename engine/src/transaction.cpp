// Transactions (flintkv/transaction.hpp): reads at a registered snapshot through the public
// DB interface, writes buffered in a map, commit through the engine's transaction_host,
// which validates under the combiner lock (internal/transaction.hpp).
//
// Ownership: the transaction and each of its iterators share one txn_state. When the
// transaction ends (Commit, Rollback, destruction) it releases its snapshot and closes its
// open iterators (each destroys its iterator over the snapshot); an iterator used later
// finds the state ended and touches nothing else. So an iterator may outlive its
// transaction (and even the DB, once the transaction has ended) without reaching freed
// memory.
#include "flintkv/internal/transaction.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <functional>
#include <map>
#include <new>
#include <vector>

#include "flintkv/internal/emergency_reserve.hpp"
#include "flintkv/internal/guarded.hpp"
#include "flintkv/internal/no_memory_iterator.hpp"

namespace flintkv::internal {

namespace {

enum class phase : std::uint8_t { active, committed, rolled_back, failed };

class txn_iterator;

struct txn_state {
  DB* db = nullptr;
  transaction_host* host = nullptr;
  WriteOptions write_options;
  TransactionOptions options;
  const Snapshot* snapshot = nullptr;  // registered while active
  phase state = phase::active;
  // The buffered writes: a value, or nullopt for a delete. Entries are never erased while
  // the transaction is active (iterators hold none of its iterators across calls anyway).
  std::map<std::string, std::optional<std::string>, std::less<>> writes;
  std::vector<std::string> reads;  // keys read from the snapshot by Get
  std::vector<key_range> ranges;   // ranges the iterators passed over in the snapshot
  std::vector<txn_iterator*> iterators;  // open iterators
  std::uint64_t commit_version = 0;

  bool active() const { return state == phase::active; }
  Status ended() const {
    switch (state) {
      case phase::committed: return Status::InvalidArgument("transaction already committed");
      case phase::rolled_back: return Status::InvalidArgument("transaction already rolled back");
      case phase::failed:
        return Status::InvalidArgument("transaction already ended: its Commit failed");
      case phase::active: break;
    }
    return Status::OK();
  }
  void end(phase p);
};

// Keys k and the first key after k in bytewise order.
std::string after(std::string_view k) {
  std::string s(k);
  s.push_back('\0');
  return s;
}

// Bounds as ranges: nullopt lo is the first key, nullopt hi the end.
bool lo_le_hi(const std::optional<std::string>& lo, const std::optional<std::string>& hi) {
  return !lo || !hi || *lo <= *hi;
}
const std::optional<std::string>& min_lo(const std::optional<std::string>& a,
                                          const std::optional<std::string>& b) {
  return !a ? a : !b ? b : (*a < *b ? a : b);
}
const std::optional<std::string>& max_hi(const std::optional<std::string>& a,
                                          const std::optional<std::string>& b) {
  return !a ? a : !b ? b : (*a < *b ? b : a);
}

// The transaction's view as an iterator: the snapshot's keys (an engine iterator, `base`)
// merged with the buffered writes. Each move of `base` records the range of keys it passed
// over, from where it stood (or the seek target) to where it stopped (the key it stands on,
// or the bound or the end): the keys whose absence or presence the iterator observed.
class txn_iterator final : public Iterator {
 public:
  txn_iterator(std::shared_ptr<txn_state> st, const ReadOptions& bounds)
      : st_(std::move(st)), lower_(bounds.lower_bound), upper_(bounds.upper_bound) {
    if (!st_->active()) return;
    ReadOptions o;
    o.snapshot = st_->snapshot;
    o.lower_bound = lower_;
    o.upper_bound = upper_;
    o.verify_checksums = st_->options.verify_checksums;
    st_->iterators.push_back(this);
    base_ = st_->db->NewIterator(o);
    if (base_ == nullptr) status_ = Status::NoSpace("out of DRAM");
  }

  ~txn_iterator() override {
    auto& its = st_->iterators;
    its.erase(std::remove(its.begin(), its.end(), this), its.end());
  }

  // The transaction ended: drop everything of the DB.
  void close() noexcept {
    base_.reset();
    valid_ = false;
  }

  bool Valid() const override { return valid_; }

  void SeekToFirst() override {
    if (!usable()) return;
    forward_ = true;
    base_->SeekToFirst();
    cover(lower_, forward_stop());
    settle_forward(lower_.value_or(std::string()), true);
  }

  void SeekToLast() override {
    if (!usable()) return;
    forward_ = false;
    base_->SeekToLast();
    cover(backward_start(), upper_);
    settle_backward(std::nullopt, true);
  }

  void Seek(std::string_view target) override {
    if (!usable()) return;
    forward_ = true;
    std::string t(lower_ && target < *lower_ ? std::string_view(*lower_) : target);
    base_seek(t);
    settle_forward(std::move(t), true);
  }

  void SeekForPrev(std::string_view target) override {
    if (!usable()) return;
    forward_ = false;
    std::string t(target);
    base_->SeekForPrev(t);
    cover(backward_start(), min_hi(after(t)));
    settle_backward(std::move(t), true);
  }

  void Next() override {
    if (!usable() || !valid_) return;
    const std::string current = key_;
    if (!forward_) {
      forward_ = true;
      base_seek(current);
    }
    if (base_->Valid() && base_->key() == current) base_next();
    settle_forward(current, false);
  }

  void Prev() override {
    if (!usable() || !valid_) return;
    const std::string current = key_;
    if (forward_) {
      forward_ = false;
      base_->SeekForPrev(current);
      cover(backward_start(), after(current));
    }
    if (base_->Valid() && base_->key() == current) base_prev();
    settle_backward(current, false);
  }

  std::string_view key() const override { return key_; }
  std::string_view value() const override { return value_; }

  Status status() const override {
    if (!st_->active()) return st_->ended();
    return status_;
  }

 private:
  using write_iter = std::map<std::string, std::optional<std::string>, std::less<>>::iterator;

  bool usable() {
    if (st_->active() && base_ != nullptr) return true;
    valid_ = false;
    return false;
  }

  // ---- moves of the snapshot's iterator, each recording what it passed over -----------

  void base_seek(const std::string& t) {
    base_->Seek(t);
    cover(t, forward_stop());
  }
  void base_next() {
    std::string from(base_->key());
    base_->Next();
    cover(std::move(from), forward_stop());
  }
  void base_prev() {
    std::string to = after(base_->key());
    base_->Prev();
    cover(backward_start(), std::move(to));
  }
  // Where a forward move stopped: just after the key it stands on, else the upper bound.
  std::optional<std::string> forward_stop() const {
    return base_->Valid() ? std::optional(after(base_->key())) : upper_;
  }
  // Where a backward move stopped: the key it stands on, else the lower bound.
  std::optional<std::string> backward_start() const {
    return base_->Valid() ? std::optional(std::string(base_->key())) : lower_;
  }
  std::optional<std::string> min_hi(std::string hi) const {
    if (upper_ && *upper_ < hi) return upper_;
    return hi;
  }

  // Adds [lo, hi) to the transaction's ranges, merged into the range this iterator
  // recorded last if the two touch (a scan records one range, not one per step).
  void cover(std::optional<std::string> lo, std::optional<std::string> hi) {
    if (lo && lower_ && *lo < *lower_) lo = lower_;
    if (hi && upper_ && *upper_ < *hi) hi = upper_;
    if (lo && hi && *hi <= *lo) return;
    auto& ranges = st_->ranges;
    if (last_ < ranges.size()) {
      key_range& r = ranges[last_];
      if (lo_le_hi(lo, r.hi) && lo_le_hi(r.lo, hi)) {
        std::optional<std::string> new_lo = min_lo(r.lo, lo);
        std::optional<std::string> new_hi = max_hi(r.hi, hi);
        r.lo = std::move(new_lo);
        r.hi = std::move(new_hi);
        return;
      }
    }
    ranges.push_back({std::move(lo), std::move(hi)});
    last_ = ranges.size() - 1;
  }

  // ---- the buffered writes within the bounds -----------------------------------------

  // The first write at or after t (after it if !inclusive), or end.
  write_iter first_write(const std::string& t, bool inclusive) const {
    auto& m = st_->writes;
    write_iter it = inclusive ? m.lower_bound(t) : m.upper_bound(t);
    if (it != m.end() && upper_ && it->first >= *upper_) return m.end();
    return it;
  }
  // The last write at or before t (before it if !inclusive; nullopt t: the last), or end.
  write_iter last_write(std::optional<std::string> t, bool inclusive) const {
    auto& m = st_->writes;
    if (upper_ && (!t || *t >= *upper_)) {
      t = upper_;
      inclusive = false;
    }
    write_iter it = !t ? m.end() : inclusive ? m.upper_bound(*t) : m.lower_bound(*t);
    if (it == m.begin()) return m.end();
    --it;
    if (lower_ && it->first < *lower_) return m.end();
    return it;
  }

  // ---- merging -------------------------------------------------------------------------

  // The first visible key at or after t (after, if !inclusive), given that base stands on
  // the first snapshot key at or after it (or after it).
  void settle_forward(std::string t, bool inclusive) {
    while (true) {
      if (!base_->Valid() && !base_->status().ok()) return fail();
      const write_iter w = first_write(t, inclusive);
      const bool has_base = base_->Valid();
      if (w == st_->writes.end() && !has_base) return none();
      if (w != st_->writes.end() && (!has_base || w->first <= base_->key())) {
        const bool shadows = has_base && w->first == base_->key();
        if (w->second) return land(w->first, *w->second);
        t = w->first;  // a delete of the transaction hides the key
        inclusive = false;
        if (shadows) base_next();
        continue;
      }
      return land(base_->key(), base_->value());
    }
  }

  // The last visible key at or before t (before, if !inclusive; nullopt: the last), given
  // that base stands on the last snapshot key at or before it (or before it).
  void settle_backward(std::optional<std::string> t, bool inclusive) {
    while (true) {
      if (!base_->Valid() && !base_->status().ok()) return fail();
      const write_iter w = last_write(t, inclusive);
      const bool has_base = base_->Valid();
      if (w == st_->writes.end() && !has_base) return none();
      if (w != st_->writes.end() && (!has_base || w->first >= base_->key())) {
        const bool shadows = has_base && w->first == base_->key();
        if (w->second) return land(w->first, *w->second);
        t = w->first;
        inclusive = false;
        if (shadows) base_prev();
        continue;
      }
      return land(base_->key(), base_->value());
    }
  }

  void land(std::string_view k, std::string_view v) {
    key_.assign(k);
    value_.assign(v);
    valid_ = true;
    status_ = Status::OK();
  }
  void none() {
    valid_ = false;
    status_ = Status::OK();
  }
  void fail() {
    valid_ = false;
    status_ = base_->status();
  }

  std::shared_ptr<txn_state> st_;
  std::unique_ptr<Iterator> base_;  // nullptr once the transaction ended
  std::optional<std::string> lower_, upper_;
  bool valid_ = false;
  bool forward_ = true;
  std::string key_, value_;
  Status status_;
  std::size_t last_ = SIZE_MAX;  // index in st_->ranges of the range recorded last
};

void txn_state::end(phase p) {
  state = p;
  for (txn_iterator* it : iterators) it->close();
  iterators.clear();
  db->ReleaseSnapshot(snapshot);
  snapshot = nullptr;
  writes.clear();
  reads.clear();
  ranges.clear();
}

Status check_key(std::string_view key) {
  if (key.empty()) return Status::InvalidArgument("empty key");
  if (key.size() > kMaxKeySize) {
    return Status::InvalidArgument("key of " + std::to_string(key.size()) +
                                   " bytes; the limit is " + std::to_string(kMaxKeySize));
  }
  return Status::OK();
}

Status check_value(std::string_view value) {
  if (value.size() > kMaxValueSize) {
    return Status::InvalidArgument("value of " + std::to_string(value.size()) +
                                   " bytes; the limit is " + std::to_string(kMaxValueSize));
  }
  return Status::OK();
}


class transaction_impl final : public Transaction {
 public:
  transaction_impl(std::shared_ptr<txn_state> st, std::uint64_t snapshot_version)
      : st_(std::move(st)), snapshot_version_(snapshot_version) {}
  ~transaction_impl() override {
    if (st_->active()) st_->end(phase::rolled_back);
  }

  Status Get(std::string_view key, std::string* value) override {
    return guarded([&]() -> Status {
      if (!st_->active()) return st_->ended();
      if (Status s = check_key(key); !s.ok()) return s;
      if (auto w = st_->writes.find(key); w != st_->writes.end()) {
        if (!w->second) return Status::NotFound(key.substr(0, 64));
        if (value != nullptr) *value = *w->second;
        return Status::OK();
      }
      st_->reads.emplace_back(key);  // before the read: out of DRAM, no read unrecorded
      ReadOptions o;
      o.snapshot = st_->snapshot;
      o.verify_checksums = st_->options.verify_checksums;
      return st_->db->Get(key, value, o);
    });
  }

  Status Put(std::string_view key, std::string_view value) override {
    return write(key, value, false);
  }
  Status Delete(std::string_view key) override { return write(key, {}, true); }

  std::unique_ptr<Iterator> NewIterator(const ReadOptions& bounds) override {
    try {
      return std::make_unique<txn_iterator>(st_, bounds);
    } catch (const std::bad_alloc&) {
      return no_memory_iterator::make();
    }
  }

  Status Commit() override {
    return guarded([&]() -> Status {
      if (!st_->active()) return st_->ended();
      if (st_->writes.empty()) {
        // Read-only: its reads are those of one snapshot, which is a serial point of its
        // own (docs/engine-design.md): nothing to check, nothing to attach.
        st_->end(phase::committed);
        return Status::OK();
      }
      Status s = guarded([&] { return attach(); });
      st_->end(s.ok() ? phase::committed : phase::failed);
      return s;
    });
  }

  Status Rollback() override {
    if (!st_->active()) return st_->ended();
    st_->end(phase::rolled_back);
    return Status::OK();
  }

  std::uint64_t commit_version() const { return st_->commit_version; }
  std::uint64_t snapshot_version() const { return snapshot_version_; }

 private:
  Status write(std::string_view key, std::string_view value, bool tombstone) {
    return guarded([&]() -> Status {
      if (!st_->active()) return st_->ended();
      if (Status s = st_->host->writable(tombstone ? "Transaction::Delete"
                                                   : "Transaction::Put");
          !s.ok()) {
        return s;
      }
      if (Status s = check_key(key); !s.ok()) return s;
      if (Status s = check_value(value); !s.ok()) return s;
      std::optional<std::string> v;
      if (!tombstone) v.emplace(value);
      if (auto w = st_->writes.find(key); w != st_->writes.end()) {
        w->second = std::move(v);
      } else {
        st_->writes.emplace(std::string(key), std::move(v));
      }
      return Status::OK();
    });
  }

  Status attach() {
    WriteBatch batch;
    for (auto& [key, value] : st_->writes) {
      if (value) {
        batch.Put(key, *value);
      } else {
        batch.Delete(key);
      }
    }
    std::vector<std::string>& reads = st_->reads;
    std::sort(reads.begin(), reads.end());
    reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
    txn_validation v;
    v.snapshot = st_->snapshot->version();
    v.reads = reads;
    v.ranges = st_->ranges;
    std::uint64_t version = 0;
    Status s = st_->host->commit_transaction(batch, st_->write_options, v, &version);
    if (s.ok()) st_->commit_version = version;
    return s;
  }

  std::shared_ptr<txn_state> st_;
  const std::uint64_t snapshot_version_;
};

// What BeginTransaction returns when DRAM ran out: every call says NoSpace. Its memory comes
// from a small static reserve when the heap has none (as no_memory_iterator's).
class no_memory_transaction final : public Transaction {
 public:
  static constexpr std::size_t kReserve = 64;

  static std::unique_ptr<Transaction> make() noexcept {
    return std::unique_ptr<Transaction>(new no_memory_transaction);
  }

  Status Get(std::string_view, std::string*) override { return no_space(); }
  Status Put(std::string_view, std::string_view) override { return no_space(); }
  Status Delete(std::string_view) override { return no_space(); }
  std::unique_ptr<Iterator> NewIterator(const ReadOptions&) override {
    return no_memory_iterator::make();
  }
  Status Commit() override { return no_space(); }
  Status Rollback() override { return no_space(); }

  static void* operator new(std::size_t size) noexcept;
  static void operator delete(void* p) noexcept;

 private:
  no_memory_transaction() = default;
  // Short enough for std::string's inline buffer: nothing is allocated.
  static Status no_space() { return Status::NoSpace("out of DRAM"); }
};

emergency_reserve<no_memory_transaction, no_memory_transaction::kReserve> reserve;

void* no_memory_transaction::operator new(std::size_t size) noexcept {
  return reserve.allocate(size);
}

void no_memory_transaction::operator delete(void* p) noexcept { reserve.release(p); }

// Keys shown in messages: printable bytes as they are, others as \xNN.
std::string printable(std::string_view key) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (const char c : key) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && u != '\\' && u != '\'') {
      out.push_back(c);
    } else {
      out += "\\x";
      out.push_back(hex[u >> 4]);
      out.push_back(hex[u & 15]);
    }
  }
  return out;
}

std::string shown(const std::optional<std::string>& bound, std::string_view none) {
  return bound ? "'" + printable(bound->substr(0, 64)) + "'" : std::string(none);
}

}  // namespace

std::unique_ptr<Transaction> begin_transaction(DB& db, transaction_host& host,
                                               const WriteOptions& write_options,
                                               const TransactionOptions& options) noexcept {
  const Snapshot* snapshot = db.GetSnapshot();
  if (snapshot == nullptr) return no_memory_transaction::make();
  try {
    auto st = std::make_shared<txn_state>();
    st->db = &db;
    st->host = &host;
    st->write_options = write_options;
    st->options = options;
    st->snapshot = snapshot;
    return std::make_unique<transaction_impl>(std::move(st), snapshot->version());
  } catch (const std::bad_alloc&) {
    db.ReleaseSnapshot(snapshot);
    return no_memory_transaction::make();
  }
}

std::string conflict_message(const txn_validation& v, std::string_view path) {
  using kind = txn_validation::kind;
  const std::string key =
      "'" + printable({v.key.data(), std::min(v.key_size, v.key.size())}) +
      (v.key_size > v.key.size() ? "...'" : "'");
  std::string what;
  switch (v.conflict) {
    case kind::read: what = "key " + key + ", which it read,"; break;
    case kind::write: what = "key " + key + ", which it writes,"; break;
    case kind::range: {
      const key_range& r = v.ranges[v.index];
      what = "key " + key + " in the range [" + shown(r.lo, "the first key") + ", " +
             shown(r.hi, "the end") + ") that it scanned";
      break;
    }
    case kind::none: what = "nothing"; break;
  }
  return std::string(path) + ": transaction conflict: " + what + " has version " +
         std::to_string(v.newer) + ", newer than the transaction's snapshot " +
         std::to_string(v.snapshot) + "; nothing applied, run the transaction again";
}

std::uint64_t TEST_commit_version(const Transaction& t) {
  const auto* impl = dynamic_cast<const transaction_impl*>(&t);
  return impl != nullptr ? impl->commit_version() : 0;
}

std::uint64_t TEST_snapshot_version(const Transaction& t) {
  const auto* impl = dynamic_cast<const transaction_impl*>(&t);
  return impl != nullptr ? impl->snapshot_version() : 0;
}

}  // namespace flintkv::internal
