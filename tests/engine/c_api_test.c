/* The C API (flintkv/c.h), compiled as C: round trips, batches' atomic visibility,
   snapshots, iterators both ways with seeks and bounds, properties, check and repair, and
   errors as strings (missing pool, a file that is no pool, oversized keys, a pool open
   twice) with *errptr replaced, never leaked (the ASan build's leak checker sees a lost
   message). Each check that fails prints its name and exits non-zero. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flintkv/c.h"

static const char* current_test = "";

#define CHECK(cond, ...)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "c_api_test: FAILED %s: %s (line %d): ", current_test, #cond,   \
              __LINE__);                                                              \
      fprintf(stderr, __VA_ARGS__);                                                   \
      fprintf(stderr, "\n");                                                          \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

#define CHECK_NO_ERROR(err) CHECK((err) == NULL, "unexpected error: %s", (err))

/* Every pool path handed out, removed at exit: a failed check leaves no pool behind. */
enum { kMaxPaths = 16 };
static char paths[kMaxPaths][256];
static int path_count = 0;
static void remove_pools(void) {
  for (int i = 0; i < path_count; ++i) unlink(paths[i]);
}

/* A fresh pool path in /dev/shm, removed first. */
static void pool_path(char* out, size_t size, const char* name) {
  snprintf(out, size, "/dev/shm/flintkv-c-test-%ld-%s.pool", (long)getpid(), name);
  unlink(out);
  CHECK(path_count < kMaxPaths, "too many pool paths");
  snprintf(paths[path_count++], sizeof paths[0], "%s", out);
}

static flintkv_options_t* creating(void) {
  flintkv_options_t* options = flintkv_options_create();
  CHECK(options != NULL, "options_create");
  flintkv_options_set_create_if_missing(options, 1);
  flintkv_options_set_pool_size(options, 16u << 20);
  return options;
}

static flintkv_t* open_new(const char* path) {
  flintkv_options_t* options = creating();
  char* err = NULL;
  flintkv_t* db = flintkv_open(options, path, &err);
  flintkv_options_destroy(options);
  CHECK_NO_ERROR(err);
  CHECK(db != NULL, "open of %s", path);
  return db;
}

/* *err is an error whose code is `code` and whose text contains `part`; frees it. */
static void expect_error(char** err, const char* code, const char* part) {
  CHECK(*err != NULL, "expected a %s error naming \"%s\", got none", code, part);
  CHECK(strncmp(*err, code, strlen(code)) == 0 && (*err)[strlen(code)] == ':',
        "expected code %s, got \"%s\"", code, *err);
  CHECK(strstr(*err, part) != NULL, "\"%s\" does not name \"%s\"", *err, part);
  flintkv_free(*err);
  *err = NULL;
}

/* The value of `key` as a NUL-terminated string (to free), or NULL if absent. */
static char* get_string(flintkv_t* db, const flintkv_readoptions_t* ro, const char* key) {
  char* err = NULL;
  size_t len = 99;
  char* value = flintkv_get(db, ro, key, strlen(key), &len, &err);
  CHECK_NO_ERROR(err);
  if (value == NULL) {
    CHECK(len == 0, "vallen of an absent key is %zu", len);
    return NULL;
  }
  char* out = malloc(len + 1);
  CHECK(out != NULL, "malloc");
  memcpy(out, value, len);
  out[len] = '\0';
  flintkv_free(value);
  return out;
}

static void expect_value(flintkv_t* db, const flintkv_readoptions_t* ro, const char* key,
                         const char* expected) {
  char* value = get_string(db, ro, key);
  if (expected == NULL) {
    CHECK(value == NULL, "key %s: expected absent, got \"%s\"", key, value);
  } else {
    CHECK(value != NULL, "key %s: expected \"%s\", got absent", key, expected);
    CHECK(strcmp(value, expected) == 0, "key %s: expected \"%s\", got \"%s\"", key, expected,
          value);
  }
  free(value);
}

static void put_string(flintkv_t* db, const char* key, const char* value) {
  char* err = NULL;
  flintkv_put(db, NULL, key, strlen(key), value, strlen(value), &err);
  CHECK_NO_ERROR(err);
}

