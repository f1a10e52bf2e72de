// What the structure tests share: the memory nodes live in, the configurations (structure x
// mode x placement) every suite runs over, and a uniform way to create a structure.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flit/flit.hpp"
#include "pv_interface/model.hpp"
#include "structures/bst.hpp"
#include "structures/harris_list.hpp"
#include "structures/hash_table.hpp"
#include "structures/memory.hpp"
#include "structures/modes.hpp"
#include "structures/skiplist.hpp"
#include "support/policies.hpp"

namespace structures_test {

// Node memory for tests of the algorithms: a bump allocator over a byte range that never
// reuses memory (retired and deallocated nodes stay allocated), so that what the tests
// check does not depend on a reclamation scheme.
class bump_memory {
 public:
  bump_memory(std::byte* base, std::size_t bytes) : base_(base), bytes_(bytes) {}

  std::byte* base() const noexcept { return base_; }

  std::uint64_t allocate(std::size_t n) {
    const std::uint64_t align = std::max<std::uint64_t>(8, std::min<std::uint64_t>(64, std::bit_ceil(n)));
    std::uint64_t at = next_.load(std::memory_order_relaxed);
    std::uint64_t start;
    do {
      start = (at + align - 1) & ~(align - 1);
      if (start + n > bytes_) return 0;
    } while (!next_.compare_exchange_weak(at, start + n, std::memory_order_relaxed));
    return start;
  }
  void deallocate(std::uint64_t, std::size_t) noexcept {}
  void retire(std::uint64_t, std::size_t) noexcept { retired_.fetch_add(1, std::memory_order_relaxed); }
  struct guard {};
  guard pin() noexcept { return {}; }

  std::uint64_t used() const noexcept { return next_.load(std::memory_order_relaxed); }
  std::uint64_t retired() const noexcept { return retired_.load(std::memory_order_relaxed); }

 private:
  std::byte* base_;
  std::size_t bytes_;
  std::atomic<std::uint64_t> next_{64};  // offset 0 is the null ref
  std::atomic<std::uint64_t> retired_{0};
};
static_assert(structures::node_memory<bump_memory>);

// One structure in one mode with one policy.
template <template <class, class, class> class Structure, class Mode, class Policy>
struct config {
  template <class Memory>
  using type = Structure<Mode, Policy, Memory>;
  using mode = Mode;
  using policy = Policy;
  static std::string name() {
    return std::string(Mode::name) + "_" + std::string(Policy::placement::name);
  }
};

// Creates a structure (a hash table gets `buckets` buckets).
template <class S, class Memory>
std::unique_ptr<S> create(Memory& memory, std::size_t buckets = 64) {
  if constexpr (std::is_constructible_v<S, Memory&, std::size_t>) {
    return std::make_unique<S>(memory, buckets);
  } else {
    return std::make_unique<S>(memory);
  }
}

// Recovers a structure from its root; live(offset, bytes) sees each node kept.
template <class S, class Memory, class Live>
std::unique_ptr<S> recover(Memory& memory, std::uint64_t root, Live&& live) {
  return std::unique_ptr<S>(new S(S::recover(memory, root, live)));
}

// Every (key, value) of a structure, in its iteration order.
template <class S>
std::vector<std::pair<std::uint64_t, std::uint64_t>> contents(const S& s) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  s.for_each([&](std::uint64_t k, std::uint64_t v) { out.emplace_back(k, v); });
  return out;
}

using test_hashed = flit_test::test_hashed;

// Each persistent mode under each persistent placement, plus `original`.
template <template <class, class, class> class S, template <class> class On>
using configs = ::testing::Types<
    config<S, structures::original, On<test_hashed>>,
    config<S, structures::automatic, On<test_hashed>>, config<S, structures::automatic, On<flit::adjacent>>,
    config<S, structures::automatic, On<flit::plain>>, config<S, structures::automatic, On<flit::link_and_persist>>,
    config<S, structures::traversal, On<test_hashed>>, config<S, structures::traversal, On<flit::adjacent>>,
    config<S, structures::traversal, On<flit::plain>>, config<S, structures::traversal, On<flit::link_and_persist>>,
    config<S, structures::manual, On<test_hashed>>, config<S, structures::manual, On<flit::adjacent>>,
    config<S, structures::manual, On<flit::plain>>, config<S, structures::manual, On<flit::link_and_persist>>>;

template <class Placement>
using on_model = flit::policy<Placement, pv::model_backend>;
template <class Placement>
using on_hardware = flit::policy<Placement, flit::detected>;

// Test names: "<mode>_<placement>".
struct config_names {
  template <class C>
  static std::string GetName(int) {
    return C::name();
  }
};

}  // namespace structures_test
