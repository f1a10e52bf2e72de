/* A C program on FlintKV: opens (creating) the pool at argv[1], puts three keys, reads one
   back, iterates over all of them, closes, and removes the pool. Exits non-zero, naming
   the step, on any failure. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <flintkv/c.h>

static int failed(const char* step, char* err) {
  fprintf(stderr, "flintkv_c_consumer: %s failed: %s\n", step, err ? err : "(no message)");
  flintkv_free(err);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s POOL_PATH\n", argv[0]);
    return 2;
  }
  const char* path = argv[1];
  unlink(path);
  char* err = NULL;

  flintkv_options_t* options = flintkv_options_create();
  flintkv_options_set_create_if_missing(options, 1);
  flintkv_options_set_pool_size(options, 16u << 20);
  flintkv_t* db = flintkv_open(options, path, &err);
  flintkv_options_destroy(options);
  if (db == NULL) return failed("open", err);

  const char* keys[] = {"apple", "banana", "cherry"};
  for (int i = 0; i < 3; ++i) {
    flintkv_put(db, NULL, keys[i], strlen(keys[i]), "fruit", 5, &err);
    if (err != NULL) return failed("put", err);
  }

  size_t len = 0;
  char* value = flintkv_get(db, NULL, "banana", 6, &len, &err);
  if (err != NULL) return failed("get", err);
  if (value == NULL || len != 5 || memcmp(value, "fruit", 5) != 0) return failed("get", NULL);
  flintkv_free(value);

  flintkv_iterator_t* it = flintkv_create_iterator(db, NULL);
  int seen = 0;
  for (flintkv_iter_seek_to_first(it); flintkv_iter_valid(it); flintkv_iter_next(it)) {
    size_t klen = 0;
    const char* key = flintkv_iter_key(it, &klen);
    if (seen >= 3 || klen != strlen(keys[seen]) || memcmp(key, keys[seen], klen) != 0)
      return failed("iterate (order)", NULL);
    ++seen;
  }
  flintkv_iter_get_error(it, &err);
  flintkv_iter_destroy(it);
  if (err != NULL) return failed("iterate", err);
  if (seen != 3) return failed("iterate (count)", NULL);

  flintkv_close(db);
  unlink(path);
  printf("flintkv_c_consumer: open, put, get, iterate, close: ok\n");
  return 0;
}
