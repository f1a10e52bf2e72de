// The P-V interface: what p-instructions and v-instructions promise, stated as C++20
// concepts that a persistence policy must model.
//
// Every access to persistent memory is either a p-instruction (its effect, and everything it
// depends on, must be persisted before anything that depends on it becomes visible or the
// operation completes) or a v-instruction (its persistence was reasoned away by the
// programmer). Accesses are also shared (may race with other accesses to the location) or
// private (cannot race: the location is not yet published, or is owned by one thread).
//
// Contract (Definition 1 of the FliT paper, in our words). Every instruction has a
// linearization point inside its interval such that:
//  (1) Volatile behaviour is kept: a load returns the value of the latest store to its
//      location that linearized before it, exactly as without persistence.
//  (2) Store dependencies: a thread depends on each of its own p-stores.
//  (3) Load dependencies: a thread that p-loads a location depends on every p-store to that
//      location linearized before the load.
//  (4) Persisting dependencies: at the linearization point of a shared store (p or v) by a
//      thread, and when the thread completes an operation, every store it depended on
//      before that point is persisted.
//
// A v-instruction adds no dependency and issues no write-back or fence of its own. A shared
// store may still have to fence first, to complete write-backs the thread issued earlier and
// has not fenced yet (condition 4); an implementation issues that fence only when such
// write-backs exist.
//
// Thread safety: every operation of a policy is safe to call from any thread on shared
// locations; private operations require that no other thread accesses the location
// concurrently.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pv {

// ---- access tags -------------------------------------------------------------------------

// The persistence of an access. Tags are types so that the choice is made at compile time.
struct persisted_t {
  explicit constexpr persisted_t() = default;
  static constexpr bool is_persisted = true;
};
struct volatile_t {
  explicit constexpr volatile_t() = default;
  static constexpr bool is_persisted = false;
};
inline constexpr persisted_t persisted{};
inline constexpr volatile_t volatile_{};

template <class M>
concept access_mode = std::same_as<M, persisted_t> || std::same_as<M, volatile_t>;

// Whether an access may race with others on the same location.
struct shared_t {
  explicit constexpr shared_t() = default;
  static constexpr bool is_shared = true;
};
struct private_t {
  explicit constexpr private_t() = default;
  static constexpr bool is_shared = false;
};
inline constexpr shared_t shared{};
inline constexpr private_t private_{};

template <class S>
concept access_sharing = std::same_as<S, shared_t> || std::same_as<S, private_t>;

// ---- what a flush backend offers ---------------------------------------------------------

// One memory access as a backend sees it, for backends that observe accesses (the model).
enum class access_kind : std::uint8_t { load, store };

struct access {
  access_kind kind;
  bool persisted;
  bool shared;
};

// What a backend's observe() returns on hardware: nothing to do.
struct no_guard {
  void unchanged() noexcept {}
};

// A flush backend: the instructions that move cache lines to persistent memory.
//  (1) pwb(p) starts the write-back of the cache line holding p; it need not block.
//  (2) pfence() returns only when every line this thread pwb'd before it is persistent,
//      and orders those write-backs before this thread's later stores.
//  (3) observe(a, p, n) is called around every access of n bytes at p made through the
//      layer; the returned guard lives for the duration of the access. Hardware backends
//      return no_guard; the model records the access. A store that turned out not to
//      write (a failed CAS) calls unchanged() on the guard: it is then a load.
//  (4) operation_completed() is called after the fence of operation_completion().
template <class B>
concept flush_backend = requires(const void* p, std::size_t n, access a) {
  { B::pwb(p) } noexcept;
  { B::pfence() } noexcept;
  { B::observe(a, p, n).unchanged() };
  { B::operation_completed() } noexcept;
  { B::name() } -> std::convertible_to<std::string_view>;
};

// ---- what a persistence policy offers -----------------------------------------------------

// A persistence policy implements the P-V interface on words of type T held in
// `P::cell<T>` (the word plus whatever metadata the policy keeps beside it).
//  (1) load, store, compare_exchange, exchange and fetch_add in p and v forms, shared and
//      private, satisfying the contract above.
//  (2) operation_completion() persists every dependency of the calling thread.
//  (3) write_range(dst, src, n, mode) copies n bytes to persistent memory as a private store
//      of that mode: with `persisted`, the bytes are dependencies of the thread and are
//      persisted by its next fence (a later shared store or operation completion).
//  (4) flush_range(p, n) issues the write-backs of a range the thread wrote privately
//      through write_range(..., volatile_) or word stores, making it a dependency.
template <class P, class T = std::uint64_t>
concept pv_policy =
    requires(typename P::template cell<T>& c, const typename P::template cell<T>& cc, T v,
             T& expected, void* dst, const void* src, std::size_t n) {
      { P::load(cc, persisted, shared) } -> std::same_as<T>;
      { P::load(cc, volatile_, shared) } -> std::same_as<T>;
      { P::load(cc, persisted, private_) } -> std::same_as<T>;
      { P::load(cc, volatile_, private_) } -> std::same_as<T>;
      P::store(c, v, persisted, shared);
      P::store(c, v, volatile_, shared);
      P::store(c, v, persisted, private_);
      P::store(c, v, volatile_, private_);
      { P::compare_exchange(c, expected, v, persisted) } -> std::same_as<bool>;
      { P::compare_exchange(c, expected, v, volatile_) } -> std::same_as<bool>;
      { P::exchange(c, v, persisted) } -> std::same_as<T>;
      { P::exchange(c, v, volatile_) } -> std::same_as<T>;
      P::operation_completion();
      P::write_range(dst, src, n, persisted);
      P::write_range(dst, src, n, volatile_);
      P::flush_range(src, n);
    };

// fetch_add exists for integral words only.
template <class P, class T = std::uint64_t>
concept pv_policy_counting =
    pv_policy<P, T> && requires(typename P::template cell<T>& c, T v) {
      { P::fetch_add(c, v, persisted) } -> std::same_as<T>;
      { P::fetch_add(c, v, volatile_) } -> std::same_as<T>;
    };

inline constexpr std::size_t cache_line = 64;

constexpr std::uintptr_t line_of(std::uintptr_t address) { return address / cache_line; }

}  // namespace pv
