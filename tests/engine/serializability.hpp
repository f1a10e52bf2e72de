// A serializability checker for histories of transactions (and plain writes) on a key-value
// store whose writes carry versions.
//
// A test records, for each committed transaction, its snapshot, its operations in program
// order (reads: key -> value or absent; scans: a key range -> the key/values seen in it;
// writes: key -> value or a delete) and its commit version; a plain write is a transaction
// of writes only. check() replays the committed transactions one at a time in the serial
// order the store claims (commit version order; a transaction that wrote nothing at its
// snapshot, after the writer of that version) against a std::map, and requires every read
// and scan to return exactly what was recorded. When one does not, it builds the
// dependency graph of the history (ww: consecutive writers of a key; wr: the writer of the
// version a read or scan saw -> the reader; rw: the reader -> the writer of the key's next
// version) and reports the shortest cycle it finds.
//
// Thread safety: add() may be called by any number of threads at once; check() after
// they are done.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace flintkv_test::serializability {

using value = std::optional<std::string>;  // nullopt: absent (or, for a write, a delete)
using kv_list = std::vector<std::pair<std::string, std::string>>;

struct op {
  enum class kind { read, scan, write };
  kind what = kind::read;
  std::string key;                    // read, write
  value val;                          // read: what it returned; write: what it wrote
  std::optional<std::string> lo, hi;  // scan: every key k with lo <= k < hi was visited
  bool backward = false;              // scan: in descending order
  kv_list seen;                       // scan: the live keys it visited, in its order
};

struct transaction {
  std::string name;           // for reports
  std::uint64_t snapshot = 0;
  std::uint64_t version = 0;  // its commit version; 0 if it wrote nothing
  std::vector<op> ops;        // in program order

  void read(std::string key, value v) {
    ops.push_back({op::kind::read, std::move(key), std::move(v), {}, {}, false, {}});
  }
  void scan(std::optional<std::string> lo, std::optional<std::string> hi, bool backward,
            kv_list seen) {
    ops.push_back({op::kind::scan, {}, {}, std::move(lo), std::move(hi), backward,
                   std::move(seen)});
  }
  void write(std::string key, value v) {
    ops.push_back({op::kind::write, std::move(key), std::move(v), {}, {}, false, {}});
  }
  bool writes_anything() const {
    return std::any_of(ops.begin(), ops.end(), [](const op& o) { return o.what == op::kind::write; });
  }
};

class history {
 public:
  explicit history(std::map<std::string, std::string> initial = {}) : initial_(std::move(initial)) {}

  // Records a committed transaction (or a plain write).
  void add(transaction t) {
    std::lock_guard lock(mutex_);
    committed_.push_back(std::move(t));
  }
  std::size_t size() const { return committed_.size(); }

  // "" if the replay in the serial order reproduces every read and scan; else what differed
  // and the shortest cycle of the dependency graph.
  std::string check() const {
    const std::vector<const transaction*> order = serial_order();
    std::map<std::string, std::string> state = initial_;
    std::ostringstream report;
    int mismatches = 0;
    for (const transaction* t : order) {
      for (const op& o : t->ops) {
        std::string problem;
        if (o.what == op::kind::write) {
          if (o.val) {
            state[o.key] = *o.val;
          } else {
            state.erase(o.key);
          }
          continue;
        }
        if (o.what == op::kind::read) {
          auto it = state.find(o.key);
          const value expected = it == state.end() ? value{} : value{it->second};
          if (expected != o.val) {
            problem = "read of '" + o.key + "' returned " + show(o.val) +
                      "; in the serial order it is " + show(expected);
          }
        } else {
          const kv_list expected = scan_of(state, o);
          if (expected != o.seen) {
            problem = "scan of " + show_range(o) + " saw " + show(o.seen) +
                      "; in the serial order it sees " + show(expected);
          }
        }
        if (!problem.empty() && mismatches++ < 5) {
          report << describe(*t) << ": " << problem << "\n";
        }
      }
    }
    if (mismatches == 0) return "";
    report << mismatches << " read(s) or scan(s) differ from the serial order.\n";
    report << smallest_cycle(order);
    return report.str();
  }

 private:
  struct edge {
    std::size_t to;
    std::string label;
  };

  // Writers by version; then those that wrote nothing, at their snapshot, after its writer.
  std::vector<const transaction*> serial_order() const {
    std::vector<const transaction*> order;
    for (const transaction& t : committed_) order.push_back(&t);
    std::stable_sort(order.begin(), order.end(), [](const transaction* a, const transaction* b) {
      const auto key = [](const transaction* t) {
        return t->version != 0 ? std::pair{t->version, 0} : std::pair{t->snapshot, 1};
      };
      return key(a) < key(b);
    });
    return order;
  }

  static kv_list scan_of(const std::map<std::string, std::string>& state, const op& o) {
    kv_list out;
    if (o.lo && o.hi && *o.hi <= *o.lo) return out;
    auto first = o.lo ? state.lower_bound(*o.lo) : state.begin();
    auto last = o.hi ? state.lower_bound(*o.hi) : state.end();
    for (auto it = first; it != last; ++it) out.emplace_back(it->first, it->second);
    if (o.backward) std::reverse(out.begin(), out.end());
    return out;
  }

  static bool in_range(const std::string& k, const op& o) {
    return (!o.lo || k >= *o.lo) && (!o.hi || k < *o.hi);
  }