static void test_round_trip(void) {
  current_test = "round_trip";
  char path[256];
  pool_path(path, sizeof path, "round-trip");
  flintkv_t* db = open_new(path);
  flintkv_writeoptions_t* wo = flintkv_writeoptions_create();
  flintkv_readoptions_t* ro = flintkv_readoptions_create();
  CHECK(wo != NULL && ro != NULL, "options_create");
  char* err = NULL;

  flintkv_put(db, wo, "key", 3, "value", 5, &err);
  CHECK_NO_ERROR(err);
  size_t len = 0;
  char* value = flintkv_get(db, ro, "key", 3, &len, &err);
  CHECK_NO_ERROR(err);
  CHECK(value != NULL && len == 5 && memcmp(value, "value", 5) == 0, "get after put");
  flintkv_free(value);

  /* Overwrite; binary bytes with NULs in key and value. */
  put_string(db, "key", "second");
  expect_value(db, NULL, "key", "second");
  const char bin_key[4] = {'b', '\0', 'k', '\0'};
  const char bin_val[3] = {'\0', 'x', '\0'};
  flintkv_put(db, wo, bin_key, sizeof bin_key, bin_val, sizeof bin_val, &err);
  CHECK_NO_ERROR(err);
  value = flintkv_get(db, NULL, bin_key, sizeof bin_key, &len, &err);
  CHECK_NO_ERROR(err);
  CHECK(value != NULL && len == 3 && memcmp(value, bin_val, 3) == 0, "binary round trip");
  flintkv_free(value);
  value = flintkv_get(db, NULL, bin_key, 1, &len, &err); /* "b", a prefix: absent */
  CHECK(value == NULL && err == NULL, "a prefix of a key is another key");

  /* An empty value is found: a buffer, length 0. */
  flintkv_put(db, wo, "empty", 5, NULL, 0, &err);
  CHECK_NO_ERROR(err);
  len = 7;
  value = flintkv_get(db, ro, "empty", 5, &len, &err);
  CHECK_NO_ERROR(err);
  CHECK(value != NULL && len == 0, "an empty value is found (value %p, len %zu)",
        (void*)value, len);
  flintkv_free(value);

  /* Absent keys: NULL, no error. Delete, delete of a missing key. */
  expect_value(db, NULL, "missing", NULL);
  flintkv_delete(db, wo, "key", 3, &err);
  CHECK_NO_ERROR(err);
  expect_value(db, NULL, "key", NULL);
  flintkv_delete(db, wo, "never-there", 11, &err);
  CHECK_NO_ERROR(err);

  /* Durable across close and open. */
  put_string(db, "kept", "across-open");
  flintkv_close(db);
  db = flintkv_open(NULL, path, &err); /* NULL options: the defaults */
  CHECK_NO_ERROR(err);
  CHECK(db != NULL, "reopen");
  expect_value(db, NULL, "kept", "across-open");
  expect_value(db, NULL, "key", NULL);

  flintkv_readoptions_destroy(ro);
  flintkv_writeoptions_destroy(wo);
  flintkv_close(db);
  unlink(path);
}

struct batch_log {
  int puts, deletes;
  char last_key[16];
};
static void log_put(void* state, const char* k, size_t klen, const char* v, size_t vlen) {
  struct batch_log* log = state;
  (void)v;
  (void)vlen;
  log->puts++;
  snprintf(log->last_key, sizeof log->last_key, "%.*s", (int)klen, k);
}
static void log_delete(void* state, const char* k, size_t klen) {
  struct batch_log* log = state;
  log->deletes++;
  snprintf(log->last_key, sizeof log->last_key, "%.*s", (int)klen, k);
}

/* A writer rewrites kGroup keys in one batch per generation; a reader reads them at one
   snapshot and must see one generation throughout. The writer writes at least kGenerations
   batches and goes on until the reader has seen kMinSeen generations (so its reads fall
   between many batches) or has seen part of a batch. */
