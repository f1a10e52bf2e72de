// flit::policy<Placement, Backend>: the flush-if-tagged implementation of the P-V interface
// (pv_interface/interface.hpp), one algorithm for every counter placement and backend.
//
// Per word, with `tagged` and `mark` from the placement:
//   shared p-load     read; if tagged: pwb
//   shared p-store    fence if unfenced write-backs; begin_store; write mark(v); pwb;
//                     pfence (if the placement needs it); release
//   shared v-store    fence if unfenced write-backs; write (under a flag-bit placement, a
//                     write that keeps the flag up if the word had it: see (3))
//   private p-store   write; pwb (the fence comes with the thread's next shared store or
//                     operation completion)
//   private loads, v-loads, private v-stores: the plain access
//   completion        fence if unfenced write-backs
// CAS, exchange and fetch-add are stores; a failed p-CAS is a p-load of what it read.
//
// "Unfenced write-backs" is a per-thread, per-backend flag set by pwb and cleared by pfence:
// fences are issued only when they have something to complete, which is what makes
// v-instructions and read-only operations fence-free.
//
// Thread safety: all static functions may be called concurrently on shared cells.
// Persistence:
//  (1) A shared p-store's value is persisted before its location stops being tagged.
//  (2) Before any shared store or completion, every write-back the thread issued is fenced.
//  (3) A shared v-store, v-CAS, v-exchange or v-fetch-add never untags a location: under
//      link_and_persist (the tag is a bit of the word) it writes its value with the flag up
//      when the word it replaces had it. Otherwise a p-store still in flight would lose its
//      tag to the v-write, and a p-load after it would skip the write-back it depends on.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "flit/backend.hpp"
#include "flit/placement.hpp"
#include "flit/stats.hpp"
#include "pv_interface/interface.hpp"

namespace flit {

using pv::access_mode;
using pv::access_sharing;

namespace detail {
// Set when this thread issued a write-back through Backend that no fence completed yet.
template <class Backend>
inline thread_local constinit bool unfenced = false;
}  // namespace detail

template <counter_placement Placement, pv::flush_backend Backend>
struct policy {
  using placement = Placement;
  using backend = Backend;
  template <class T>
  using cell = typename Placement::template cell<T>;

  static constexpr bool persistent = Placement::persistent;

  // ---- the instructions, counted --------------------------------------------------------

  static void pwb(const void* p) noexcept {
    if constexpr (persistent) {
      detail::count_pwb();
      Backend::pwb(p);
      detail::unfenced<Backend> = true;
    }
  }
  static void pfence() noexcept {
    if constexpr (persistent) {
      detail::count_pfence();
      Backend::pfence();
      detail::unfenced<Backend> = false;
    }
  }
  // Completes this thread's earlier write-backs, if there are any.
  static void fence_pending() noexcept {
    if constexpr (persistent) {
      if (detail::unfenced<Backend>) pfence();
    }
  }
  static bool has_unfenced() noexcept { return persistent && detail::unfenced<Backend>; }

  // ---- loads ----------------------------------------------------------------------------

  template <persistable T, access_mode M, access_sharing S>
  static T load(const cell<T>& c, M, S) {
    word_t<T> raw;
    {
      [[maybe_unused]] auto observed = Backend::observe({pv::access_kind::load, M::is_persisted, S::is_shared},
                                       &c.word, sizeof(T));
      raw = c.word.load(std::memory_order_acquire);
    }
    if constexpr (persistent) {
      if constexpr (M::is_persisted && S::is_shared) {
        if (Placement::tagged(c, raw)) {
          detail::count_tagged_flush();
          pwb(&c.word);
        }
      }
      return from_word<T>(Placement::value(c, raw));
    } else {
      return from_word<T>(raw);
    }
  }

  // ---- stores ---------------------------------------------------------------------------

