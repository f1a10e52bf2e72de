/* The C API when its error message cannot be allocated: a failed call must still leave a
   message in *errptr, or the caller would take the failure for success. Linked with
   -Wl,--wrap=malloc, so that every malloc of this program's own objects and of the
   library's (not of the shared C++ runtime) comes here, and fails while `failing` is set.
   Each check that fails prints its name and exits non-zero. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flintkv/c.h"

void* __real_malloc(size_t size);
static int failing = 0;
void* __wrap_malloc(size_t size) { return failing ? NULL : __real_malloc(size); }

#define CHECK(cond, what)                                                       \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "c_api_no_memory_test: FAILED %s (line %d): %s\n", #cond, \
              __LINE__, what);                                                  \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

static char path[256];
static void remove_pool(void) { unlink(path); }

/* A put that fails (its key is over the limit), with malloc failing or not. */
static void failing_put(flintkv_t* db, flintkv_writeoptions_t* w, const char* key,
                        size_t keylen, int no_memory, char** err) {
  failing = no_memory;
  flintkv_put(db, w, key, keylen, "v", 1, err);
  failing = 0;
}

int main(void) {
  snprintf(path, sizeof path, "/dev/shm/flintkv-c-nomem-%ld.pool", (long)getpid());
  unlink(path);
  atexit(remove_pool);
  flintkv_options_t* options = flintkv_options_create();
  CHECK(options != NULL, "options_create");
  flintkv_options_set_create_if_missing(options, 1);
  flintkv_options_set_pool_size(options, 16u << 20);
  char* err = NULL;
  flintkv_t* db = flintkv_open(options, path, &err);
  flintkv_options_destroy(options);
  CHECK(db != NULL && err == NULL, "open");
  flintkv_writeoptions_t* w = flintkv_writeoptions_create();
  CHECK(w != NULL, "writeoptions_create");
  const size_t big = FLINTKV_MAX_KEY_SIZE + 1;
  char* key = malloc(big);
  CHECK(key != NULL, "key buffer");
  memset(key, 'k', big);

  /* With memory: the engine's message. */
  failing_put(db, w, key, big, 0, &err);
  CHECK(err != NULL && strncmp(err, "InvalidArgument", 15) == 0, "the engine's message");
  flintkv_free(err);
  err = NULL;

  /* Without: the reserve, which the caller frees like any message. */
  failing_put(db, w, key, big, 1, &err);
  CHECK(err != NULL, "a failed put with no memory left *errptr NULL (looks like success)");
  CHECK(strcmp(err, "NoSpace") == 0, err);
  flintkv_free(err);
  err = NULL;

  /* The next error with memory makes the reserve again, so a second one finds it. */
  failing_put(db, w, key, big, 0, &err);
  CHECK(err != NULL && strncmp(err, "InvalidArgument", 15) == 0, "the engine's message again");
  flintkv_free(err);
  err = NULL;
  failing_put(db, w, key, big, 1, &err);
  CHECK(err != NULL && strcmp(err, "NoSpace") == 0, "the reserve, made again");

  /* Reserve taken, no memory, an earlier message in *errptr: it stays (still an error). */
  char* earlier = err;
  failing_put(db, w, key, big, 1, &err);
  CHECK(err == earlier, "the earlier message was replaced by nothing");
  flintkv_free(err);
  err = NULL;

  /* A successful put leaves *errptr NULL: nothing above broke the store. */
  flintkv_put(db, w, "k", 1, "v", 1, &err);
  CHECK(err == NULL, "a put after the failures");
  free(key);
  flintkv_writeoptions_destroy(w);
  flintkv_close(db);
  puts("c_api_no_memory_test: ok");
  return 0;
}
