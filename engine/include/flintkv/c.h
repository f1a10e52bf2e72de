/* FlintKV's C API: the C++ API of flintkv/db.hpp for C and other languages' FFIs, in the
   style of leveldb/c.h and rocksdb/c.h. docs/c-api.md has an example.

   Conventions:

   (1) Handles are opaque pointers. Each *_create or flintkv_open has a matching
       *_destroy, flintkv_close or flintkv_release_snapshot; destroying NULL does nothing.
       Iterators and snapshots must be destroyed/released before their database is closed.

   (2) Keys and values are (pointer, length) pairs of bytes; they need not be NUL-terminated
       and may contain NUL bytes. A pointer may be NULL when its length is 0.

   (3) Errors are reported through a `char** errptr`, the last argument. On entry *errptr
       is NULL or a message this library returned earlier. On success a call leaves
       *errptr unchanged (so it stays NULL if it was). On failure it frees the old message
       and sets *errptr to a new malloc()ed, NUL-terminated one: the engine's Status as
       Status::ToString() spells it, the code's name first ("NotFound", "Corruption",
       "InvalidArgument", "IOError", "NoSpace", "Busy"), then ": " and a message that names
       the file, offset or limit. Release it with flintkv_free. errptr itself may be NULL:
       the call's error is then discarded. Out of memory for the message itself, *errptr is
       "NoSpace" (allocated ahead) or keeps the earlier message.

   (4) Buffers this library returns (values, properties, error messages) are malloc()ed;
       release them with flintkv_free.

   (5) No C++ exception leaves this library. Running out of DRAM is reported as a NoSpace
       error, or as the documented result of a call that has no errptr (a NULL handle from
       a *_create, an iterator whose flintkv_iter_get_error says NoSpace).

   (6) Booleans are unsigned char: 0 is false, anything else true.

   (7) Handles marked REQUIRES non-NULL must not be NULL (as in leveldb, a NULL there is
       undefined behaviour). A NULL database, batch or path passed to a call with an errptr
       is reported as InvalidArgument instead.

   Thread safety: a flintkv_t may be used by any number of threads at once; snapshots may be
   shared by threads. Options, batches and iterators are used by one thread at a time. */
#ifndef FLINTKV_C_H_
#define FLINTKV_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct flintkv_t flintkv_t;
typedef struct flintkv_options_t flintkv_options_t;
typedef struct flintkv_readoptions_t flintkv_readoptions_t;
typedef struct flintkv_writeoptions_t flintkv_writeoptions_t;
typedef struct flintkv_writebatch_t flintkv_writebatch_t;
typedef struct flintkv_snapshot_t flintkv_snapshot_t;
typedef struct flintkv_iterator_t flintkv_iterator_t;

/* Limits, enforced with InvalidArgument (the same as flintkv/options.hpp). */
#define FLINTKV_MAX_KEY_SIZE 4096u          /* bytes; keys are never empty */
#define FLINTKV_MAX_VALUE_SIZE 1048576u     /* bytes; values may be empty */
#define FLINTKV_MIN_POOL_SIZE 8388608u      /* bytes */
#define FLINTKV_MAX_THREAD_SLOTS 1024u

/* ---- Database ---------------------------------------------------------------------- */

/* Opens (and recovers) the pool file at `path`, or creates it (see the options). Returns
   NULL and sets *errptr on failure, e.g. NotFound (missing pool without create-if-missing),
   InvalidArgument (a file that is not a FlintKV pool, or one of another build layout),
   Busy (the pool is open elsewhere, in this process or another). `options` may be NULL:
   the defaults (no create-if-missing). */
flintkv_t* flintkv_open(const flintkv_options_t* options, const char* path, char** errptr);

/* Closes the database. REQUIRES: its iterators destroyed and snapshots released. */
void flintkv_close(flintkv_t* db);

/* Stores `val` for `key`, durably (or weakly: flintkv_writeoptions_set_sync). `options` may
   be NULL (the defaults). */
void flintkv_put(flintkv_t* db, const flintkv_writeoptions_t* options, const char* key,
                 size_t keylen, const char* val, size_t vallen, char** errptr);

/* Deletes `key`, durably; deleting a missing key is not an error. */
void flintkv_delete(flintkv_t* db, const flintkv_writeoptions_t* options, const char* key,
                    size_t keylen, char** errptr);

/* Applies every entry of `batch` atomically and durably: readers and recovery see all of
   them or none. One bad entry (e.g. an oversized key) fails the whole batch. */
void flintkv_write(flintkv_t* db, const flintkv_writeoptions_t* options,
                   const flintkv_writebatch_t* batch, char** errptr);

/* Makes every write visible when it was called durable (writes made with sync 0), and
   returns when they are. Nothing to do (or a read-only database): returns at once. */
void flintkv_persist(flintkv_t* db, char** errptr);

/* Waits until the merge thread (flintkv_options_set_merge_interval_ms) is done with the
   writes made so far: every key it may move is in the packed tier, and the tier is one
   run (DB::WaitForMerges). An error if its last pass failed; at once without the thread. */
