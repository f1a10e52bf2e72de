// Serializable transactions by optimistic validation in the combiner (docs/engine-design.md,
// "Transactions"). A transaction reads at a registered snapshot and records what it read:
// the keys its Gets asked for and the key ranges its iterators passed over. Commit prepares
// its writes as a batch (DB::Write's path) and advertises them with a txn_validation; the
// combiner, under its lock and before it gives the batch a version, runs validate(): if a
// key read or written, or a key in a scanned range, has a version above the snapshot, the
// batch is refused (slot_state::conflict) and its prepared nodes are freed by their owner.
//
// Thread safety: a transaction (transaction.cpp) and its iterators are used by one thread at
// a time. validate() runs under the combiner lock, pinned; conflict fields of a
// txn_validation are written by it and read by the transaction's thread after the slot's
// outcome (combiner.hpp, invariant (1)).
// Invariants:
//  (1) A transaction's snapshot is registered (snapshot_registry) from Begin until it ends,
//      its validation included. So the watermark stays at or below it, and every key with a
//      version above the snapshot keeps its index entry, whose newest version is then above
//      the snapshot (reclamation removes an entry only when its newest version is a delete
//      at or below the watermark; newest versions only grow).
//  (2) Under the combiner lock the index does not change, and every version already given
//      (attached in an earlier pass or earlier in this one) is in it. So validate() sees
//      every write ordered before the transaction's commit version.
//  (3) validate() reads the index only (find, seek, level-0 links, newest versions): it
//      allocates nothing and cannot throw.
// Persistence: none of its own. A commit is a batch (engine.hpp, Persistence (3)); a
// refused one never reaches the persistent list.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "flintkv/db.hpp"
#include "flintkv/transaction.hpp"
#include "flintkv/write_batch.hpp"
#include "flintkv/internal/index.hpp"

namespace flintkv::internal {

// The keys k with lo <= k < hi; no lo: from the first key, no hi: to the last.
struct key_range {
  std::optional<std::string> lo, hi;
};

// What the combiner checks a transaction's commit against. The transaction fills the first
// three fields before it advertises its batch; validate() fills the rest when it refuses.
struct txn_validation {
  enum class kind : std::uint8_t { none, read, write, range };

  std::uint64_t snapshot = 0;
  std::span<const std::string> reads;  // keys read by Get, sorted, without duplicates
  std::span<const key_range> ranges;   // ranges passed over by the transaction's iterators

  kind conflict = kind::none;
  std::size_t index = 0;      // of the conflicting read, write (in batch order) or range
  std::uint64_t newer = 0;    // the version found above the snapshot
  std::array<char, 64> key{};  // the first bytes of the key that has it
  std::size_t key_size = 0;    // its full size
};

namespace txn_detail {

// Records a conflict on entry n if its newest version is above the snapshot.
// REQUIRES: the combiner lock.
inline bool newer(const inode* n, txn_validation& v, txn_validation::kind kind,
                  std::size_t index) noexcept {
  if (n == nullptr) return false;
  const std::uint64_t newest = n->unlocked_newest().version;
  if (newest <= v.snapshot) return false;
  v.conflict = kind;
  v.index = index;
  v.newer = newest;
  const std::string_view key = n->key();
  v.key_size = key.size();
  key.copy(v.key.data(), std::min(key.size(), v.key.size()));
  return true;
}

}  // namespace txn_detail

// True if no key the transaction read, no key in `writes` (each has a `key`) and no key in
// a scanned range has a version above v.snapshot; else records the first conflict in v.
// REQUIRES: the combiner lock; pinned in the index's epoch domain.
template <class Updates>
bool validate(const key_index& index, txn_validation& v, const Updates& writes) noexcept {
  using kind = txn_validation::kind;
  for (std::size_t i = 0; i < v.reads.size(); ++i) {
    if (txn_detail::newer(index.find(v.reads[i]), v, kind::read, i)) return false;
  }
  std::size_t i = 0;
  for (const auto& u : writes) {
    if (txn_detail::newer(index.find(u.key), v, kind::write, i++)) return false;
  }
  for (i = 0; i < v.ranges.size(); ++i) {
    const key_range& r = v.ranges[i];
    const inode* n = r.lo ? index.seek(*r.lo) : index.head()->load_next();
    for (; n != nullptr && (!r.hi || compare_keys(n->key(), *r.hi) < 0); n = n->load_next()) {
      if (txn_detail::newer(n, v, kind::range, i)) return false;
    }
  }
  return true;
}

// The message of the Busy a refused commit returns, naming the conflict v records.
std::string conflict_message(const txn_validation& v, std::string_view path);

// What a transaction needs of its engine besides the public DB interface.
class transaction_host {
 public:
  // Writes `writes` (one entry per key) as one batch, as DB::Write does, if `v` validates
  // under the combiner lock. OK with *version its version; Busy when the validation failed
  // (v says why), nothing applied; the write path's other errors.
  virtual Status commit_transaction(const WriteBatch& writes, const WriteOptions& options,
                                    txn_validation& v, std::uint64_t* version) = 0;
  // OK if the store may be written, else the InvalidArgument a write gets (read-only open).
  virtual Status writable(std::string_view what) const = 0;

 protected:
  ~transaction_host() = default;
};

// DB::BeginTransaction for an engine: a transaction reading at a snapshot of `db`,
// committing through `host`. Never nullptr (out of DRAM: every call returns NoSpace).
std::unique_ptr<Transaction> begin_transaction(DB& db, transaction_host& host,
                                               const WriteOptions& write_options,
                                               const TransactionOptions& options) noexcept;

// Test hooks. The version a transaction's Commit gave its writes (0: not committed, or it
// wrote nothing), and its snapshot's version (0 for a transaction out of DRAM).
std::uint64_t TEST_commit_version(const Transaction& t);
std::uint64_t TEST_snapshot_version(const Transaction& t);

}  // namespace flintkv::internal
