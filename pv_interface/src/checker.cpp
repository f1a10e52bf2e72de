#include "pv_interface/checker.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_map>

namespace pv {

std::string violation::describe() const {
  std::ostringstream out;
  out << "thread " << thread << " at trace event " << event << " ("
      << (at_completion ? "operation completion" : "shared store")
      << ") depends on the store at offset " << offset << " (line version " << version
      << ") but only line version " << durable << " is durable";
  return out.str();
}

std::vector<violation> check_definition1(const std::vector<trace_event>& trace) {
  struct dependency {
    std::uint64_t offset;
    std::uint64_t version;
  };
  struct store_seen {
    std::uint64_t version;
  };
  std::unordered_map<std::uint64_t, std::uint64_t> durable;     // line -> durable version
  std::unordered_map<std::uint64_t, store_seen> last_pstore;    // offset -> latest p-store
  std::map<std::uint32_t, std::vector<dependency>> depends;     // thread -> dependencies
  std::map<std::uint32_t, std::vector<std::pair<std::uint64_t, std::uint64_t>>> unfenced;
  std::vector<violation> found;

  auto check = [&](std::size_t index, std::uint32_t thread, bool at_completion) {
    auto& deps = depends[thread];
    std::erase_if(deps, [&](const dependency& d) {
      std::uint64_t have = durable[d.offset / cache_line];
      if (have >= d.version) return true;  // durable for good: durable versions only grow
      found.push_back({index, thread, d.offset, d.version, have, at_completion});
      return true;  // report once
    });
  };

  for (std::size_t i = 0; i < trace.size(); ++i) {
    const trace_event& e = trace[i];
    switch (e.what) {
      case trace_event::type::load:
        if (e.persisted) {
          auto it = last_pstore.find(e.offset);
          if (it != last_pstore.end()) {
            depends[e.thread].push_back({e.offset, it->second.version});
          }
        }
        break;
      case trace_event::type::store:
        if (e.shared) check(i, e.thread, false);
        if (e.persisted) {
          last_pstore[e.offset] = {e.version};
          depends[e.thread].push_back({e.offset, e.version});
        }
        break;
      case trace_event::type::pwb:
        unfenced[e.thread].emplace_back(e.offset / cache_line, e.version);
        break;
      case trace_event::type::pfence:
        for (auto [line, version] : unfenced[e.thread]) {
          std::uint64_t& d = durable[line];
          d = std::max(d, version);
        }
        unfenced[e.thread].clear();
        break;
      case trace_event::type::complete:
        check(i, e.thread, true);
        break;
    }
  }
  return found;
}

}  // namespace pv
