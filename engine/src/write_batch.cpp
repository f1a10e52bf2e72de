#include "flintkv/write_batch.hpp"

namespace flintkv {

void WriteBatch::Put(std::string_view key, std::string_view value) {
  entries_.push_back({Kind::kPut, std::string(key), std::string(value)});
}

void WriteBatch::Delete(std::string_view key) {
  entries_.push_back({Kind::kDelete, std::string(key), {}});
}

}  // namespace flintkv
