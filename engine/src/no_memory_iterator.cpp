#include "flintkv/internal/no_memory_iterator.hpp"

#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>
#include <new>

namespace flintkv::internal {

namespace {

static_assert(no_memory_iterator::kReserve == 64, "one bit of `taken` per slot");

struct alignas(no_memory_iterator) slot {
  std::byte bytes[sizeof(no_memory_iterator)];
};
slot reserve[no_memory_iterator::kReserve];
std::atomic<std::uint64_t> taken{0};  // bit i: reserve[i] holds an iterator

}  // namespace

void* no_memory_iterator::operator new(std::size_t size) noexcept {
  if (void* p = ::operator new(size, std::nothrow)) return p;
  std::uint64_t seen = taken.load(std::memory_order_relaxed);
  while (seen != ~std::uint64_t{0}) {
    const int i = std::countr_one(seen);
    if (taken.compare_exchange_weak(seen, seen | (std::uint64_t{1} << i),
                                    std::memory_order_acquire, std::memory_order_relaxed)) {
      return reserve[i].bytes;
    }
  }
  return nullptr;
}

void no_memory_iterator::operator delete(void* p) noexcept {
  const std::less<const void*> before;
  if (!before(p, reserve) && before(p, reserve + kReserve)) {
    const auto i = static_cast<std::size_t>(static_cast<slot*>(p) - reserve);
    taken.fetch_and(~(std::uint64_t{1} << i), std::memory_order_release);
    return;
  }
  ::operator delete(p);
}

}  // namespace flintkv::internal
