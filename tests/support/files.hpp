// Whole-file reads and writes for tests that corrupt, truncate or restore pool files.
//
// Thread safety: as the files they touch.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace test_support {

inline std::vector<char> read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file(const std::filesystem::path& p, const std::vector<char>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace test_support
