#include "crashtest/checkers.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace crashtest {

namespace {

std::string hex(std::uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

const char* status_name(op_status s) {
  switch (s) {
    case op_status::not_invoked: return "not invoked";
    case op_status::pending: return "pending";
    case op_status::completed: return "completed";
  }
  return "?";
}

// Who wrote a value, if it is a value_id().
std::string value_origin(std::uint64_t v) {
  std::uint64_t thread = v >> 48;
  if (v == 0 || thread == 0) return "not a value any workload writes";
  std::ostringstream s;
  s << "would be thread " << thread - 1 << " op " << ((v >> 16) & 0xffffffff) << " entry "
    << (v & 0xffff);
  return s.str();
}

std::uint64_t op_id(unsigned thread, std::size_t op) {
  return (std::uint64_t{thread} << 32) | op;
}

}  // namespace

std::string describe_op(const workload& w, unsigned thread, std::size_t op) {
  const operation& o = w.threads[thread][op];
  std::ostringstream s;
  s << "thread " << thread << " op " << op << " (" << (o.weak ? "weak " : "") << w.names(o.kind);
  if (o.kind == op_kind::batch) {
    s << " [";
    for (std::uint32_t e = 0; e < o.batch_size; ++e) {
      const kv_write& k = w.batch_entries[o.batch_first + e];
      s << (e ? ", " : "") << (k.del ? "del " : "put ") << k.key;
      if (!k.del) s << "=" << hex(k.value);
    }
    s << "]";
  } else if (o.kind == op_kind::enqueue || o.kind == op_kind::dequeue ||
             o.kind == op_kind::push || o.kind == op_kind::pop || o.kind >= op_kind::user) {
    // No key (user kinds: a key only if it has one).
    if (o.key != 0) s << " key " << o.key;
    if (o.value != 0) s << " value " << hex(o.value);
  } else {
    s << " key " << o.key;
    if (o.value != 0) s << " value " << hex(o.value);
  }
  s << ")";
  return s.str();
}

// ---- key-value stores --------------------------------------------------------------------

namespace {

struct kv_write_ref {
  unsigned thread;
  std::size_t op;
  kv_write write;
  const op_outcome* outcome;
  bool batch;
};

enum class required_by : std::uint8_t { completion, read, batch, persist, prefix };

const char* reason(required_by r) {
  switch (r) {
    case required_by::completion: return "which completed";
    case required_by::read: return "whose value a completed get returned";
    case required_by::batch: return "whose batch survived in part, so must survive whole";
    case required_by::persist: return "which completed before a completed persist began";
    case required_by::prefix:
      return "whose version is below one that survived or must survive (weak durability "
             "keeps a prefix of the version order)";
  }
  return "?";
}

struct kv_floor {
  std::uint64_t version;
  std::size_t write;
  required_by why;
};

class kv_checker {
 public:
  kv_checker(const workload& w, const history& h) : w_(w), h_(h) { index(); }

  std::vector<std::string> check(const std::vector<kv_entry>& recovered) {
    match(recovered);
    required();
    for (const auto& [key, writes] : by_key_) check_key(key);
    return std::move(problems_);
  }

 private:
  std::string who(std::size_t wi) const {
    const kv_write_ref& r = writes_[wi];
    std::ostringstream s;
    s << describe_op(w_, r.thread, r.op) << " [" << status_name(r.outcome->status);
    if (r.outcome->status == op_status::completed) s << ", version " << r.outcome->version;
    s << "]";
    return s.str();
  }

  void problem(std::string p) { problems_.push_back(std::move(p)); }

  void add(unsigned t, std::size_t i, const kv_write& k, bool batch) {
    std::size_t wi = writes_.size();
    writes_.push_back({t, i, k, &h_.threads[t][i], batch});
    by_key_[k.key].push_back(wi);
    if (!k.del) by_value_[k.value] = wi;
  }

