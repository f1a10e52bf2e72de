#include "flit/backend.hpp"

#include <cpuid.h>

namespace flit {

bool cpu_supports(flush_instruction f) noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  switch (f) {
    case flush_instruction::clflush:
      if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
      return (edx & (1u << 19)) != 0;
    case flush_instruction::clflushopt:
      if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
      return (ebx & (1u << 23)) != 0;
    case flush_instruction::clwb:
      if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
      return (ebx & (1u << 24)) != 0;
  }
  return false;
}

flush_instruction best_flush_instruction() noexcept {
  if (cpu_supports(flush_instruction::clwb)) return flush_instruction::clwb;
  if (cpu_supports(flush_instruction::clflushopt)) return flush_instruction::clflushopt;
  return flush_instruction::clflush;
}

std::string_view to_string(flush_instruction f) noexcept {
  switch (f) {
    case flush_instruction::clwb: return "clwb";
    case flush_instruction::clflushopt: return "clflushopt";
    case flush_instruction::clflush: return "clflush";
  }
  return "?";
}

}  // namespace flit
