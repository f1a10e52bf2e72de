// JSON text for the benchmark drivers' results (`flintkv bench --json`, bench/peers):
//
//   out += "\"configuration\": \"" + json_escape(text) + "\", \"seconds\": " + json_number(s);
//
// Thread safety: pure functions.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

namespace flintkv::tools {

// `s` with the characters a JSON string cannot hold as they are escaped.
inline std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char u[8];
          std::snprintf(u, sizeof u, "\\u%04x", static_cast<unsigned>(c));
          out += u;
        } else {
          out += c;
        }
    }
  }
  return out;
}

// A JSON number; null for infinities and NaN.
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace flintkv::tools