  void index() {
    bool reported_missing_version = false;
    for (unsigned t = 0; t < w_.threads.size(); ++t) {
      for (std::size_t i = 0; i < w_.threads[t].size(); ++i) {
        const operation& o = w_.threads[t][i];
        const op_outcome& out = h_.threads[t][i];
        if (out.status == op_status::not_invoked) continue;
        bool writes = true;
        switch (o.kind) {
          case op_kind::put: add(t, i, {o.key, o.value, false}, false); break;
          case op_kind::del: add(t, i, {o.key, 0, true}, false); break;
          case op_kind::batch:
            for (std::uint32_t e = 0; e < o.batch_size; ++e) {
              add(t, i, w_.batch_entries[o.batch_first + e], true);
            }
            break;
          default: writes = false; break;
        }
        if (!writes || out.status != op_status::completed) continue;
        if (out.version == 0) {
          if (!reported_missing_version) {
            problem("the subject reported no version for completed " + describe_op(w_, t, i) +
                    ": key-value subjects must return the version they assign");
            reported_missing_version = true;
          }
          continue;
        }
        auto [it, fresh] = version_owner_.try_emplace(out.version, op_id(t, i));
        if (!fresh && it->second != op_id(t, i)) {
          problem("version " + std::to_string(out.version) + " was assigned to both " +
                  describe_op(w_, t, i) + " and " +
                  describe_op(w_, static_cast<unsigned>(it->second >> 32),
                              it->second & 0xffffffff));
        }
      }
    }
  }

  // The version a write is known to have: assigned (completed) or learned from the state.
  std::uint64_t version_of(std::size_t wi) const {
    const kv_write_ref& r = writes_[wi];
    if (r.outcome->status == op_status::completed) return r.outcome->version;
    auto it = learned_.find(op_id(r.thread, r.op));
    return it == learned_.end() ? 0 : it->second;
  }

  void match(const std::vector<kv_entry>& recovered) {
    for (const kv_entry& e : recovered) {
      if (!recovered_.try_emplace(e.key, e).second) {
        problem("key " + std::to_string(e.key) + " is reported twice");
        continue;
      }
      auto it = by_value_.find(e.value);
      if (it == by_value_.end() || writes_[it->second].write.key != e.key) {
        std::string origin = it == by_value_.end()
                                 ? value_origin(e.value)
                                 : "written to key " +
                                       std::to_string(writes_[it->second].write.key) + " by " +
                                       who(it->second);
        problem("key " + std::to_string(e.key) + " holds value " + hex(e.value) +
                " (version " + std::to_string(e.version) +
                ") that no invoked write of this key produced: " + origin);
        continue;
      }
      std::size_t wi = it->second;
      const kv_write_ref& r = writes_[wi];
      matched_[e.key] = wi;
      if (r.outcome->status == op_status::completed && r.outcome->version != 0) {
        if (r.outcome->version != e.version) {
          problem("key " + std::to_string(e.key) + " holds value " + hex(e.value) +
                  " with version " + std::to_string(e.version) + ", but " + who(wi) +
                  " was assigned version " + std::to_string(r.outcome->version));
        }
        continue;
      }
      auto owner = version_owner_.find(e.version);
      if (owner != version_owner_.end() && owner->second != op_id(r.thread, r.op)) {
        problem("key " + std::to_string(e.key) + " holds value " + hex(e.value) + " of " +
                who(wi) + " with version " + std::to_string(e.version) +
                ", a version assigned to " +
                describe_op(w_, static_cast<unsigned>(owner->second >> 32),
                            owner->second & 0xffffffff));
      }
      auto [l, fresh] = learned_.try_emplace(op_id(r.thread, r.op), e.version);
      if (!fresh && l->second != e.version) {
        problem("entries of " + describe_op(w_, r.thread, r.op) +
                " were recovered with two versions, " + std::to_string(l->second) + " and " +
                std::to_string(e.version));
      }
      if (r.batch) survived_batches_.insert(op_id(r.thread, r.op));
    }
  }

  void raise(std::size_t wi, std::uint64_t version, required_by why) {
    std::uint64_t key = writes_[wi].write.key;
    auto [it, fresh] = floors_.try_emplace(key, kv_floor{version, wi, why});
    if (!fresh && version > it->second.version) it->second = {version, wi, why};
  }

