// The policies every toolkit test runs over: each counter placement with the pv model, and
// each hardware flush backend with the default placement.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <new>
#include <type_traits>

#include "flit/flit.hpp"
#include "pv_interface/model.hpp"

namespace flit_test {

using test_hashed = flit::hashed<(1u << 16)>;

template <class Placement>
using on_model = flit::policy<Placement, pv::model_backend>;

using model_policies =
    ::testing::Types<on_model<test_hashed>, on_model<flit::adjacent>, on_model<flit::plain>,
                     on_model<flit::link_and_persist>, on_model<flit::nonpersistent>>;

// Persistent placements only (the crash tests: nonpersistent is expected to lose data).
using persistent_model_policies =
    ::testing::Types<on_model<test_hashed>, on_model<flit::adjacent>, on_model<flit::plain>,
                     on_model<flit::link_and_persist>>;

using all_policies = ::testing::Types<
    on_model<test_hashed>, on_model<flit::adjacent>, on_model<flit::plain>,
    on_model<flit::link_and_persist>, on_model<flit::nonpersistent>,
    flit::policy<test_hashed, flit::detected>, flit::policy<flit::adjacent, flit::clwb>,
    flit::policy<flit::plain, flit::clflushopt>, flit::policy<flit::link_and_persist, flit::clflush>,
    flit::policy<flit::nonpersistent, flit::detected>, flit::default_policy>;

// A word every placement can hold: a pointer to a 64-byte aligned object leaves spare bits.
struct alignas(64) slot {
  std::uint64_t payload;
};
using word = slot*;

// Distinct test values of type `word`.
inline word value(std::size_t i) {
  static slot slots[64];
  return &slots[i % 64];
}

template <class Policy>
constexpr bool counts_integers =
    Policy::placement::tracks != flit::tracking::flush_bit;

template <class Policy>
bool backend_runs_here() {
  if constexpr (requires { Policy::backend::supported(); }) {
    return Policy::backend::supported();
  } else {
    return true;
  }
}

// An object of type U built in the active model's region (or on the heap without a model).
template <class U>
struct in_region {
  explicit in_region(pv::model& m, std::size_t offset = 0)
      : ptr(new (m.base() + offset) U()) {}
  ~in_region() { ptr->~U(); }
  U* operator->() const { return ptr; }
  U& operator*() const { return *ptr; }
  U* ptr;
};

}  // namespace flit_test
