// Per-thread state of an object (an allocator's caches, an epoch domain's record), found in
// a few instructions on the hot path and handed back when the thread exits.
//
// An owner derives from per_thread_owner and is held by a shared_ptr. Each owner gets an id
// that is never reused. A thread keeps a small direct-mapped cache (id -> state) and a list
// of every state it was given, with a weak reference to the owner; when the thread exits,
// each owner still alive gets its state back through release_thread_state().
//
// Thread safety: thread_state() may be called from any thread; create_thread_state() and
// release_thread_state() must be safe to call concurrently with each other and with the
// owner's other members.
// Invariants:
//  (1) A state is returned only for the owner (id) it was created for: ids are never reused,
//      so a cache entry left by a destroyed owner never matches.
//  (2) release_thread_state() runs at most once per state, on the thread that used it.
// REQUIRES: owners are not used from thread_local destructors.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

namespace alloc::detail {

class per_thread_owner : public std::enable_shared_from_this<per_thread_owner> {
 public:
  per_thread_owner();
  virtual ~per_thread_owner() = default;
  per_thread_owner(const per_thread_owner&) = delete;
  per_thread_owner& operator=(const per_thread_owner&) = delete;

  std::uint64_t id() const noexcept { return id_; }

  // A new state for the calling thread, on its first use of this owner.
  virtual void* create_thread_state() = 0;
  // The state of a thread that exited (called on that thread, only while the owner lives).
  virtual void release_thread_state(void* state) noexcept = 0;

 private:
  std::uint64_t id_;
};

struct thread_state_entry {
  std::uint64_t id = 0;  // 0: empty (ids start at 1)
  void* state = nullptr;
};

inline constexpr std::size_t thread_state_ways = 8;
inline thread_local constinit std::array<thread_state_entry, thread_state_ways> thread_states{};

// Registers the calling thread with `owner` (creating its state) and fills the cache.
void* thread_state_slow(per_thread_owner& owner);

template <class State>
inline State* thread_state(per_thread_owner& owner) {
  thread_state_entry& e = thread_states[owner.id() % thread_state_ways];
  if (e.id == owner.id()) [[likely]] return static_cast<State*>(e.state);
  return static_cast<State*>(thread_state_slow(owner));
}

}  // namespace alloc::detail
