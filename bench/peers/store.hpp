// The peer benchmark's view of a key-value store: what every system (FlintKV, RocksDB,
// LevelDB, LMDB) offers the driver (peers.cpp), each in its own file.
//
//   std::unique_ptr<store> db;
//   Status s = open_store("lmdb", config, &db);    // a fresh store in config.dir
//   std::unique_ptr<session> me;
//   if (s.ok()) s = db->new_session(&me);           // on the thread that uses it
//   if (s.ok()) s = me->put("0000000000000042", value);   // durable on return
//
//   config.sync = false;                            // the weakly durable mode:
//   ...                                             // puts visible on return,
//   if (s.ok()) s = me->persist();                  // durable once a persist returned
//
//   bool aborted = true;                            // a transfer (transactional systems):
//   while (s.ok() && aborted) {                     // read both keys, write both, commit;
//     s = me->transfer("0000000000000042", "0000000000000007", v1, v2, &aborted);
//   }                                               // aborted: a conflict, nothing applied
//
// Thread safety: a store is shared by the benchmark's threads (new_session may be called by
// any of them at once); a session is used by the thread that made it, and only while the
// store lives. Sessions of one store may put, transfer and persist at the same time.
// bytes() and settings() are called while no session works.
//
// Persistence, each system in its own way (settings() says which):
// - store_config::sync true (the default): every put is durable when it returns. FlintKV
//   by default, RocksDB and LevelDB with WriteOptions::sync, LMDB with one synced commit
//   per put.
// - sync false: a put is visible to every session when it returns, and durable once a
//   persist() called after it returned has returned (of any session). FlintKV with
//   WriteOptions::sync = false and DB::Persist(); RocksDB and LevelDB with
//   WriteOptions::sync = false and, to persist, RocksDB's FlushWAL(true) and LevelDB's
//   synced write of an empty batch; LMDB with MDB_NOSYNC and mdb_env_sync(env, 1). One
//   exception, LevelDB's: its persist syncs only its current log, and puts in a log it
//   switched away from are durable once that memtable's flush has finished
//   (leveldb_store.cpp). Each system's own rules for a crash in between apply
//   (docs/peers.md says them).
//
// Transactions (session::transfer), in the systems of kTransactionalSystems; the others
// return InvalidArgument. A transfer that commits is atomic (both writes or neither, for every
// reader and after a crash) and durable as a put is in the mode (above). Isolation, each
// system's own:
// - FlintKV: DB::BeginTransaction, two Gets, two Puts, Commit; serializable by validation
//   at commit (a key read or written got a version after the snapshot: Busy).
// - rocksdb-occ: OptimisticTransactionDB, two GetForUpdate, two Puts, Commit; without a
//   snapshot, Commit fails (Busy, or TryAgain when the memtable history is too short) when
//   either key was written by another since this transaction first read it: for this
//   workload (every key read is written) serializable.
// - rocksdb-2pl: TransactionDB (pessimistic, write-committed), GetForUpdate takes each key's
//   exclusive lock (held until Commit): strict two-phase locking, serializable. A lock
//   request that would close a cycle fails at once (deadlock detection: Busy); one that
//   waits longer than the lock timeout fails with TimedOut (rocksdb_store.cpp says the
//   settings).
// - LMDB: one write transaction (LMDB's single writer) reading and putting both keys:
//   serial, so serializable trivially; it never aborts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "flintkv/status.hpp"

