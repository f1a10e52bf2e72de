// The C API (flintkv/c.h): thin wrappers over the public C++ API that turn each Status into
// an error string and keep every C++ exception inside.
#include "flintkv/c.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>

#include "flintkv/db.hpp"

using flintkv::DB;
using flintkv::Iterator;
using flintkv::Options;
using flintkv::ReadOptions;
using flintkv::Snapshot;
using flintkv::Stats;
using flintkv::Status;
using flintkv::WriteBatch;
using flintkv::WriteOptions;

static_assert(FLINTKV_MAX_KEY_SIZE == flintkv::kMaxKeySize);
static_assert(FLINTKV_MAX_VALUE_SIZE == flintkv::kMaxValueSize);
static_assert(FLINTKV_MIN_POOL_SIZE == flintkv::kMinPoolSize);
static_assert(FLINTKV_MAX_THREAD_SLOTS == flintkv::kMaxThreadSlots);

struct flintkv_t {
  std::unique_ptr<DB> rep;
};
struct flintkv_options_t {
  Options rep;
};
struct flintkv_readoptions_t {
  ReadOptions rep;
  // A bound that could not be copied (out of DRAM): reads with these options fail.
  bool lower_lost = false, upper_lost = false;
};
struct flintkv_writeoptions_t {
  WriteOptions rep;
};
struct flintkv_writebatch_t {
  WriteBatch rep;
  bool entry_lost = false;  // an entry could not be added (out of DRAM)
};
struct flintkv_iterator_t {
  std::unique_ptr<Iterator> rep;  // null: the iterator could not be made, see `error`
  Status error;
};
// flintkv_snapshot_t is never defined: a handle is the engine's Snapshot pointer.

namespace {

const flintkv::Snapshot* unwrap(const flintkv_snapshot_t* s) {
  return reinterpret_cast<const Snapshot*>(s);
}
const flintkv_snapshot_t* wrap(const Snapshot* s) {
  return reinterpret_cast<const flintkv_snapshot_t*>(s);
}

std::string_view bytes(const char* p, std::size_t n) {
  return n == 0 ? std::string_view{} : std::string_view{p, n};
}

char* copy_string(std::string_view s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) return nullptr;
  if (!s.empty()) std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

// A "NoSpace" message allocated ahead, for a failure whose message cannot be allocated: a
// static string would not do (the caller frees it), and a NULL *errptr would say the call
// succeeded. Taken by set_error, and allocated again by the next set_error that can.
std::atomic<char*> reserve_message{copy_string("NoSpace")};

// Frees an earlier message in *errptr and stores `text`, as leveldb's SaveError does. If the
// message cannot be allocated, the reserve is stored instead (and made again at once if it
// can be); without it an earlier message stays (stale, but still an error). Only a failure
// with neither, the reserve taken and not yet replaced, leaves *errptr NULL.
void set_error(char** errptr, std::string_view text) noexcept {
  if (errptr == nullptr) return;
  char* message = copy_string(text);
  if (message == nullptr) message = reserve_message.exchange(nullptr);
  if (message != nullptr) {
    std::free(*errptr);
    *errptr = message;
  }
  if (reserve_message.load(std::memory_order_relaxed) == nullptr) {
    char* fresh = copy_string("NoSpace");
    char* none = nullptr;
    if (fresh != nullptr && !reserve_message.compare_exchange_strong(none, fresh)) {
      std::free(fresh);
    }
  }
}

// Returns s.ok(); on failure stores s.ToString().
bool save(char** errptr, const Status& s) noexcept {
  if (s.ok()) return true;
  try {
    set_error(errptr, s.ToString());
  } catch (...) {  // ToString ran out of DRAM: the code's name alone
    set_error(errptr, flintkv::to_string(s.code()));
  }
  return false;
}

// The error of an exception caught in `call`.
void save_exception(char** errptr, const char* call) noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    // Built by hand: allocating a std::string may be what failed.
    char message[128];
    std::snprintf(message, sizeof message, "NoSpace: out of DRAM in %s", call);
    set_error(errptr, message);
  } catch (const std::exception& e) {
    char message[512];
    std::snprintf(message, sizeof message, "IOError: %s: unexpected exception: %s", call,
                  e.what());
    set_error(errptr, message);
  } catch (...) {
    char message[128];
    std::snprintf(message, sizeof message, "IOError: %s: unexpected exception", call);
    set_error(errptr, message);
  }
}

