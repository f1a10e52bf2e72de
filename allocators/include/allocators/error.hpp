// Errors of the allocators layer: a code and a message that names the file, the offset or the
// limit involved. Functions that can fail return result<T> (a value or an error); nothing in
// this layer throws across its API.
//
// The codes are those of the engine's Status, so the engine maps them one to one.
//
// Thread safety: plain values.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace alloc {

enum class errc : std::uint8_t {
  ok,
  not_found,         // the file does not exist
  corruption,        // the bytes are not what a valid pool holds
  invalid_argument,  // a request or a file that this build cannot accept
  io_error,          // the operating system refused (open, map, lock, sync)
  no_space,          // the pool (or the device) is full
  busy,              // the pool is open elsewhere
};

std::string_view to_string(errc code) noexcept;

class error {
 public:
  error(errc code, std::string message) : code_(code), message_(std::move(message)) {}

  errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "<code>: <message>".
  std::string to_string() const;

 private:
  errc code_;
  std::string message_;
};

// A T, or the error that prevented it. result<void> carries only the error, if any.
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  // REQUIRES: e.code() != errc::ok.
  result(alloc::error e) : state_(std::in_place_index<1>, std::move(e)) {
    assert(error().code() != errc::ok);
  }

  bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  // REQUIRES: has_value().
  T& value() & {
    assert(has_value());
    return *std::get_if<0>(&state_);
  }
  const T& value() const& {
    assert(has_value());
    return *std::get_if<0>(&state_);
  }
  T&& value() && {
    assert(has_value());
    return std::move(*std::get_if<0>(&state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // REQUIRES: !has_value().
  const alloc::error& error() const& {
    assert(!has_value());
    return *std::get_if<1>(&state_);
  }
  alloc::error&& error() && {
    assert(!has_value());
    return std::move(*std::get_if<1>(&state_));
  }
  errc code() const noexcept { return has_value() ? errc::ok : error().code(); }

 private:
  std::variant<T, alloc::error> state_;
};

template <>
class [[nodiscard]] result<void> {
 public:
  result() = default;
  result(alloc::error e) : error_(std::move(e)) {}

  bool has_value() const noexcept { return error_.code() == errc::ok; }
  explicit operator bool() const noexcept { return has_value(); }

  // REQUIRES: !has_value().
  const alloc::error& error() const& {
    assert(!has_value());
    return error_;
  }
  alloc::error&& error() && {
    assert(!has_value());
    return std::move(error_);
  }
  errc code() const noexcept { return error_.code(); }

 private:
  alloc::error error_{errc::ok, {}};
};

using status = result<void>;

}  // namespace alloc
