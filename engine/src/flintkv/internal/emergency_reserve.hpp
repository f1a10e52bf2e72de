// Room for a few objects of one type when the heap has none: what the engine hands out
// instead of nullptr when DRAM runs out (an iterator or a transaction whose every call
// reports NoSpace). The type's operator new takes a block from the heap or, failing that,
// from the reserve; its operator delete gives reserve blocks back.
//
// Thread safety: allocate and release may be called by any number of threads at once.
// Invariants: bit i of `taken_` is set exactly while block i is handed out.
// Persistence: none (DRAM only).
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>

namespace flintkv::internal {

template <class T, std::size_t N>
class emergency_reserve {
  static_assert(N >= 1 && N <= 64, "one bit of `taken_` per block");

 public:
  // A block of sizeof(T) bytes from the heap, else from the reserve; nullptr when both are
  // exhausted.
  void* allocate(std::size_t size) noexcept {
    if (void* p = ::operator new(size, std::nothrow)) return p;
    std::uint64_t seen = taken_.load(std::memory_order_relaxed);
    while (seen != kAllTaken) {
      const int i = std::countr_one(seen);
      if (taken_.compare_exchange_weak(seen, seen | (std::uint64_t{1} << i),
                                       std::memory_order_acquire, std::memory_order_relaxed)) {
        return blocks_[i].bytes;
      }
    }
    return nullptr;
  }

  // Gives back a block allocate() returned.
  void release(void* p) noexcept {
    const std::less<const void*> before;
    if (!before(p, blocks_) && before(p, blocks_ + N)) {
      const auto i = static_cast<std::size_t>(static_cast<block*>(p) - blocks_);
      taken_.fetch_and(~(std::uint64_t{1} << i), std::memory_order_release);
      return;
    }
    ::operator delete(p);
  }

 private:
  static constexpr std::uint64_t kAllTaken = N == 64 ? ~std::uint64_t{0}
                                                     : (std::uint64_t{1} << N) - 1;
  struct alignas(T) block {
    std::byte bytes[sizeof(T)];
  };
  block blocks_[N];
  std::atomic<std::uint64_t> taken_{0};
};

}  // namespace flintkv::internal
