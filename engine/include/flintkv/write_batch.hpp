// A WriteBatch collects puts and deletes that DB::Write applies atomically: after a crash
// either all of them are there or none; readers never see part of a batch.
//
// Thread safety: a batch is not safe for concurrent modification; a const batch may be
// written by several threads at once.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace flintkv {

class WriteBatch {
 public:
  enum class Kind : unsigned char { kPut, kDelete };
  struct Entry {
    Kind kind;
    std::string key;
    std::string value;  // empty for kDelete
  };

  void Put(std::string_view key, std::string_view value);
  void Delete(std::string_view key);
  void Clear() noexcept { entries_.clear(); }
  std::size_t Count() const noexcept { return entries_.size(); }
  // Entries in the order they were added; a later entry for a key replaces an earlier one.
  const std::vector<Entry>& entries() const noexcept { return entries_; }

 private:
  std::vector<Entry> entries_;
};

}  // namespace flintkv