enum { kGroup = 8, kGenerations = 300, kMinSeen = 20 };
struct visibility {
  flintkv_t* db;
  atomic_int done;
  atomic_int reads;
  atomic_int seen; /* generations the reader has seen, each different from the one before */
  atomic_int torn; /* reads that saw more than one generation */
};
static void* read_groups(void* arg) {
  struct visibility* v = arg;
  flintkv_readoptions_t* ro = flintkv_readoptions_create();
  int last = -1;
  while (!atomic_load(&v->done)) {
    const flintkv_snapshot_t* snap = flintkv_create_snapshot(v->db);
    flintkv_readoptions_set_snapshot(ro, snap);
    char first[32] = "";
    for (int i = 0; i < kGroup; ++i) {
      char key[16];
      snprintf(key, sizeof key, "group-%d", i);
      char* err = NULL;
      size_t len = 0;
      char* value = flintkv_get(v->db, ro, key, strlen(key), &len, &err);
      if (err != NULL || value == NULL) {
        atomic_fetch_add(&v->torn, 1);
        flintkv_free(err);
        flintkv_free(value);
        break;
      }
      char got[32];
      snprintf(got, sizeof got, "%.*s", (int)len, value);
      flintkv_free(value);
      if (i == 0) {
        strcpy(first, got);
      } else if (strcmp(first, got) != 0) {
        atomic_fetch_add(&v->torn, 1);
        break;
      }
    }
    int generation = -1;
    if (sscanf(first, "gen-%d", &generation) == 1 && generation != last) {
      last = generation;
      atomic_fetch_add(&v->seen, 1);
    }
    atomic_fetch_add(&v->reads, 1);
    flintkv_readoptions_set_snapshot(ro, NULL);
    flintkv_release_snapshot(v->db, snap);
  }
  flintkv_readoptions_destroy(ro);
  return NULL;
}

static void write_group(flintkv_t* db, flintkv_writebatch_t* batch, int generation) {
  flintkv_writebatch_clear(batch);
  for (int i = 0; i < kGroup; ++i) {
    char key[16], value[32];
    snprintf(key, sizeof key, "group-%d", i);
    snprintf(value, sizeof value, "gen-%d", generation);
    flintkv_writebatch_put(batch, key, strlen(key), value, strlen(value));
  }
  char* err = NULL;
  flintkv_write(db, NULL, batch, &err);
  CHECK_NO_ERROR(err);
}

static void test_weak_writes(void) {
  current_test = "weak_writes";
  char path[256];
  pool_path(path, sizeof path, "weak");
  flintkv_t* db = open_new(path);
  flintkv_writeoptions_t* weak = flintkv_writeoptions_create();
  CHECK(weak != NULL, "writeoptions_create");
  flintkv_writeoptions_set_sync(weak, 0);
  char* err = NULL;
  flintkv_put(db, weak, "w", 1, "1", 1, &err);
  CHECK_NO_ERROR(err);
  expect_value(db, NULL, "w", "1"); /* visible at once */
  uint64_t unpersisted = 0;
  CHECK(flintkv_property_int(db, "flintkv.unpersisted-writes", &unpersisted) == 0,
        "flintkv.unpersisted-writes");
  flintkv_persist(db, &err);
  CHECK_NO_ERROR(err);
  CHECK(flintkv_property_int(db, "flintkv.unpersisted-writes", &unpersisted) == 0 &&
            unpersisted == 0,
        "no weak write waits after flintkv_persist (%llu)", (unsigned long long)unpersisted);
  uint64_t calls = 0;
  CHECK(flintkv_property_int(db, "flintkv.persist-calls", &calls) == 0 && calls == 1,
        "flintkv.persist-calls");
  flintkv_persist(NULL, &err);
  CHECK(err != NULL, "flintkv_persist(NULL) is an error");
  flintkv_free(err);
  err = NULL;
  flintkv_writeoptions_destroy(weak);
  flintkv_close(db);
  db = flintkv_open(NULL, path, &err);
  CHECK_NO_ERROR(err);
  expect_value(db, NULL, "w", "1");
  flintkv_close(db);
  unlink(path);
}

/* flintkv_wait_for_merges wakes a merge thread whose interval (an hour) would not come
   in the test, and returns once every key is in the packed tier. */