  // The dependency graph over the serial order's transactions and its shortest cycle.
  std::string smallest_cycle(const std::vector<const transaction*>& order) const {
    const std::size_t n = order.size();
    // Each key's writers in version order (a transaction's last write of the key counts).
    std::map<std::string, std::vector<std::size_t>> writers;
    for (std::size_t i = 0; i < n; ++i) {
      std::set<std::string> keys;
      for (const op& o : order[i]->ops) {
        if (o.what == op::kind::write) keys.insert(o.key);
      }
      for (const std::string& k : keys) writers[k].push_back(i);
    }
    std::vector<std::vector<edge>> out(n);
    for (const auto& [k, ws] : writers) {
      for (std::size_t j = 0; j + 1 < ws.size(); ++j) {
        out[ws[j]].push_back({ws[j + 1], "ww '" + k + "'"});
      }
    }
    // A read of key k at snapshot s saw the last writer of k at or below s, and was
    // overwritten by the next one.
    const auto read_edges = [&](std::size_t reader, const std::string& k) {
      auto w = writers.find(k);
      if (w == writers.end()) return;
      const std::vector<std::size_t>& ws = w->second;
      const std::uint64_t s = order[reader]->snapshot;
      std::size_t next = 0;
      while (next < ws.size() && order[ws[next]]->version <= s) ++next;
      if (next > 0 && ws[next - 1] != reader) {
        out[ws[next - 1]].push_back({reader, "wr '" + k + "'"});
      }
      if (next < ws.size() && ws[next] != reader) out[reader].push_back({ws[next], "rw '" + k + "'"});
    };
    for (std::size_t i = 0; i < n; ++i) {
      std::set<std::string> own;  // keys it wrote before: its reads of them are its own
      for (const op& o : order[i]->ops) {
        if (o.what == op::kind::write) {
          own.insert(o.key);
        } else if (o.what == op::kind::read) {
          if (!own.count(o.key)) read_edges(i, o.key);
        } else {
          for (const auto& [k, ws] : writers) {
            if (in_range(k, o) && !own.count(k)) read_edges(i, k);
          }
        }
      }
    }
    // Shortest cycle: a breadth-first search from each transaction back to itself.
    std::vector<std::size_t> best;
    std::vector<std::string> best_labels;
    for (std::size_t s = 0; s < n; ++s) {
      std::vector<std::size_t> parent(n, SIZE_MAX);
      std::vector<std::string> via(n);
      std::vector<std::size_t> depth(n, 0);
      std::deque<std::size_t> queue{s};
      std::vector<bool> seen(n, false);
      seen[s] = true;
      bool closed = false;
      std::size_t closing = 0;
      std::string closing_label;
      while (!queue.empty() && !closed) {
        const std::size_t u = queue.front();
        queue.pop_front();
        if (!best.empty() && depth[u] + 1 >= best.size()) break;
        for (const edge& e : out[u]) {
          if (e.to == s) {
            closed = true;
            closing = u;
            closing_label = e.label;
            break;
          }
          if (seen[e.to]) continue;
          seen[e.to] = true;
          parent[e.to] = u;
          via[e.to] = e.label;
          depth[e.to] = depth[u] + 1;
          queue.push_back(e.to);
        }
      }
      if (!closed) continue;
      std::vector<std::size_t> cycle;
      std::vector<std::string> labels{closing_label};
      for (std::size_t v = closing; v != s; v = parent[v]) {
        cycle.push_back(v);
        labels.push_back(via[v]);
      }
      cycle.push_back(s);
      std::reverse(cycle.begin(), cycle.end());
      std::reverse(labels.begin(), labels.end());
      if (best.empty() || cycle.size() < best.size()) {
        best = cycle;
        best_labels = labels;
      }
    }
    if (best.empty()) {
      return "no cycle in the dependency graph: a read returned a value that no order of "
             "these transactions gives\n";
    }
    std::ostringstream s;
    s << "shortest cycle (" << best.size() << " transactions): ";
    for (std::size_t i = 0; i < best.size(); ++i) {
      s << describe(*order[best[i]]) << " -" << best_labels[i] << "-> ";
    }
    s << describe(*order[best[0]]) << "\n";
    return s.str();
  }

  static std::string describe(const transaction& t) {
    return t.name + " (snapshot " + std::to_string(t.snapshot) +
           (t.version != 0 ? ", version " + std::to_string(t.version) : std::string(", read-only")) +
           ")";
  }
  static std::string show(const value& v) { return v ? "'" + *v + "'" : "absent"; }
  static std::string show(const kv_list& l) {
    std::string s = "{";
    for (const auto& [k, v] : l) s += (s.size() > 1 ? ", " : "") + k + "=" + v;
    return s + "}";
  }
  static std::string show_range(const op& o) {
    const auto bound = [](const std::optional<std::string>& b, const char* none) {
      if (!b) return std::string(none);
      std::string s = "'";
      for (char c : *b) s += c == '\0' ? std::string("\\0") : std::string(1, c);
      return s + "'";
    };
    return "[" + bound(o.lo, "first") + ", " + bound(o.hi, "end") + ")" +
           (o.backward ? " backward" : "");
  }

  std::map<std::string, std::string> initial_;
  mutable std::mutex mutex_;
  std::deque<transaction> committed_;
};

}  // namespace flintkv_test::serializability
