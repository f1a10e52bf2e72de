#include "allocators/error.hpp"

namespace alloc {

std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::ok: return "ok";
    case errc::not_found: return "not found";
    case errc::corruption: return "corruption";
    case errc::invalid_argument: return "invalid argument";
    case errc::io_error: return "I/O error";
    case errc::no_space: return "no space";
    case errc::busy: return "busy";
  }
  return "?";
}

std::string error::to_string() const {
  std::string s(alloc::to_string(code_));
  if (!message_.empty()) s += ": " + message_;
  return s;
}

}  // namespace alloc