namespace flintkv::peers {

struct store_config {
  std::string dir;  // an empty directory the store's files go into
  std::uint64_t num = 0;  // keys the workload writes (for FlintKV's pool and LMDB's map size)
  std::uint64_t key_size = 0, value_size = 0;
  // Versions the workload writes, at most, before the store is closed (fill plus overwrite).
  std::uint64_t versions = 0;
  // true: every put durable on return. false: puts are weak, made durable by persist()
  // (see Persistence above).
  bool sync = true;
  // With sync false, how often the driver calls persist(): after every persist_every puts
  // (or transfers) of a session, and once at the end of its run (0: only at the end). The
  // backends only state it in settings().
  std::uint64_t persist_every = 1000;
  // The workload runs session::transfer: settings() then also says what a transfer is.
  bool transfers = false;
};

// One thread's handle on a store (and its reusable buffers, read transaction, cursor).
class session {
 public:
  virtual ~session() = default;
  // Stores `value` for `key`: durably, or, with store_config::sync false, visibly and
  // durable at the next persist().
  [[nodiscard]] virtual Status put(std::string_view key, std::string_view value) = 0;
  // Makes every put of any session of the store that returned before this call durable,
  // as the system's own call for it does (settings() names it), and returns when they are.
  // Valid in both modes (with sync, every put is durable already: the call only costs its
  // time); the driver calls it only with sync false.
  [[nodiscard]] virtual Status persist() = 0;
  // Copies the value of `key` into the session's buffer; *found says whether there was one.
  [[nodiscard]] virtual Status get(std::string_view key, bool* found) = 0;
  // A new iterator (cursor) on the newest state: Seek to the first key at or after `key`,
  // then up to `nexts` steps forward. *found says whether `key` itself was there.
  [[nodiscard]] virtual Status seek(std::string_view key, std::uint64_t nexts, bool* found) = 0;
  // One attempt at a transfer: a transaction that reads `key_a` and `key_b` (into the
  // session's buffer; the keys may be equal), puts `value_a` for key_a and `value_b` for
  // key_b, and commits (see Transactions above). OK with *aborted false: committed. OK
  // with *aborted true: a conflict with another session's transaction or put (the system's
  // Busy, TryAgain or lock TimedOut, from a read, a put or the commit); nothing applied, and
  // the caller begins again. Any other status: an error; InvalidArgument in a system
  // without transactions (the default).
  [[nodiscard]] virtual Status transfer(std::string_view key_a, std::string_view key_b,
                                        std::string_view value_a, std::string_view value_b,
                                        bool* aborted) {
    (void)key_a, (void)key_b, (void)value_a, (void)value_b;
    *aborted = false;
    return Status::InvalidArgument("transfer: this system has no transactions");
  }
};

class store {
 public:
  virtual ~store() = default;
  [[nodiscard]] virtual Status new_session(std::unique_ptr<session>* out) = 0;
  // The store's bytes: the sizes of its files (FlintKV: the pool's bytes in use).
  virtual std::uint64_t bytes() = 0;
  // Keys present now, when the system counts them exactly (FlintKV, LMDB); nullopt
  // otherwise (the driver then takes num: every workload leaves each key written once).
  virtual std::optional<std::uint64_t> live_keys() = 0;
  // The system and its version, and the settings that matter here: write buffer, block
  // cache, bloom filter, compression, how a put is made durable (and, with sync false,
  // what persist() calls and how often the driver calls it).
  virtual std::string settings() = 0;
  // Whether the store's data lives in a memory-mapped pool that stands for persistent
  // memory (FlintKV's pool, here a file in /dev/shm): its pages are then not DRAM on the
  // hardware the system is for, and the driver's DRAM figure leaves them out. LMDB's map is
  // not: its pages are the kernel's page cache, DRAM on any device.
  virtual bool maps_persistent_memory() const { return false; }
  // Waits, after the untimed fill and before the timed part, until the background work
  // the fill left (merges, compactions, flushes) is done, as far as the system can tell
  // (and again after the timed part, before the store's bytes are measured):
  // the timed part then reads an existing, settled store, as db_bench's
  // --use_existing_db does, whatever pace each system's background work has. FlintKV:
  // DB::WaitForMerges. RocksDB: polls its properties until no flush or compaction runs or
  // is pending. LevelDB has no way to ask (nothing waited for); LMDB has no background work.
  [[nodiscard]] virtual Status settle() { return Status::OK(); }
};

// The systems, in the order the driver lists them.
// rocksdb-occ and rocksdb-2pl are RocksDB (rocksdb's settings) opened as its optimistic and
// its pessimistic transaction database.
inline constexpr std::string_view kSystems[] = {"flintkv", "rocksdb",     "rocksdb-occ",
                                                "rocksdb-2pl", "leveldb", "lmdb"};
// Those whose sessions run transfer.
inline constexpr std::string_view kTransactionalSystems[] = {"flintkv", "rocksdb-occ",
                                                             "rocksdb-2pl", "lmdb"};

// Opens a fresh store of `system` (one of kSystems) in config.dir.
[[nodiscard]] Status open_store(std::string_view system, const store_config& config,
                                std::unique_ptr<store>* out);

// One per system (its own file); open_store calls them.
[[nodiscard]] Status open_flintkv(const store_config& config, std::unique_ptr<store>* out);
[[nodiscard]] Status open_rocksdb(const store_config& config, std::unique_ptr<store>* out);
[[nodiscard]] Status open_rocksdb_occ(const store_config& config, std::unique_ptr<store>* out);
[[nodiscard]] Status open_rocksdb_2pl(const store_config& config, std::unique_ptr<store>* out);
[[nodiscard]] Status open_leveldb(const store_config& config, std::unique_ptr<store>* out);
[[nodiscard]] Status open_lmdb(const store_config& config, std::unique_ptr<store>* out);

// The sum of the sizes of the regular files below `dir` (the stores that are directories).
std::uint64_t directory_bytes(const std::string& dir);

// For settings(), with sync false: "after every N puts of each thread and at its end" ("N
// transfers (commits)" when the workload runs transfers; "at the end of each thread's run"
// for persist_every 0).
std::string persist_cadence(std::uint64_t persist_every, bool transfers);

}  // namespace flintkv::peers
