// LMDB from Debian's liblmdb-dev: one synced write transaction per put (default flags: no
// MDB_NOSYNC, MDB_NOMETASYNC or MDB_WRITEMAP), so a put is durable on return; one writer
// at a time (concurrent puts wait for LMDB's write lock). With store_config::sync false
// the environment is opened with MDB_NOSYNC (a commit writes its pages and meta page with
// pwrite and syncs nothing; MDB_NOMETASYNC, which only spares the meta page's sync, would
// add nothing) and persist() is mdb_env_sync(env, 1): fdatasync of the data file, which
// makes every committed transaction durable. Still no MDB_WRITEMAP, under which LMDB's
// documentation no longer promises integrity for MDB_NOSYNC. Reads renew a read transaction
// (and cursor) of their session, reset after each operation: every get and seek reads the
// newest committed state, as a new iterator does in the other systems. MDB_NOTLS ties a
// read transaction to its session rather than to its thread. A transfer is one write
// transaction that gets both keys and puts both, committed as a put's is: LMDB's writers
// run one at a time, so it is serializable and never aborts.
#include <lmdb.h>

#include <memory>
#include <string>

#include "store.hpp"

namespace flintkv::peers {

namespace {

Status lmdb_error(const char* what, int rc) {
  return Status::IOError(std::string("LMDB ") + what + ": " + mdb_strerror(rc));
}

MDB_val val(std::string_view s) { return {s.size(), const_cast<char*>(s.data())}; }

class lmdb_session final : public session {
 public:
  lmdb_session(MDB_env* env, MDB_dbi dbi) : env_(env), dbi_(dbi) {}
  ~lmdb_session() override {
    if (cursor_ != nullptr) mdb_cursor_close(cursor_);
    if (read_ != nullptr) mdb_txn_abort(read_);
  }
  lmdb_session(const lmdb_session&) = delete;
  lmdb_session& operator=(const lmdb_session&) = delete;

  Status put(std::string_view key, std::string_view value) override {
    MDB_txn* txn = nullptr;
    if (int rc = mdb_txn_begin(env_, nullptr, 0, &txn); rc != 0) return lmdb_error("begin", rc);
    MDB_val k = val(key), v = val(value);
    if (int rc = mdb_put(txn, dbi_, &k, &v, 0); rc != 0) {
      mdb_txn_abort(txn);
      return lmdb_error("put", rc);
    }
    if (int rc = mdb_txn_commit(txn); rc != 0) return lmdb_error("commit", rc);
    return Status::OK();
  }

  Status transfer(std::string_view key_a, std::string_view key_b, std::string_view value_a,
                  std::string_view value_b, bool* aborted) override {
    *aborted = false;
    MDB_txn* txn = nullptr;
    if (int rc = mdb_txn_begin(env_, nullptr, 0, &txn); rc != 0) return lmdb_error("begin", rc);
    auto fail = [txn](const char* what, int rc) {
      mdb_txn_abort(txn);
      return lmdb_error(what, rc);
    };
    for (std::string_view key : {key_a, key_b}) {
      MDB_val k = val(key), v;
      int rc = mdb_get(txn, dbi_, &k, &v);
      if (rc == 0) {
        value_.assign(static_cast<const char*>(v.mv_data), v.mv_size);
      } else if (rc != MDB_NOTFOUND) {
        return fail("transfer get", rc);
      }
    }
    MDB_val ka = val(key_a), va = val(value_a), kb = val(key_b), vb = val(value_b);
    if (int rc = mdb_put(txn, dbi_, &ka, &va, 0); rc != 0) return fail("transfer put", rc);
    if (int rc = mdb_put(txn, dbi_, &kb, &vb, 0); rc != 0) return fail("transfer put", rc);
    if (int rc = mdb_txn_commit(txn); rc != 0) return lmdb_error("transfer commit", rc);
    return Status::OK();
  }

  Status persist() override {
    if (int rc = mdb_env_sync(env_, 1); rc != 0) return lmdb_error("env sync", rc);
    return Status::OK();
  }

  Status get(std::string_view key, bool* found) override {
    if (Status s = begin_read(); !s.ok()) return s;
    MDB_val k = val(key), v;
    int rc = mdb_get(read_, dbi_, &k, &v);
    *found = rc == 0;
    if (*found) value_.assign(static_cast<const char*>(v.mv_data), v.mv_size);
    mdb_txn_reset(read_);
    return rc == 0 || rc == MDB_NOTFOUND ? Status::OK() : lmdb_error("get", rc);
  }

  Status seek(std::string_view key, std::uint64_t nexts, bool* found) override {
    if (Status s = begin_read(); !s.ok()) return s;
    MDB_val k = val(key), v;
    int rc = mdb_cursor_get(cursor_, &k, &v, MDB_SET_RANGE);
    *found = rc == 0 && std::string_view(static_cast<const char*>(k.mv_data), k.mv_size) == key;
    for (std::uint64_t j = 0; j < nexts && rc == 0; ++j) {
      rc = mdb_cursor_get(cursor_, &k, &v, MDB_NEXT);
    }
    mdb_txn_reset(read_);
    return rc == 0 || rc == MDB_NOTFOUND ? Status::OK() : lmdb_error("seek", rc);
  }

