// A copy of a short string kept inside its owner: the keys and values a scan copies at each
// move (an iterator's key, a packed run cursor's key, the tier's answer). std::string keeps
// at most 15 bytes inline, less than the benchmarks' 16-byte keys, so each new iterator's
// first copies allocated (seekrandom makes an iterator per operation); up to N bytes
// nothing is allocated here, and past N a heap buffer is kept and reused.
//
// Thread safety: as a std::string's.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace flintkv::internal {

template <std::size_t N>
class inline_string {
 public:
  // REQUIRES (both): the views are not of this string.
  void assign(std::string_view s) { assign(s, {}); }
  // a and b back to back.
  void assign(std::string_view a, std::string_view b) {
    const std::size_t n = a.size() + b.size();
    char* p = inline_;
    on_heap_ = n > N;
    if (on_heap_) {
      heap_.resize(n);
      p = heap_.data();
    }
    if (!a.empty()) std::memcpy(p, a.data(), a.size());
    if (!b.empty()) std::memcpy(p + a.size(), b.data(), b.size());
    size_ = n;
  }
  std::string_view view() const { return {on_heap_ ? heap_.data() : inline_, size_}; }
  operator std::string_view() const { return view(); }
  std::size_t size() const { return size_; }

 private:
  char inline_[N];
  std::size_t size_ = 0;
  bool on_heap_ = false;
  std::string heap_;
};

}  // namespace flintkv::internal
