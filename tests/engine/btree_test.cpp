// The B+tree of the DRAM index (btree.hpp) on its own.
//  - BtreeTest: inserts and erases at random against std::map, over 16-byte decimal keys,
//    short keys, the empty key, long keys that share long prefixes (separators that need
//    copies, ties that need the whole key) and keys that differ only in length; every query
//    (find, lower_bound, last_below, first, last, following) answers as the map does and
//    check() holds; following and at_or_after give each entry with its key's size and the
//    tag it was inserted with (each entry's own, so a tag that stayed behind when its slot
//    moved, in a shift or a split, is caught). Erasing every key gives all DRAM back (bytes() is 0).
//  - BtreeTest.*Build*: build() gives the tree that inserts give, queries and check() alike.
//  - BtreeTest.*Memory*: an insert without memory (nullptr or std::bad_alloc at any of its
//    allocations) fails and leaves the tree as it was.
//  - BtreeConcurrencyTest: one writer inserts and erases a churn set, splitting, removing
//    and collapsing nodes, while readers query a stable set that is never erased: each
//    stable key is found, and every ordered query respects the stable keys around it.
//    Nodes, separator copies and erased entries are retired through the epochs; run under
//    AddressSanitizer, no reader touches freed memory.
//  - BtreeConcurrencyTest.TheChecksCatchAWriterThatSkipsVersions: the same reader checks
//    fail against a writer that does not bump versions, at a split it holds open.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "allocators/epoch.hpp"
#include "allocators/node_allocator.hpp"
#include "flintkv/internal/btree.hpp"

namespace {

using flintkv::internal::btree;
using flintkv::internal::compare_keys;
using flintkv::internal::epoch_dram;

struct test_entry {
  std::string key;
  std::uint32_t tag = 0;  // unique among the entries of a tree
};

struct key_of_entry {
  std::string_view operator()(const test_entry* e) const { return e->key; }
};
struct tag_of_entry {
  std::uint32_t operator()(const test_entry* e) const { return e->tag; }
};

// epoch_dram (btree.hpp) that runs out on demand: after `budget` more allocations, it fails, by
// returning nullptr or (throws) by throwing std::bad_alloc.
struct limited_memory {
  struct limit {
    long budget = -1;  // < 0: unlimited
    bool throws = false;
  };
  epoch_dram memory;
  limit* lim;

  void* allocate(std::size_t bytes) {
    if (lim->budget == 0) {
      if (lim->throws) throw std::bad_alloc();
      return nullptr;
    }
    if (lim->budget > 0) --lim->budget;
    return memory.allocate(bytes);
  }
  void free(void* p, std::size_t bytes) { memory.free(p, bytes); }
  void retire(void* p, std::size_t bytes) noexcept { memory.retire(p, bytes); }
  void reserve(std::size_t bytes, std::uint32_t n) noexcept { memory.reserve(bytes, n); }
};

using tree = btree<test_entry, key_of_entry, tag_of_entry, epoch_dram>;

// A tree with its DRAM and epochs, and the entries it indexes: owned here, and retired
// through the epochs when erased (pinned readers may still read their keys).
template <class Tree = tree, class Memory = epoch_dram>
class test_tree {
 public:
  test_tree() : tree_(epoch_dram{&nodes_, &epochs_}) {}
  explicit test_tree(limited_memory::limit* lim)
      : tree_(limited_memory{epoch_dram{&nodes_, &epochs_}, lim}) {}

  Tree& operator*() { return tree_; }
  Tree* operator->() { return &tree_; }
  alloc::epoch_domain& epochs() { return epochs_; }

  // The tree never reads an entry when it is destroyed: those left in it go first.
  ~test_tree() {
    for (test_entry* e : owned_) delete e;
  }

  test_entry* make(const std::string& key) {
    auto* e = new test_entry{key, ++tags_};
    owned_.insert(e);
    return e;
  }
  // Inserts a new entry for `key`; returns it, or nullptr (and no entry) if the tree ran out.
  test_entry* insert(const std::string& key) {
    test_entry* e = make(key);
    if (!tree_.insert(e)) {
      owned_.erase(e);
      delete e;
      return nullptr;
    }
    return e;
  }
  void erase(test_entry* e) {
    tree_.erase(e);
    owned_.erase(e);
    epochs_.retire(e);
  }

