// Flat combining: a writer advertises its prepared request in a slot and waits; whichever
// writer takes the combiner lock attaches every advertised request, its own and the others',
// one after the other, then ends the pass (where the engine fences the whole group once and
// publishes it: group commit), and only then tells each writer its outcome. The lock holder
// also runs the engine's housekeeping (reclamation) between passes. A writer that finds the
// lock free takes it at once and attaches its own request without a slot (attach_if_free):
// a slot's lines are written by its owner and by the pass, on either core, so leasing and
// advertising cost misses that a writer alone does not need to pay.
//
// Thread safety: any number of threads may lease slots and attach at once (or attach
// without a slot when the lock is free); a thread that finds every slot taken waits for
// one. The function given to attach() runs under the lock, on one thread at a time, and
// sees every write made by earlier lock holders.
// Invariants:
//  (1) A slot is owned by at most one thread; its request is read by the combiner only
//      while its state is `ready`, and the owner reads the outcome only after the combiner
//      set it (release/acquire on state).
//  (2) Every ready slot is visited by the next pass that starts after it was advertised.
//  (3) A slot's outcome is published only after the pass's end_pass() returned.
// Persistence: none of its own. The caller makes its request's persistent bytes durable (or,
// in automatic mode, calls the hand-off fence) before advertising: the combiner may link
// them as soon as it sees the slot.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

namespace flintkv::internal {

// failed: stale neighbours, locate and prepare again; exhausted: no version is left;
// conflict: a transaction's validation refused it (transaction.hpp), nothing was attached.
enum class slot_state : std::uint8_t { idle, ready, done, failed, exhausted, conflict };

template <class Request>
class combiner {
 public:
  struct alignas(64) slot {
    std::atomic<bool> owned{false};
    std::atomic<slot_state> state{slot_state::idle};
    slot_state outcome = slot_state::idle;  // the pass's, until end_pass() returned
    Request request{};
  };

  explicit combiner(unsigned slots) : slots_(std::max(1u, slots)) {
    served_.reserve(slots_.size());  // a pass never allocates
  }

  // A slot held for one attach.
  class lease {
   public:
    explicit lease(combiner& c) : slot_(c.take_slot()) {}
    ~lease() {
      slot_.state.store(slot_state::idle, std::memory_order_relaxed);
      slot_.owned.store(false, std::memory_order_release);
    }
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    slot* operator->() { return &slot_; }
    slot& operator*() { return slot_; }

   private:
    slot& slot_;
  };

  // Advertises the slot's request and waits until a pass (maybe this thread's) set its
  // outcome. A pass calls attach_one(request&) -> slot_state for each ready slot, then
  // end_pass(), then publishes the outcomes, then after_pass().
  template <class AttachOne, class EndPass, class AfterPass>
  slot_state attach(slot& me, AttachOne&& attach_one, EndPass&& end_pass,
                    AfterPass&& after_pass) {
    me.state.store(slot_state::ready, std::memory_order_release);
    for (unsigned spins = 0;; ++spins) {
      const slot_state st = me.state.load(std::memory_order_acquire);
      if (st != slot_state::ready) return st;
      if (try_lock()) {
        pass(attach_one, end_pass, after_pass);
        continue;
      }
      pause(spins);
    }
  }

  // If the lock is free, takes it and runs a pass that attaches `request` first, then every
  // ready slot, and returns the request's outcome once the pass has ended (as attach()
  // would). Else nullopt: the caller advertises the request in a slot.
  template <class AttachOne, class EndPass, class AfterPass>
  std::optional<slot_state> attach_if_free(Request& request, AttachOne&& attach_one,
                                           EndPass&& end_pass, AfterPass&& after_pass) {
    if (!try_lock()) return std::nullopt;
    const slot_state mine = attach_one(request);
    pass(attach_one, end_pass, after_pass);
    return mine;
  }

  // Some slot's request waits for a pass (for tests).
  bool advertised() const {
    return std::any_of(slots_.begin(), slots_.end(), [](const slot& s) {
      return s.state.load(std::memory_order_acquire) == slot_state::ready;
    });
  }

  // Runs f under the lock, waiting for it.
  template <class F>
  void locked(F&& f) {
    for (unsigned spins = 0; !try_lock(); ++spins) pause(spins);
    f();
    unlock();
  }

 private:
  // Attaches every ready slot, ends the pass, tells the slots their outcomes, runs the
  // housekeeping and unlocks. REQUIRES: the lock.
  template <class AttachOne, class EndPass, class AfterPass>
  void pass(AttachOne& attach_one, EndPass& end_pass, AfterPass& after_pass) {
    for (slot& s : slots_) {
      if (s.state.load(std::memory_order_acquire) != slot_state::ready) continue;
      s.outcome = attach_one(s.request);
      served_.push_back(&s);  // within the reserved capacity: one entry per slot
    }
    end_pass();
    for (slot* s : served_) s->state.store(s->outcome, std::memory_order_release);
    served_.clear();
    after_pass();
    unlock();
  }

  slot& take_slot() {
    thread_local std::size_t hint = 0;
    while (true) {
      for (std::size_t k = 0; k < slots_.size(); ++k) {
        const std::size_t i = (hint + k) % slots_.size();
        bool expected = false;
        if (!slots_[i].owned.load(std::memory_order_relaxed) &&
            slots_[i].owned.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
          hint = i;
          return slots_[i];
        }
      }
      std::this_thread::yield();  // every slot taken: wait for one
    }
  }

  bool try_lock() {
    return !lock_.load(std::memory_order_relaxed) &&
           !lock_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { lock_.store(false, std::memory_order_release); }

  static void pause(unsigned spins) {
    if (spins % 64 == 63) {
      std::this_thread::yield();
    } else {
      _mm_pause();
    }
  }

  std::vector<slot> slots_;
  // The current pass's slots; the lock holder's. Written at every pass: on a line of its
  // own, away from slots_, which every writer reads.
  alignas(64) std::vector<slot*> served_;
  alignas(64) std::atomic<bool> lock_{false};
};

}  // namespace flintkv::internal
