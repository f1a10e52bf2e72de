// A checker of Definition 1 (see interface.hpp) over a trace recorded by pv::model.
//
// The checker replays the trace in order. It tracks, per cache line, which version is
// durable (a pwb records the line's version for its thread; that thread's next pfence makes
// it durable), and per thread the stores it depends on: its own p-stores (condition 2) and,
// for each p-load, the latest p-store to the same location before it (condition 3). At each
// shared store (before it takes effect) and at each operation completion, every dependency of
// the thread must be durable (condition 4); each one that is not is a violation.
//
// Thread safety: a pure function of its input.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pv_interface/model.hpp"

namespace pv {

struct violation {
  std::size_t event;           // index in the trace of the shared store or completion
  std::uint32_t thread;        // the thread that reached it
  std::uint64_t offset;        // location of the store it depended on
  std::uint64_t version;       // line version that store created
  std::uint64_t durable;       // line version durable at that point
  bool at_completion;          // true: operation completion; false: a shared store
  std::string describe() const;
};

std::vector<violation> check_definition1(const std::vector<trace_event>& trace);

}  // namespace pv
