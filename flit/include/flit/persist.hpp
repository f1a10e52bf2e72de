// persist<T, Policy, Default>: a word of persistent memory whose every access goes through
// the P-V interface.
//
// Declare the fields of a concurrent structure as persist<T> and use them as atomics: the
// default load()/store()/operators take the declared path (Default: p-instructions unless
// declared flit::volatile_t); the other path is chosen per access with a tag:
//     node->next.load(flit::volatile_)            v-load during a traversal
//     node->key.store(k, flit::persisted, flit::private_)   private p-store before publishing
// and every operation ends with flit::operation_completion() (or a completion_scope).
//
// T: trivially copyable, 1, 2, 4 or 8 bytes (integers, pointers, pool offsets).
// Policy: flit::policy<Placement, Backend>; the build's default is flit::default_policy.
//
// Thread safety: as std::atomic<T>. Private accesses REQUIRE that no other thread accesses
// the word at the same time.
// Invariants:
//  (1) sizeof(persist<T>) == sizeof(T) for every placement but `adjacent`, which doubles it.
// Persistence: see flit/policy.hpp for what each access issues.
#pragma once

#include <concepts>
#include <type_traits>

#include "flit/policy.hpp"
#include "pv_interface/interface.hpp"

namespace flit {

using pv::persisted;
using pv::persisted_t;
using pv::private_;
using pv::private_t;
using pv::shared;
using pv::shared_t;
using pv::volatile_;
using pv::volatile_t;

template <persistable T, class Policy, access_mode Default = persisted_t>
class persist {
 public:
  using value_type = T;
  using policy_type = Policy;
  using default_mode = Default;

  // Zero. Construction is a private v-store: publish the object, or flush it, before use.
  constexpr persist() noexcept : cell_{} {}
  constexpr persist(T v) noexcept : cell_{} { cell_.word.store(to_word(v), std::memory_order_relaxed); }
  persist(const persist&) = delete;
  persist& operator=(const persist&) = delete;

  // ---- loads ----
  T load() const { return Policy::load(cell_, Default{}, shared); }
  template <access_mode M>
  T load(M m) const {
    return Policy::load(cell_, m, shared);
  }
  template <access_mode M, access_sharing S>
  T load(M m, S s) const {
    return Policy::load(cell_, m, s);
  }

  // ---- stores ----
  void store(T v) { Policy::store(cell_, v, Default{}, shared); }
  template <access_mode M>
  void store(T v, M m) {
    Policy::store(cell_, v, m, shared);
  }
  template <access_mode M, access_sharing S>
  void store(T v, M m, S s) {
    Policy::store(cell_, v, m, s);
  }

  // ---- read-modify-write (shared) ----
  bool compare_exchange(T& expected, T desired) {
    return Policy::compare_exchange(cell_, expected, desired, Default{});
  }
  template <access_mode M>
  bool compare_exchange(T& expected, T desired, M m) {
    return Policy::compare_exchange(cell_, expected, desired, m);
  }
  T exchange(T v) { return Policy::exchange(cell_, v, Default{}); }
  template <access_mode M>
  T exchange(T v, M m) {
    return Policy::exchange(cell_, v, m);
  }
  T fetch_add(T delta)
    requires std::is_integral_v<T>
  {
    return Policy::fetch_add(cell_, delta, Default{});
  }
  template <access_mode M>
  T fetch_add(T delta, M m)
    requires std::is_integral_v<T>
  {
    return Policy::fetch_add(cell_, delta, m);
  }

  // ---- the default path as operators ----
  operator T() const { return load(); }
  persist& operator=(T v) {
    store(v);
    return *this;
  }
  T operator->() const
    requires std::is_pointer_v<T>
  {
    return load();
  }

  // Clears placement metadata kept in the word or beside it (a counter or flag left in a
  // crash image). REQUIRES: no other thread uses the word; call during recovery.
  void reset_metadata() noexcept { Policy::reset(cell_); }
  // Whether reset_metadata() would write to the memory the word lies in (a counter or flag
  // left in a crash image): recovery collects such words and resets them only once the
  // image has been validated.
  bool needs_reset() const noexcept { return Policy::needs_reset(cell_); }

  // The word's address, for range flushes of a node that holds it.
  const void* address() const noexcept { return &cell_.word; }

  static void operation_completion() noexcept { Policy::operation_completion(); }

 private:
  typename Policy::template cell<T> cell_;
};

// Calls Policy::operation_completion() when it leaves scope: one per operation.
template <class Policy>
class completion_scope {
 public:
  completion_scope() = default;
  completion_scope(const completion_scope&) = delete;
  completion_scope& operator=(const completion_scope&) = delete;
  ~completion_scope() { Policy::operation_completion(); }
};

}  // namespace flit
