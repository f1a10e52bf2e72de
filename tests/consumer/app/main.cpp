// An outside program on flint, built the ways a user builds one (tests/consumer/run.sh):
// FlintKV (open, put, get, iterate, reopen) and a structure field declared persist<T>.
// Only public headers; argv[1] is a directory for the pool. Exit status 0 on success.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <flintkv/db.hpp>
#include <flit/flit.hpp>

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "consumer: FAILED: %s\n", what.c_str());
    ++failures;
  }
}

std::string key_of(int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "key%04d", i);
  return buf;
}

// A user's structure: one field in persistent memory, written with a p-store.
struct counter {
  flit::persistent<std::uint64_t> value;
};

void check_persist() {
  static counter c;
  const flit::stats_scope scope;
  c.value.store(42);
  flit::operation_completion();
  expect(c.value.load() == 42, "persist<T> store then load gives 42");
  if constexpr (flit::stats_enabled) {
    expect(scope.delta().pwb > 0, "a p-store issues a write-back");
  }
}

void check_kv(const std::string& path) {
  constexpr int n = 100;
  flintkv::Options options;
  options.create_if_missing = true;
  options.pool_size = std::size_t{64} << 20;
  {
    std::unique_ptr<flintkv::DB> db;
    flintkv::Status s = flintkv::DB::Open(options, path, &db);
    expect(s.ok(), "open " + path + ": " + s.ToString());
    if (!s.ok()) return;
    for (int i = n - 1; i >= 0; --i) {  // reverse order: the iterator must sort them
      s = db->Put(key_of(i), "value" + std::to_string(i));
      expect(s.ok(), "put " + key_of(i) + ": " + s.ToString());
    }
    std::string value;
    s = db->Get(key_of(7), &value);
    expect(s.ok() && value == "value7", "get key0007 gives value7, got " + value);
    expect(db->Get("absent", &value).IsNotFound(), "get of an absent key is NotFound");
  }
  // Reopened: every key is there, in order.
  std::unique_ptr<flintkv::DB> db;
  flintkv::Status s = flintkv::DB::Open(options, path, &db);
  expect(s.ok(), "reopen " + path + ": " + s.ToString());
  if (!s.ok()) return;
  const std::unique_ptr<flintkv::Iterator> it = db->NewIterator();
  int i = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++i) {
    expect(it->key() == key_of(i), "iteration yields " + key_of(i) + " at position " +
                                       std::to_string(i) + ", got " + std::string(it->key()));
    expect(it->value() == "value" + std::to_string(i), "value of " + key_of(i));
  }
  expect(it->status().ok(), "iterator status: " + it->status().ToString());
  expect(i == n, "iteration yields " + std::to_string(n) + " keys, got " + std::to_string(i));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIRECTORY (where the pool is created)\n", argv[0]);
    return 2;
  }
  check_persist();
  check_kv(std::string(argv[1]) + "/consumer.pool");
  if (failures == 0) std::printf("consumer: ok\n");
  return failures == 0 ? 0 : 1;
}