static void test_wait_for_merges(void) {
  current_test = "wait_for_merges";
  char path[256];
  pool_path(path, sizeof path, "merges");
  flintkv_options_t* options = creating();
  flintkv_options_set_merge_interval_ms(options, 3600u * 1000u);
  char* err = NULL;
  flintkv_t* db = flintkv_open(options, path, &err);
  flintkv_options_destroy(options);
  CHECK_NO_ERROR(err);
  flintkv_writeoptions_t* sync = flintkv_writeoptions_create();
  for (int i = 0; i < 100; ++i) {
    char key[16];
    snprintf(key, sizeof key, "k%03d", i);
    flintkv_put(db, sync, key, strlen(key), "v", 1, &err);
    CHECK_NO_ERROR(err);
  }
  flintkv_wait_for_merges(db, &err);
  CHECK_NO_ERROR(err);
  uint64_t keys = 1, merged = 0;
  CHECK(flintkv_property_int(db, "flintkv.keys", &keys) == 0 && keys == 0,
        "no key left in the list after flintkv_wait_for_merges (%llu)",
        (unsigned long long)keys);
  CHECK(flintkv_property_int(db, "flintkv.merged-keys", &merged) == 0 && merged == 100,
        "flintkv.merged-keys (%llu)", (unsigned long long)merged);
  expect_value(db, NULL, "k042", "v");
  flintkv_wait_for_merges(NULL, &err);
  CHECK(err != NULL, "flintkv_wait_for_merges(NULL) is an error");
  flintkv_free(err);
  flintkv_writeoptions_destroy(sync);
  flintkv_close(db);
  unlink(path);
}

static void test_batch(void) {
  current_test = "batch";
  char path[256];
  pool_path(path, sizeof path, "batch");
  flintkv_t* db = open_new(path);
  char* err = NULL;
  put_string(db, "c", "old");

  flintkv_writebatch_t* batch = flintkv_writebatch_create();
  CHECK(batch != NULL, "writebatch_create");
  CHECK(flintkv_writebatch_count(batch) == 0, "a new batch is empty");
  flintkv_writebatch_put(batch, "a", 1, "1", 1);
  flintkv_writebatch_put(batch, "b", 1, "2", 1);
  flintkv_writebatch_delete(batch, "c", 1);
  CHECK(flintkv_writebatch_count(batch) == 3, "count %zu", flintkv_writebatch_count(batch));
  struct batch_log log = {0, 0, ""};
  flintkv_writebatch_iterate(batch, &log, log_put, log_delete);
  CHECK(log.puts == 2 && log.deletes == 1 && strcmp(log.last_key, "c") == 0,
        "iterate: %d puts, %d deletes, last %s", log.puts, log.deletes, log.last_key);

  /* Nothing of the batch is visible before Write, all of it after. */
  const flintkv_snapshot_t* before = flintkv_create_snapshot(db);
  CHECK(before != NULL, "snapshot");
  expect_value(db, NULL, "a", NULL);
  flintkv_write(db, NULL, batch, &err);
  CHECK_NO_ERROR(err);
  expect_value(db, NULL, "a", "1");
  expect_value(db, NULL, "b", "2");
  expect_value(db, NULL, "c", NULL);
  flintkv_readoptions_t* at_before = flintkv_readoptions_create();
  flintkv_readoptions_set_snapshot(at_before, before);
  expect_value(db, at_before, "a", NULL);
  expect_value(db, at_before, "b", NULL);
  expect_value(db, at_before, "c", "old");
  flintkv_readoptions_destroy(at_before);
  flintkv_release_snapshot(db, before);

  /* One bad entry fails the whole batch: nothing of it is applied. */
  flintkv_writebatch_clear(batch);
  CHECK(flintkv_writebatch_count(batch) == 0, "clear empties the batch");
  flintkv_writebatch_put(batch, "good", 4, "x", 1);
  flintkv_writebatch_put(batch, "", 0, "y", 1);
  flintkv_write(db, NULL, batch, &err);
  expect_error(&err, "InvalidArgument", "");
  expect_value(db, NULL, "good", NULL);

  /* An empty batch writes nothing and is no error. */
  flintkv_writebatch_clear(batch);
  flintkv_write(db, NULL, batch, &err);
  CHECK_NO_ERROR(err);

  /* Concurrent readers at a snapshot never see part of a batch. */
  write_group(db, batch, 0);
  struct visibility v;
  v.db = db;
  atomic_init(&v.done, 0);
  atomic_init(&v.reads, 0);
  atomic_init(&v.seen, 0);
  atomic_init(&v.torn, 0);
  pthread_t reader;
  CHECK(pthread_create(&reader, NULL, read_groups, &v) == 0, "pthread_create");
  int g = 0;
  while ((++g <= kGenerations || atomic_load(&v.seen) < kMinSeen) && atomic_load(&v.torn) == 0)
    write_group(db, batch, g);
  atomic_store(&v.done, 1);
  pthread_join(reader, NULL);
  CHECK(atomic_load(&v.torn) == 0, "%d of %d reads saw part of a batch", atomic_load(&v.torn),
        atomic_load(&v.reads));
  char last[32];
  snprintf(last, sizeof last, "gen-%d", g - 1);
  expect_value(db, NULL, "group-0", last);

  flintkv_writebatch_destroy(batch);
  flintkv_close(db);
  unlink(path);
}

