// RocksDB from Debian's librocksdb-dev: the library's defaults but for a 10 bits/key bloom
// filter and no compression; the write buffer and block cache set to their defaults
// explicitly, so that settings() states them; puts with WriteOptions::sync, or, with
// store_config::sync false, without it and persisted by FlushWAL(true) (with the default
// manual_wal_flush = false, the WAL's buffer is already written: it is SyncWAL(), which
// syncs every WAL file not yet synced, older ones included).
//
// Two more systems are the same RocksDB opened as a transaction database, for transfer
// (their puts, gets, seeks and persist are the plain system's, on the stacked DB):
// - rocksdb-occ: OptimisticTransactionDB (validate_policy kValidateParallel, its default).
//   A transfer: BeginTransaction (no snapshot), GetForUpdate of both keys, Put of both,
//   Commit; Commit returns Busy when a key was written by another since this transaction
//   first read it, or TryAgain when the memtable history no longer tells.
// - rocksdb-2pl: TransactionDB (pessimistic, write-committed, its default lock manager).
//   A transfer: BeginTransaction with deadlock_detect, GetForUpdate of both keys (each
//   takes the key's exclusive lock, held until Commit), Put of both, Commit. A lock that
//   would close a wait-for cycle fails at once with Busy (deadlock detection); the lock
//   timeout stays at TransactionDBOptions' default (1 s; TimedOut), which only a stalled
//   lock holder reaches. The keys are read in the transaction's order, not sorted: two
//   transfers may deadlock, and one of them then aborts.
// In both, Busy, TryAgain or TimedOut from any step is an abort: the transaction is
// destroyed (a pessimistic one releases its locks) and the driver begins again. Both keep
// the memtable history that conflict checks read (max_write_buffer_size_to_maintain -1:
// max_write_buffer_number x write_buffer_size, as both Opens set it when left at 0). The
// transactions' WriteOptions are the puts' (sync, or not in the weak mode).
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/optimistic_transaction_db.h>
#include <rocksdb/utilities/transaction.h>
#include <rocksdb/utilities/transaction_db.h>
#include <rocksdb/version.h>

#include <chrono>
#include <thread>

#include "lsm_store.hpp"

