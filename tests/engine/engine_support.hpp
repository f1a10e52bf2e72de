// Configurations and helpers shared by the engine's tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flintkv/internal/open.hpp"

namespace flintkv_test {

using namespace flintkv;
using internal::engine_config;

template <class Placement, class Mode>
using on_hardware = engine_config<flit::policy<Placement, flit::detected>, Mode>;

using hashed = flit::hashed<(1u << 20)>;

// The model test's matrix: both durability modes x hashed and adjacent, plus the other
// placements in manual mode.
using model_configs = ::testing::Types<
    on_hardware<hashed, manual>, on_hardware<flit::adjacent, manual>,
    on_hardware<hashed, automatic>, on_hardware<flit::adjacent, automatic>,
    on_hardware<flit::link_and_persist, manual>, on_hardware<flit::plain, automatic>,
    on_hardware<flit::nonpersistent, manual>>;

// The concurrency tests' matrix: one configuration of each durability mode.
using concurrency_configs =
    ::testing::Types<on_hardware<hashed, manual>, on_hardware<flit::adjacent, automatic>>;

// The engine behind a DB, for its test hooks.
template <class Config>
internal::engine_for<Config>* engine_of(DB* db) {
  return dynamic_cast<internal::engine_for<Config>*>(db);
}

// A zeroed, 64-byte aligned memory range standing in for persistent memory.
class region {
 public:
  explicit region(std::size_t bytes)
      : bytes_(bytes), memory_(static_cast<std::byte*>(std::aligned_alloc(64, bytes))) {
    std::memset(memory_.get(), 0, bytes);
  }
  std::span<std::byte> span() const { return {memory_.get(), bytes_}; }

 private:
  struct release {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::size_t bytes_;
  std::unique_ptr<std::byte, release> memory_;
};

// A path for a pool file in /dev/shm, removed when the object dies.
class temp_pool_path {
 public:
  explicit temp_pool_path(const std::string& name)
      : path_("/dev/shm/flintkv-test-" + std::to_string(::getpid()) + "-" + name + ".pool") {
    std::filesystem::remove(path_);
  }
  ~temp_pool_path() { std::filesystem::remove(path_); }
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

// The engine over `r`: a new store if the region is blank, else the one in it, recovered.
template <class Config>
std::unique_ptr<DB> open_in(const region& r, Options options = {}) {
  options.create_if_missing = true;
  std::unique_ptr<DB> db;
  Status s = internal::open_region<Config>(r.span(), options, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return db;
}

// Pools made by the default build and edited by hand, the way a defect or a bad medium
// would (integrity and repair tests). Offsets are the engine's layout (layout.hpp).
namespace pool_edit {

namespace in = flintkv::internal;
using policy = in::default_config::policy;
constexpr std::size_t W = sizeof(flit::persist<in::word63, policy>);  // a persistent word
constexpr std::size_t kRoot = alloc::format::root_offset;

inline Options creating() {
  Options o;
  o.create_if_missing = true;
  o.pool_size = kMinPoolSize;
  return o;
}

inline std::string key_of(int i) { return "key" + std::to_string(1000 + i); }
inline std::string value_of(int i) {
  return "value-" + std::to_string(i) + "-of-thirty-bytes....";
}

// A pool file with keys 0 .. n-1, each with its value_of, written by the default build.
inline void fill(const std::string& path, int n) {
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(creating(), path, &db).ok());
  for (int i = 0; i < n; ++i) ASSERT_TRUE(db->Put(key_of(i), value_of(i)).ok());
}

template <class T>
T load(const std::vector<char>& bytes, std::size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof v);
  return v;
}
template <class T>
void store(std::vector<char>& bytes, std::size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof v);
}

// The offset of the (first) node holding `key` and `value`.
inline std::size_t node_with(const std::vector<char>& bytes, std::string_view key,
                             std::string_view value) {
  const std::string needle = std::string(key) + std::string(value);
  auto at = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(at, bytes.end());
  return static_cast<std::size_t>(at - bytes.begin()) - 5 * W;
}
// The offset of the node holding key_of(i) and value_of(i).
inline std::size_t node_at(const std::vector<char>& bytes, int i) {
  return node_with(bytes, key_of(i), value_of(i));
}
inline std::size_t next_word(std::size_t node) { return node; }
inline std::size_t prior_word_at(std::size_t node) { return node + W; }
inline std::size_t link_version_word_at(std::size_t node) { return node + 2 * W; }
inline std::size_t version_word_at(std::size_t node) { return node + 3 * W; }
inline std::size_t sizes_word_at(std::size_t node) { return node + 4 * W; }

}  // namespace pool_edit

}  // namespace flintkv_test
