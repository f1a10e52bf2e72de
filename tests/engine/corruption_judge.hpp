// The classifier of the corruption fuzz test (corruption_test.cpp): fed what one trial's
// session observed, in order, it decides the trial's outcome. It knows nothing about pools
// or damage, so its own tests can feed it made-up observations.
//
// Outcomes (the first failure observed wins; with no failure, any detection makes the trial
// `detected`, else it is `intact`):
//   intact        every read returned exactly the expected data; the write and the reopen
//                 worked and the reopened store held the expected data and the new key.
//   detected      some step reported the damage, and nothing read before or after it was
//                 wrong. What counts as reporting the damage: Status::Corruption from any
//                 step; InvalidArgument from DB::Check or DB::Open only (a damaged header can
//                 make the file look like another format, layout or build, which open
//                 refuses with InvalidArgument naming the file).
//   wrong data    a read returned a value that was not written, a key that should be absent,
//                 reported absent a key that should be there, or a scan that skipped or
//                 added a key, or left the order. With a pending (interrupted) write, either
//                 state before or after it is right, but the same one for every read.
//   wrong status  a step failed with a code that does not say the pool is damaged
//                 (IOError, NoSpace, NotFound from Open or Put, InvalidArgument from a read
//                 or a write of valid arguments).
//   changed       the file's bytes changed during DB::Check, during a refused DB::Open, or
//                 during the reads of an open store (Get and iterators must not write).
//   disagree      DB::Check returned OK, but DB::Open or a read then reported the pool
//                 damaged: Check must run every validation that open and the reads run.
//   late          the first session saw nothing wrong and a write was acknowledged, but the
//                 reopen (or a read after it) reported damage: the damaged pool was accepted
//                 and written to, and only then refused.
//   crash, hang   decided by the parent process (a signal, a sanitizer's exit, the time
//                 limit); see forked_trial.hpp.
//
// Thread safety: one judge per trial, used by one thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flintkv/status.hpp"