static void test_snapshot(void) {
  current_test = "snapshot";
  char path[256];
  pool_path(path, sizeof path, "snapshot");
  flintkv_t* db = open_new(path);
  put_string(db, "k", "v1");
  put_string(db, "gone", "here");
  const flintkv_snapshot_t* snap = flintkv_create_snapshot(db);
  CHECK(snap != NULL, "create_snapshot");
  put_string(db, "k", "v2");
  put_string(db, "new", "n");
  char* err = NULL;
  flintkv_delete(db, NULL, "gone", 4, &err);
  CHECK_NO_ERROR(err);
  const flintkv_snapshot_t* later = flintkv_create_snapshot(db);
  CHECK(flintkv_snapshot_version(later) > flintkv_snapshot_version(snap), "versions grow");

  flintkv_readoptions_t* ro = flintkv_readoptions_create();
  flintkv_readoptions_set_snapshot(ro, snap);
  expect_value(db, ro, "k", "v1");
  expect_value(db, ro, "gone", "here");
  expect_value(db, ro, "new", NULL);
  expect_value(db, NULL, "k", "v2");
  expect_value(db, NULL, "gone", NULL);

  /* An iterator at the snapshot sees its keys: gone, k. */
  flintkv_iterator_t* it = flintkv_create_iterator(db, ro);
  CHECK(it != NULL, "create_iterator");
  flintkv_iter_seek_to_first(it);
  size_t klen = 0, vlen = 0;
  CHECK(flintkv_iter_valid(it), "first");
  const char* key = flintkv_iter_key(it, &klen);
  CHECK(klen == 4 && memcmp(key, "gone", 4) == 0, "first key at the snapshot");
  flintkv_iter_next(it);
  key = flintkv_iter_key(it, &klen);
  const char* val = flintkv_iter_value(it, &vlen);
  CHECK(klen == 1 && key[0] == 'k' && vlen == 2 && memcmp(val, "v1", 2) == 0,
        "second entry at the snapshot");
  flintkv_iter_next(it);
  CHECK(!flintkv_iter_valid(it), "two keys at the snapshot");
  /* An iterator over a snapshot is not refreshed: NotSupported, and it reads the snapshot. */
  flintkv_iter_refresh(it, &err);
  CHECK(err != NULL && strncmp(err, "NotSupported", 12) == 0, "refresh at a snapshot: %s",
        err != NULL ? err : "no error");
  flintkv_free(err);
  err = NULL;
  flintkv_iter_seek(it, "k", 1);
  val = flintkv_iter_value(it, &vlen);
  CHECK(vlen == 2 && memcmp(val, "v1", 2) == 0, "the snapshot's value after a refused refresh");
  flintkv_iter_destroy(it);

  uint64_t snapshots = 0;
  CHECK(flintkv_property_int(db, "flintkv.snapshots", &snapshots) == 0, "property");
  CHECK(snapshots == 2, "two live snapshots, property says %llu",
        (unsigned long long)snapshots);
  flintkv_readoptions_destroy(ro);
  flintkv_release_snapshot(db, snap);
  flintkv_release_snapshot(db, later);
  flintkv_release_snapshot(db, NULL);
  CHECK(flintkv_property_int(db, "flintkv.snapshots", &snapshots) == 0 && snapshots == 0,
        "released: %llu live snapshots", (unsigned long long)snapshots);
  flintkv_close(db);
  unlink(path);
}

