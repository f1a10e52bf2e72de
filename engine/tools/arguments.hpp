// Command-line parsing for the flintkv tool: positional words and `--name[=value]` flags.
//
//   arguments args(argc, argv, 2);          // words after the subcommand
//   bool reverse = args.flag("reverse");
//   std::uint64_t num = args.number("num", 1000000, 1, kMax);
//   args.reject_unused("scan");              // any flag nobody asked for is an error
//
// A word that starts with "--" is a flag, up to a bare "--": every word after it is
// positional (for keys and values that start with "--"). A repeated flag keeps its last value.
// Malformed input throws usage_error, whose message names the flag and the expected form;
// the tool prints it with the usage text and exits with status 2.
//
// Thread safety: an arguments object is used by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace flintkv::tools {

class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A decimal unsigned integer with nothing around it; throws usage_error naming `what`.
std::uint64_t parse_number(std::string_view text, std::string_view what);
// A byte count: a decimal number with an optional binary suffix K, M, G or T (KiB...).
std::uint64_t parse_bytes(std::string_view text, std::string_view what);

class arguments {
 public:
  // Parses argv[first] .. argv[argc - 1].
  arguments(int argc, const char* const* argv, int first);

  const std::vector<std::string>& positional() const noexcept { return positional_; }

  // A boolean flag: absent -> false; `--name`, `--name=1`, `--name=true` -> true;
  // `--name=0`, `--name=false` -> false.
  bool flag(std::string_view name);
  // The text after `--name=`; nullopt if the flag is absent. `--name` alone is an error.
  std::optional<std::string> text(std::string_view name);
  // A number flag within [min, max]; `fallback` when absent.
  std::uint64_t number(std::string_view name, std::uint64_t fallback, std::uint64_t min,
                       std::uint64_t max);
  // A byte-count flag (suffixes K, M, G, T) within [min, max]; nullopt when absent.
  std::optional<std::uint64_t> bytes(std::string_view name, std::uint64_t min,
                                     std::uint64_t max);

  // Throws usage_error naming the first flag that no call above asked about.
  void reject_unused(std::string_view command) const;

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::optional<std::string>, std::less<>> flags_;  // name -> value
  std::set<std::string, std::less<>> asked_;
};

}  // namespace flintkv::tools
