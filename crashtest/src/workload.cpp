#include "crashtest/workload.hpp"

#include <algorithm>
#include <random>
#include <sstream>

namespace crashtest {

std::string to_string(op_kind k) {
  switch (k) {
    case op_kind::put: return "put";
    case op_kind::del: return "del";
    case op_kind::get: return "get";
    case op_kind::batch: return "batch";
    case op_kind::persist: return "persist";
    case op_kind::insert: return "insert";
    case op_kind::remove: return "remove";
    case op_kind::contains: return "contains";
    case op_kind::enqueue: return "enqueue";
    case op_kind::dequeue: return "dequeue";
    case op_kind::push: return "push";
    case op_kind::pop: return "pop";
    case op_kind::user: break;
  }
  auto n = static_cast<unsigned>(k);
  if (n >= static_cast<unsigned>(op_kind::user)) {
    return "user+" + std::to_string(n - static_cast<unsigned>(op_kind::user));
  }
  return "kind " + std::to_string(n);
}

void op_names::set(op_kind k, std::string name) {
  for (auto& [kind, n] : names_) {
    if (kind == k) {
      n = std::move(name);
      return;
    }
  }
  names_.emplace_back(k, std::move(name));
}

std::string op_names::operator()(op_kind k) const {
  for (const auto& [kind, n] : names_) {
    if (kind == k) return n;
  }
  return to_string(k);
}

std::size_t workload_config::max_ops() const {
  std::size_t most = writer_threads > 0 ? ops_per_writer : 0;
  if (reader_threads > 0) most = std::max(most, ops_per_reader);
  return most;
}

std::string workload_config::describe() const {
  std::ostringstream s;
  s << "w" << writer_threads << "r" << reader_threads << " o" << ops_per_writer;
  if (reader_threads > 0) s << "/" << ops_per_reader;
  s << " k" << key_space;
  return s.str();
}

workload make_workload(const workload_config& config, workload_family family,
                       std::uint64_t seed) {
  workload w;
  w.threads.resize(config.threads());
  std::mt19937_64 rng(seed);
  auto key = [&] { return 1 + rng() % std::max<std::uint64_t>(config.key_space, 1); };
  const bool sequence = family == workload_family::queue || family == workload_family::stack;
  const op_kind add = family == workload_family::queue ? op_kind::enqueue : op_kind::push;
  const op_kind take = family == workload_family::queue ? op_kind::dequeue : op_kind::pop;
  const op_kind read = family == workload_family::kv ? op_kind::get : op_kind::contains;
  for (unsigned t = 0; t < config.threads(); ++t) {
    auto& ops = w.threads[t];
    for (std::uint32_t i = 0; i < config.ops_of(t); ++i) {
      operation op;
      if (sequence) {
        // Writers enqueue (push) or dequeue (pop); readers only dequeue (pop). No keys.
        unsigned roll = t < config.writer_threads ? static_cast<unsigned>(rng() % 100) : 100;
        op.kind = roll < config.put_percent ? add : take;
        if (op.kind == add) op.value = value_id(t, i, 0);
        ops.push_back(op);
        continue;
      }
      const bool writer = t < config.writer_threads;
      if (family == workload_family::kv && writer && config.persist_percent > 0 &&
          rng() % 100 < config.persist_percent) {
        op.kind = op_kind::persist;
        ops.push_back(op);
        continue;
      }
      op.kind = read;
      op.key = key();
      unsigned roll = writer ? static_cast<unsigned>(rng() % 100) : 100;
      if (roll < config.put_percent) {
        op.kind = family == workload_family::kv ? op_kind::put : op_kind::insert;
        op.value = value_id(t, i, 0);
      } else if (roll < config.put_percent + config.del_percent) {
        op.kind = family == workload_family::kv ? op_kind::del : op_kind::remove;
      } else if (family == workload_family::kv && config.max_batch >= 2 &&
                 config.key_space >= 2 &&
                 roll < config.put_percent + config.del_percent + config.batch_percent) {
        op.kind = op_kind::batch;
        op.key = 0;
        auto most = static_cast<unsigned>(std::min<std::uint64_t>(config.max_batch,
                                                                  config.key_space));
        unsigned size = 2 + static_cast<unsigned>(rng() % (most - 1));
        op.batch_first = static_cast<std::uint32_t>(w.batch_entries.size());
        op.batch_size = size;
        std::vector<std::uint64_t> keys;
        while (keys.size() < size) {
          std::uint64_t k = key();
          if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
        }
        for (std::uint32_t e = 0; e < size; ++e) {
          bool del = rng() % 5 == 0;
          w.batch_entries.push_back({keys[e], del ? 0 : value_id(t, i, e), del});
        }
      }
      const bool write = op.kind == op_kind::put || op.kind == op_kind::del ||
                         op.kind == op_kind::batch;
      if (family == workload_family::kv && write && config.weak_percent > 0) {
        op.weak = rng() % 100 < config.weak_percent;
      }
      ops.push_back(op);
    }
  }
  return w;
}

}  // namespace crashtest