  template <persistable T, access_mode M, access_sharing S>
  static void store(cell<T>& c, T v, M, S) {
    word_t<T> raw = to_word(v);
    if constexpr (persistent && S::is_shared) fence_pending();
    if constexpr (persistent && M::is_persisted && S::is_shared) {
      Placement::begin_store(c);
      word_t<T> marked = Placement::mark(c, raw);
      write(c, marked, pv::persisted, pv::shared);
      finish_store(c, marked);
    } else if constexpr (carries_flag && S::is_shared) {
      [[maybe_unused]] auto observed = Backend::observe({pv::access_kind::store, false, true},
                                                        &c.word, sizeof(T));
      word_t<T> old = c.word.load(std::memory_order_relaxed);
      while (!c.word.compare_exchange_weak(old, carry(c, old, raw), std::memory_order_release,
                                           std::memory_order_relaxed)) {
      }
    } else {
      write(c, raw, M{}, S{});
      if constexpr (persistent && M::is_persisted) pwb(&c.word);
    }
  }

  // Stores `desired` if the word holds `expected`; otherwise loads the word into `expected`.
  template <persistable T, access_mode M>
  static bool compare_exchange(cell<T>& c, T& expected, T desired, M) {
    const word_t<T> want = to_word(expected);
    word_t<T> raw = to_word(desired);
    if constexpr (!persistent) {
      word_t<T> seen = want;
      auto observed = observe_store(c, M{});
      bool ok = c.word.compare_exchange_strong(seen, raw, std::memory_order_acq_rel);
      if (!ok) {
        observed.unchanged();
        expected = from_word<T>(seen);
      }
      return ok;
    } else {
      fence_pending();
      if constexpr (M::is_persisted) Placement::begin_store(c);
      word_t<T> put = M::is_persisted ? Placement::mark(c, raw) : raw;
      word_t<T> seen = want;
      bool ok;
      {
        auto observed = observe_store(c, M{});
        // The placement's metadata bits may differ from `want`: retry while only they do.
        while (!(ok = c.word.compare_exchange_strong(seen, put, std::memory_order_acq_rel)) &&
               Placement::value(c, seen) == want) {
          if constexpr (carries_flag && !M::is_persisted) put = carry(c, seen, raw);
        }
        if (!ok) observed.unchanged();
      }
      if constexpr (M::is_persisted) {
        if (ok) {
          finish_store(c, put);
        } else {
          Placement::abandon(c);
          if (Placement::tagged(c, seen)) {
            detail::count_tagged_flush();
            pwb(&c.word);
          }
        }
      }
      if (!ok) expected = from_word<T>(Placement::value(c, seen));
      return ok;
    }
  }

  template <persistable T, access_mode M>
  static T exchange(cell<T>& c, T v, M) {
    word_t<T> raw = to_word(v);
    if constexpr (!persistent) {
      [[maybe_unused]] auto observed = observe_store(c, M{});
      return from_word<T>(c.word.exchange(raw, std::memory_order_acq_rel));
    } else {
      fence_pending();
      if constexpr (M::is_persisted) Placement::begin_store(c);
      word_t<T> put = M::is_persisted ? Placement::mark(c, raw) : raw;
      word_t<T> old;
      {
        [[maybe_unused]] auto observed = observe_store(c, M{});
        if constexpr (carries_flag && !M::is_persisted) {
          old = c.word.load(std::memory_order_relaxed);
          while (!c.word.compare_exchange_weak(old, put = carry(c, old, raw),
                                               std::memory_order_acq_rel)) {
          }
        } else {
          old = c.word.exchange(put, std::memory_order_acq_rel);
        }
      }
      if constexpr (M::is_persisted) finish_store(c, put);
      return from_word<T>(Placement::value(c, old));
    }
  }