  // Every write of the batch `id` with the batch's version (or as unknown-version required).
  void require_batch(std::uint64_t id, std::uint64_t version, required_by why,
                     const op_outcome* reader) {
    for (std::size_t wi = 0; wi < writes_.size(); ++wi) {
      if (op_id(writes_[wi].thread, writes_[wi].op) != id) continue;
      if (version != 0) {
        raise(wi, version, why);
      } else {
        unknown_[writes_[wi].write.key].push_back({wi, reader});
      }
    }
  }

  bool weak(std::size_t wi) const { return w_.threads[writes_[wi].thread][writes_[wi].op].weak; }

  // A completed persist began after the write completed.
  bool persisted(std::size_t wi) const {
    for (unsigned t = 0; t < w_.threads.size(); ++t) {
      for (std::size_t i = 0; i < w_.threads[t].size(); ++i) {
        const op_outcome& p = h_.threads[t][i];
        if (w_.threads[t][i].kind == op_kind::persist && p.status == op_status::completed &&
            history::precedes(*writes_[wi].outcome, p)) {
          return true;
        }
      }
    }
    return false;
  }

  void required() {
    for (std::size_t wi = 0; wi < writes_.size(); ++wi) {
      if (writes_[wi].outcome->status != op_status::completed || version_of(wi) == 0) continue;
      if (!weak(wi)) {
        raise(wi, version_of(wi), required_by::completion);
      } else if (persisted(wi)) {
        raise(wi, version_of(wi), required_by::persist);
      }
    }
    for (std::uint64_t id : survived_batches_) {
      require_batch(id, learned_.at(id), required_by::batch, nullptr);
    }
    for (unsigned t = 0; t < w_.threads.size(); ++t) {
      for (std::size_t i = 0; i < w_.threads[t].size(); ++i) {
        const operation& o = w_.threads[t][i];
        const op_outcome& out = h_.threads[t][i];
        if (o.kind != op_kind::get || out.status != op_status::completed || !out.found) {
          continue;
        }
        auto it = by_value_.find(out.value);
        if (it == by_value_.end() || writes_[it->second].write.key != o.key) {
          problem(describe_op(w_, t, i) + " returned value " + hex(out.value) +
                  " that no invoked write of this key produced");
          continue;
        }
        std::size_t wi = it->second;
        if (weak(wi)) continue;  // a weak write may be read and then lost (prefix() below)
        std::uint64_t version = out.version != 0 ? out.version : version_of(wi);
        if (writes_[wi].outcome->status == op_status::completed && out.version != 0 &&
            out.version != writes_[wi].outcome->version) {
          problem(describe_op(w_, t, i) + " returned version " + std::to_string(out.version) +
                  " for the value of " + who(wi));
        }
        require_batch(op_id(writes_[wi].thread, writes_[wi].op), version, required_by::read,
                      &out);
      }
    }
    prefix();
  }

  // Weak durability keeps a prefix of the version order: every write whose version is
  // below the newest one that survived or must survive is required too.
  void prefix() {
    std::uint64_t cut = 0;
    for (const auto& [key, f] : floors_) cut = std::max(cut, f.version);
    for (const auto& [key, e] : recovered_) cut = std::max(cut, e.version);
    for (std::size_t wi = 0; wi < writes_.size(); ++wi) {
      const std::uint64_t v = version_of(wi);
      if (v != 0 && v <= cut) raise(wi, v, required_by::prefix);
    }
  }

  // A delete of `key` that may be the newest surviving write after `floor`.
  bool later_delete_possible(std::uint64_t key, const kv_floor* floor,
                             const kv_write_ref* after) const {
    for (std::size_t wi : by_key_.at(key)) {
      const kv_write_ref& d = writes_[wi];
      if (!d.write.del) continue;
      if (floor != nullptr && wi == floor->write) return true;
      std::uint64_t v = version_of(wi);
      bool newer = v == 0 ? d.outcome->status != op_status::completed
                          : (floor == nullptr || v > floor->version);
      if (after != nullptr && history::precedes(*d.outcome, *after->outcome)) newer = false;
      if (newer) return true;
    }
    return false;
  }