/* The iterator is at `expected` (NULL: not valid). */
static void expect_at(flintkv_iterator_t* it, const char* expected) {
  size_t klen = 0, vlen = 0;
  const char* key = flintkv_iter_key(it, &klen);
  if (expected == NULL) {
    CHECK(!flintkv_iter_valid(it), "expected the end, at \"%.*s\"", (int)klen, key);
    CHECK(key == NULL && klen == 0, "an invalid iterator has no key");
    return;
  }
  CHECK(flintkv_iter_valid(it), "expected \"%s\", iterator not valid", expected);
  CHECK(klen == strlen(expected) && memcmp(key, expected, klen) == 0,
        "expected \"%s\", at \"%.*s\"", expected, (int)klen, key);
  const char* value = flintkv_iter_value(it, &vlen);
  char expected_value[16];
  snprintf(expected_value, sizeof expected_value, "v-%s", expected);
  CHECK(vlen == strlen(expected_value) && memcmp(value, expected_value, vlen) == 0,
        "value at \"%s\"", expected);
}

static void test_iterator(void) {
  current_test = "iterator";
  char path[256];
  pool_path(path, sizeof path, "iterator");
  flintkv_t* db = open_new(path);
  const char* keys[] = {"a", "b", "c", "d", "e"};
  for (int i = 4; i >= 0; --i) {
    char value[16];
    snprintf(value, sizeof value, "v-%s", keys[i]);
    put_string(db, keys[i], value);
  }
  flintkv_iterator_t* it = flintkv_create_iterator(db, NULL);
  CHECK(it != NULL, "create_iterator");
  flintkv_iter_seek_to_first(it);
  for (int i = 0; i < 5; ++i, flintkv_iter_next(it)) expect_at(it, keys[i]);
  expect_at(it, NULL);
  flintkv_iter_next(it); /* ignored when not valid */
  expect_at(it, NULL);
  flintkv_iter_seek_to_last(it);
  for (int i = 4; i >= 0; --i, flintkv_iter_prev(it)) expect_at(it, keys[i]);
  expect_at(it, NULL);
  flintkv_iter_seek(it, "c", 1);
  expect_at(it, "c");
  flintkv_iter_seek(it, "bb", 2);
  expect_at(it, "c");
  flintkv_iter_prev(it);
  expect_at(it, "b");
  flintkv_iter_seek_for_prev(it, "bb", 2);
  expect_at(it, "b");
  flintkv_iter_seek(it, "f", 1);
  expect_at(it, NULL);
  char* err = NULL;
  flintkv_iter_get_error(it, &err);
  CHECK_NO_ERROR(err);
  /* A refresh reads what was written since, from the next seek on. */
  flintkv_iter_seek(it, "a", 1);
  put_string(db, "f", "v-f");
  flintkv_iter_refresh(it, &err);
  CHECK_NO_ERROR(err);
  expect_at(it, NULL);
  flintkv_iter_seek(it, "e", 1);
  expect_at(it, "e");
  flintkv_iter_next(it);
  expect_at(it, "f");
  flintkv_iter_destroy(it);

  /* Bounds: [b, d). */
  flintkv_readoptions_t* ro = flintkv_readoptions_create();
  flintkv_readoptions_set_iterate_lower_bound(ro, "b", 1);
  flintkv_readoptions_set_iterate_upper_bound(ro, "d", 1);
  it = flintkv_create_iterator(db, ro);
  flintkv_iter_seek_to_first(it);
  expect_at(it, "b");
  flintkv_iter_next(it);
  expect_at(it, "c");
  flintkv_iter_next(it);
  expect_at(it, NULL);
  flintkv_iter_seek_to_last(it);
  expect_at(it, "c");
  flintkv_iter_destroy(it);
  /* A NULL bound removes it. */
  flintkv_readoptions_set_iterate_upper_bound(ro, NULL, 0);
  it = flintkv_create_iterator(db, ro);
  flintkv_iter_seek_to_last(it);
  expect_at(it, "f");
  flintkv_iter_destroy(it);
  flintkv_readoptions_destroy(ro);
  flintkv_iter_destroy(NULL);
  flintkv_close(db);
  unlink(path);
}

