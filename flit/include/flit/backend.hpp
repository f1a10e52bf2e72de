// Flush backends on x86-64 hardware: which instruction writes a cache line back.
//
//  clwb        writes the line back and may keep it in the cache (the cheapest);
//  clflushopt  writes back and invalidates, weakly ordered;
//  clflush     writes back and invalidates, ordered with other clflush (every x86-64 CPU);
//  detected    the best of the three that this CPU supports, chosen once at start.
// Every backend fences with sfence. The pv model is a backend too (pv::model_backend), for
// tests.
//
// Thread safety: stateless; `detected` reads a value fixed before main.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <string_view>

#include "pv_interface/interface.hpp"

namespace flit {

// clflush first: a zero-initialized value names the instruction every x86-64 CPU has.
enum class flush_instruction { clflush, clflushopt, clwb };

// What this CPU supports, from cpuid.
bool cpu_supports(flush_instruction f) noexcept;
// The best flush instruction this CPU supports.
flush_instruction best_flush_instruction() noexcept;
std::string_view to_string(flush_instruction f) noexcept;

template <flush_instruction F>
struct hardware_backend {
  static constexpr flush_instruction instruction = F;
  static void pwb(const void* p) noexcept {
    void* line = const_cast<void*>(p);
    if constexpr (F == flush_instruction::clwb) {
      _mm_clwb(line);
    } else if constexpr (F == flush_instruction::clflushopt) {
      _mm_clflushopt(line);
    } else {
      _mm_clflush(line);
    }
  }
  static void pfence() noexcept { _mm_sfence(); }
  static pv::no_guard observe(pv::access, const void*, std::size_t) noexcept { return {}; }
  static void operation_completed() noexcept {}
  static std::string_view name() noexcept { return to_string(F); }
  static bool supported() noexcept { return cpu_supports(F); }
};

using clwb = hardware_backend<flush_instruction::clwb>;
using clflushopt = hardware_backend<flush_instruction::clflushopt>;
using clflush = hardware_backend<flush_instruction::clflush>;

namespace detail {
inline const flush_instruction detected_instruction = best_flush_instruction();
}

// The best instruction the CPU supports; the choice is a predictable branch per pwb.
struct detected {
  static void pwb(const void* p) noexcept {
    switch (detail::detected_instruction) {
      case flush_instruction::clwb: clwb::pwb(p); break;
      case flush_instruction::clflushopt: clflushopt::pwb(p); break;
      case flush_instruction::clflush: clflush::pwb(p); break;
    }
  }
  static void pfence() noexcept { _mm_sfence(); }
  static pv::no_guard observe(pv::access, const void*, std::size_t) noexcept { return {}; }
  static void operation_completed() noexcept {}
  static std::string_view name() noexcept { return to_string(detail::detected_instruction); }
  static bool supported() noexcept { return true; }
};

static_assert(pv::flush_backend<clwb>);
static_assert(pv::flush_backend<clflushopt>);
static_assert(pv::flush_backend<clflush>);
static_assert(pv::flush_backend<detected>);

}  // namespace flit
