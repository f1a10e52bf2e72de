// Counter placements: where persist<T> keeps what tells a p-load that a location may hold a
// value whose p-store has not been persisted yet (the location is "tagged").
//
// A placement is a type modelling flit::counter_placement:
//  (1) cell<T> is the storage of one word: std::atomic<word_t<T>> `word`, plus metadata.
//  (2) begin_store(c) runs before a shared p-store writes the word; mark(c, raw) is what the
//      store writes; release(c, marked) runs after the store was written back and, when
//      fence_before_release is true, fenced. Between begin_store and release the location
//      is tagged.
//      abandon(c) undoes begin_store when the store did not happen (a failed CAS).
//  (3) tagged(c, raw) tells a p-load that read `raw` from c whether it must write back.
//      It may say yes too often (only extra write-backs), never too rarely.
//  (4) value(c, raw) strips metadata from a word read.
//  (5) reset(c) clears metadata of a cell after a crash or before first use;
//      needs_reset(c) is true when reset(c) would change the memory the cell lies in (so a
//      recovery that must not write before it has validated can collect such cells first).
//  (6) persistent == false turns persistence off altogether (the volatile baseline).
//
// Placements: hashed<Bytes> (a table of 8-bit counters that addresses hash into), adjacent
// (a counter beside the word, on the same cache line), plain (no counters: every p-load
// writes back), link_and_persist (a flag bit inside the word), nonpersistent.
#pragma once

#include <atomic>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace flit {

// The unsigned integer that holds a T's bits.
template <class T>
using word_t = std::conditional_t<
    sizeof(T) == 1, std::uint8_t,
    std::conditional_t<sizeof(T) == 2, std::uint16_t,
                       std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;

// Types persist<T> accepts: word-sized and trivially copyable.
template <class T>
concept persistable = std::is_trivially_copyable_v<T> &&
                      (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);

template <persistable T>
constexpr word_t<T> to_word(T v) noexcept {
  return std::bit_cast<word_t<T>>(v);
}
template <persistable T>
constexpr T from_word(word_t<T> w) noexcept {
  return std::bit_cast<T>(w);
}

// A bit of T's representation that no value of T uses, for link_and_persist. Specialize for
// your own types (a pool offset aligned to 8 bytes has three). The primary has none.
template <class T>
struct spare_bit {
  static constexpr word_t<T> mask = 0;
};
// A pointer to an object aligned to 2 bytes or more never has its low bit set.
template <class U>
  requires(alignof(U) >= 2)
struct spare_bit<U*> {
  static constexpr word_t<U*> mask = 1;
};

template <class T>
concept has_spare_bit = persistable<T> && (spare_bit<T>::mask != 0);

enum class tracking {
  counter,    // a flit-counter per location (shared or not)
  flush_bit,  // a bit in the word
  none,       // every p-load writes back
};

// ---- hashed -----------------------------------------------------------------------------

template <std::size_t Bytes>
struct hashed {
  static_assert(Bytes >= 64 && std::has_single_bit(Bytes), "table size: a power of two");
  static constexpr std::string_view name = "hashed";
  static constexpr bool persistent = true;
  static constexpr tracking tracks = tracking::counter;
  static constexpr bool fence_before_release = true;
  static constexpr std::size_t table_bytes = Bytes;

  template <persistable T>
  struct cell {
    std::atomic<word_t<T>> word;
  };

  // Counters live outside the cells, in DRAM; 8 bits suffice while fewer than 256 threads
  // store at once.
  alignas(64) static inline std::atomic<std::uint8_t> table[Bytes];

  static std::atomic<std::uint8_t>& counter_of(const void* p) noexcept {
    auto a = reinterpret_cast<std::uintptr_t>(p) >> 3;
    return table[(a * 0x9e3779b97f4a7c15ULL) >> (64 - std::countr_zero(Bytes))];
  }

  template <class C>
  static void begin_store(const C& c) noexcept {
    counter_of(&c.word).fetch_add(1, std::memory_order_acq_rel);
  }
  template <class C>
  static void abandon(const C& c) noexcept {
    counter_of(&c.word).fetch_sub(1, std::memory_order_release);
  }
  template <class C, class W>
  static W mark(const C&, W raw) noexcept {
    return raw;
  }
  template <class C, class W>
  static void release(const C& c, W) noexcept {
    counter_of(&c.word).fetch_sub(1, std::memory_order_release);
  }
  template <class C, class W>
  static bool tagged(const C& c, W) noexcept {
    return counter_of(&c.word).load(std::memory_order_acquire) != 0;
  }
  template <class C, class W>
  static W value(const C&, W raw) noexcept {
    return raw;
  }
  template <class C>
  static void reset(C&) noexcept {}
  template <class C>
  static bool needs_reset(const C&) noexcept {
    return false;  // the counters are in DRAM
  }
};

// ---- adjacent ---------------------------------------------------------------------------

struct adjacent {
  static constexpr std::string_view name = "adjacent";
  static constexpr bool persistent = true;
  static constexpr tracking tracks = tracking::counter;
  static constexpr bool fence_before_release = true;

  // Word and counter share a cache line: the cell is aligned to twice the word.
  template <persistable T>
  struct alignas(2 * sizeof(T)) cell {
    std::atomic<word_t<T>> word;
    mutable std::atomic<std::uint8_t> counter;
  };

