// FlintKV through its public API: a pool file in the store's directory, default options
// (every write durable on return: the engine's flushes and fences, as on persistent memory)
// but for merges into the packed tier every kMergeInterval (Options::merge_interval).
// With store_config::sync false, every put has WriteOptions::sync = false and persist() is
// DB::Persist() (Options::persist_interval stays off: only the driver's calls persist).
// A transfer is a Transaction begun with the puts' WriteOptions (default TransactionOptions:
// checksums verified on reads, as plain gets do); Busy from Commit is an abort.
#include <chrono>
#include <memory>
#include <string>

#include "bench.hpp"
#include "flintkv/db.hpp"
#include "flintkv/transaction.hpp"
#include "store.hpp"

namespace flintkv::peers {

namespace {

constexpr std::chrono::milliseconds kMergeInterval{10};

class flintkv_session final : public session {
 public:
  flintkv_session(DB& db, bool sync) : db_(db) { write_.sync = sync; }

  Status put(std::string_view key, std::string_view value) override {
    return db_.Put(key, value, write_);
  }

  Status persist() override { return db_.Persist(); }

  Status get(std::string_view key, bool* found) override {
    Status s = db_.Get(key, &value_);
    *found = s.ok();
    return s.IsNotFound() ? Status::OK() : s;
  }

  // One iterator per session, refreshed before each seek (Iterator::Refresh: the newest
  // state, as a new iterator reads it), as RocksDB's session refreshes its own and LMDB's
  // renews its read transaction and cursor.
  Status seek(std::string_view key, std::uint64_t nexts, bool* found) override {
    if (!iterator_) {
      iterator_ = db_.NewIterator();
    } else if (Status s = iterator_->Refresh(); !s.ok()) {
      return s;
    }
    Iterator* it = iterator_.get();
    it->Seek(key);
    *found = it->Valid() && it->key() == key;
    for (std::uint64_t j = 0; j < nexts && it->Valid(); ++j) it->Next();
    return it->status();
  }

  Status transfer(std::string_view key_a, std::string_view key_b, std::string_view value_a,
                  std::string_view value_b, bool* aborted) override {
    *aborted = false;
    std::unique_ptr<Transaction> txn = db_.BeginTransaction(write_);
    for (std::string_view key : {key_a, key_b}) {
      if (Status s = txn->Get(key, &value_); !s.ok() && !s.IsNotFound()) return s;
    }
    if (Status s = txn->Put(key_a, value_a); !s.ok()) return s;
    if (Status s = txn->Put(key_b, value_b); !s.ok()) return s;
    Status s = txn->Commit();
    *aborted = s.IsBusy();
    return *aborted ? Status::OK() : s;
  }

 private:
  DB& db_;
  WriteOptions write_;
  std::string value_;
  std::unique_ptr<Iterator> iterator_;  // the seeks'
};

class flintkv_store final : public store {
 public:
  flintkv_store(std::unique_ptr<DB> db, std::uint64_t pool_size, const store_config& config)
      : db_(std::move(db)), pool_size_(pool_size), sync_(config.sync),
        persist_every_(config.persist_every), transfers_(config.transfers) {}

  Status new_session(std::unique_ptr<session>* out) override {
    *out = std::make_unique<flintkv_session>(*db_, sync_);
    return Status::OK();
  }
  std::uint64_t bytes() override { return db_->GetStats().pool_used; }
  bool maps_persistent_memory() const override { return true; }
  Status settle() override { return db_->WaitForMerges(); }
  std::optional<std::uint64_t> live_keys() override { return db_->GetStats().live_keys; }
  std::string settings() override {
    Stats stats = db_->GetStats();
    return "FlintKV " + stats.configuration + "; pool " + std::to_string(pool_size_ >> 20) +
           " MiB (bytes = pool bytes in use); no write buffer, block cache, bloom filter or "
           "compression (a DRAM index over the persistent list); merges into the packed tier "
           "every " + std::to_string(kMergeInterval.count()) + " ms (Options::merge_interval); " +
           (sync_ ? std::string("every put durable on return (default options)")
                  : "every put with WriteOptions::sync = false (visible on return), made "
                    "durable by DB::Persist() " + persist_cadence(persist_every_, transfers_) +
                    "; Options::persist_interval off") +
           (transfers_ ? "; a transfer: DB::BeginTransaction with the puts' WriteOptions, "
                         "Get both keys, Put both, Commit (serializable: validated at "
                         "commit, Busy on a conflict)"
                       : "");
  }

 private:
  std::unique_ptr<DB> db_;
  std::uint64_t pool_size_;
  bool sync_;
  std::uint64_t persist_every_;
  bool transfers_;
};

}  // namespace

Status open_flintkv(const store_config& config, std::unique_ptr<store>* out) {
  // The pool `flintkv bench` would create for a fill followed by this many versions more,
  // or by its transfer benchmark.
  tools::bench_config sizing;
  sizing.benchmarks = {"fillrandom"};
  if (config.transfers) {
    sizing.benchmarks.push_back("transfer");
  } else if (config.versions > config.num) {
    sizing.benchmarks.push_back("overwrite");
  }
  sizing.num = config.num;
  sizing.key_size = config.key_size;
  sizing.value_size = config.value_size;
  Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  options.pool_size = tools::default_pool_size(sizing);
  options.merge_interval = kMergeInterval;
  std::unique_ptr<DB> db;
  Status s = DB::Open(options, config.dir + "/flintkv.pool", &db);
  if (!s.ok()) return s;
  *out = std::make_unique<flintkv_store>(std::move(db), options.pool_size, config);
  return Status::OK();
}

}  // namespace flintkv::peers
