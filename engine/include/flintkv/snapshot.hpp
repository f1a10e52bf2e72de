// A snapshot: a version of the whole store, readable until released.
//
// Thread safety: immutable; may be shared by threads until DB::ReleaseSnapshot.
#pragma once

#include <cstdint>

namespace flintkv {

class Snapshot {
 public:
  // Every write with a version at or below this one is in the snapshot; none above.
  std::uint64_t version() const noexcept { return version_; }

 protected:
  explicit Snapshot(std::uint64_t version) : version_(version) {}
  ~Snapshot() = default;

 private:
  const std::uint64_t version_;
};

}  // namespace flintkv