  void check_key(std::uint64_t key) {
    const kv_floor* floor = nullptr;
    if (auto f = floors_.find(key); f != floors_.end()) floor = &f->second;
    const std::vector<std::pair<std::size_t, const op_outcome*>>* unknown = nullptr;
    if (auto u = unknown_.find(key); u != unknown_.end()) unknown = &u->second;
    auto rec = recovered_.find(key);
    std::string k = "key " + std::to_string(key);
    if (rec == recovered_.end()) {
      if (floor != nullptr && !later_delete_possible(key, floor, nullptr)) {
        problem(k + " is absent, but " + who(floor->write) + " " + reason(floor->why) +
                " must survive (version " + std::to_string(floor->version) + ")");
      }
      if (unknown != nullptr) {
        for (const auto& [wi, reader] : *unknown) {
          if (!writes_[wi].write.del && !later_delete_possible(key, nullptr, &writes_[wi])) {
            problem(k + " is absent, but " + who(wi) + " " + reason(required_by::read) +
                    " must survive");
          }
        }
      }
      return;
    }
    auto m = matched_.find(key);
    if (m == matched_.end()) return;  // an invented value, already reported
    std::size_t wi = m->second;
    const kv_entry& e = rec->second;
    if (floor != nullptr) {
      if (e.version < floor->version) {
        problem(k + " holds " + hex(e.value) + " of " + who(wi) + " at version " +
                std::to_string(e.version) + ", older than " + who(floor->write) + " " +
                reason(floor->why) + " (version " + std::to_string(floor->version) + ")");
      } else if (e.version == floor->version && wi != floor->write) {
        problem(k + " holds " + hex(e.value) + " of " + who(wi) + " at version " +
                std::to_string(e.version) + ", the version of " + who(floor->write));
      }
    }
    if (unknown != nullptr) {
      for (const auto& [ri, reader] : *unknown) {
        if (ri != wi && history::precedes(*writes_[wi].outcome, *writes_[ri].outcome)) {
          problem(k + " holds " + hex(e.value) + " of " + who(wi) + ", which completed before " +
                  who(ri) + " began; the latter " + reason(required_by::read) +
                  " and must survive");
        }
      }
    }
  }

  const workload& w_;
  const history& h_;
  std::vector<kv_write_ref> writes_;
  std::map<std::uint64_t, std::vector<std::size_t>> by_key_;
  std::unordered_map<std::uint64_t, std::size_t> by_value_;
  std::unordered_map<std::uint64_t, std::uint64_t> version_owner_;  // version -> op id
  std::unordered_map<std::uint64_t, std::uint64_t> learned_;        // op id -> version
  std::unordered_set<std::uint64_t> survived_batches_;
  std::unordered_map<std::uint64_t, kv_entry> recovered_;
  std::unordered_map<std::uint64_t, std::size_t> matched_;
  std::unordered_map<std::uint64_t, kv_floor> floors_;
  std::unordered_map<std::uint64_t, std::vector<std::pair<std::size_t, const op_outcome*>>>
      unknown_;
  std::vector<std::string> problems_;
};

}  // namespace

std::vector<std::string> check_kv(const workload& w, const history& h,
                                  const std::vector<kv_entry>& recovered) {
  return kv_checker(w, h).check(recovered);
}

// ---- sets and maps -----------------------------------------------------------------------

namespace {

// The state of one key after an operation: absent, present with a known value, or present
// with whichever value an earlier insert left.
struct key_state {
  bool present = false;
  std::optional<std::uint64_t> value;
  std::size_t thread = 0, op = 0;  // the operation that leaves it
  bool initial = false;