static void test_properties_check_repair(void) {
  current_test = "properties_check_repair";
  char path[256], repaired[256];
  pool_path(path, sizeof path, "properties");
  pool_path(repaired, sizeof repaired, "repaired");
  flintkv_t* db = open_new(path);
  put_string(db, "x", "1");
  put_string(db, "y", "2");
  char* err = NULL;
  flintkv_delete(db, NULL, "y", 1, &err);
  CHECK_NO_ERROR(err);
  uint64_t live = 99, size = 0;
  CHECK(flintkv_property_int(db, "flintkv.live-keys", &live) == 0, "live-keys");
  CHECK(live == 1, "live-keys %llu", (unsigned long long)live);
  CHECK(flintkv_property_int(db, "flintkv.pool-size", &size) == 0 && size == (16u << 20),
        "pool-size %llu", (unsigned long long)size);
  char* text = flintkv_property_value(db, "flintkv.live-keys");
  CHECK(text != NULL && strcmp(text, "1") == 0, "live-keys as text: %s", text);
  flintkv_free(text);
  text = flintkv_property_value(db, "flintkv.stats");
  CHECK(text != NULL && strstr(text, "flintkv.live-keys: 1\n") != NULL &&
            strstr(text, "flintkv.configuration: ") != NULL,
        "stats: %s", text);
  flintkv_free(text);
  text = flintkv_property_value(db, "flintkv.configuration");
  CHECK(text != NULL && text[0] != '\0', "configuration");
  flintkv_free(text);
  uint64_t unchanged = 7;
  CHECK(flintkv_property_int(db, "flintkv.configuration", &unchanged) == -1 && unchanged == 7,
        "a text property is no integer");
  CHECK(flintkv_property_int(db, "flintkv.no-such", &unchanged) == -1, "unknown name");
  CHECK(flintkv_property_value(db, "flintkv.no-such") == NULL, "unknown name");

  /* Check: Busy while open for writing, OK once closed. */
  flintkv_check_db(path, &err);
  expect_error(&err, "Busy", path);
  flintkv_close(db);
  flintkv_check_db(path, &err);
  CHECK_NO_ERROR(err);

  /* Read-only open: reads work, writes are refused. */
  flintkv_options_t* options = flintkv_options_create();
  flintkv_options_set_read_only(options, 1);
  db = flintkv_open(options, path, &err);
  CHECK_NO_ERROR(err);
  expect_value(db, NULL, "x", "1");
  flintkv_put(db, NULL, "z", 1, "3", 1, &err);
  expect_error(&err, "InvalidArgument", path);
  flintkv_close(db);

  /* Repair into a new pool (NULL options: the damaged file's size), then read it. */
  flintkv_repair_db(NULL, path, repaired, &err);
  CHECK_NO_ERROR(err);
  flintkv_repair_db(NULL, path, repaired, &err); /* never replaces a file */
  expect_error(&err, "InvalidArgument", repaired);
  flintkv_options_set_read_only(options, 0);
  db = flintkv_open(options, repaired, &err);
  CHECK_NO_ERROR(err);
  expect_value(db, NULL, "x", "1");
  expect_value(db, NULL, "y", NULL);
  flintkv_close(db);
  flintkv_options_destroy(options);
  unlink(path);
  unlink(repaired);
}