namespace flintkv::peers {

namespace {

struct rocksdb_api {
  using DB = rocksdb::DB;
  using Slice = rocksdb::Slice;
  using Iterator = rocksdb::Iterator;
  using WriteOptions = rocksdb::WriteOptions;
  using ReadOptions = rocksdb::ReadOptions;
  static constexpr const char* name = "RocksDB";
  static rocksdb::Status persist(DB& db) { return db.FlushWAL(true); }
  static constexpr bool refreshes = true;
  // Polls, every millisecond, until no flush or compaction runs or is pending.
  static rocksdb::Status settle(DB& db) {
    static constexpr const char* kBusy[] = {
        "rocksdb.num-running-flushes", "rocksdb.num-running-compactions",
        "rocksdb.mem-table-flush-pending", "rocksdb.compaction-pending"};
    while (true) {
      bool busy = false;
      for (const char* property : kBusy) {
        std::uint64_t n = 0;
        if (!db.GetIntProperty(property, &n)) {
          return rocksdb::Status::NotSupported(std::string("property ") + property);
        }
        busy = busy || n != 0;
      }
      if (!busy) return rocksdb::Status::OK();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
};

constexpr std::size_t kWriteBuffer = std::size_t{64} << 20;  // RocksDB's default
constexpr std::size_t kBlockCache = std::size_t{8} << 20;    // its default internal cache

rocksdb::Options rocksdb_options() {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  options.compression = rocksdb::kNoCompression;
  options.bottommost_compression = rocksdb::kDisableCompressionOption;
  options.write_buffer_size = kWriteBuffer;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(kBlockCache);
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return options;
}

// What settings() says of every RocksDB system.
std::string rocksdb_settings(const rocksdb::Options& options, const store_config& config) {
  return "RocksDB " + std::to_string(ROCKSDB_MAJOR) + "." + std::to_string(ROCKSDB_MINOR) +
         "." + std::to_string(ROCKSDB_PATCH) + "; write buffer " +
         std::to_string(kWriteBuffer >> 20) + " MiB; block cache " +
         std::to_string(kBlockCache >> 20) +
         " MiB LRU; bloom filter 10 bits/key; compression off; other options default (" +
         std::to_string(options.max_background_jobs) + " background jobs); " +
         (config.sync
              ? std::string("every put with WriteOptions::sync = true (the WAL synced before "
                            "it returns)")
              : "every put with WriteOptions::sync = false (in the WAL file, not synced), made "
                "durable by DB::FlushWAL(true) (= SyncWAL: every unsynced WAL file synced) " +
                    persist_cadence(config.persist_every, config.transfers));
}

Status open_error(const store_config& config, const rocksdb::Status& s) {
  return Status::IOError("RocksDB open " + config.dir + ": " + s.ToString());
}

// The two transaction databases, for rocksdb_txn_session (and, from rocksdb_api, what
// lsm_store asks of the plain system: name, settle).
struct optimistic : rocksdb_api {
  using DB = rocksdb::OptimisticTransactionDB;
  using TransactionOptions = rocksdb::OptimisticTransactionOptions;
  static TransactionOptions transaction_options() { return {}; }
};

struct pessimistic : rocksdb_api {
  using DB = rocksdb::TransactionDB;
  using TransactionOptions = rocksdb::TransactionOptions;
  static TransactionOptions transaction_options() {
    TransactionOptions o;
    o.deadlock_detect = true;
    return o;
  }
};

// A conflict: the transaction is begun again.
bool conflict(const rocksdb::Status& s) { return s.IsBusy() || s.IsTryAgain() || s.IsTimedOut(); }

// The plain system's session (put, persist, get, seek on the transaction database, which
// is a DB), and transfer.
template <class Kind>
class rocksdb_txn_session final : public session {
 public:
  rocksdb_txn_session(typename Kind::DB& db, bool sync) : db_(db), plain_(db, sync) {
    write_.sync = sync;
  }

  Status put(std::string_view key, std::string_view value) override {
    return plain_.put(key, value);
  }
  Status persist() override { return plain_.persist(); }
  Status get(std::string_view key, bool* found) override { return plain_.get(key, found); }
  Status seek(std::string_view key, std::uint64_t nexts, bool* found) override {
    return plain_.seek(key, nexts, found);
  }

  Status transfer(std::string_view key_a, std::string_view key_b, std::string_view value_a,
                  std::string_view value_b, bool* aborted) override {
    *aborted = false;
    // The session's transaction is reused (RocksDB's way to spare the allocation).
    rocksdb::Transaction* txn =
        db_.BeginTransaction(write_, Kind::transaction_options(), txn_.release());
    txn_.reset(txn);
    rocksdb::Status s = txn->GetForUpdate(read_, slice(key_a), &value_);
    if (s.IsNotFound()) s = rocksdb::Status::OK();
    if (s.ok()) s = txn->GetForUpdate(read_, slice(key_b), &value_);
    if (s.IsNotFound()) s = rocksdb::Status::OK();
    if (s.ok()) s = txn->Put(slice(key_a), slice(value_a));
    if (s.ok()) s = txn->Put(slice(key_b), slice(value_b));
    if (s.ok()) s = txn->Commit();
    if (s.ok()) return Status::OK();
    txn_.reset();  // rolls back; a pessimistic transaction releases its locks
    if (!conflict(s)) return Status::IOError("RocksDB transfer: " + s.ToString());
    *aborted = true;
    return Status::OK();
  }

 private:
  static rocksdb::Slice slice(std::string_view s) { return {s.data(), s.size()}; }

  typename Kind::DB& db_;
  lsm_session<rocksdb_api> plain_;
  rocksdb::WriteOptions write_;
  rocksdb::ReadOptions read_;
  std::unique_ptr<rocksdb::Transaction> txn_;  // the last one begun (committed), or null
  std::string value_;
};

// A transaction database: the store of the plain ones, with transaction sessions.
template <class Kind>
using rocksdb_txn_store = lsm_store<Kind, rocksdb_txn_session<Kind>>;

// What a transfer is in both transaction databases, for settings().
std::string transfer_settings(const store_config& config) {
  return std::string("; a transfer: BeginTransaction with the puts' WriteOptions (sync = ") +
         (config.sync ? "true" : "false") +
         "), no snapshot, GetForUpdate both keys, Put both, Commit; Busy, TryAgain or "
         "TimedOut from any step is an abort; memtable history for conflict checks: "
         "max_write_buffer_size_to_maintain -1";
}

}  // namespace

Status open_rocksdb(const store_config& config, std::unique_ptr<store>* out) {
  rocksdb::Options options = rocksdb_options();
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, config.dir, &raw);
  if (!s.ok()) return open_error(config, s);
  std::unique_ptr<rocksdb::DB> db(raw);
  *out = std::make_unique<lsm_store<rocksdb_api>>(nullptr, std::move(db), config.dir,
                                                  config.sync,
                                                  rocksdb_settings(options, config));
  return Status::OK();
}

Status open_rocksdb_occ(const store_config& config, std::unique_ptr<store>* out) {
  rocksdb::Options options = rocksdb_options();
  options.max_write_buffer_size_to_maintain = -1;
  rocksdb::OptimisticTransactionDB* raw = nullptr;
  rocksdb::Status s = rocksdb::OptimisticTransactionDB::Open(options, config.dir, &raw);
  if (!s.ok()) return open_error(config, s);
  std::unique_ptr<rocksdb::OptimisticTransactionDB> db(raw);
  std::string settings = rocksdb_settings(options, config) +
                         "; opened as OptimisticTransactionDB (validate_policy "
                         "kValidateParallel, default)" +
                         transfer_settings(config) +
                         "; Commit validates: Busy when a key read was written since its "
                         "GetForUpdate";
  *out = std::make_unique<rocksdb_txn_store<optimistic>>(nullptr, std::move(db), config.dir,
                                                         config.sync, std::move(settings));
  return Status::OK();
}

Status open_rocksdb_2pl(const store_config& config, std::unique_ptr<store>* out) {
  rocksdb::Options options = rocksdb_options();
  options.max_write_buffer_size_to_maintain = -1;
  rocksdb::TransactionDBOptions txn_db_options;  // write-committed, point locks
  rocksdb::TransactionDB* raw = nullptr;
  rocksdb::Status s = rocksdb::TransactionDB::Open(options, txn_db_options, config.dir, &raw);
  if (!s.ok()) return open_error(config, s);
  std::unique_ptr<rocksdb::TransactionDB> db(raw);
  std::string settings =
      rocksdb_settings(options, config) +
      "; opened as TransactionDB (pessimistic, write-committed, default lock manager with " +
      std::to_string(txn_db_options.num_stripes) + " stripes)" + transfer_settings(config) +
      "; GetForUpdate takes the key's exclusive lock until Commit (strict 2PL); "
      "TransactionOptions::deadlock_detect = true (a lock that would deadlock: Busy at once); "
      "lock timeout " + std::to_string(txn_db_options.transaction_lock_timeout) +
      " ms (the default; TimedOut)";
  *out = std::make_unique<rocksdb_txn_store<pessimistic>>(nullptr, std::move(db), config.dir,
                                                          config.sync, std::move(settings));
  return Status::OK();
}

}  // namespace flintkv::peers
