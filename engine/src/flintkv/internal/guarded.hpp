// No exception crosses the API: the engine runs each public call through guarded(), which
// turns what escapes into a Status (out of DRAM: NoSpace; anything else: IOError naming it).
//
// Thread safety: a pure function. Invariants: none. Persistence: none.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "flintkv/status.hpp"

namespace flintkv::internal {

template <class F>
Status guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Status::NoSpace("out of DRAM");
  } catch (const std::exception& e) {
    return Status::IOError(std::string("internal error: ") + e.what());
  }
}

}  // namespace flintkv::internal