 private:
  alloc::node_allocator nodes_;
  alloc::epoch_domain epochs_;  // after nodes_: destroyed first, it frees what it holds there
  Tree tree_;                   // after epochs_: retires its nodes there
  std::unordered_set<test_entry*> owned_;  // made here, not erased (the writer's)
  std::uint32_t tags_ = 0;                 // the last entry's tag
};

std::string decimal_key(std::uint64_t i) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llu", static_cast<unsigned long long>(i));
  return buf;
}

// Keys of every kind the tree must order: 16-byte decimals, short keys over a few bytes
// (NUL and 0xff among them), the empty key, keys of 17 to 300 bytes sharing long prefixes
// (so that separators are long and comparisons reach past the inline 16 bytes), and keys
// that differ only in trailing NULs.
std::vector<std::string> mixed_keys(std::mt19937_64& rng, std::size_t n) {
  std::set<std::string> keys = {"",
                                std::string("ab"),
                                std::string("ab\0", 3),
                                std::string("ab\0\0", 4),
                                decimal_key(1),
                                decimal_key(1) + std::string(1, '\0'),
                                decimal_key(1) + std::string(2, '\0'),
                                std::string(17, 'p'),
                                std::string(17, 'p') + std::string(1, '\0')};
  const std::string alphabet("\0ab\xff", 4);
  const std::string common(300, 'p');
  while (keys.size() < n) {
    std::string k;
    switch (rng() % 4) {
      case 0:
        k = decimal_key(rng() % 1000000000);
        break;
      case 1:
        for (std::size_t len = rng() % 4; len > 0; --len) k.push_back(alphabet[rng() % 4]);
        break;
      case 2: {
        // A long shared prefix, then a few varying bytes, then maybe a tail.
        k = common.substr(0, 16 + rng() % 60);
        for (int i = 0; i < 3; ++i) k.push_back(alphabet[rng() % 4]);
        k.append(rng() % 200, 'q');
        break;
      }
      default:
        k = decimal_key(rng() % 1000) + std::string(rng() % 3, '\0') +
            (rng() % 2 ? common.substr(0, rng() % 40) : "");
        break;
    }
    keys.insert(k);
  }
  return {keys.begin(), keys.end()};
}

using model = std::map<std::string, test_entry*>;

// Every query of `t` at `key` against the model. "" if they agree, else what differs.
template <class Tree>
std::string compare_queries(Tree& t, const model& m, const std::string& key) {
  auto name = [](const test_entry* e) { return e == nullptr ? std::string("(none)") : e->key; };
  auto mismatch = [&](const char* what, const test_entry* got, const test_entry* want) {
    return std::string(what) + "('" + key + "') gave " + name(got) + ", the model " + name(want);
  };
  const auto it = m.lower_bound(key);
  const test_entry* want_lower = it == m.end() ? nullptr : it->second;
  const test_entry* want_find = it != m.end() && it->first == key ? it->second : nullptr;
  const test_entry* want_below = it == m.begin() ? nullptr : std::prev(it)->second;
  if (const test_entry* e = t.find(key); e != want_find) return mismatch("find", e, want_find);
  if (const test_entry* e = t.lower_bound(key); e != want_lower) {
    return mismatch("lower_bound", e, want_lower);
  }
  if (const test_entry* e = t.last_below(key); e != want_below) {
    return mismatch("last_below", e, want_below);
  }
  for (const bool inclusive : {false, true}) {
    typename Tree::ahead out[12];
    // on_leaf: each leaf's entries, as soon as they are read, in order and none twice.
    std::size_t told = 0;
    std::string leaf_error;
    auto on_leaf = [&](std::size_t from, std::size_t to) {
      if (from != told || to <= from || to > 12) {
        leaf_error = "on_leaf(" + std::to_string(from) + ", " + std::to_string(to) +
                     ") after entries up to " + std::to_string(told);
      }
      for (std::size_t i = from; i < to && i < 12; ++i) {
        if (out[i].entry == nullptr) leaf_error = "on_leaf before entry " + std::to_string(i);
      }
      told = to;
    };
    for (auto& a : out) a.entry = nullptr;
    const std::size_t got = inclusive ? t.at_or_after(key, out, 12, on_leaf)
                                      : t.following(key, out, 12, on_leaf);
    if (!leaf_error.empty()) return leaf_error + " ('" + key + "')";
    if (told != got) {
      return "on_leaf told " + std::to_string(told) + " of " + std::to_string(got) +
             " entries ('" + key + "')";
    }
    auto it = inclusive ? m.lower_bound(key) : m.upper_bound(key);
    const std::string what = std::string(inclusive ? "at_or_after" : "following") + "('" + key +
                             "') entry ";
    for (std::size_t i = 0; i < 12; ++i, it = it == m.end() ? it : std::next(it)) {
      const bool have = i < got;
      const bool want = it != m.end();
      if (have != want || (have && out[i].entry != it->second)) {
        return what + std::to_string(i) + ": " + (have ? name(out[i].entry) : "(none)") +
               ", the model " + (want ? it->first : "(none)");
      }
      if (have && (out[i].key_size != it->first.size() || out[i].tag != it->second->tag)) {
        return what + std::to_string(i) + " ('" + it->first + "'): key size " +
               std::to_string(out[i].key_size) + " and tag " + std::to_string(out[i].tag) +
               ", its entry's " + std::to_string(it->first.size()) + " and " +
               std::to_string(it->second->tag);
      }
      if (have && !(out[i].pre == flintkv::internal::btree_layout::prefix_of(it->first))) {
        return what + std::to_string(i) + " ('" + it->first + "'): not its key's prefix";
      }
    }
  }
  const test_entry* want_first = m.empty() ? nullptr : m.begin()->second;
  const test_entry* want_last = m.empty() ? nullptr : m.rbegin()->second;
  if (t.first() != want_first) return mismatch("first", t.first(), want_first);
  if (t.last() != want_last) return mismatch("last", t.last(), want_last);
  return "";
}

