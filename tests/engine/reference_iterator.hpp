// The reference the engine's iterators are compared with: an iterator over a std::map
// restricted to [lower_bound, upper_bound), with the engine's Iterator semantics.
#pragma once

#include <iterator>
#include <map>
#include <optional>
#include <string>

#include "flintkv/options.hpp"

namespace flintkv_test {

using kv_map = std::map<std::string, std::string>;

class reference_iterator {
 public:
  reference_iterator(const kv_map& m, const ReadOptions& o)
      : map_(m), lower_(o.lower_bound), upper_(o.upper_bound), at_(m.end()) {}

  bool valid() const { return at_ != map_.end(); }
  void seek_to_first() { at_ = clamp(lower_ ? map_.lower_bound(*lower_) : map_.begin()); }
  void seek_to_last() {
    auto it = upper_ ? map_.lower_bound(*upper_) : map_.end();
    at_ = it == map_.begin() ? map_.end() : clamp(std::prev(it));
  }
  void seek(const std::string& t) {
    std::string target = lower_ && t < *lower_ ? *lower_ : t;
    at_ = clamp(map_.lower_bound(target));
  }
  void seek_for_prev(const std::string& t) {
    auto it = map_.upper_bound(t);  // the first key after t
    if (upper_) {
      auto u = map_.lower_bound(*upper_);  // the first key out of bounds
      if (u != map_.end() && (it == map_.end() || u->first < it->first)) it = u;
    }
    at_ = it == map_.begin() ? map_.end() : clamp(std::prev(it));
  }
  void next() { at_ = clamp(std::next(at_)); }
  void prev() { at_ = at_ == map_.begin() ? map_.end() : clamp(std::prev(at_)); }
  const std::string& key() const { return at_->first; }
  const std::string& value() const { return at_->second; }

 private:
  kv_map::const_iterator clamp(kv_map::const_iterator it) const {
    if (it == map_.end()) return it;
    if (lower_ && it->first < *lower_) return map_.end();
    if (upper_ && it->first >= *upper_) return map_.end();
    return it;
  }
  const kv_map& map_;
  std::optional<std::string> lower_, upper_;
  kv_map::const_iterator at_;
};

}  // namespace flintkv_test
