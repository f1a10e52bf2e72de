#include "flintkv/internal/no_memory_iterator.hpp"

#include <cstddef>

#include "flintkv/internal/emergency_reserve.hpp"

namespace flintkv::internal {

namespace {
emergency_reserve<no_memory_iterator, no_memory_iterator::kReserve> reserve;
}  // namespace

void* no_memory_iterator::operator new(std::size_t size) noexcept {
  return reserve.allocate(size);
}

void no_memory_iterator::operator delete(void* p) noexcept { reserve.release(p); }

}  // namespace flintkv::internal