void flintkv_wait_for_merges(flintkv_t* db, char** errptr);

/* The value of `key` at the snapshot in `options` (or now): a malloc()ed buffer of
   *vallen bytes (not NUL-terminated; never NULL for a found key, even an empty value).
   Returns NULL with *vallen = 0 if the key is absent (*errptr then unchanged) or on an
   error (*errptr set). `options` may be NULL (the defaults). REQUIRES: vallen non-NULL. */
char* flintkv_get(flintkv_t* db, const flintkv_readoptions_t* options, const char* key,
                  size_t keylen, size_t* vallen, char** errptr);

/* An iterator over the snapshot in `options` (or an implicit one taken now), with the
   options' bounds. REQUIRES: db non-NULL. `options` may be NULL. When DRAM has run out the
   iterator is never valid and flintkv_iter_get_error reports NoSpace; NULL is returned only
   if not even that iterator can be allocated. */
flintkv_iterator_t* flintkv_create_iterator(flintkv_t* db, const flintkv_readoptions_t* options);

/* Pins the current version of the whole store until released. Returns NULL when DRAM has
   run out (a NULL snapshot in read options reads the newest state). REQUIRES: db non-NULL. */
const flintkv_snapshot_t* flintkv_create_snapshot(flintkv_t* db);

/* Releases a snapshot of `db`; releasing NULL does nothing. REQUIRES: db non-NULL. */
void flintkv_release_snapshot(flintkv_t* db, const flintkv_snapshot_t* snapshot);

/* The version a snapshot reads: every write at or below it is in the snapshot, none above.
   REQUIRES: snapshot non-NULL. */
uint64_t flintkv_snapshot_version(const flintkv_snapshot_t* snapshot);

/* Statistics (DB::GetStats). Property names: "flintkv.<field>" for each field of
   flintkv::Stats with '_' written '-' ("flintkv.live-keys", "flintkv.pool-used", ...;
   docs/c-api.md lists them), and "flintkv.stats": every one, a "name: value" line each.
   flintkv_property_value returns a malloc()ed NUL-terminated string, or NULL if the name
   is unknown or DRAM has run out. REQUIRES: db and propname non-NULL. */
char* flintkv_property_value(flintkv_t* db, const char* propname);

/* The integer properties: sets *value and returns 0; returns -1 (and leaves *value) if the
   name is unknown or the property is not an integer (granularity, configuration,
   recovery-seconds, stats). REQUIRES: db, propname and value non-NULL. */
int flintkv_property_int(flintkv_t* db, const char* propname, uint64_t* value);

/* ---- Management -------------------------------------------------------------------- */

/* Validates the pool at `path` without changing it (DB::Check): opens it read-only, checks
   its header and every node. Corruption names the first problem; Busy while the pool is
   open for writing. There is no destroy call: a pool is one file, remove it when closed. */
void flintkv_check_db(const char* path, char** errptr);

/* Salvages a damaged pool (DB::Repair): copies every intact committed key-value of the pool
   at `damaged` (only read) into a new pool created at `new_pool` (never an existing file),
   of options' pool size, or of the damaged file's size when that is 0. `options` may be
   NULL (the damaged file's size). The report of what was kept and dropped is available
   through the C++ API and `flintkv repair`. */
void flintkv_repair_db(const flintkv_options_t* options, const char* damaged,
                       const char* new_pool, char** errptr);

/* ---- Write batch ------------------------------------------------------------------- */

/* Returns NULL when DRAM has run out. */
flintkv_writebatch_t* flintkv_writebatch_create(void);
void flintkv_writebatch_destroy(flintkv_writebatch_t* batch);
/* Removes every entry. REQUIRES (this and the next four): batch non-NULL. */
void flintkv_writebatch_clear(flintkv_writebatch_t* batch);
/* Adds a put or a delete; a later entry for a key replaces an earlier one. The bytes are
   copied. Limits are checked by flintkv_write. If DRAM runs out the entry is lost, the
   batch remembers it, and flintkv_write of it fails with NoSpace (until cleared). */
void flintkv_writebatch_put(flintkv_writebatch_t* batch, const char* key, size_t keylen,
                            const char* val, size_t vallen);
void flintkv_writebatch_delete(flintkv_writebatch_t* batch, const char* key, size_t keylen);
/* The number of entries. */
size_t flintkv_writebatch_count(const flintkv_writebatch_t* batch);
/* Calls put or deleted for each entry, in the order they were added. */
void flintkv_writebatch_iterate(const flintkv_writebatch_t* batch, void* state,
                                void (*put)(void* state, const char* key, size_t keylen,
                                            const char* val, size_t vallen),
                                void (*deleted)(void* state, const char* key, size_t keylen));

/* ---- Iterator ---------------------------------------------------------------------- */

/* REQUIRES (all but destroy): iter non-NULL. An iterator that is not valid ignores next
   and prev, and its key and value are NULL with length 0. */
