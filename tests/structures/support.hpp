// What the structure tests share: the memory nodes live in, the configurations (structure x
// mode x placement) every suite runs over, and a uniform way to create a structure.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "flit/flit.hpp"
#include "pv_interface/model.hpp"
#include "structures/bst.hpp"
#include "structures/harris_list.hpp"
#include "structures/hash_table.hpp"
#include "allocators/node_memory.hpp"
#include "allocators/modes.hpp"
#include "allocators/pool_memory.hpp"
#include "structures/skiplist.hpp"
#include "support/policies.hpp"

namespace structures_test {

// The layout name of the pools the structure tests make.
inline constexpr std::string_view pool_label = "structures";

// The memory a configuration's nodes live in: a pool over a memory range.
template <class Policy>
using memory_for = alloc::pool_memory<Policy>;

// A pool over `region`; fails the test (by exception) if the pool cannot be made or opened.
template <class Memory>
Memory unwrap(alloc::result<Memory> r) {
  if (!r) throw std::runtime_error(r.error().to_string());
  return std::move(*r);
}

// One structure in one mode with one policy.
template <template <class, class, class> class Structure, class Mode, class Policy>
struct config {
  using mode = Mode;
  using policy = Policy;
  // The memory, on the policy the structure actually runs on (original: nonpersistent).
  using memory = memory_for<typename Mode::template policy_for<Policy>>;
  using structure = Structure<Mode, Policy, memory>;
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


// The pv model's backend: observed by the model when one is active (model and crash
// tests), plain atomics and counters otherwise (stress tests).
template <class Placement>
using on_model = flit::policy<Placement, pv::model_backend>;

template <template <class, class, class> class S, class Mode, class Placement>
using on = config<S, Mode, on_model<Placement>>;

// The crash matrix of a structure: each persistent mode under each persistent placement.
template <template <class, class, class> class S>
using persistent_configs = ::testing::Types<
    on<S, structures::automatic, test_hashed>, on<S, structures::automatic, flit::adjacent>,
    on<S, structures::automatic, flit::plain>, on<S, structures::automatic, flit::link_and_persist>,
    on<S, structures::traversal, test_hashed>, on<S, structures::traversal, flit::adjacent>,
    on<S, structures::traversal, flit::plain>, on<S, structures::traversal, flit::link_and_persist>,
    on<S, structures::manual, test_hashed>, on<S, structures::manual, flit::adjacent>,
    on<S, structures::manual, flit::plain>, on<S, structures::manual, flit::link_and_persist>>;

template <class T, class List>
struct prepend;
template <class T, class... Ts>
struct prepend<T, ::testing::Types<Ts...>> {
  using type = ::testing::Types<T, Ts...>;
};

// The model and stress suites: the crash matrix plus `original`.
template <template <class, class, class> class S>
using all_configs =
    typename prepend<on<S, structures::original, test_hashed>, persistent_configs<S>>::type;

// Test names: "<mode>_<placement>".
struct config_names {
  template <class C>
  static std::string GetName(int) {
    return C::name();
  }
};

}  // namespace structures_test