  bool allows(bool rec_present, std::uint64_t rec_value, bool values) const {
    if (present != rec_present) return false;
    return !present || !values || !value || *value == rec_value;
  }
};

}  // namespace

std::vector<std::string> check_map(const workload& w, const history& h,
                                   const std::vector<kv_entry>& recovered,
                                   map_check_options options) {
  std::vector<std::string> problems;
  struct op_ref {
    unsigned thread;
    std::size_t op;
  };
  std::map<std::uint64_t, std::vector<op_ref>> by_key;
  std::unordered_map<std::uint64_t, std::unordered_set<std::uint64_t>> inserted;  // key -> values
  for (unsigned t = 0; t < w.threads.size(); ++t) {
    for (std::size_t i = 0; i < w.threads[t].size(); ++i) {
      const operation& o = w.threads[t][i];
      if (h.threads[t][i].status == op_status::not_invoked) continue;
      by_key[o.key].push_back({t, i});
      if (o.kind == op_kind::insert) inserted[o.key].insert(o.value);
    }
  }

  std::unordered_map<std::uint64_t, const kv_entry*> rec;
  for (std::size_t n = 0; n < recovered.size(); ++n) {
    const kv_entry& e = recovered[n];
    if (!rec.try_emplace(e.key, &e).second) {
      problems.push_back("key " + std::to_string(e.key) + " is reported twice");
    }
    if (options.ordered && n > 0 && recovered[n - 1].key >= e.key) {
      problems.push_back("keys out of order: " + std::to_string(recovered[n - 1].key) +
                         " before " + std::to_string(e.key));
    }
    auto ins = inserted.find(e.key);
    if (ins == inserted.end()) {
      problems.push_back("key " + std::to_string(e.key) + " is present but was never inserted");
    } else if (options.values && !ins->second.contains(e.value)) {
      problems.push_back("key " + std::to_string(e.key) + " holds value " + hex(e.value) +
                         " that no insert of this key wrote");
    }
  }

  for (const auto& [key, ops] : by_key) {
    std::vector<key_state> candidates;
    bool any_completed = false;
    for (const op_ref& r : ops) {
      const op_outcome& out = h.threads[r.thread][r.op];
      if (out.status == op_status::completed) any_completed = true;
    }
    for (const op_ref& r : ops) {
      const operation& o = w.threads[r.thread][r.op];
      const op_outcome& out = h.threads[r.thread][r.op];
      key_state s;
      s.thread = r.thread;
      s.op = r.op;
      bool completed = out.status == op_status::completed;
      switch (o.kind) {
        case op_kind::insert:
          s.present = true;
          if (!completed || out.found) s.value = o.value;  // a failed insert changes nothing
          break;
        case op_kind::remove: s.present = false; break;
        case op_kind::contains:
          if (!completed) continue;  // a pending read tells nothing
          s.present = out.found;
          if (out.found) s.value = out.value;
          break;
        default: continue;
      }
      if (completed) {
        bool overtaken = std::any_of(ops.begin(), ops.end(), [&](const op_ref& p) {
          return history::precedes(out, h.threads[p.thread][p.op]) &&
                 h.threads[p.thread][p.op].status == op_status::completed;
        });
        if (overtaken) continue;
      }
      candidates.push_back(s);
    }
    if (!any_completed) {
      key_state start;
      start.initial = true;
      candidates.push_back(start);
    }

    auto it = rec.find(key);
    bool present = it != rec.end();
    std::uint64_t value = present ? it->second->value : 0;
    bool allowed = std::any_of(candidates.begin(), candidates.end(), [&](const key_state& s) {
      return s.allows(present, value, options.values);
    });
    if (allowed) continue;
    std::ostringstream s;
    s << "key " << key << " is " << (present ? "present" : "absent");
    if (present && options.values) s << " with value " << hex(value);
    s << "; allowed are the states after:";
    for (const key_state& c : candidates) {
      s << "\n    " << (c.initial ? std::string("the start (absent)")
                                  : describe_op(w, static_cast<unsigned>(c.thread), c.op) +
                                        " [" +
                                        status_name(h.threads[c.thread][c.op].status) + "]")
        << " -> " << (c.present ? "present" : "absent");
    }
    problems.push_back(s.str());
  }
  return problems;
}

// ---- queues and stacks -------------------------------------------------------------------

namespace {

class sequence_checker {
 public:
  sequence_checker(const workload& w, const history& h, bool lifo)
      : w_(w), h_(h), lifo_(lifo),
        add_(lifo ? op_kind::push : op_kind::enqueue),
        take_(lifo ? op_kind::pop : op_kind::dequeue),
        container_(lifo ? "stack" : "queue") {}

