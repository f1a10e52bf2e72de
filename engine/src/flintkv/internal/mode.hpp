// Durability modes: how the engine's accesses to persistent memory map onto the P-V
// interface. The engine is written once against durable<Policy, Mode>; the mode decides.
//
//  manual     The FlintKV placement. Persistent words are accessed with private
//             v-instructions (only one thread touches a node or link at a time: the preparing
//             worker, then the combiner under its lock, or recovery), and the engine issues
//             the write-backs and fences itself at the points the algorithm needs: a put's
//             node, version and link written back together and fenced once (by its pass, or
//             at its weak window's end); a batch's nodes written back and fenced in prepare.
//  automatic  Every persistent access is a shared p-instruction and the engine issues no
//             flush of its own: durability follows from the P-V interface alone (every store
//             is persisted before the next shared store and before the operation completes).
//             Simpler to reason about, and more fences.
//
// Hand-offs. Some stores that pass persistent data to another thread are not made through
// the P-V layer: a writer advertising its prepared node in its combiner slot, the combiner
// publishing visible_version and marking a slot done (std::atomic stores in DRAM). For the
// P-V contract they are shared stores all the same, and a shared store is preceded by the
// fence of the thread's pending write-backs: the engine calls hand_off() right before each.
// In automatic mode that is the policy's fence_pending(): it completes the write-backs whose
// fence the layer defers to the thread's next shared store or completion (the lines written
// by put_bytes, and under `plain` the p-stores' own). In manual mode the engine's own fence
// already stands right before every hand-off, and hand_off() adds nothing.
#pragma once

#include <cstddef>
#include <string_view>

#include "flit/flit.hpp"

namespace flintkv {

struct manual {
  static constexpr std::string_view name = "manual";
  static constexpr bool explicit_flushes = true;
};
struct automatic {
  static constexpr std::string_view name = "automatic";
  static constexpr bool explicit_flushes = false;
};

namespace internal {

template <class Policy, class Mode>
struct durable {
  // A link keeps the successor it replaces (recovery.hpp, store_link). Only a test's broken
  // engine says otherwise.
  static constexpr bool keeps_prior = true;
  // A link whose prior would name a node not yet fenced (of this pass, or of the weak
  // window) fences first (engine.hpp, fence_before_relinking). Likewise.
  static constexpr bool fences_unfenced_priors = true;
  // A store to a persistent word.
  template <class Word, class T>
  static void put(Word& w, T v) {
    if constexpr (Mode::explicit_flushes) {
      w.store(v, flit::volatile_, flit::private_);
    } else {
      w.store(v);
    }
  }
  // A load of a persistent word.
  template <class Word>
  static auto get(const Word& w) {
    if constexpr (Mode::explicit_flushes) {
      return w.load(flit::volatile_, flit::private_);
    } else {
      return w.load();
    }
  }
  // Bulk bytes (keys, values) into persistent memory.
  static void put_bytes(void* dst, const void* src, std::size_t n) {
    if constexpr (Mode::explicit_flushes) {
      Policy::write_range(dst, src, n, flit::volatile_);
    } else {
      Policy::write_range(dst, src, n, flit::persisted);
    }
  }
  // Write-back of what the engine stored at [p, p + n); manual mode only.
  static void flush(const void* p, std::size_t n) {
    if constexpr (Mode::explicit_flushes) Policy::flush_range(p, n);
  }
  template <class Word>
  static void flush(const Word& w) {
    flush(w.address(), sizeof(Word));
  }
  // Orders and completes this thread's write-backs; manual mode only.
  static void fence() {
    if constexpr (Mode::explicit_flushes) Policy::pfence();
  }
  // Before a store outside the P-V layer that lets another thread reach what this thread
  // wrote: completes this thread's pending write-backs (automatic mode; in manual mode the
  // engine has fenced them already).
  static void hand_off() {
    if constexpr (!Mode::explicit_flushes) Policy::fence_pending();
  }
  // Before freeing blocks this thread unlinked (another thread may reuse one at once): the
  // unlinks are made durable, so a freed block is never linked in the durable list.
  static void before_free() {
    fence();
    hand_off();
  }
  // Before the store that closes a weak window (batch_mode idle): the window's versions
  // and links, written back, are made durable, so that recovery never counts a version whose
  // link may still be lost.
  static void before_window_close() { fence(); }
  // The end of an engine operation: whatever the mode left unfenced is fenced.
  static void complete() { Policy::operation_completion(); }
};

}  // namespace internal
}  // namespace flintkv
