// FlintKV: an embedded durable key-value store on persistent memory.
//
//   flintkv::Options options;
//   options.create_if_missing = true;
//   std::unique_ptr<flintkv::DB> db;
//   flintkv::Status s = flintkv::DB::Open(options, "/dev/shm/my.pool", &db);
//   if (s.ok()) s = db->Put("key", "value");
//   std::string value;
//   if (s.ok()) s = db->Get("key", &value);
//
// Every completed Put, Delete and Write is durable (unless WriteOptions::sync is false): a
// crash loses nothing that was acknowledged, and recovery (inside Open) restores exactly the
// completed writes plus, possibly, writes that were in flight, each whole or not at all.
// Writes with sync = false are durable once Persist() covered them; a crash before then
// recovers the writes up to some point of their order, never a later one without an
// earlier one.
//
// Thread safety: a DB may be used by any number of threads at once without locking.
// Snapshots, iterators and transactions must be released/destroyed before the DB.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flintkv/iterator.hpp"
#include "flintkv/options.hpp"
#include "flintkv/snapshot.hpp"
#include "flintkv/status.hpp"
#include "flintkv/transaction.hpp"
#include "flintkv/write_batch.hpp"

namespace flintkv {

struct Stats {
  // Operations since Open.
  std::uint64_t puts = 0, deletes = 0, batches = 0, gets = 0, iterators = 0;
  // Of the writes, those made with WriteOptions::sync = false; Persist() calls, and the
  // times weak writes were made durable (by Persist, a sync write, the interval, the
  // engine's own bound on waiting writes, reclamation or the close).
  std::uint64_t weak_writes = 0, persist_calls = 0, weak_persists = 0;
  // Weak writes visible now but not yet durable.
  std::uint64_t unpersisted_writes = 0;
  // Flush instructions issued by every thread of the process since it started.
  std::uint64_t pwb = 0, pfence = 0;
  // The newest version visible to readers; keys' newest versions in the store.
  std::uint64_t visible_version = 0;
  std::uint64_t live_keys = 0;         // keys whose newest version is not a delete (in the
                                       // list, or, for keys it lacks, in the packed tier)
  std::uint64_t keys = 0;              // keys in the list's index: live ones and deleted
                                       // ones whose delete is not reclaimed yet
  std::uint64_t versions = 0;          // versions in the store (persistent nodes)
  // Versions other than the newest live version of each key (older versions and deletes):
  // reclaimed once no reader can see them (a snapshot or iterator may hold them).
  std::uint64_t obsolete_versions = 0;
  // The oldest version a reader may still read: the oldest live snapshot or iterator, else
  // the visible version (as of the last reclamation pass).
  std::uint64_t watermark = 0;
  std::uint64_t snapshots = 0;         // live snapshots and iterators
  // Reclamation since Open: versions unlinked and freed, their nodes' bytes, and passes.
  std::uint64_t reclaimed_versions = 0, reclaimed_bytes = 0, reclamation_passes = 0;
  // Merges since Open (Options::merge_interval): those that moved keys to the packed tier,
  // the keys they moved, and those that failed (the pool full, damage met in the tier).
  std::uint64_t merges = 0, merged_keys = 0, merge_errors = 0;
  // Writes that waited for the merge thread because the list held more keys than it keeps
  // while merges move keys (back-pressure; docs/engine-guide.md, "Merges").
  std::uint64_t write_stalls = 0;
  // Why the merge thread's last merge failed (Status::ToString, with the pool's path), or
  // empty when it succeeded or none ran: a failed merge leaves its keys in the list and is
  // tried again at the next interval, and this says what stands in its way.
  std::string merge_error;
  std::uint64_t pool_size = 0, pool_used = 0;
  std::string granularity;             // persistence granularity of the pool's mapping
  std::string configuration;           // durability mode, counter placement, flush backend
  std::uint64_t recovered_versions = 0;  // nodes found by the recovery in Open
  double recovery_seconds = 0;           // time spent recovering in Open
};

// What DB::Check found in a pool.
struct CheckReport {
  std::uint64_t versions = 0;     // committed nodes in the persistent list
  std::uint64_t keys = 0;         // distinct keys among them
  std::uint64_t live_keys = 0;    // keys whose newest version is not a delete
  std::uint64_t uncommitted = 0;  // nodes of writes that did not complete (recovery drops them)
  // A batch was being attached, or weak writes (WriteOptions::sync = false) were waiting
  // to be persisted, when the pool was last used: recovery drops the versions above
  // newest_version that this left in the list (they are counted in `uncommitted`).
  bool batch_in_progress = false;
  std::uint64_t newest_version = 0;
  std::uint64_t pool_size = 0;
  std::string granularity;
  std::string configuration;
};

// What DB::Repair found in a damaged pool and what it wrote to the new one.
struct RepairReport {
  // A node of the damaged pool that was not salvaged because it is damaged.
  struct Dropped {
    std::uint64_t offset = 0;   // in the damaged pool
    std::string key;            // the node's key bytes as stored ("" when unreadable)
    bool key_verified = false;  // the key passed the node's checksum (else it may be wrong)
    std::string reason;
  };
  // A key whose newest version may be missing from the new pool: an older version, or
  // none, may have been kept.
  struct Doubtful {
    std::string key;
    std::string reason;  // which node was lost, and what was kept instead
  };
  std::uint64_t damaged_size = 0;   // bytes of the damaged file
  std::uint64_t new_pool_size = 0;  // bytes of the new pool
  bool header_intact = false;  // the pool header passed every check an open makes
  bool root_intact = false;    // the root's words and the head node are intact
  bool list_intact = false;    // the walk from the head reached the list's end
  // Where and why the walk of the list stopped ("" when it is intact). Past that point, the
  // versions come from a scan of the heap's blocks.
  std::string list_break;
  // The keys up to and including this one were covered by the intact part of the list
  // (empty: none, or list_intact).
  std::string list_covered_to;
  std::uint64_t versions_examined = 0;     // committed versions found, in the list or the heap
  std::uint64_t versions_from_scan = 0;    // of them, found by scanning the heap
  std::uint64_t uncommitted = 0;           // versions of writes that did not complete: not kept
  std::uint64_t chunks_scanned = 0;        // heap chunks scanned for nodes
  std::uint64_t chunks_scanned_fully = 0;  // of them, tried at every 16-byte offset
  std::uint64_t keys_salvaged = 0;         // keys written to the new pool
  std::uint64_t keys_from_scan = 0;        // of them, whose version was found by the scan
  // Of keys_salvaged, those whose value came from the packed tier (format 4): keys of which
  // neither the list nor the scan found a version, answered by the tier's newest record.
  std::uint64_t keys_from_tier = 0;
  // Keys whose newest version is a delete, or (for a key the tier answers) whose newest
  // record in the tier is an erasure: absent.
  std::uint64_t keys_deleted = 0;
  // Records (values and erasures) read from the packed tier's runs, all of them, along each
  // run's chain up to any damage (a note says where a chain broke).
  std::uint64_t tier_records = 0;
  std::vector<Dropped> dropped;
  std::vector<Doubtful> doubtful;
  std::vector<std::string> notes;  // other damage (header, root words, chunk tags, the tier)
};

class DB {
 public:
  // Opens (and recovers) the pool at `path`, or creates it. The engine is built with the
  // build's durability mode and counter placement (meson options). With
  // options.read_only the pool is opened and mapped read-only and recovery writes nothing.
  // Busy if the pool is open elsewhere in a conflicting mode (read-only opens coexist).
  static Status Open(const Options& options, const std::string& path, std::unique_ptr<DB>* db);