  std::vector<std::string> check(const std::vector<kv_entry>& recovered) {
    index();
    read_state(recovered);
    missing_values();
    order();
    return std::move(problems_);
  }

 private:
  struct op_ref {
    unsigned thread;
    std::size_t op;
  };

  const op_outcome& out(op_ref r) const { return h_.threads[r.thread][r.op]; }
  std::string who(op_ref r) const {
    return describe_op(w_, r.thread, r.op) + " [" + status_name(out(r).status) + "]";
  }
  std::string name(op_kind k) const { return w_.names(k); }
  void problem(std::string p) { problems_.push_back(std::move(p)); }

  void index() {
    for (unsigned t = 0; t < w_.threads.size(); ++t) {
      for (std::size_t i = 0; i < w_.threads[t].size(); ++i) {
        const operation& o = w_.threads[t][i];
        const op_outcome& oc = h_.threads[t][i];
        if (oc.status == op_status::not_invoked) continue;
        if (o.kind == add_) {
          adds_.emplace(o.value, op_ref{t, i});
        } else if (o.kind == take_) {
          if (oc.status == op_status::pending) {
            pending_takes_.push_back({t, i});
          } else if (oc.found) {
            takes_.push_back({t, i});
          }
        }
      }
    }
    for (op_ref r : takes_) {
      std::uint64_t v = out(r).value;
      if (!adds_.contains(v)) {
        problem(who(r) + " returned value " + hex(v) + " that no invoked " + name(add_) +
                " wrote: " + value_origin(v));
        continue;
      }
      auto [it, fresh] = taken_.emplace(v, r);
      if (!fresh) {
        problem("value " + hex(v) + " was returned twice: by " + who(it->second) + " and by " +
                who(r));
      }
    }
  }

  void read_state(const std::vector<kv_entry>& recovered) {
    for (std::size_t pos = 0; pos < recovered.size(); ++pos) {
      std::uint64_t v = recovered[pos].value;
      if (!position_.emplace(v, pos).second) {
        problem("value " + hex(v) + " is in the " + container_ + " twice (positions " +
                std::to_string(position_.at(v)) + " and " + std::to_string(pos) + ")");
        continue;
      }
      auto a = adds_.find(v);
      if (a == adds_.end()) {
        problem("value " + hex(v) + " at position " + std::to_string(pos) + " of the " +
                container_ + " was written by no invoked " + name(add_) + ": " +
                value_origin(v));
        continue;
      }
      if (auto t = taken_.find(v); t != taken_.end()) {
        problem("value " + hex(v) + " of " + who(a->second) + " is still in the " + container_ +
                " (position " + std::to_string(pos) + "), but " + who(t->second) +
                " returned it");
      }
      present_.push_back({v, pos});
    }
  }

  // Values whose add completed, in no completed take, not in the state: each one needs a
  // pending take that may have removed it (missing_ lists them if there are enough).
  void missing_values() {
    std::vector<std::uint64_t> missing;
    for (const auto& [v, r] : adds_) {
      if (out(r).status != op_status::completed) continue;
      if (taken_.contains(v) || position_.contains(v)) continue;
      missing.push_back(v);
    }
    std::sort(missing.begin(), missing.end());
    if (missing.size() > pending_takes_.size()) {
      std::ostringstream s;
      s << missing.size() << " value(s) whose " << name(add_) << " completed are lost: in no "
        << "completed " << name(take_) << " and not in the " << container_ << ", and only "
        << pending_takes_.size() << " " << name(take_) << "(s) were pending to have taken them:";
      for (std::size_t i = 0; i < missing.size() && i < 8; ++i) {
        s << "\n    " << who(adds_.at(missing[i]));
      }
      if (missing.size() > 8) s << "\n    (" << missing.size() - 8 << " more)";
      problem(s.str());
      return;  // lost, not taken: the order rules below for taken values do not apply
    }
    missing_ = std::move(missing);
  }