 private:
  // A read transaction on the newest committed state, and the session's cursor in it.
  Status begin_read() {
    if (read_ == nullptr) {
      if (int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &read_); rc != 0) {
        read_ = nullptr;
        return lmdb_error("read begin", rc);
      }
      if (int rc = mdb_cursor_open(read_, dbi_, &cursor_); rc != 0) {
        mdb_txn_abort(read_);
        read_ = nullptr;
        cursor_ = nullptr;
        return lmdb_error("cursor open", rc);
      }
      return Status::OK();
    }
    if (int rc = mdb_txn_renew(read_); rc != 0) return lmdb_error("read renew", rc);
    if (int rc = mdb_cursor_renew(read_, cursor_); rc != 0) return lmdb_error("cursor renew", rc);
    return Status::OK();
  }

  MDB_env* env_;
  MDB_dbi dbi_;
  MDB_txn* read_ = nullptr;      // reset between operations
  MDB_cursor* cursor_ = nullptr;  // of read_
  std::string value_;
};

class lmdb_store final : public store {
 public:
  lmdb_store(MDB_env* env, MDB_dbi dbi, std::string dir, std::uint64_t map_size,
             const store_config& config)
      : env_(env), dbi_(dbi), dir_(std::move(dir)), map_size_(map_size), sync_(config.sync),
        persist_every_(config.persist_every), transfers_(config.transfers) {}
  ~lmdb_store() override { mdb_env_close(env_); }
  lmdb_store(const lmdb_store&) = delete;
  lmdb_store& operator=(const lmdb_store&) = delete;

  Status new_session(std::unique_ptr<session>* out) override {
    *out = std::make_unique<lmdb_session>(env_, dbi_);
    return Status::OK();
  }
  std::uint64_t bytes() override { return directory_bytes(dir_); }
  std::optional<std::uint64_t> live_keys() override {
    MDB_stat stat;
    if (mdb_env_stat(env_, &stat) != 0) return std::nullopt;
    return stat.ms_entries;
  }
  std::string settings() override {
    return std::string("LMDB ") + std::to_string(MDB_VERSION_MAJOR) + "." +
           std::to_string(MDB_VERSION_MINOR) + "." + std::to_string(MDB_VERSION_PATCH) +
           "; map size " + std::to_string(map_size_ >> 20) +
           " MiB (the data file grows as pages are written); no write buffer, block cache, "
           "bloom filter or compression (a B+tree read through its memory map); " +
           (sync_ ? std::string("flags MDB_NOTLS only; every put its own write transaction, "
                                "committed synchronously (data and meta page synced)")
                  : "flags MDB_NOTLS and MDB_NOSYNC (no MDB_NOMETASYNC, MDB_WRITEMAP); every "
                    "put its own write transaction, committed without a sync, made durable "
                    "by mdb_env_sync(env, 1) " + persist_cadence(persist_every_, transfers_)) +
           "; one writer at a time" +
           (transfers_ ? "; a transfer: one write transaction (mdb_get both keys, mdb_put "
                         "both, committed as a put's): serial, never aborts"
                       : "");
  }

 private:
  MDB_env* env_;
  MDB_dbi dbi_;
  std::string dir_;
  std::uint64_t map_size_;
  bool sync_;
  std::uint64_t persist_every_;
  bool transfers_;
};

}  // namespace

Status open_lmdb(const store_config& config, std::unique_ptr<store>* out) {
  // Virtual address space only: room for every version many times over (copy-on-write
  // pages are reused only when no reader still sees them).
  const std::uint64_t map_size = std::max<std::uint64_t>(
      std::uint64_t{1} << 30, 32 * config.versions * (config.key_size + config.value_size + 16));
  MDB_env* env = nullptr;
  if (int rc = mdb_env_create(&env); rc != 0) return lmdb_error("env create", rc);
  auto fail = [env](const char* what, int rc) {
    mdb_env_close(env);
    return lmdb_error(what, rc);
  };
  if (int rc = mdb_env_set_mapsize(env, map_size); rc != 0) return fail("map size", rc);
  const unsigned flags = MDB_NOTLS | (config.sync ? 0u : unsigned{MDB_NOSYNC});
  if (int rc = mdb_env_open(env, config.dir.c_str(), flags, 0644); rc != 0) {
    return fail(("open " + config.dir).c_str(), rc);
  }
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  if (int rc = mdb_txn_begin(env, nullptr, 0, &txn); rc != 0) return fail("begin", rc);
  if (int rc = mdb_dbi_open(txn, nullptr, 0, &dbi); rc != 0) {
    mdb_txn_abort(txn);
    return fail("dbi open", rc);
  }
  if (int rc = mdb_txn_commit(txn); rc != 0) return fail("commit", rc);
  *out = std::make_unique<lmdb_store>(env, dbi, config.dir, map_size, config);
  return Status::OK();
}

}  // namespace flintkv::peers