  // Validates the pool at `path` without changing it: its header, then every node of the
  // persistent list. Returns Corruption naming the first problem, and fills `report`.
  // Opens the pool read-only (see Options::read_only): works on a file the user cannot
  // write, alongside read-only opens, and is Busy while the pool is open for writing.
  static Status Check(const std::string& path, CheckReport* report);

  // Salvages what is left of a damaged pool: copies every intact, committed key-value of
  // the pool at `damaged` (each key's newest such version; a key whose newest version is a
  // delete is left out; a key with no version in the list gets the packed tier's newest
  // intact record, if any) into a new pool created at `new_pool`, and says in `report` (may
  // be null) what it kept, what it dropped and why. The damaged file is only read, never
  // changed; its header, root, list and chunk tags may all be damaged (what is salvaged
  // then: docs/engine-guide.md, "After a Corruption"). The new pool has options.pool_size bytes,
  // or, when options.pool_size is 0 (what `flintkv repair` passes), the damaged file's
  // size; the other options are ignored. Returns:
  //   OK               the new pool was created, holds every salvaged key, passed Check.
  //   InvalidArgument  an empty path; `new_pool` exists (repair never replaces a file) or
  //                    is `damaged`; `damaged` is not a regular file, is empty, holds a pool
  //                    of another layout or build layout (its intact header says so), or is
  //                    no FlintKV pool at all (no pool header and no node in it); a pool
  //                    size below kMinPoolSize.
  //   NotFound         `damaged` does not exist.
  //   Busy             `damaged` is open in a process (it would be read while it changes).
  //   Corruption       `damaged` is too short to hold a pool and its header is damaged.
  //   IOError          `damaged` cannot be read; the new pool cannot be created (its
  //                    directory is missing or not writable) or written.
  //   NoSpace          out of DRAM (the damaged file is read into memory); the file system
  //                    of the new pool is full; the salvaged keys do not fit its size.
  // On any error no new pool is left behind.
  static Status Repair(const std::string& damaged, const std::string& new_pool,
                       const Options& options, RepairReport* report);