// Queries at keys in and around the model: present keys, their neighbours just above and
// below, and random others.
template <class Tree>
std::string compare_some_queries(Tree& t, const model& m, const std::vector<std::string>& universe,
                                 std::mt19937_64& rng, int probes) {
  for (int i = 0; i < probes; ++i) {
    std::string k = universe[rng() % universe.size()];
    switch (rng() % 4) {
      case 0: k.push_back('\0'); break;
      case 1: if (!k.empty()) k.pop_back(); break;
      case 2: if (!k.empty()) k.back() = static_cast<char>(k.back() + 1); break;
      default: break;
    }
    if (std::string e = compare_queries(t, m, k); !e.empty()) return e;
  }
  return "";
}

TEST(BtreeTest, AnEmptyTreeAnswersNothingAndHoldsNoMemory) {
  test_tree<> t;
  auto pinned = t.epochs().pin();
  EXPECT_EQ(t->find(""), nullptr);
  EXPECT_EQ(t->lower_bound(""), nullptr);
  EXPECT_EQ(t->last_below("zzz"), nullptr);
  EXPECT_EQ(t->first(), nullptr);
  EXPECT_EQ(t->last(), nullptr);
  tree::ahead out[4];
  EXPECT_EQ(t->following("", out, 4), 0u);
  EXPECT_EQ(t->bytes(), 0u);
  EXPECT_EQ(t->size(), 0u);
  EXPECT_EQ(t->check(), "");
}

TEST(BtreeTest, RandomInsertsAndErasesOfMixedKeysAnswerAsTheModel) {
  test_tree<> t;
  auto pinned = t.epochs().pin();
  std::mt19937_64 rng(1);
  const std::vector<std::string> universe = mixed_keys(rng, 6000);
  model m;
  // Grows towards the whole universe, shrinks to a few, and grows again: splits at every
  // level, then leaves and inner nodes emptied and removed, the root collapsing.
  for (int batch = 0; batch < 300; ++batch) {
    const bool grow = batch < 100 || batch >= 200;
    for (int step = 0; step < 100; ++step) {
      const std::string& k = universe[rng() % universe.size()];
      auto it = m.find(k);
      if (it == m.end() && (grow ? rng() % 4 != 0 : rng() % 4 == 0)) {
        test_entry* e = t.insert(k);
        ASSERT_NE(e, nullptr);
        m.emplace(k, e);
      } else if (it != m.end() && (grow ? rng() % 4 == 0 : rng() % 4 != 0)) {
        t.erase(it->second);
        m.erase(it);
      }
    }
    ASSERT_EQ(t->size(), m.size());
    ASSERT_EQ(compare_some_queries(*t, m, universe, rng, 40), "") << "batch " << batch;
    if (batch % 10 == 0) {
      ASSERT_EQ(t->check(), "") << "batch " << batch;
    }
  }
  ASSERT_EQ(t->check(), "");
  for (const auto& k : universe) ASSERT_EQ(compare_queries(*t, m, k), "");
  for (auto& [k, e] : m) t.erase(e);
  m.clear();
  EXPECT_EQ(t->check(), "");
  EXPECT_EQ(t->bytes(), 0u) << "every node and copy given back";
}