void flintkv_iter_destroy(flintkv_iterator_t* iter);
unsigned char flintkv_iter_valid(const flintkv_iterator_t* iter);
void flintkv_iter_seek_to_first(flintkv_iterator_t* iter);
void flintkv_iter_seek_to_last(flintkv_iterator_t* iter);
/* The first key at or after `key`. */
void flintkv_iter_seek(flintkv_iterator_t* iter, const char* key, size_t keylen);
/* The last key at or before `key`. */
void flintkv_iter_seek_for_prev(flintkv_iterator_t* iter, const char* key, size_t keylen);
void flintkv_iter_next(flintkv_iterator_t* iter);
void flintkv_iter_prev(flintkv_iterator_t* iter);
/* The current key and value: they stay valid until the iterator moves or is destroyed. */
const char* flintkv_iter_key(const flintkv_iterator_t* iter, size_t* keylen);
const char* flintkv_iter_value(const flintkv_iterator_t* iter, size_t* vallen);
/* Sets *errptr if the iteration stopped on an error (e.g. Corruption of a node read,
   NoSpace); leaves it unchanged otherwise. */
void flintkv_iter_get_error(const flintkv_iterator_t* iter, char** errptr);
/* Iterator::Refresh: the iterator reads the newest committed state from now on and is not
   valid until the next seek. Sets *errptr if it cannot (an iterator over a snapshot:
   NotSupported; out of DRAM: NoSpace), the iterator then as it was; leaves *errptr
   unchanged otherwise. */
void flintkv_iter_refresh(flintkv_iterator_t* iter, char** errptr);

/* ---- Options ----------------------------------------------------------------------- */

/* Returns NULL when DRAM has run out. The defaults are flintkv::Options's. REQUIRES (the
   setters): options non-NULL. */
flintkv_options_t* flintkv_options_create(void);
void flintkv_options_destroy(flintkv_options_t* options);
/* Create the pool file if it does not exist (default 0). */
void flintkv_options_set_create_if_missing(flintkv_options_t* options, unsigned char v);
/* Fail with InvalidArgument if the pool file exists (default 0). */
void flintkv_options_set_error_if_exists(flintkv_options_t* options, unsigned char v);
/* Size in bytes of a pool created by this open (default 1 GiB; at least
   FLINTKV_MIN_POOL_SIZE); ignored when opening an existing pool. */
void flintkv_options_set_pool_size(flintkv_options_t* options, size_t bytes);
/* Open read-only (default 0): read-only opens coexist, writes fail with InvalidArgument,
   a missing pool is NotFound whatever create-if-missing says. */
void flintkv_options_set_read_only(flintkv_options_t* options, unsigned char v);
/* Writers that can be attaching at once (default 64, at most FLINTKV_MAX_THREAD_SLOTS). */
void flintkv_options_set_thread_slots(flintkv_options_t* options, unsigned slots);
/* Writes made with sync 0 are persisted at least this often, in milliseconds, by a
   background thread (default 0: no thread). */
void flintkv_options_set_persist_interval_ms(flintkv_options_t* options, uint64_t ms);
/* Options::merge_interval: every `ms` milliseconds a background thread moves keys that
   stopped changing to the packed tier (0, the default: no merges). */
void flintkv_options_set_merge_interval_ms(flintkv_options_t* options, uint64_t ms);

/* Returns NULL when DRAM has run out. REQUIRES (the setters): options non-NULL. */
flintkv_readoptions_t* flintkv_readoptions_create(void);
void flintkv_readoptions_destroy(flintkv_readoptions_t* options);
/* Read as of `snapshot` (NULL, the default: the newest state). The snapshot must outlive
   the reads and iterators that use it. */
void flintkv_readoptions_set_snapshot(flintkv_readoptions_t* options,
                                      const flintkv_snapshot_t* snapshot);
/* Check each value read against its node's checksum (default 1). */
void flintkv_readoptions_set_verify_checksums(flintkv_readoptions_t* options,
                                              unsigned char v);
/* Iterators only: keys below the lower bound (inclusive) or at or above the upper bound
   (exclusive) are not visited. The bytes are copied; a NULL key removes the bound. If DRAM
   runs out the bound is lost and reads with these options fail with NoSpace (until the
   bound is set again). */
void flintkv_readoptions_set_iterate_lower_bound(flintkv_readoptions_t* options,
                                                 const char* key, size_t keylen);
void flintkv_readoptions_set_iterate_upper_bound(flintkv_readoptions_t* options,
                                                 const char* key, size_t keylen);

/* Returns NULL when DRAM has run out. */
flintkv_writeoptions_t* flintkv_writeoptions_create(void);
void flintkv_writeoptions_destroy(flintkv_writeoptions_t* options);
/* 1 (the default): a write is durable when it returns. 0: visible when it returns, durable
   at the next flintkv_persist, sync write, persist interval or close; a crash keeps the
   writes up to some point of their order (docs/engine-guide.md, "Weak writes"). */
void flintkv_writeoptions_set_sync(flintkv_writeoptions_t* options, unsigned char v);

/* ---- Utility ----------------------------------------------------------------------- */

/* Calls free(ptr). REQUIRES: ptr is NULL or was returned by this library. */
void flintkv_free(void* ptr);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLINTKV_C_H_ */