void null_argument(char** errptr, const char* call, const char* what) noexcept {
  char message[128];
  std::snprintf(message, sizeof message, "InvalidArgument: %s: %s is NULL", call, what);
  set_error(errptr, message);
}

// Read options as the C++ API takes them; fails if a bound was lost.
Status read_options(const flintkv_readoptions_t* options, const ReadOptions** out) {
  static const ReadOptions defaults;
  *out = &defaults;
  if (options == nullptr) return Status::OK();
  if (options->lower_lost || options->upper_lost)
    return Status::NoSpace("an iterate bound of these read options was lost: out of DRAM");
  *out = &options->rep;
  return Status::OK();
}

const WriteOptions& write_options(const flintkv_writeoptions_t* options) {
  static const WriteOptions defaults;
  return options ? options->rep : defaults;
}

// The statistics as properties: one row per field of Stats, written once.
struct property {
  const char* name;
  std::uint64_t Stats::*integer;       // or null
  std::string Stats::*text;            // or null
  double Stats::*real;                 // or null
};
constexpr property kProperties[] = {
    {"flintkv.puts", &Stats::puts, nullptr, nullptr},
    {"flintkv.deletes", &Stats::deletes, nullptr, nullptr},
    {"flintkv.batches", &Stats::batches, nullptr, nullptr},
    {"flintkv.gets", &Stats::gets, nullptr, nullptr},
    {"flintkv.iterators", &Stats::iterators, nullptr, nullptr},
    {"flintkv.weak-writes", &Stats::weak_writes, nullptr, nullptr},
    {"flintkv.persist-calls", &Stats::persist_calls, nullptr, nullptr},
    {"flintkv.weak-persists", &Stats::weak_persists, nullptr, nullptr},
    {"flintkv.unpersisted-writes", &Stats::unpersisted_writes, nullptr, nullptr},
    {"flintkv.pwb", &Stats::pwb, nullptr, nullptr},
    {"flintkv.pfence", &Stats::pfence, nullptr, nullptr},
    {"flintkv.visible-version", &Stats::visible_version, nullptr, nullptr},
    {"flintkv.live-keys", &Stats::live_keys, nullptr, nullptr},
    {"flintkv.keys", &Stats::keys, nullptr, nullptr},
    {"flintkv.versions", &Stats::versions, nullptr, nullptr},
    {"flintkv.obsolete-versions", &Stats::obsolete_versions, nullptr, nullptr},
    {"flintkv.watermark", &Stats::watermark, nullptr, nullptr},
    {"flintkv.snapshots", &Stats::snapshots, nullptr, nullptr},
    {"flintkv.reclaimed-versions", &Stats::reclaimed_versions, nullptr, nullptr},
    {"flintkv.reclaimed-bytes", &Stats::reclaimed_bytes, nullptr, nullptr},
    {"flintkv.reclamation-passes", &Stats::reclamation_passes, nullptr, nullptr},
    {"flintkv.merges", &Stats::merges, nullptr, nullptr},
    {"flintkv.merged-keys", &Stats::merged_keys, nullptr, nullptr},
    {"flintkv.merge-errors", &Stats::merge_errors, nullptr, nullptr},
    {"flintkv.write-stalls", &Stats::write_stalls, nullptr, nullptr},
    {"flintkv.merge-error", nullptr, &Stats::merge_error, nullptr},
    {"flintkv.pool-size", &Stats::pool_size, nullptr, nullptr},
    {"flintkv.pool-used", &Stats::pool_used, nullptr, nullptr},
    {"flintkv.granularity", nullptr, &Stats::granularity, nullptr},
    {"flintkv.configuration", nullptr, &Stats::configuration, nullptr},
    {"flintkv.recovered-versions", &Stats::recovered_versions, nullptr, nullptr},
    {"flintkv.recovery-seconds", nullptr, nullptr, &Stats::recovery_seconds},
};
constexpr const char* kAllProperties = "flintkv.stats";

