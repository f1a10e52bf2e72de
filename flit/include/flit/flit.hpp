// The FliT toolkit: persist<T> with the build's default policy.
//
//   #include "flit/flit.hpp"
//   struct node { flit::persistent<node*> next; flit::persistent<std::uint64_t> key; };
//
// flit::default_policy is the counter placement and flush backend chosen by the build
// options `flit_counters` and `flit_flush`; any other combination can be named explicitly
// as flit::policy<Placement, Backend>.
#pragma once

#include "flit/backend.hpp"
#include "flit/config.hpp"
#include "flit/persist.hpp"
#include "flit/placement.hpp"
#include "flit/policy.hpp"
#include "flit/stats.hpp"

namespace flit {

namespace detail {

template <config::counter_choice C>
struct placement_for;
template <>
struct placement_for<config::counter_choice::hashed> {
  using type = hashed<config::hash_bytes>;
};
template <>
struct placement_for<config::counter_choice::adjacent> {
  using type = adjacent;
};
template <>
struct placement_for<config::counter_choice::plain> {
  using type = plain;
};
template <>
struct placement_for<config::counter_choice::link_and_persist> {
  using type = link_and_persist;
};
template <>
struct placement_for<config::counter_choice::nonpersistent> {
  using type = nonpersistent;
};

template <config::flush_choice F>
struct backend_for;
template <>
struct backend_for<config::flush_choice::automatic> {
  using type = detected;
};
template <>
struct backend_for<config::flush_choice::clwb> {
  using type = clwb;
};
template <>
struct backend_for<config::flush_choice::clflushopt> {
  using type = clflushopt;
};
template <>
struct backend_for<config::flush_choice::clflush> {
  using type = clflush;
};

}  // namespace detail

using default_placement = typename detail::placement_for<config::counters>::type;
using default_backend = typename detail::backend_for<config::flush>::type;
using default_policy = policy<default_placement, default_backend>;

static_assert(pv::pv_policy_counting<default_policy, std::uint64_t> ||
              default_placement::tracks == tracking::flush_bit);

// persist<T> with the build's policy.
template <persistable T, access_mode Default = persisted_t>
using persistent = persist<T, default_policy, Default>;

// Ends an operation under the build's policy.
inline void operation_completion() noexcept { default_policy::operation_completion(); }

using default_completion_scope = completion_scope<default_policy>;

// True when the build's flush instruction runs on this CPU (always, with flit_flush=auto).
bool default_backend_supported() noexcept;

}  // namespace flit
