// LevelDB from Debian's libleveldb-dev: the library's defaults but for a 10 bits/key bloom
// filter and no compression; the write buffer and block cache set to their defaults
// explicitly, so that settings() states them; puts with WriteOptions::sync, or, with
// store_config::sync false, without it and persisted by a write of an empty batch with
// WriteOptions::sync = true, LevelDB's only way to sync its log (it has no SyncWAL): it
// syncs the current log file. A log LevelDB switched away from (a full memtable) was closed
// unsynced; its writes are durable once the background flush of that memtable into a table
// file (synced, with the MANIFEST) has finished.
#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>
#include <leveldb/options.h>
#include <leveldb/write_batch.h>

#include "lsm_store.hpp"

namespace flintkv::peers {

namespace {

struct leveldb_api {
  using DB = leveldb::DB;
  using Slice = leveldb::Slice;
  using Iterator = leveldb::Iterator;
  using WriteOptions = leveldb::WriteOptions;
  using ReadOptions = leveldb::ReadOptions;
  static constexpr const char* name = "LevelDB";
  static constexpr bool refreshes = false;  // LevelDB's Iterator has no Refresh
  static leveldb::Status persist(DB& db) {
    leveldb::WriteOptions synced;
    synced.sync = true;
    leveldb::WriteBatch empty;
    return db.Write(synced, &empty);
  }
  // LevelDB tells no one whether a compaction is pending or running.
  static leveldb::Status settle(DB&) { return leveldb::Status::OK(); }
};

constexpr std::size_t kWriteBuffer = std::size_t{4} << 20;  // LevelDB's default
constexpr std::size_t kBlockCache = std::size_t{8} << 20;   // its default internal cache

// What the options point to; LevelDB does not own them.
struct leveldb_owned {
  std::unique_ptr<leveldb::Cache> cache{leveldb::NewLRUCache(kBlockCache)};
  std::unique_ptr<const leveldb::FilterPolicy> filter{leveldb::NewBloomFilterPolicy(10)};
};

}  // namespace

Status open_leveldb(const store_config& config, std::unique_ptr<store>* out) {
  auto owned = std::make_shared<leveldb_owned>();
  leveldb::Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  options.compression = leveldb::kNoCompression;
  options.write_buffer_size = kWriteBuffer;
  options.block_cache = owned->cache.get();
  options.filter_policy = owned->filter.get();
  leveldb::DB* raw = nullptr;
  leveldb::Status s = leveldb::DB::Open(options, config.dir, &raw);
  if (!s.ok()) return Status::IOError("LevelDB open " + config.dir + ": " + s.ToString());
  std::unique_ptr<leveldb::DB> db(raw);
  std::string settings =
      "LevelDB " + std::to_string(leveldb::kMajorVersion) + "." +
      std::to_string(leveldb::kMinorVersion) + "; write buffer " +
      std::to_string(kWriteBuffer >> 20) + " MiB; block cache " +
      std::to_string(kBlockCache >> 20) +
      " MiB LRU; bloom filter 10 bits/key; compression off; other options default; " +
      (config.sync
           ? std::string("every put with WriteOptions::sync = true (the log synced before it "
                         "returns)")
           : "every put with WriteOptions::sync = false (in the log file, not synced), made "
             "durable by a write of an empty WriteBatch with sync = true (the current log "
             "synced) " +
             persist_cadence(config.persist_every, config.transfers));
  *out = std::make_unique<lsm_store<leveldb_api>>(std::move(owned), std::move(db), config.dir,
                                                  config.sync, std::move(settings));
  return Status::OK();
}

}  // namespace flintkv::peers
