// Configurations and helpers shared by the engine's tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

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

}  // namespace flintkv_test