const property* find_property(std::string_view name) {
  for (const property& p : kProperties)
    if (name == p.name) return &p;
  return nullptr;
}

std::string render(const property& p, const Stats& stats) {
  if (p.integer) return std::to_string(stats.*p.integer);
  if (p.text) return stats.*p.text;
  char number[64];
  std::snprintf(number, sizeof number, "%.6f", stats.*p.real);
  return number;
}

}  // namespace

extern "C" {

// ---- Database ----

flintkv_t* flintkv_open(const flintkv_options_t* options, const char* path, char** errptr) {
  if (path == nullptr) {
    null_argument(errptr, "flintkv_open", "path");
    return nullptr;
  }
  try {
    std::unique_ptr<DB> db;
    if (!save(errptr, DB::Open(options ? options->rep : Options{}, path, &db))) return nullptr;
    return new flintkv_t{std::move(db)};
  } catch (...) {
    save_exception(errptr, "flintkv_open");
    return nullptr;
  }
}

void flintkv_close(flintkv_t* db) { delete db; }

void flintkv_put(flintkv_t* db, const flintkv_writeoptions_t* options, const char* key,
                 std::size_t keylen, const char* val, std::size_t vallen, char** errptr) {
  if (db == nullptr) {
    null_argument(errptr, "flintkv_put", "db");
    return;
  }
  try {
    save(errptr, db->rep->Put(bytes(key, keylen), bytes(val, vallen), write_options(options)));
  } catch (...) {
    save_exception(errptr, "flintkv_put");
  }
}

void flintkv_delete(flintkv_t* db, const flintkv_writeoptions_t* options, const char* key,
                    std::size_t keylen, char** errptr) {
  if (db == nullptr) {
    null_argument(errptr, "flintkv_delete", "db");
    return;
  }
  try {
    save(errptr, db->rep->Delete(bytes(key, keylen), write_options(options)));
  } catch (...) {
    save_exception(errptr, "flintkv_delete");
  }
}

void flintkv_persist(flintkv_t* db, char** errptr) {
  if (db == nullptr) {
    null_argument(errptr, "flintkv_persist", "db");
    return;
  }
  try {
    save(errptr, db->rep->Persist());
  } catch (...) {
    save_exception(errptr, "flintkv_persist");
  }
}

void flintkv_wait_for_merges(flintkv_t* db, char** errptr) {
  if (db == nullptr) {
    null_argument(errptr, "flintkv_wait_for_merges", "db");
    return;
  }
  try {
    save(errptr, db->rep->WaitForMerges());
  } catch (...) {
    save_exception(errptr, "flintkv_wait_for_merges");
  }
}

void flintkv_write(flintkv_t* db, const flintkv_writeoptions_t* options,
                   const flintkv_writebatch_t* batch, char** errptr) {
  if (db == nullptr) {
    null_argument(errptr, "flintkv_write", "db");
    return;
  }
  if (batch == nullptr) {
    null_argument(errptr, "flintkv_write", "batch");
    return;
  }
  if (batch->entry_lost) {
    save(errptr, Status::NoSpace("flintkv_write: the batch lost an entry while it was filled: "
                                 "out of DRAM"));
    return;
  }
  try {
    save(errptr, db->rep->Write(batch->rep, write_options(options)));
  } catch (...) {
    save_exception(errptr, "flintkv_write");
  }
}

char* flintkv_get(flintkv_t* db, const flintkv_readoptions_t* options, const char* key,
                  std::size_t keylen, std::size_t* vallen, char** errptr) {
  *vallen = 0;
  if (db == nullptr) {
    null_argument(errptr, "flintkv_get", "db");
    return nullptr;
  }
  try {
    const ReadOptions* read = nullptr;
    if (!save(errptr, read_options(options, &read))) return nullptr;
    std::string value;
    Status s = db->rep->Get(bytes(key, keylen), &value, *read);
    if (s.IsNotFound()) return nullptr;
    if (!save(errptr, s)) return nullptr;
    // malloc(0) may return NULL: a found empty value still gets a buffer.
    char* out = static_cast<char*>(std::malloc(value.empty() ? 1 : value.size()));
    if (out == nullptr) {
      save(errptr, Status::NoSpace("flintkv_get: out of DRAM for a value of " +
                                   std::to_string(value.size()) + " bytes"));
      return nullptr;
    }
    if (!value.empty()) std::memcpy(out, value.data(), value.size());
    *vallen = value.size();
    return out;
  } catch (...) {
    save_exception(errptr, "flintkv_get");
    return nullptr;
  }
}

flintkv_iterator_t* flintkv_create_iterator(flintkv_t* db, const flintkv_readoptions_t* options) {
  auto* iter = new (std::nothrow) flintkv_iterator_t;
  if (iter == nullptr) return nullptr;
  try {
    const ReadOptions* read = nullptr;
    iter->error = read_options(options, &read);
    if (iter->error.ok()) {
      iter->rep = db->rep->NewIterator(*read);
      if (iter->rep == nullptr)
        iter->error = Status::NoSpace("flintkv_create_iterator: out of DRAM");
    }
  } catch (...) {
    iter->rep.reset();
    // A message this short fits std::string's inline buffer: nothing to allocate.
    iter->error = Status::NoSpace("out of DRAM");
  }
  return iter;
}

const flintkv_snapshot_t* flintkv_create_snapshot(flintkv_t* db) {
  try {
    return wrap(db->rep->GetSnapshot());
  } catch (...) {
    return nullptr;
  }
}

void flintkv_release_snapshot(flintkv_t* db, const flintkv_snapshot_t* snapshot) {
  if (snapshot == nullptr) return;
  try {
    db->rep->ReleaseSnapshot(unwrap(snapshot));
  } catch (...) {
    // ReleaseSnapshot allocates nothing; there is nothing a caller could do.
  }
}

std::uint64_t flintkv_snapshot_version(const flintkv_snapshot_t* snapshot) {
  return unwrap(snapshot)->version();
}

char* flintkv_property_value(flintkv_t* db, const char* propname) {
  try {
    const std::string_view name = propname;
    const property* p = find_property(name);
    if (p == nullptr && name != kAllProperties) return nullptr;
    const Stats stats = db->rep->GetStats();
    if (p != nullptr) return copy_string(render(*p, stats));
    std::string all;
    for (const property& q : kProperties) {
      all += q.name;
      all += ": ";
      all += render(q, stats);
      all += '\n';
    }
    return copy_string(all);
  } catch (...) {
    return nullptr;
  }
}

int flintkv_property_int(flintkv_t* db, const char* propname, std::uint64_t* value) {
  try {
    const property* p = find_property(propname);
    if (p == nullptr || p->integer == nullptr) return -1;
    *value = db->rep->GetStats().*p->integer;
    return 0;
  } catch (...) {
    return -1;
  }
}

// ---- Management ----

void flintkv_check_db(const char* path, char** errptr) {
  if (path == nullptr) {
    null_argument(errptr, "flintkv_check_db", "path");
    return;
  }
  try {
    flintkv::CheckReport report;
    save(errptr, DB::Check(path, &report));
  } catch (...) {
    save_exception(errptr, "flintkv_check_db");
  }
}

void flintkv_repair_db(const flintkv_options_t* options, const char* damaged,
                       const char* new_pool, char** errptr) {
  if (damaged == nullptr) {
    null_argument(errptr, "flintkv_repair_db", "damaged");
    return;
  }
  if (new_pool == nullptr) {
    null_argument(errptr, "flintkv_repair_db", "new_pool");
    return;
  }
  try {
    Options repair_options;
    if (options != nullptr) {
      repair_options = options->rep;
    } else {
      repair_options.pool_size = 0;  // the damaged file's size
    }
    save(errptr, DB::Repair(damaged, new_pool, repair_options, nullptr));
  } catch (...) {
    save_exception(errptr, "flintkv_repair_db");
  }
}

// ---- Write batch ----

flintkv_writebatch_t* flintkv_writebatch_create(void) {
  return new (std::nothrow) flintkv_writebatch_t;
}

void flintkv_writebatch_destroy(flintkv_writebatch_t* batch) { delete batch; }

void flintkv_writebatch_clear(flintkv_writebatch_t* batch) {
  batch->rep.Clear();
  batch->entry_lost = false;
}

void flintkv_writebatch_put(flintkv_writebatch_t* batch, const char* key, std::size_t keylen,
                            const char* val, std::size_t vallen) {
  try {
    batch->rep.Put(bytes(key, keylen), bytes(val, vallen));
  } catch (...) {
    batch->entry_lost = true;
  }
}

void flintkv_writebatch_delete(flintkv_writebatch_t* batch, const char* key,
                               std::size_t keylen) {
  try {
    batch->rep.Delete(bytes(key, keylen));
  } catch (...) {
    batch->entry_lost = true;
  }
}

std::size_t flintkv_writebatch_count(const flintkv_writebatch_t* batch) {
  return batch->rep.Count();
}

void flintkv_writebatch_iterate(const flintkv_writebatch_t* batch, void* state,
                                void (*put)(void*, const char*, std::size_t, const char*,
                                            std::size_t),
                                void (*deleted)(void*, const char*, std::size_t)) {
  for (const WriteBatch::Entry& e : batch->rep.entries()) {
    if (e.kind == WriteBatch::Kind::kPut) {
      put(state, e.key.data(), e.key.size(), e.value.data(), e.value.size());
    } else {
      deleted(state, e.key.data(), e.key.size());
    }
  }
}

// ---- Iterator ----

void flintkv_iter_destroy(flintkv_iterator_t* iter) { delete iter; }

unsigned char flintkv_iter_valid(const flintkv_iterator_t* iter) {
  return iter->rep != nullptr && iter->rep->Valid();
}

void flintkv_iter_seek_to_first(flintkv_iterator_t* iter) {
  if (iter->rep) iter->rep->SeekToFirst();
}

void flintkv_iter_seek_to_last(flintkv_iterator_t* iter) {
  if (iter->rep) iter->rep->SeekToLast();
}

void flintkv_iter_seek(flintkv_iterator_t* iter, const char* key, std::size_t keylen) {
  if (iter->rep) iter->rep->Seek(bytes(key, keylen));
}

void flintkv_iter_seek_for_prev(flintkv_iterator_t* iter, const char* key,
                                std::size_t keylen) {
  if (iter->rep) iter->rep->SeekForPrev(bytes(key, keylen));
}

void flintkv_iter_next(flintkv_iterator_t* iter) {
  if (flintkv_iter_valid(iter)) iter->rep->Next();
}

void flintkv_iter_prev(flintkv_iterator_t* iter) {
  if (flintkv_iter_valid(iter)) iter->rep->Prev();
}

const char* flintkv_iter_key(const flintkv_iterator_t* iter, std::size_t* keylen) {
  if (!flintkv_iter_valid(iter)) {
    *keylen = 0;
    return nullptr;
  }
  std::string_view k = iter->rep->key();
  *keylen = k.size();
  return k.data();
}

const char* flintkv_iter_value(const flintkv_iterator_t* iter, std::size_t* vallen) {
  if (!flintkv_iter_valid(iter)) {
    *vallen = 0;
    return nullptr;
  }
  std::string_view v = iter->rep->value();
  *vallen = v.size();
  return v.data();
}

void flintkv_iter_get_error(const flintkv_iterator_t* iter, char** errptr) {
  try {
    if (!save(errptr, iter->error)) return;
    if (iter->rep) save(errptr, iter->rep->status());
  } catch (...) {
    save_exception(errptr, "flintkv_iter_get_error");
  }
}

void flintkv_iter_refresh(flintkv_iterator_t* iter, char** errptr) {
  try {
    if (!save(errptr, iter->error)) return;
    if (iter->rep) save(errptr, iter->rep->Refresh());
  } catch (...) {
    save_exception(errptr, "flintkv_iter_refresh");
  }
}

// ---- Options ----

flintkv_options_t* flintkv_options_create(void) { return new (std::nothrow) flintkv_options_t; }
void flintkv_options_destroy(flintkv_options_t* options) { delete options; }

void flintkv_options_set_create_if_missing(flintkv_options_t* options, unsigned char v) {
  options->rep.create_if_missing = v != 0;
}
void flintkv_options_set_error_if_exists(flintkv_options_t* options, unsigned char v) {
  options->rep.error_if_exists = v != 0;
}
void flintkv_options_set_pool_size(flintkv_options_t* options, std::size_t bytes) {
  options->rep.pool_size = bytes;
}
void flintkv_options_set_read_only(flintkv_options_t* options, unsigned char v) {
  options->rep.read_only = v != 0;
}
void flintkv_options_set_thread_slots(flintkv_options_t* options, unsigned slots) {
  options->rep.thread_slots = slots;
}
void flintkv_options_set_merge_interval_ms(flintkv_options_t* options, uint64_t ms) {
  options->rep.merge_interval = std::chrono::milliseconds(ms);
}

void flintkv_options_set_persist_interval_ms(flintkv_options_t* options, uint64_t ms) {
  options->rep.persist_interval = std::chrono::milliseconds(ms);
}

flintkv_readoptions_t* flintkv_readoptions_create(void) {
  return new (std::nothrow) flintkv_readoptions_t;
}
void flintkv_readoptions_destroy(flintkv_readoptions_t* options) { delete options; }

void flintkv_readoptions_set_snapshot(flintkv_readoptions_t* options,
                                      const flintkv_snapshot_t* snapshot) {
  options->rep.snapshot = unwrap(snapshot);
}
void flintkv_readoptions_set_verify_checksums(flintkv_readoptions_t* options,
                                              unsigned char v) {
  options->rep.verify_checksums = v != 0;
}

namespace {
void set_bound(std::optional<std::string>& bound, bool& lost, const char* key,
               std::size_t keylen) {
  lost = false;
  if (key == nullptr) {
    bound.reset();
    return;
  }
  try {
    bound.emplace(key, keylen);
  } catch (...) {
    bound.reset();
    lost = true;
  }
}
}  // namespace

void flintkv_readoptions_set_iterate_lower_bound(flintkv_readoptions_t* options,
                                                 const char* key, std::size_t keylen) {
  set_bound(options->rep.lower_bound, options->lower_lost, key, keylen);
}
void flintkv_readoptions_set_iterate_upper_bound(flintkv_readoptions_t* options,
                                                 const char* key, std::size_t keylen) {
  set_bound(options->rep.upper_bound, options->upper_lost, key, keylen);
}

flintkv_writeoptions_t* flintkv_writeoptions_create(void) {
  return new (std::nothrow) flintkv_writeoptions_t;
}
void flintkv_writeoptions_destroy(flintkv_writeoptions_t* options) { delete options; }
void flintkv_writeoptions_set_sync(flintkv_writeoptions_t* options, unsigned char v) {
  options->rep.sync = v != 0;
}

// ---- Utility ----

void flintkv_free(void* ptr) { std::free(ptr); }

}  // extern "C"