// Enough keys for four levels, inserted in random order and then all erased in another.
TEST(BtreeTest, ATreeOfManyDecimalKeysGrowsAndShrinksBackToNothing) {
  test_tree<> t;
  auto pinned = t.epochs().pin();
  std::mt19937_64 rng(2);
  std::vector<std::uint64_t> ids(250000);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = i * 7;
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<std::string> universe;
  for (std::size_t i = 0; i < ids.size() * 7; i += 3) universe.push_back(decimal_key(i));
  model m;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::string k = decimal_key(ids[i]);
    test_entry* e = t.insert(k);
    ASSERT_NE(e, nullptr);
    m.emplace(k, e);
    if (i % 25000 == 0) {
      ASSERT_EQ(compare_some_queries(*t, m, universe, rng, 200), "");
    }
  }
  ASSERT_EQ(t->check(), "");
  EXPECT_GE(t->height(), 4) << "splits reached three levels of inner nodes";
  ASSERT_EQ(compare_some_queries(*t, m, universe, rng, 5000), "");
  std::shuffle(ids.begin(), ids.end(), rng);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto it = m.find(decimal_key(ids[i]));
    t.erase(it->second);
    m.erase(it);
    if (i % 25000 == 0) {
      ASSERT_EQ(compare_some_queries(*t, m, universe, rng, 200), "");
      ASSERT_EQ(t->check(), "");
    }
  }
  EXPECT_EQ(t->check(), "");
  EXPECT_EQ(t->size(), 0u);
  EXPECT_EQ(t->height(), 0);
  EXPECT_EQ(t->bytes(), 0u);
}

// Ascending inserts (a sequential load) split by appending: every node but the last on
// each level stays full. 31 x 24 x 24 keys fill 576 leaves under 24 full inner nodes and a
// root, three levels; splits into halves would leave the leaves about half full, twice the
// bytes and a level more.
TEST(BtreeTest, AscendingInsertsLeaveFullNodes) {
  using flintkv::internal::btree_layout::inner;
  using leaf = flintkv::internal::btree_layout::leaf<test_entry>;
  test_tree<> t;
  auto pinned = t.epochs().pin();
  constexpr std::size_t kLeaves = tree::kInnerSlots * tree::kInnerSlots;
  constexpr std::size_t kKeys = tree::kLeafSlots * kLeaves;
  model m;
  for (std::size_t i = 0; i < kKeys; ++i) {
    const std::string k = decimal_key(i * 3);
    m.emplace(k, t.insert(k));
  }
  ASSERT_EQ(t->check(), "");
  EXPECT_EQ(t->height(), 3);
  EXPECT_EQ(t->bytes(), kLeaves * sizeof(leaf) + (tree::kInnerSlots + 1) * sizeof(inner));
  std::mt19937_64 rng(23);
  std::vector<std::string> universe;
  for (std::size_t i = 0; i <= kKeys * 3; i += 2) universe.push_back(decimal_key(i));
  ASSERT_EQ(compare_some_queries(*t, m, universe, rng, 3000), "");
  // Inserts between the packed keys split full leaves into halves as before.
  for (std::size_t i = 0; i < kKeys; i += 7) {
    const std::string k = decimal_key(i * 3 + 1);
    m.emplace(k, t.insert(k));
  }
  ASSERT_EQ(t->check(), "");
  ASSERT_EQ(compare_some_queries(*t, m, universe, rng, 3000), "");
  for (auto& [k, e] : m) t.erase(e);
  EXPECT_EQ(t->bytes(), 0u);
}