  template <class C>
  static void begin_store(const C& c) noexcept {
    c.counter.fetch_add(1, std::memory_order_acq_rel);
  }
  template <class C>
  static void abandon(const C& c) noexcept {
    c.counter.fetch_sub(1, std::memory_order_release);
  }
  template <class C, class W>
  static W mark(const C&, W raw) noexcept {
    return raw;
  }
  template <class C, class W>
  static void release(const C& c, W) noexcept {
    c.counter.fetch_sub(1, std::memory_order_release);
  }
  template <class C, class W>
  static bool tagged(const C& c, W) noexcept {
    return c.counter.load(std::memory_order_acquire) != 0;
  }
  template <class C, class W>
  static W value(const C&, W raw) noexcept {
    return raw;
  }
  // A counter found in a crash image may hold any count; a stuck count would only cost
  // write-backs, but recovery clears it.
  template <class C>
  static void reset(C& c) noexcept {
    c.counter.store(0, std::memory_order_relaxed);
  }
  template <class C>
  static bool needs_reset(const C& c) noexcept {
    return c.counter.load(std::memory_order_relaxed) != 0;
  }
};

// ---- plain ------------------------------------------------------------------------------

struct plain {
  static constexpr std::string_view name = "plain";
  static constexpr bool persistent = true;
  static constexpr tracking tracks = tracking::none;
  // Readers write back whatever they read, so a store need not fence before it is done.
  static constexpr bool fence_before_release = false;

  template <persistable T>
  struct cell {
    std::atomic<word_t<T>> word;
  };

  template <class C>
  static void begin_store(const C&) noexcept {}
  template <class C>
  static void abandon(const C&) noexcept {}
  template <class C, class W>
  static W mark(const C&, W raw) noexcept {
    return raw;
  }
  template <class C, class W>
  static void release(const C&, W) noexcept {}
  template <class C, class W>
  static bool tagged(const C&, W) noexcept {
    return true;
  }
  template <class C, class W>
  static W value(const C&, W raw) noexcept {
    return raw;
  }
  template <class C>
  static void reset(C&) noexcept {}
  template <class C>
  static bool needs_reset(const C&) noexcept {
    return false;
  }
};

// ---- link_and_persist -------------------------------------------------------------------
//
// Limitation: release() lowers the flag by comparing values, so a release that comes late
// also lowers the flag of a later store that wrote the same value (A stores x, B stores y,
// C stores x; A's release lowers C's flag before C's store is written back). A p-load of x
// then skips the write-back it depends on. One bit cannot tell the two stores apart; words
// whose values do not come back while a store to them is in flight are safe.

struct link_and_persist {
  static constexpr std::string_view name = "link_and_persist";
  static constexpr bool persistent = true;
  static constexpr tracking tracks = tracking::flush_bit;
  static constexpr bool fence_before_release = true;

  template <persistable T>
  struct cell {
    static_assert(has_spare_bit<T>,
                  "link_and_persist needs a spare bit in T: specialize flit::spare_bit<T>");
    static constexpr word_t<T> flag = spare_bit<T>::mask;
    std::atomic<word_t<T>> word;
  };

  template <class C>
  static void begin_store(const C&) noexcept {}
  template <class C>
  static void abandon(const C&) noexcept {}
  // The word is written with its flag up: "written, maybe not persisted".
  template <class C, class W>
  static W mark(const C&, W raw) noexcept {
    return static_cast<W>(raw | C::flag);
  }
  // After write-back and fence, lower the flag unless the word changed meanwhile.
  template <class C, class W>
  static void release(C& c, W marked) noexcept {
    W expected = marked;
    c.word.compare_exchange_strong(expected, static_cast<W>(marked & ~C::flag),
                                                   std::memory_order_acq_rel);
  }
  template <class C, class W>
  static bool tagged(const C&, W raw) noexcept {
    return (raw & C::flag) != 0;
  }
  template <class C, class W>
  static W value(const C&, W raw) noexcept {
    return static_cast<W>(raw & ~C::flag);
  }
  template <class C>
  static void reset(C& c) noexcept {
    c.word.store(static_cast<decltype(C::flag)>(c.word.load(std::memory_order_relaxed) & ~C::flag),
                 std::memory_order_relaxed);
  }
  template <class C>
  static bool needs_reset(const C& c) noexcept {
    return (c.word.load(std::memory_order_relaxed) & C::flag) != 0;
  }
};

// ---- nonpersistent ----------------------------------------------------------------------

struct nonpersistent {
  static constexpr std::string_view name = "nonpersistent";
  static constexpr bool persistent = false;
  static constexpr tracking tracks = tracking::none;
  static constexpr bool fence_before_release = false;

  template <persistable T>
  struct cell {
    std::atomic<word_t<T>> word;
  };
  template <class C>
  static void reset(C&) noexcept {}
  template <class C>
  static bool needs_reset(const C&) noexcept {
    return false;
  }
};

// What persist<T> needs of a placement.
template <class P>
concept counter_placement = requires {
  { P::name } -> std::convertible_to<std::string_view>;
  { P::persistent } -> std::convertible_to<bool>;
  typename P::template cell<std::uint64_t>;
} && (!P::persistent || requires(typename P::template cell<std::uint64_t>& c, std::uint64_t w) {
  P::begin_store(c);
  P::abandon(c);
  { P::mark(c, w) } -> std::same_as<std::uint64_t>;
  P::release(c, w);
  { P::tagged(c, w) } -> std::same_as<bool>;
  { P::value(c, w) } -> std::same_as<std::uint64_t>;
  P::reset(c);
  { P::needs_reset(c) } -> std::same_as<bool>;
});

static_assert(counter_placement<hashed<1024>>);
static_assert(counter_placement<adjacent>);
static_assert(counter_placement<plain>);
static_assert(counter_placement<nonpersistent>);

}  // namespace flit
