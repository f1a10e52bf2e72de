// RocksDB and LevelDB share their API (DB, Slice, WriteOptions, ReadOptions, Iterator,
// Status): one backend serves both, over a description of the library:
//
//   struct leveldb_api {
//     using DB = leveldb::DB; using Slice = leveldb::Slice; using Iterator = leveldb::Iterator;
//     using WriteOptions = leveldb::WriteOptions; using ReadOptions = leveldb::ReadOptions;
//     static constexpr const char* name = "LevelDB";
//     // What makes every earlier write durable (session::persist).
//     static leveldb::Status persist(DB& db);
//     // Whether Iterator::Refresh() exists: a session then refreshes one iterator before
//     // each seek (the newest state, as a new iterator reads it); else each seek makes one.
//     static constexpr bool refreshes = false;
//     // Waits until no background work runs or is pending (store::settle).
//     static leveldb::Status settle(DB& db);
//   };
//
// Thread safety, persistence: as store.hpp says; puts use WriteOptions::sync =
// store_config::sync, persist() calls Api::persist.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "store.hpp"

namespace flintkv::peers {

template <class Api>
class lsm_session final : public session {
 public:
  lsm_session(typename Api::DB& db, bool sync) : db_(db) { write_.sync = sync; }

  Status put(std::string_view key, std::string_view value) override {
    return check(db_.Put(write_, slice(key), slice(value)), "put");
  }

  Status persist() override { return check(Api::persist(db_), "persist"); }

  Status get(std::string_view key, bool* found) override {
    auto s = db_.Get(read_, slice(key), &value_);
    *found = s.ok();
    return s.IsNotFound() ? Status::OK() : check(s, "get");
  }

  Status seek(std::string_view key, std::uint64_t nexts, bool* found) override {
    std::unique_ptr<typename Api::Iterator> made;
    typename Api::Iterator* it;
    if constexpr (Api::refreshes) {
      if (!iterator_) iterator_.reset(db_.NewIterator(read_));
      else if (auto s = iterator_->Refresh(); !s.ok()) return check(s, "refresh");
      it = iterator_.get();
    } else {
      made.reset(db_.NewIterator(read_));
      it = made.get();
    }
    it->Seek(slice(key));
    *found = it->Valid() && it->key() == slice(key);
    for (std::uint64_t j = 0; j < nexts && it->Valid(); ++j) it->Next();
    return check(it->status(), "seek");
  }

 private:
  static typename Api::Slice slice(std::string_view s) { return {s.data(), s.size()}; }
  template <class LibraryStatus>
  static Status check(const LibraryStatus& s, const char* what) {
    if (s.ok()) return Status::OK();
    return Status::IOError(std::string(Api::name) + " " + what + ": " + s.ToString());
  }

  typename Api::DB& db_;
  typename Api::WriteOptions write_;
  typename Api::ReadOptions read_;
  std::string value_;
  std::unique_ptr<typename Api::Iterator> iterator_;  // Api::refreshes: the seeks' iterator
};

// Session: lsm_session<Api>, or a session of the same constructor (DB&, bool sync) over
// another API of the same DB type (RocksDB's transaction databases).
template <class Api, class Session = lsm_session<Api>>
class lsm_store final : public store {
 public:
  // `owned` holds what the options point to (cache, filter policy): released after the DB.
  lsm_store(std::shared_ptr<void> owned, std::unique_ptr<typename Api::DB> db, std::string dir,
            bool sync, std::string settings)
      : owned_(std::move(owned)), db_(std::move(db)), dir_(std::move(dir)), sync_(sync),
        settings_(std::move(settings)) {}

  Status new_session(std::unique_ptr<session>* out) override {
    *out = std::make_unique<Session>(*db_, sync_);
    return Status::OK();
  }
  std::uint64_t bytes() override { return directory_bytes(dir_); }
  std::optional<std::uint64_t> live_keys() override { return std::nullopt; }
  std::string settings() override { return settings_; }
  Status settle() override {
    const auto s = Api::settle(*db_);
    return s.ok() ? Status::OK() : Status::IOError(std::string(Api::name) + " settle: " +
                                                   s.ToString());
  }

 private:
  std::shared_ptr<void> owned_;  // declared first: destroyed after db_
  std::unique_ptr<typename Api::DB> db_;
  std::string dir_;
  bool sync_;
  std::string settings_;
};

}  // namespace flintkv::peers