  DB() = default;
  DB(const DB&) = delete;
  DB& operator=(const DB&) = delete;
  virtual ~DB() = default;

  // Writes return InvalidArgument, naming the file, on a DB opened with Options::read_only.
  // Stores `value` for `key`, durably, as a new version.
  virtual Status Put(std::string_view key, std::string_view value,
                     const WriteOptions& options = {}) = 0;
  // Deletes `key` (a tombstone version), durably. Deleting a missing key is not an error.
  virtual Status Delete(std::string_view key, const WriteOptions& options = {}) = 0;
  // Applies every entry of `batch` atomically and durably, as one version.
  virtual Status Write(const WriteBatch& batch, const WriteOptions& options = {}) = 0;
  // Makes every write that was visible when it was called durable (weak writes, made with
  // WriteOptions::sync = false; sync writes are durable already), and returns when they
  // are. OK at once when there is nothing to persist, and on a read-only DB.
  virtual Status Persist() = 0;
  // Waits until the merge thread (Options::merge_interval) is done with the writes made so
  // far: it starts a pass now, without waiting for the interval, and this returns once a
  // pass that began after the call found no key to move and left the packed tier a single
  // run (what a store that stopped changing settles into), so that reads after it meet no
  // merge. Returns that pass's error if it failed (the pool full, damage met in the tier:
  // Stats::merge_error), and OK at once when there is no merge thread (merge_interval
  // zero, a read-only DB). Writes made meanwhile give the thread more to do and may keep
  // this waiting; a snapshot or iterator that holds old versions does not (the keys it
  // holds cannot move). Not while the DB is being destroyed.
  virtual Status WaitForMerges() = 0;
  // The newest value of `key` visible at the snapshot (or now); NotFound if none.
  virtual Status Get(std::string_view key, std::string* value,
                     const ReadOptions& options = {}) = 0;

  // Pins the current version until ReleaseSnapshot. Returns nullptr when DRAM has run out
  // (ReadOptions::snapshot = nullptr then reads the newest state).
  virtual const Snapshot* GetSnapshot() = 0;
  // Releasing nullptr does nothing.
  virtual void ReleaseSnapshot(const Snapshot* snapshot) = 0;

  // An iterator over the snapshot in `options` (or an implicit one taken now). When DRAM
  // has run out, an iterator that is never Valid() and whose status() is NoSpace (nullptr
  // only if not even that can be had: the heap is exhausted and 64 such iterators are
  // alive).
  virtual std::unique_ptr<Iterator> NewIterator(const ReadOptions& options = {}) = 0;

  // A serializable transaction reading at a snapshot taken now (transaction.hpp); its
  // commit is written with `write_options`. Never nullptr: out of DRAM, a transaction whose
  // every call returns NoSpace. On a DB opened read-only, its reads work and its writes
  // return InvalidArgument.
  virtual std::unique_ptr<Transaction> BeginTransaction(
      const WriteOptions& write_options = {}, const TransactionOptions& options = {}) = 0;

  virtual Stats GetStats() = 0;
};

}  // namespace flintkv