namespace corruption_test {

// Stored in replay lines and summaries by name only.
enum class outcome : int {
  intact,
  detected,
  // failures:
  wrong_data,
  wrong_status,
  changed,
  disagree,
  late,
  crash,
  hang,
};

inline constexpr outcome kOutcomes[] = {
    outcome::intact, outcome::detected,  outcome::wrong_data, outcome::wrong_status,
    outcome::changed, outcome::disagree, outcome::late,       outcome::crash,
    outcome::hang};

constexpr bool is_failure(outcome o) { return o >= outcome::wrong_data; }

inline std::string_view to_string(outcome o) {
  switch (o) {
    case outcome::intact: return "intact";
    case outcome::detected: return "detected";
    case outcome::wrong_data: return "wrong data";
    case outcome::wrong_status: return "wrong status";
    case outcome::changed: return "changed";
    case outcome::disagree: return "disagree";
    case outcome::late: return "late";
    case outcome::crash: return "crash";
    case outcome::hang: return "hang";
  }
  return "?";
}

using contents = std::map<std::string, std::string>;
using kv_list = std::vector<std::pair<std::string, std::string>>;

// Up to 48 bytes of `s`, printable, with its length when cut.
inline std::string shown(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < 48; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  out += "'";
  if (s.size() > 48) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

class trial_judge {
 public:
  // `candidates`: the states a correct store may show (one, or the states before and after
  // a write that was interrupted). REQUIRES: at least one.
  explicit trial_judge(std::vector<contents> candidates)
      : candidates_(std::move(candidates)), alive_(candidates_.size(), true) {}

  // The step that the next observations belong to (named in failure details).
  void at(std::string step) { step_ = std::move(step); }
  const std::string& step() const { return step_; }

  // ---- observations, in the order the session makes them --------------------------------

  void on_check(const flintkv::Status& s) {
    check_passed_ = s.ok();
    if (!s.ok()) damage_reported(s, /*invalid_argument_counts=*/true);
  }

  // The first DB::Open. Returns true if the store opened.
  bool on_open(const flintkv::Status& s) {
    if (s.ok()) return true;
    damage_reported(s, /*invalid_argument_counts=*/true);
    return false;
  }

  // Get(key): `value` is looked at only when `s` is OK.
  void on_get(std::string_view key, const flintkv::Status& s, std::string_view value) {
    if (!s.ok() && !s.IsNotFound()) {
      damage_reported(s, false);
      return;
    }
    const bool found = s.ok();
    keep_candidates(
        [&](const contents& c) {
          auto it = c.find(std::string(key));
          return found ? it != c.end() && it->second == value : it == c.end();
        },
        [&](const contents& c) {
          auto it = c.find(std::string(key));
          std::string want = it == c.end() ? "NotFound" : shown(it->second);
          std::string got = found ? shown(value) : "NotFound";
          return "Get(" + shown(key) + ") returned " + got + ", expected " + want;
        });
  }

  // A full scan (SeekToFirst + Next, or SeekToLast + Prev): what it returned, in order, and
  // the iterator's status when it stopped. A scan that stops with an error must have
  // returned a prefix of the right sequence.
  void on_scan(bool forward, const kv_list& seen, const flintkv::Status& end) {
    const bool complete = end.ok();
    keep_candidates(
        [&](const contents& c) { return scan_mismatch(c, forward, seen, complete).empty(); },
        [&](const contents& c) { return scan_mismatch(c, forward, seen, complete); });
    if (!end.ok()) damage_reported(end, false);
  }

  // The Put of a new key after the reads. Returns true if it was acknowledged; the key is
  // then expected in every state.
  bool on_put(std::string_view key, std::string_view value, const flintkv::Status& s) {
    if (!s.ok()) {
      damage_reported(s, false);
      return false;
    }
    for (contents& c : candidates_) c[std::string(key)] = std::string(value);
    return true;
  }

  // The reopen after the write. Returns true if the store opened; from here on, every
  // report of damage is `late`.
  bool on_reopen(const flintkv::Status& s) {
    second_session_ = true;
    if (s.ok()) return true;
    damage_reported(s, /*invalid_argument_counts=*/true);
    return false;
  }

  // The file changed where it must not have; `offset` is its first differing byte (or
  // its old size, when the size changed).
  void on_changed(std::string_view when, std::uint64_t offset) {
    fail(outcome::changed, "the file changed during " + std::string(when) + " (first at offset " +
                               std::to_string(offset) + ")");
  }

  // A crash or a hang, decided by the parent.
  void on_died(outcome o, std::string detail) { fail(o, std::move(detail)); }

  // ---- the verdict -----------------------------------------------------------------------

  // True once a step reported the pool damaged (the session then writes nothing).
  bool damage_seen() const { return !detection_.empty(); }
  bool failed() const { return failure_ != outcome::intact; }

  outcome verdict() const {
    if (failed()) return failure_;
    return damage_seen() ? outcome::detected : outcome::intact;
  }
  // The first failure, or else the first report of damage ("" if neither), and its step.
  const std::string& detail() const { return failed() ? failure_detail_ : detection_; }
  const std::string& verdict_step() const { return failed() ? failure_step_ : detection_step_; }

 private:
  // A step returned a non-OK status that is not a read's NotFound.
  void damage_reported(const flintkv::Status& s, bool invalid_argument_counts) {
    const bool names_damage = s.IsCorruption() || (invalid_argument_counts && s.IsInvalidArgument());
    const std::string what = s.ToString();
    if (!names_damage) {
      fail(outcome::wrong_status, what);
      return;
    }
    if (second_session_) {
      fail(outcome::late, "the damaged pool was accepted and written to, then " + what);
    } else if (check_passed_) {
      fail(outcome::disagree, "DB::Check returned OK, then " + what);
    }
    if (detection_.empty()) {
      detection_ = what;
      detection_step_ = step_;
    }
  }

  void fail(outcome o, std::string detail) {
    if (failed()) return;
    failure_ = o;
    failure_step_ = step_;
    failure_detail_ = std::move(detail);
  }

  // Drops the candidates that `fits` rejects; if none is left, the read was wrong
  // (`explain` says how, against the first candidate still alive before this read).
  template <class Fits, class Explain>
  void keep_candidates(Fits fits, Explain explain) {
    std::size_t first_alive = candidates_.size();
    bool any = false;
    std::vector<bool> next(candidates_.size(), false);
    for (std::size_t i = 0; i < candidates_.size(); ++i) {
      if (!alive_[i]) continue;
      if (first_alive == candidates_.size()) first_alive = i;
      next[i] = fits(candidates_[i]);
      any = any || next[i];
    }
    if (!any) {
      if (first_alive < candidates_.size()) {
        std::string why = explain(candidates_[first_alive]);
        if (candidates_.size() > 1) why += " (and no other allowed state fits)";
        fail(outcome::wrong_data, why);
      }
      return;  // keep the old set: later reads are judged against it too
    }
    alive_ = std::move(next);
  }

  // "" if `seen` is `c` in scan order (or a prefix of it, when !complete); else the first
  // difference.
  static std::string scan_mismatch(const contents& c, bool forward, const kv_list& seen,
                                   bool complete) {
    kv_list want(c.begin(), c.end());
    if (!forward) std::reverse(want.begin(), want.end());
    for (std::size_t i = 0; i < seen.size(); ++i) {
      if (i >= want.size()) {
        return "extra key " + shown(seen[i].first) + " after the last expected one";
      }
      if (seen[i].first != want[i].first) {
        return "at position " + std::to_string(i) + " key " + shown(seen[i].first) +
               ", expected " + shown(want[i].first);
      }
      if (seen[i].second != want[i].second) {
        return "key " + shown(seen[i].first) + " has value " + shown(seen[i].second) +
               ", expected " + shown(want[i].second);
      }
    }
    if (complete && seen.size() < want.size()) {
      return "ended after " + std::to_string(seen.size()) + " keys with OK, expected " +
             std::to_string(want.size()) + " (next expected " + shown(want[seen.size()].first) +
             ")";
    }
    return "";
  }

  std::vector<contents> candidates_;
  std::vector<bool> alive_;
  std::string step_;
  bool check_passed_ = false;
  bool second_session_ = false;
  std::string detection_, detection_step_;
  outcome failure_ = outcome::intact;
  std::string failure_detail_, failure_step_;
};

}  // namespace corruption_test