// following() tells its caller each leaf's entries as it reads them (on_leaf), before it
// reads the next leaf, so that a scan can request their nodes while the next leaf comes.
// Ascending inserts fill leaves of kLeafSlots keys each, so the calls are known exactly:
// one for the rest of the key's leaf, one for the next leaf when twelve entries need it.
TEST(BtreeTest, ReadAheadTellsEachLeafsEntriesBeforeReadingTheNext) {
  test_tree<> t;
  auto pinned = t.epochs().pin();
  constexpr std::size_t kKeys = tree::kLeafSlots * 40;
  for (std::size_t i = 0; i < kKeys; ++i) ASSERT_NE(t.insert(decimal_key(i)), nullptr);
  std::size_t spanning = 0;
  for (std::size_t i = 0; i + 13 < kKeys; ++i) {
    tree::ahead out[12];
    for (auto& a : out) a.entry = nullptr;
    std::vector<std::pair<std::size_t, std::size_t>> calls;
    std::vector<bool> next_unread;
    auto on_leaf = [&](std::size_t from, std::size_t to) {
      calls.emplace_back(from, to);
      next_unread.push_back(to == 12 || out[to].entry == nullptr);
    };
    const std::size_t got = t->following(decimal_key(i), out, 12, on_leaf);
    ASSERT_EQ(got, 12u);
    for (std::size_t j = 0; j < got; ++j) ASSERT_EQ(out[j].entry->key, decimal_key(i + 1 + j));
    const std::size_t in_leaf = tree::kLeafSlots - (i + 1) % tree::kLeafSlots;
    std::vector<std::pair<std::size_t, std::size_t>> want{{0, std::min<std::size_t>(in_leaf, 12)}};
    if (in_leaf < 12) want.emplace_back(in_leaf, 12);
    spanning += want.size() > 1;
    EXPECT_EQ(calls, want) << "following(" << decimal_key(i) << ")";
    for (bool unread : next_unread) EXPECT_TRUE(unread) << "a leaf told after the next was read";
  }
  EXPECT_GT(spanning, 0u);
}

// Keys longer than the inline prefix, all alike in their first hundred bytes: every
// comparison reads whole keys, and every separator is a copy.
// insert(e, where): a place last_below() gave puts the key there while its leaf is
// unchanged; once the leaf changed (another insert, a split), the insert descends instead.
// Either way the tree answers as a model of every key inserted.
TEST(BtreeTest, InsertAtAPlaceFromLastBelowFallsBackOnceTheLeafChanged) {
  test_tree<> t;
  auto pinned = t.epochs().pin();
  std::mt19937_64 rng(21);
  std::set<std::string> model;
  std::size_t at_place = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::string k = decimal_key(rng() % 1000000);
    if (model.count(k) != 0) continue;
    tree::place where;
    (void)t->last_below(k, &where);
    // Every third key, another key lands first: the place is stale when it is used.
    const std::string other = decimal_key(rng() % 1000000);
    if (i % 3 == 0 && model.count(other) == 0 && other != k) {
      ASSERT_NE(t.insert(other), nullptr);
      model.insert(other);
    } else {
      ++at_place;
    }
    test_entry* e = t.make(k);
    ASSERT_TRUE(t->insert(e, where));
    model.insert(k);
    if (i % 2000 == 0) {
      ASSERT_EQ(t->check(), "") << "after " << i;
    }
  }
  ASSERT_EQ(t->check(), "");
  ASSERT_EQ(t->size(), model.size());
  for (const std::string& k : model) {
    const test_entry* e = t->find(k);
    ASSERT_NE(e, nullptr) << k;
    EXPECT_EQ(e->key, k);
  }
  EXPECT_GT(at_place, 10000u);
}

TEST(BtreeTest, LongKeysWithLongCommonPrefixesNeedSeparatorCopies) {
  test_tree<> t;
  auto pinned = t.epochs().pin();
  std::mt19937_64 rng(3);
  const std::string common(100, 'k');
  std::vector<std::string> universe;
  for (int i = 0; i < 20000; ++i) universe.push_back(common + decimal_key(i * 13 % 20000));
  // A few near the size limit.
  for (int i = 0; i < 4; ++i) {
    universe.push_back(common + std::string(65000, static_cast<char>('a' + i)));
  }
  universe.push_back(std::string(65536, 'k'));
  model m;
  std::vector<std::string> order = universe;
  std::shuffle(order.begin(), order.end(), rng);
  for (const auto& k : order) m.emplace(k, t.insert(k));
  ASSERT_EQ(t->check(), "");
  const std::size_t full = t->bytes();
  EXPECT_GT(full, (universe.size() / 31) * 1024) << "nodes";
  ASSERT_EQ(compare_some_queries(*t, m, universe, rng, 3000), "");
  std::shuffle(order.begin(), order.end(), rng);
  for (std::size_t i = 0; i < order.size(); ++i) {
    auto it = m.find(order[i]);
    t.erase(it->second);
    m.erase(it);
    if (i % 2000 == 0) {
      ASSERT_EQ(t->check(), "");
      ASSERT_EQ(compare_some_queries(*t, m, universe, rng, 100), "");
    }
  }
  EXPECT_EQ(t->bytes(), 0u);
}