static void test_errors(void) {
  current_test = "errors";
  char path[256];
  pool_path(path, sizeof path, "errors");
  char* err = NULL;

  /* A missing pool without create-if-missing. */
  flintkv_options_t* plain = flintkv_options_create();
  flintkv_t* db = flintkv_open(plain, path, &err);
  CHECK(db == NULL, "opened a missing pool");
  expect_error(&err, "NotFound", path);
  /* Below the minimum pool size. */
  flintkv_options_t* tiny = creating();
  flintkv_options_set_pool_size(tiny, FLINTKV_MIN_POOL_SIZE - 1);
  db = flintkv_open(tiny, path, &err);
  CHECK(db == NULL, "a pool below the minimum size");
  expect_error(&err, "InvalidArgument", "");
  flintkv_options_destroy(tiny);
  /* NULL path. */
  db = flintkv_open(plain, NULL, &err);
  CHECK(db == NULL, "NULL path");
  expect_error(&err, "InvalidArgument", "path is NULL");

  /* A file that is no pool: refused, naming it, and left as it was. */
  {
    FILE* f = fopen(path, "wb");
    CHECK(f != NULL, "fopen %s", path);
    unsigned state = 5;
    for (int i = 0; i < (1 << 20); ++i) {
      state = state * 1103515245u + 12345u;
      fputc((int)(state >> 16) & 0xff, f);
    }
    fclose(f);
    db = flintkv_open(plain, path, &err);
    CHECK(db == NULL, "opened random bytes as a pool");
    CHECK(err != NULL && (strncmp(err, "InvalidArgument:", 16) == 0 ||
                          strncmp(err, "Corruption:", 11) == 0),
          "a foreign file: %s", err);
    expect_error(&err, err[0] == 'I' ? "InvalidArgument" : "Corruption", path);
    flintkv_check_db(path, &err);
    CHECK(err != NULL, "check of random bytes");
    flintkv_free(err);
    err = NULL;
    unlink(path);
  }

  db = open_new(path);
  flintkv_options_t* options = creating();
  /* The pool open twice: Busy, naming it; free again once closed. */
  flintkv_t* second = flintkv_open(options, path, &err);
  CHECK(second == NULL, "opened a pool twice");
  expect_error(&err, "Busy", path);
  flintkv_options_set_error_if_exists(options, 1);

  /* Oversized keys and values name the limit; the limit itself is fine. */
  char* big = malloc(FLINTKV_MAX_VALUE_SIZE + 1);
  CHECK(big != NULL, "malloc");
  memset(big, 'k', FLINTKV_MAX_VALUE_SIZE + 1);
  flintkv_put(db, NULL, big, FLINTKV_MAX_KEY_SIZE + 1, "v", 1, &err);
  expect_error(&err, "InvalidArgument", "4096");
  flintkv_put(db, NULL, big, FLINTKV_MAX_KEY_SIZE, "v", 1, &err);
  CHECK_NO_ERROR(err);
  flintkv_put(db, NULL, "k", 1, big, FLINTKV_MAX_VALUE_SIZE + 1, &err);
  expect_error(&err, "InvalidArgument", "");
  size_t len = 5;
  char* value = flintkv_get(db, NULL, big, FLINTKV_MAX_KEY_SIZE + 1, &len, &err);
  CHECK(value == NULL && len == 0, "get of an oversized key");
  expect_error(&err, "InvalidArgument", "");
  flintkv_put(db, NULL, "", 0, "v", 1, &err);
  expect_error(&err, "InvalidArgument", "");
  flintkv_delete(db, NULL, NULL, 0, &err);
  expect_error(&err, "InvalidArgument", "");

  /* *errptr replaced: the old message is freed (the ASan build's leak checker would report
     it) and the new one is the new error. */
  flintkv_put(db, NULL, big, FLINTKV_MAX_KEY_SIZE + 1, "v", 1, &err);
  CHECK(err != NULL, "the first error");
  char first[512];
  snprintf(first, sizeof first, "%s", err);
  second = flintkv_open(options, path, &err);
  CHECK(second == NULL, "error_if_exists");
  CHECK(err != NULL && strcmp(err, first) != 0 && strstr(err, path) != NULL,
        "replaced by the second error: %s", err);
  flintkv_put(db, NULL, "", 0, "v", 1, &err);
  flintkv_put(db, NULL, "", 0, "v", 1, &err);
  expect_error(&err, "InvalidArgument", "");
  /* Success leaves *errptr alone; a NULL errptr discards the error. */
  char* kept = malloc(8);
  CHECK(kept != NULL, "malloc");
  strcpy(kept, "earlier");
  err = kept;
  put_string(db, "fine", "x"); /* with its own NULL err */
  flintkv_put(db, NULL, "fine", 4, "y", 1, &err);
  CHECK(err == kept && strcmp(err, "earlier") == 0, "success changed *errptr");
  free(kept);
  err = NULL;
  flintkv_put(db, NULL, "", 0, "v", 1, NULL);
  /* NULL handles that can report, do. */
  flintkv_put(NULL, NULL, "k", 1, "v", 1, &err);
  expect_error(&err, "InvalidArgument", "db is NULL");
  flintkv_write(db, NULL, NULL, &err);
  expect_error(&err, "InvalidArgument", "batch is NULL");

  free(big);
  flintkv_options_destroy(options);
  flintkv_options_destroy(plain);
  flintkv_close(db);
  flintkv_close(NULL);
  db = flintkv_open(plain = creating(), path, &err); /* free again once closed */
  CHECK_NO_ERROR(err);
  flintkv_options_destroy(plain);
  flintkv_close(db);
  unlink(path);
}

int main(void) {
  atexit(remove_pools);
  test_round_trip();
  test_weak_writes();
  test_wait_for_merges();
  test_batch();
  test_snapshot();
  test_iterator();
  test_properties_check_repair();
  test_errors();
  printf("c_api_test: all checks passed\n");
  return 0;
}
