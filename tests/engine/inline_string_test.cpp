// inline_string (inline_string.hpp): the copies a scan makes of keys and values.
//  - InlineStringTest.HoldsWhatWasAssignedInlineAndOnTheHeap: strings shorter than, as long
//    as and longer than the inline room, assigned whole and as two parts, one after another
//    in every order (so that a long string's heap buffer is left for a short one and taken
//    up again), each reads back as assigned.
//  - InlineStringTest.EveryLengthAndSplitReadsBackAsAssigned: every length from 0 to past
//    the short copies' 64 bytes, cut at every point into the two parts, over a string that
//    held other bytes before: each of the copies' size classes and their edges (a copy that
//    drops or repeats a byte at an edge fails it).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flintkv/internal/inline_string.hpp"

namespace {

using flintkv::internal::inline_string;

TEST(InlineStringTest, HoldsWhatWasAssignedInlineAndOnTheHeap) {
  inline_string<16> s;
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.view(), "");
  const std::vector<std::string> values = {
      "", "a", std::string(15, 'b'), std::string(16, 'c'), std::string(17, 'd'),
      std::string(300, 'e'), "short", std::string(40, 'f'), std::string(16, 'g')};
  for (const std::string& v : values) {
    s.assign(v);
    EXPECT_EQ(s.view(), v);
    EXPECT_EQ(s.size(), v.size());
    for (std::size_t cut = 0; cut <= v.size(); cut += 1 + v.size() / 7) {
      const std::string a = v.substr(0, cut) + "|";
      const std::string b = v.substr(cut);
      s.assign(a, b);
      EXPECT_EQ(std::string(s.view()), a + b);
    }
  }
  s.assign("");
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.view(), "");
}

TEST(InlineStringTest, EveryLengthAndSplitReadsBackAsAssigned) {
  inline_string<80> s;
  std::string all;
  for (int i = 0; i < 90; ++i) all.push_back(static_cast<char>('!' + i));
  for (std::size_t n = 0; n <= all.size(); ++n) {
    const std::string v = all.substr(all.size() - n);  // each length starts elsewhere
    for (std::size_t cut = 0; cut <= n; ++cut) {
      s.assign(std::string(80, '.'));  // the inline room, all overwritten
      s.assign(std::string_view(v).substr(0, cut), std::string_view(v).substr(cut));
      ASSERT_EQ(std::string(s.view()), v) << "length " << n << ", cut at " << cut;
    }
    s.assign(v);
    ASSERT_EQ(std::string(s.view()), v) << "length " << n;
  }
}

}  // namespace