// build() over sorted entries gives the tree that inserting them gives: the same answers
// to every query, and a valid tree that later inserts and erases keep valid.
TEST(BtreeTest, BuildGivesTheTreeThatInsertsGive) {
  std::mt19937_64 rng(4);
  for (std::size_t n :
       {0, 1, 2, 27, 28, 29, 31, 32, 28 * 22, 28 * 22 + 1, 28 * 22 * 22 + 5, 30000}) {
    const std::vector<std::string> universe = mixed_keys(rng, n + 200);
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < universe.size() && keys.size() < n; ++i) {
      if (rng() % 8 != 0 || universe.size() - i <= n - keys.size()) keys.push_back(universe[i]);
    }
    test_tree<> built, inserted;
    auto pin_built = built.epochs().pin();
    auto pin_inserted = inserted.epochs().pin();
    model m;
    std::vector<test_entry*> sorted;
    for (const auto& k : keys) {
      sorted.push_back(built.make(k));
      m.emplace(k, sorted.back());
    }
    ASSERT_TRUE(built->build(sorted.data(), sorted.size()));
    ASSERT_EQ(built->check(), "") << n << " keys";
    EXPECT_EQ(built->size(), n);
    model other;
    std::vector<std::string> order = keys;
    std::shuffle(order.begin(), order.end(), rng);
    for (const auto& k : order) other.emplace(k, inserted.insert(k));
    for (const auto& k : universe) {
      ASSERT_EQ(compare_queries(*built, m, k), "") << n << " keys";
      ASSERT_EQ(compare_queries(*inserted, other, k), "") << n << " keys";
    }
    // Later writes to the built tree.
    for (int i = 0; i < 2000; ++i) {
      const std::string& k = universe[rng() % universe.size()];
      if (auto it = m.find(k); it != m.end()) {
        built.erase(it->second);
        m.erase(it);
      } else {
        m.emplace(k, built.insert(k));
      }
    }
    ASSERT_EQ(built->check(), "") << n << " keys";
    ASSERT_EQ(compare_some_queries(*built, m, universe, rng, 500), "") << n << " keys";
  }
}

using limited_tree = btree<test_entry, key_of_entry, tag_of_entry, limited_memory>;

// An insert that runs out of memory at any of its allocations (leaf, separator copy, inner
// nodes, root; nullptr or std::bad_alloc) fails and leaves the tree as it was; so does a
// build().
TEST(BtreeTest, InsertWithoutMemoryFailsAndLeavesTheTreeAsItWas) {
  for (bool throws : {false, true}) {
    limited_memory::limit lim;
    lim.throws = throws;
    test_tree<limited_tree, limited_memory> t(&lim);
    auto pinned = t.epochs().pin();
    std::mt19937_64 rng(5);
    const std::vector<std::string> universe = mixed_keys(rng, 20000);
    model m;
    int failed = 0;
    for (int step = 0; step < 40000; ++step) {
      const std::string& k = universe[rng() % universe.size()];
      if (auto it = m.find(k); it != m.end()) {
        if (rng() % 3 == 0) {
          t.erase(it->second);
          m.erase(it);
        }
        continue;
      }
      lim.budget = static_cast<long>(rng() % 4);  // 0 to 3 allocations, then none
      const std::size_t before = t->bytes();
      test_entry* e = t.insert(k);
      lim.budget = -1;
      if (e == nullptr) {
        ++failed;
        ASSERT_EQ(t->bytes(), before);
        ASSERT_EQ(t->find(k), nullptr);
      } else {
        m.emplace(k, e);
      }
      if (step % 4000 == 0) {
        ASSERT_EQ(t->check(), "") << "throws " << throws << ", step " << step;
        ASSERT_EQ(compare_some_queries(*t, m, universe, rng, 50), "");
      }
    }
    EXPECT_GT(failed, 100);
    ASSERT_EQ(t->check(), "");
    ASSERT_EQ(compare_some_queries(*t, m, universe, rng, 2000), "");

    // A build that runs out part way gives everything back.
    test_tree<limited_tree, limited_memory> b(&lim);
    std::vector<test_entry*> sorted;
    for (const auto& [k, e] : m) sorted.push_back(e);
    for (long budget : {0L, 1L, 100L, 300L}) {
      lim.budget = budget;
      EXPECT_FALSE(b->build(sorted.data(), sorted.size())) << budget;
      lim.budget = -1;
      EXPECT_EQ(b->bytes(), 0u);
      EXPECT_EQ(b->check(), "");
    }
    ASSERT_TRUE(b->build(sorted.data(), sorted.size()));
    EXPECT_EQ(b->check(), "");
    EXPECT_EQ(compare_some_queries(*b, m, universe, rng, 500), "");
  }
}