  void order() {
    // Among the values still there.
    for (const auto& [a, pa] : present_) {
      for (const auto& [b, pb] : present_) {
        if (!history::precedes(out(adds_.at(a)), out(adds_.at(b)))) continue;
        // a's add completed before b's began: FIFO puts a nearer the front, LIFO nearer the
        // bottom (b is then nearer the top, the front of the state).
        bool wrong = lifo_ ? pb > pa : pa > pb;
        if (wrong) {
          problem("order: " + hex(a) + " (position " + std::to_string(pa) + ") and " + hex(b) +
                  " (position " + std::to_string(pb) + "): " + who(adds_.at(a)) +
                  " completed before " + who(adds_.at(b)) + " began, so " +
                  (lifo_ ? hex(b) + " must lie above " + hex(a)
                         : hex(a) + " must come first"));
        }
      }
    }
    if (lifo_) {
      lifo_against_gone();
    } else {
      fifo_against_gone();
    }
  }

  // FIFO: a value still queued was not overtaken by one enqueued after it that is gone.
  void fifo_against_gone() {
    auto against = [&](std::uint64_t gone, const std::string& how) {
      for (const auto& [r, pr] : present_) {
        if (history::precedes(out(adds_.at(r)), out(adds_.at(gone)))) {
          problem("order: " + hex(r) + " is still in the queue (position " + std::to_string(pr) +
                  "), but " + hex(gone) + ", whose " + who(adds_.at(gone)) + " began after " +
                  who(adds_.at(r)) + " completed, " + how);
        }
      }
    };
    for (const auto& [v, r] : taken_) {
      if (adds_.contains(v)) against(v, "was returned by " + who(r));
    }
    for (std::uint64_t v : missing_) against(v, "is gone (taken by a pending " + name(take_) + "?)");
  }

  // LIFO: a completed pop returned the top; a pending pop may have taken a missing value
  // only if nothing still there was certainly above it.
  void lifo_against_gone() {
    for (const auto& [x, p] : taken_) {
      auto ax = adds_.find(x);
      if (ax == adds_.end()) continue;
      for (const auto& [r, pr] : present_) {
        const op_outcome& push_r = out(adds_.at(r));
        if (history::precedes(out(ax->second), push_r) && history::precedes(push_r, out(p))) {
          problem("order: " + hex(r) + " is still in the stack (position " + std::to_string(pr) +
                  "), but " + who(adds_.at(r)) + " pushed it above " + hex(x) +
                  " before " + who(p) + " began and returned " + hex(x));
        }
      }
    }
    for (std::uint64_t m : missing_) {
      const op_outcome& push_m = out(adds_.at(m));
      bool some_pop_can = std::any_of(
          pending_takes_.begin(), pending_takes_.end(), [&](op_ref q) {
            return std::none_of(present_.begin(), present_.end(), [&](const auto& rp) {
              const op_outcome& push_r = out(adds_.at(rp.first));
              return history::precedes(push_m, push_r) && history::precedes(push_r, out(q));
            });
          });
      if (!pending_takes_.empty() && !some_pop_can) {
        problem("order: " + hex(m) + " of " + who(adds_.at(m)) + " is gone, but every pending " +
                name(take_) + " began when a value still in the stack had been pushed above it");
      }
    }
  }

  const workload& w_;
  const history& h_;
  const bool lifo_;
  const op_kind add_, take_;
  const std::string container_;
  std::map<std::uint64_t, op_ref> adds_;      // value -> its add
  std::vector<op_ref> takes_;                 // completed takes that returned a value
  std::vector<op_ref> pending_takes_;
  std::map<std::uint64_t, op_ref> taken_;     // value -> the completed take that returned it
  std::unordered_map<std::uint64_t, std::size_t> position_;  // value -> position in the state
  std::vector<std::pair<std::uint64_t, std::size_t>> present_;  // added values in the state
  std::vector<std::uint64_t> missing_;
  std::vector<std::string> problems_;
};

}  // namespace

std::vector<std::string> check_queue(const workload& w, const history& h,
                                     const std::vector<kv_entry>& recovered) {
  return sequence_checker(w, h, false).check(recovered);
}

std::vector<std::string> check_stack(const workload& w, const history& h,
                                     const std::vector<kv_entry>& recovered) {
  return sequence_checker(w, h, true).check(recovered);
}

}  // namespace crashtest
