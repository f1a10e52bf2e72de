// Shared by the allocators suites: policies, a scratch directory for pool files, and the
// layouts tests create pools with.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "allocators/allocators.hpp"
#include "pv_interface/model.hpp"
#include "support/files.hpp"
#include "support/policies.hpp"

namespace alloc_test {

using flit_test::on_model;
using flit_test::test_hashed;
// File pools in production form.
using file_policy = flit::policy<test_hashed, alloc::pool_backend>;

template <class Policy>
alloc::pool_layout layout_for(std::string name = "alloc-test") {
  return {std::move(name), alloc::layout_fingerprint<Policy>()};
}

// A directory of its own per test, removed afterwards.
class scratch_dir {
 public:
  explicit scratch_dir(const std::filesystem::path& parent = "/dev/shm") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "flint-alloc-" + std::to_string(::getpid()) + "-" +
                       (info ? std::string(info->test_suite_name()) + "." + info->name() : "x");
    for (char& ch : name) {
      if (ch == '/') ch = '_';
    }
    path_ = parent / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::filesystem::path file(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

using test_support::read_file;
using test_support::write_file;

}  // namespace alloc_test