// ---- Concurrency ----

// The stable keys and their entries, in key order, and what a reader checks against them.
struct stable_set {
  std::vector<std::string> keys;
  std::vector<test_entry*> entries;

  // Queries at stable key i and just above it; returns how many answers broke the order
  // the stable keys impose whatever the churn does.
  template <class Tree>
  int violations(Tree& t, std::size_t i) const {
    int bad = 0;
    const std::string& k = keys[i];
    const std::string* before = i > 0 ? &keys[i - 1] : nullptr;
    const std::string* after = i + 1 < keys.size() ? &keys[i + 1] : nullptr;
    bad += t.find(k) != entries[i];
    bad += t.lower_bound(k) != entries[i];
    // The greatest key below k: at or above the stable key before it.
    const test_entry* below = t.last_below(k);
    bad += before != nullptr && below == nullptr;
    bad += below != nullptr &&
           (compare_keys(below->key, k) >= 0 || (before && compare_keys(below->key, *before) < 0));
    // The least key above k: at most the stable key after it.
    const std::string just_above = k + std::string(1, '\0');
    const test_entry* above = t.lower_bound(just_above);
    bad += after != nullptr && above == nullptr;
    bad += above != nullptr &&
           (compare_keys(above->key, k) <= 0 || (after && compare_keys(above->key, *after) > 0));
    // The keys following k: increasing, above k (reading them proves them not freed),
    // each with its size, tag and prefix, and no stable key left out up to the last.
    typename Tree::ahead out[8];
    const std::size_t n = t.following(k, out, 8);
    std::string_view prev = k;
    std::size_t next_stable = i + 1;
    for (std::size_t j = 0; j < n; ++j) {
      const test_entry* e = out[j].entry;
      bad += compare_keys(e->key, prev) <= 0;
      bad += out[j].tag != e->tag || out[j].key_size != e->key.size();
      bad += !(out[j].pre == flintkv::internal::btree_layout::prefix_of(e->key));
      if (next_stable < keys.size()) {
        const int c = compare_keys(e->key, keys[next_stable]);
        bad += c > 0;  // passed a stable key
        if (c >= 0) ++next_stable;
      }
      prev = e->key;
    }
    const test_entry* first = t.first();
    const test_entry* last = t.last();
    bad += first == nullptr || compare_keys(first->key, keys.front()) > 0;
    bad += last == nullptr || compare_keys(last->key, keys.back()) < 0;
    return bad;
  }
};

