// RocksDB from Debian's librocksdb-dev: the library's defaults but for a 10 bits/key bloom
// filter and no compression; the write buffer and block cache set to their defaults
// explicitly, so that settings() states them; puts with WriteOptions::sync, or, with
// store_config::sync false, without it and persisted by FlushWAL(true) (with the default
// manual_wal_flush = false, the WAL's buffer is already written: it is SyncWAL(), which
// syncs every WAL file not yet synced, older ones included).
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/version.h>

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
};

constexpr std::size_t kWriteBuffer = std::size_t{64} << 20;  // RocksDB's default
constexpr std::size_t kBlockCache = std::size_t{8} << 20;    // its default internal cache

}  // namespace

Status open_rocksdb(const store_config& config, std::unique_ptr<store>* out) {
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
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, config.dir, &raw);
  if (!s.ok()) return Status::IOError("RocksDB open " + config.dir + ": " + s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string settings =
      "RocksDB " + std::to_string(ROCKSDB_MAJOR) + "." + std::to_string(ROCKSDB_MINOR) + "." +
      std::to_string(ROCKSDB_PATCH) + "; write buffer " + std::to_string(kWriteBuffer >> 20) +
      " MiB; block cache " + std::to_string(kBlockCache >> 20) +
      " MiB LRU; bloom filter 10 bits/key; compression off; other options default (" +
      std::to_string(options.max_background_jobs) +
      " background jobs); " +
      (config.sync
           ? std::string("every put with WriteOptions::sync = true (the WAL synced before it "
                         "returns)")
           : "every put with WriteOptions::sync = false (in the WAL file, not synced), made "
             "durable by DB::FlushWAL(true) (= SyncWAL: every unsynced WAL file synced) " +
             persist_cadence(config.persist_every));
  *out = std::make_unique<lsm_store<rocksdb_api>>(nullptr, std::move(db), config.dir,
                                                  config.sync, std::move(settings));
  return Status::OK();
}

}  // namespace flintkv::peers
