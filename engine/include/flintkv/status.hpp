// The result of every FlintKV call. No exception crosses the API: a call reports what went
// wrong in its Status, with a message naming the file, limit or mismatch.
//
// Thread safety: a Status is a value; distinct objects may be used from distinct threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flintkv {

class [[nodiscard]] Status {
 public:
  enum class Code : std::uint8_t {
    kOk = 0,
    kNotFound,
    kCorruption,
    kInvalidArgument,
    kIOError,
    kNoSpace,
    kBusy,
    kNotSupported,
  };

  Status() noexcept = default;

  static Status OK() { return {}; }
  static Status NotFound(std::string_view msg) { return {Code::kNotFound, msg}; }
  static Status Corruption(std::string_view msg) { return {Code::kCorruption, msg}; }
  static Status InvalidArgument(std::string_view msg) { return {Code::kInvalidArgument, msg}; }
  static Status IOError(std::string_view msg) { return {Code::kIOError, msg}; }
  static Status NoSpace(std::string_view msg) { return {Code::kNoSpace, msg}; }
  static Status Busy(std::string_view msg) { return {Code::kBusy, msg}; }
  static Status NotSupported(std::string_view msg) { return {Code::kNotSupported, msg}; }

  bool ok() const noexcept { return code_ == Code::kOk; }
  bool IsNotFound() const noexcept { return code_ == Code::kNotFound; }
  bool IsCorruption() const noexcept { return code_ == Code::kCorruption; }
  bool IsInvalidArgument() const noexcept { return code_ == Code::kInvalidArgument; }
  bool IsIOError() const noexcept { return code_ == Code::kIOError; }
  bool IsNoSpace() const noexcept { return code_ == Code::kNoSpace; }
  bool IsBusy() const noexcept { return code_ == Code::kBusy; }
  bool IsNotSupported() const noexcept { return code_ == Code::kNotSupported; }

  Code code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "OK", or the code's name, ": ", and the message.
  std::string ToString() const;

 private:
  Status(Code code, std::string_view msg) : code_(code), message_(msg) {}

  Code code_ = Code::kOk;
  std::string message_;
};

std::string_view to_string(Status::Code code) noexcept;

}  // namespace flintkv