TEST(BtreeConcurrencyTest, ReadersSeeEveryStableKeyWhileTheWriterChurns) {
  test_tree<> t;
  std::mt19937_64 rng(6);
  const std::vector<std::string> universe = mixed_keys(rng, 24000);
  // Every eighth key is stable; the rest churn around them.
  stable_set stable;
  std::vector<std::string> churn;
  for (std::size_t i = 0; i < universe.size(); ++i) {
    (i % 8 == 3 ? stable.keys : churn).push_back(universe[i]);
  }
  {
    auto pinned = t.epochs().pin();
    for (const auto& k : stable.keys) stable.entries.push_back(t.insert(k));
  }
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> bad{0}, queries{0};
  // Each reader queries at random stable keys, pinned, until the writer is done.
  auto reader = [&](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    do {
      auto pinned = t.epochs().pin();
      bad.fetch_add(stable.violations(*t, rng() % stable.keys.size()), std::memory_order_relaxed);
      queries.fetch_add(1, std::memory_order_relaxed);
    } while (!stop.load(std::memory_order_relaxed));
  };
  std::thread first_reader(reader, 100), second_reader(reader, 101);
  // The writer: rounds that insert the churn keys mostly, then erase them mostly, in
  // random orders, ending empty of them: leaves and inner nodes split, empty and go, and
  // the root grows and collapses (the stable keys alone make a shallower tree).
  std::vector<test_entry*> live;
  int heights_seen = 0;  // bit h: the tree had h levels
  for (int round = 0; round < 8; ++round) {
    // Each round starts once the readers have queried more since the last one.
    const std::uint64_t seen = queries.load();
    while (queries.load() < seen + 200) std::this_thread::yield();
    std::shuffle(churn.begin(), churn.end(), rng);
    std::size_t inserted = 0;
    for (std::size_t step = 0; step < 2 * churn.size() || !live.empty(); ++step) {
      const bool growing = step < churn.size();
      auto pinned = t.epochs().pin();
      if (inserted < churn.size() && (live.empty() || rng() % 8 < (growing ? 7u : 1u))) {
        live.push_back(t.insert(churn[inserted++]));
        ASSERT_NE(live.back(), nullptr);
      } else {
        std::swap(live[rng() % live.size()], live.back());
        t.erase(live.back());
        live.pop_back();
      }
      heights_seen |= 1 << t->height();
    }
    t.epochs().collect();
  }
  stop.store(true);
  first_reader.join();
  second_reader.join();
  EXPECT_EQ(heights_seen & 0b11000, 0b11000) << "the root grew to four levels and back to three";
  EXPECT_EQ(bad.load(), 0u) << "of " << queries.load() << " rounds of queries";
  EXPECT_GT(queries.load(), 1600u);
  auto pinned = t.epochs().pin();
  EXPECT_EQ(t->check(), "");
  EXPECT_EQ(t->size(), stable.keys.size());
}

// A writer that does not bump versions (only a test builds one), holding a leaf split open
// at TEST_mid_split(): the split leaf has given its upper half to the new leaf, which its
// parent does not route to yet. A reader that runs the concurrency test's checks there
// must report the stable keys it cannot find. The reader runs only while the split is
// held open (a handshake, no timing), so the outcome is the same on every run; with
// versions, the reader would instead retry until the split is done.
std::atomic<int>* split_phase = nullptr;  // 1: a split is open; 2: the reader is done

struct TEST_unversioned_writes {
  static constexpr bool kVersioned = false;
  static void TEST_mid_split() {
    if (split_phase == nullptr) return;
    split_phase->store(1);
    while (split_phase->load() != 2) std::this_thread::yield();
  }
};

TEST(BtreeConcurrencyTest, TheChecksCatchAWriterThatSkipsVersions) {
  using broken_tree =
      btree<test_entry, key_of_entry, tag_of_entry, epoch_dram, TEST_unversioned_writes>;
  test_tree<broken_tree> t;
  stable_set stable;
  // One full leaf of stable keys: the next insert splits it.
  for (std::size_t i = 0; i < broken_tree::kLeafSlots; ++i) {
    stable.keys.push_back(decimal_key(i * 10));
  }
  for (const auto& k : stable.keys) stable.entries.push_back(t.insert(k));
  std::atomic<int> phase{0};
  std::atomic<int> bad{0};
  split_phase = &phase;
  std::thread reader([&] {
    while (phase.load() != 1) std::this_thread::yield();
    auto pinned = t.epochs().pin();
    for (std::size_t i = 0; i < stable.keys.size(); ++i) bad += stable.violations(*t, i);
    phase.store(2);
  });
  ASSERT_NE(t.insert(decimal_key(5)), nullptr);  // splits, and waits for the reader
  reader.join();
  split_phase = nullptr;
  // Every stable key in the upper half is missed by find() at least.
  EXPECT_GE(bad.load(), static_cast<int>(broken_tree::kLeafSlots / 2)) << "the checks missed it";
  EXPECT_EQ(t->check(), "") << "the split itself completes";
}

}  // namespace
