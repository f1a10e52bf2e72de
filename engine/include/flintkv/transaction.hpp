// A serializable transaction: it reads the store as of the moment it began (its snapshot)
// together with its own writes, and keeps its writes to itself until Commit, which applies
// them all as one version (atomically and durably, as DB::Write applies a batch) if that
// keeps the history serializable, and otherwise applies nothing and returns Busy:
//
//   for (;;) {
//     std::unique_ptr<flintkv::Transaction> txn = db->BeginTransaction();
//     std::string from, to;
//     flintkv::Status s = txn->Get("alice", &from);
//     if (s.ok()) s = txn->Get("bob", &to);
//     if (s.ok()) s = txn->Put("alice", debit(from));
//     if (s.ok()) s = txn->Put("bob", credit(to));
//     if (s.ok()) s = txn->Commit();
//     if (!s.IsBusy()) break;  // Busy: another writer changed what it read; try again
//   }
//
// Serializable: every committed transaction behaves as if the committed transactions (and
// the plain writes) had run one at a time, in the order of their versions. Commit fails with
// Busy when a key the transaction read (with Get, found or not), a key it writes, or a key
// in a range one of its iterators passed over got a version after its snapshot. Nothing
// waits and nothing is locked: conflicts are found when the transaction commits.
//
// Thread safety: a transaction and its iterators are used by one thread at a time; any
// number of transactions, plain reads and writes run at once on one DB. A transaction must
// be destroyed before its DB. Its iterators may outlive it: once the transaction has
// ended, they are never Valid() and hold nothing of the DB.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "flintkv/iterator.hpp"
#include "flintkv/options.hpp"
#include "flintkv/status.hpp"

namespace flintkv {

class Transaction {
 public:
  Transaction() = default;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  // Rolls the transaction back if it has not ended.
  virtual ~Transaction() = default;

  // Every call below, on a transaction that has ended (Commit or Rollback was called),
  // returns InvalidArgument ("transaction already committed", "... rolled back", "... ended:
  // its Commit failed") and changes nothing. Out of DRAM, NoSpace (also for every call of a
  // transaction that BeginTransaction could not set up).

  // The value of `key` as the transaction sees it: its own last Put or Delete of the key,
  // else the newest version at its snapshot. OK, NotFound, InvalidArgument (an empty or
  // oversized key), Corruption (the version read fails its checksum, with
  // TransactionOptions::verify_checksums).
  virtual Status Get(std::string_view key, std::string* value) = 0;

  // Buffer a write for Commit; a later write of the same key replaces an earlier one.
  // InvalidArgument: an empty key, a key over kMaxKeySize, a value over kMaxValueSize, a DB
  // opened with Options::read_only (nothing is buffered then).
  virtual Status Put(std::string_view key, std::string_view value) = 0;
  virtual Status Delete(std::string_view key) = 0;

  // An iterator over the transaction's snapshot merged with its own writes (its deletes
  // hide keys), in both directions, within `bounds.lower_bound` and `bounds.upper_bound`.
  // The other fields of ReadOptions are ignored (the snapshot is the transaction's, and
  // TransactionOptions::verify_checksums applies). It sees the transaction's writes as
  // they are when it moves. The ranges it passes over are validated at Commit, so scan no
  // further than needed. An iterator of an ended transaction is never Valid() and its
  // status() is InvalidArgument; out of DRAM, its status() is NoSpace.
  virtual std::unique_ptr<Iterator> NewIterator(const ReadOptions& bounds = {}) = 0;

  // Applies the transaction's writes as one version, then ends the transaction. Returns:
  //   OK               applied (durably, as DB::Write with the transaction's WriteOptions);
  //                    a transaction that wrote nothing commits with no check at all.
  //   Busy             a conflict (the message names the key or range): nothing applied;
  //                    begin a new transaction and run it again.
  //   InvalidArgument  the transaction had already ended.
  //   NoSpace          the pool or DRAM is full: nothing applied.
  // Whatever it returns, the transaction has ended.
  virtual Status Commit() = 0;

  // Discards the transaction's writes and ends it. OK, or InvalidArgument if it had ended.
  virtual Status Rollback() = 0;
};

}  // namespace flintkv
