#include "arguments.hpp"

#include <charconv>
#include <limits>

namespace flintkv::tools {

namespace {

std::string flag_text(std::string_view name, const std::optional<std::string>& value) {
  std::string out = "--" + std::string(name);
  if (value) out += "=" + *value;
  return out;
}

}  // namespace

std::uint64_t parse_number(std::string_view text, std::string_view what) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != end) {
    throw usage_error(std::string(what) + ": '" + std::string(text) +
                      "' is not a non-negative decimal number");
  }
  if (ec == std::errc::result_out_of_range) {
    throw usage_error(std::string(what) + ": '" + std::string(text) + "' is too large");
  }
  return value;
}

std::uint64_t parse_bytes(std::string_view text, std::string_view what) {
  unsigned shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      case 'T': case 't': shift = 40; break;
      default: break;
    }
  }
  std::string_view digits = shift == 0 ? text : text.substr(0, text.size() - 1);
  std::uint64_t value = parse_number(digits, what);
  if (shift != 0 && value > (std::numeric_limits<std::uint64_t>::max() >> shift)) {
    throw usage_error(std::string(what) + ": '" + std::string(text) + "' is too large");
  }
  return value << shift;
}

arguments::arguments(int argc, const char* const* argv, int first) {
  bool options_ended = false;
  for (int i = first; i < argc; ++i) {
    std::string_view word = argv[i];
    if (options_ended || !word.starts_with("--")) {
      positional_.emplace_back(word);
      continue;
    }
    if (word == "--") {
      options_ended = true;
      continue;
    }
    word.remove_prefix(2);
    std::size_t eq = word.find('=');
    std::string name(word.substr(0, eq));
    if (name.empty()) throw usage_error("'" + std::string(argv[i]) + "' is not a flag");
    std::optional<std::string> value;
    if (eq != std::string_view::npos) value.emplace(word.substr(eq + 1));
    flags_[name] = std::move(value);
  }
}

bool arguments::flag(std::string_view name) {
  asked_.emplace(name);
  auto it = flags_.find(name);
  if (it == flags_.end()) return false;
  const std::optional<std::string>& v = it->second;
  if (!v || *v == "1" || *v == "true") return true;
  if (*v == "0" || *v == "false") return false;
  throw usage_error(flag_text(name, v) + ": expected --" + std::string(name) + ", or =1/=0, " +
                    "or =true/=false");
}

std::optional<std::string> arguments::text(std::string_view name) {
  asked_.emplace(name);
  auto it = flags_.find(name);
  if (it == flags_.end()) return std::nullopt;
  if (!it->second) {
    throw usage_error("--" + std::string(name) + " needs a value: --" + std::string(name) +
                      "=...");
  }
  return it->second;
}

std::uint64_t arguments::number(std::string_view name, std::uint64_t fallback,
                                std::uint64_t min, std::uint64_t max) {
  std::optional<std::string> t = text(name);
  if (!t) return fallback;
  std::string what = flag_text(name, t);
  std::uint64_t v = parse_number(*t, what);
  if (v < min || v > max) {
    throw usage_error(what + ": must be between " + std::to_string(min) + " and " +
                      std::to_string(max));
  }
  return v;
}

std::optional<std::uint64_t> arguments::bytes(std::string_view name, std::uint64_t min,
                                              std::uint64_t max) {
  std::optional<std::string> t = text(name);
  if (!t) return std::nullopt;
  std::string what = flag_text(name, t);
  std::uint64_t v = parse_bytes(*t, what);
  if (v < min || v > max) {
    throw usage_error(what + ": must be between " + std::to_string(min) + " and " +
                      std::to_string(max) + " bytes");
  }
  return v;
}

void arguments::reject_unused(std::string_view command) const {
  for (const auto& [name, value] : flags_) {
    if (!asked_.contains(name)) {
      throw usage_error("unknown option " + flag_text(name, value) + " for '" +
                        std::string(command) + "'");
    }
  }
}

}  // namespace flintkv::tools