  template <persistable T, access_mode M>
    requires std::is_integral_v<T>
  static T fetch_add(cell<T>& c, T delta, M) {
    const word_t<T> d = to_word(delta);
    if constexpr (!persistent) {
      [[maybe_unused]] auto observed = observe_store(c, M{});
      return from_word<T>(c.word.fetch_add(d, std::memory_order_acq_rel));
    } else {
      fence_pending();
      if constexpr (M::is_persisted) Placement::begin_store(c);
      word_t<T> old;
      word_t<T> put;
      {
        [[maybe_unused]] auto observed = observe_store(c, M{});
        if constexpr (Placement::tracks == tracking::flush_bit) {
          old = c.word.load(std::memory_order_acquire);
          do {
            word_t<T> sum = static_cast<word_t<T>>(Placement::value(c, old) + d);
            put = M::is_persisted ? Placement::mark(c, sum) : carry(c, old, sum);
          } while (!c.word.compare_exchange_weak(old, put, std::memory_order_acq_rel));
        } else {
          old = c.word.fetch_add(d, std::memory_order_acq_rel);
          put = static_cast<word_t<T>>(old + d);
        }
      }
      if constexpr (M::is_persisted) finish_store(c, put);
      return from_word<T>(Placement::value(c, old));
    }
  }

  // ---- operations and ranges ------------------------------------------------------------

  // Ends an operation: every dependency of this thread is persisted on return.
  static void operation_completion() noexcept {
    if constexpr (persistent) {
      fence_pending();
      Backend::operation_completed();
    }
  }

  // Copies n bytes to dst as a private store of mode M (for keys, values, node bodies).
  template <access_mode M>
  static void write_range(void* dst, const void* src, std::size_t n, M) {
    if (n == 0) return;
    {
      [[maybe_unused]] auto observed = Backend::observe({pv::access_kind::store, M::is_persisted, false}, dst, n);
      std::memcpy(dst, src, n);
    }
    if constexpr (M::is_persisted) flush_range(dst, n);
  }

  // Writes back every cache line of [p, p + n).
  static void flush_range(const void* p, std::size_t n) noexcept {
    if constexpr (persistent) {
      if (n == 0) return;
      auto first = reinterpret_cast<std::uintptr_t>(p) & ~(pv::cache_line - 1);
      auto end = reinterpret_cast<std::uintptr_t>(p) + n;
      for (std::uintptr_t line = first; line < end; line += pv::cache_line) {
        pwb(reinterpret_cast<const void*>(line));
      }
    }
  }

  // Clears a cell's placement metadata. REQUIRES: no other thread uses the cell.
  template <persistable T>
  static void reset(cell<T>& c) noexcept {
    Placement::reset(c);
  }
  // Whether reset(c) would write to the memory the cell lies in.
  template <persistable T>
  static bool needs_reset(const cell<T>& c) noexcept {
    return Placement::needs_reset(c);
  }

 private:
  // Whether the tag is a bit of the word, which a v-write must carry over (Persistence (3)).
  static constexpr bool carries_flag = persistent && Placement::tracks == tracking::flush_bit;

  // What a v-write of `raw` puts in place of `old`: `raw`, with the flag up if `old` had it.
  template <persistable T>
  static word_t<T> carry(const cell<T>& c, word_t<T> old, word_t<T> raw) noexcept {
    if constexpr (carries_flag) {
      return Placement::tagged(c, old) ? Placement::mark(c, raw) : raw;
    } else {
      return raw;
    }
  }

  template <persistable T, access_mode M>
  static auto observe_store(cell<T>& c, M) {
    return Backend::observe({pv::access_kind::store, M::is_persisted, true}, &c.word,
                            sizeof(T));
  }

  template <persistable T, access_mode M, access_sharing S>
  static void write(cell<T>& c, word_t<T> raw, M, S) {
    [[maybe_unused]] auto observed = Backend::observe({pv::access_kind::store, M::is_persisted, S::is_shared},
                                     &c.word, sizeof(T));
    c.word.store(raw, S::is_shared ? std::memory_order_release : std::memory_order_relaxed);
  }

  // The tail of a shared p-store: write back, fence if the placement needs it, untag.
  template <persistable T>
  static void finish_store(cell<T>& c, word_t<T> marked) {
    pwb(&c.word);
    if constexpr (Placement::fence_before_release) pfence();
    Placement::release(c, marked);
  }
};

}  // namespace flit
