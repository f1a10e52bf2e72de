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
    copy_short(p, a.data(), a.size());
    copy_short(p + a.size(), b.data(), b.size());
    size_ = n;
  }
  std::string_view view() const { return {on_heap_ ? heap_.data() : inline_, size_}; }
  operator std::string_view() const { return view(); }
  std::size_t size() const { return size_; }

 private:
  // Copies n bytes to d. Up to 64 bytes as two moves of a fixed size that overlap (of 1, 2,
  // 4, 8, 16 or 32 bytes), inline, where memcpy of a varying size is a call that picks its
  // way by size first: a scan step copies a key of 16 bytes or so, in two parts.
  static void copy_short(char* d, const char* s, std::size_t n) {
    if (n >= 16) {
      if (n <= 32) return ends<16>(d, s, n);
      if (n <= 64) return ends<32>(d, s, n);
      std::memcpy(d, s, n);
    } else if (n >= 8) {
      ends<8>(d, s, n);
    } else if (n >= 4) {
      ends<4>(d, s, n);
    } else if (n >= 2) {
      ends<2>(d, s, n);
    } else if (n == 1) {
      *d = *s;
    }
  }
  // The first W and the last W of n bytes. REQUIRES: W <= n <= 2 * W.
  template <std::size_t W>
  static void ends(char* d, const char* s, std::size_t n) {
    std::memcpy(d, s, W);
    std::memcpy(d + n - W, s + n - W, W);
  }

  char inline_[N];
  std::size_t size_ = 0;
  bool on_heap_ = false;
  std::string heap_;
};

}  // namespace flintkv::internal
