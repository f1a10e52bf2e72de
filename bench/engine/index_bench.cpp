// The DRAM index's ordered search: the skiplist (index.hpp) beside the B+tree (btree.hpp),
// at --num keys of 16 bytes (zero-padded decimals, the driver's keys), each built by
// inserting the keys in random order as the engine does. Per operation:
//   last_below  the search for a new key's place (what a put of a new key locates)
//   insert      a new key linked in (the skiplist: locate, then link and the point table)
//   seek+10     the first entry at or after a key absent from the index, and the 10 after
//               it, each entry read (a short scan)
// New and absent keys are odd numbers, the index's keys even ones. The two sides alternate,
// operation by operation, in each of --runs runs (other work on the machine slows both
// alike), and the median of the runs is printed, in ns/op. Also: build() of the B+tree
// from the sorted entries.
//
//   index_bench [--num=1000000] [--ops=200000] [--runs=3]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "allocators/epoch.hpp"
#include "allocators/node_allocator.hpp"
#include "flintkv/internal/btree.hpp"
#include "flintkv/internal/index.hpp"

namespace {

using flintkv::internal::inode;
using flintkv::internal::kMaxHeight;
using flintkv::internal::skiplist;

std::string decimal_key(std::uint64_t i) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llu", static_cast<unsigned long long>(i));
  return buf;
}

struct key_of_inode {
  std::string_view operator()(const inode* n) const { return n->key(); }
};

using flintkv::internal::epoch_dram;
using btree = flintkv::internal::btree<inode, key_of_inode, epoch_dram>;

// The engine's entry heights: branching factor 2 (engine.hpp, random_height).
int random_height(std::mt19937_64& rng) {
  return std::min(1 + std::countr_one(rng()), kMaxHeight);
}

std::uint64_t option(int argc, char** argv, const char* name, std::uint64_t fallback) {
  const std::size_t len = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') {
      return std::strtoull(argv[i] + len + 1, nullptr, 10);
    }
  }
  return fallback;
}

double ns_per_op(std::size_t ops, const std::function<void()>& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  const auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(end - start).count() / static_cast<double>(ops);
}

// Each side's index, its entries and the entries for the new keys.
struct skiplist_side {
  alloc::node_allocator nodes;
  alloc::epoch_domain epochs;
  void* head = std::malloc(inode::size_for(kMaxHeight, 0));
  skiplist list{head, 0, epochs};
  std::vector<inode*> fresh;

  inode* make(std::mt19937_64& rng, const std::string& key) {
    const int height = random_height(rng);
    return inode::make(nodes.allocate(inode::size_for(height, key.size())), height, key,
                       {1, 64, 0, false});
  }
  void insert(inode* n) {
    inode* preds[kMaxHeight];
    inode* succs[kMaxHeight];
    list.locate(n->key(), preds, succs);
    list.insert(n, preds);
  }
};

struct btree_side {
  alloc::node_allocator nodes;
  alloc::epoch_domain epochs;
  btree tree{epoch_dram{&nodes, &epochs}};
  std::vector<inode*> fresh;

  // Entries of height 1: the tree replaces the upper levels.
  inode* make(const std::string& key) {
    return inode::make(nodes.allocate(inode::size_for(1, key.size())), 1, key, {1, 64, 0, false});
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t num = option(argc, argv, "--num", 1000000);
  const std::uint64_t ops = std::min(option(argc, argv, "--ops", 200000), num);
  const int runs = static_cast<int>(option(argc, argv, "--runs", 3));

  std::mt19937_64 rng(42);
  std::vector<std::uint64_t> order(num);
  for (std::uint64_t i = 0; i < num; ++i) order[i] = 2 * i;
  std::shuffle(order.begin(), order.end(), rng);

  skiplist_side s;
  btree_side b;
  std::vector<inode*> sorted(num);
  {
    auto ps = s.epochs.pin();
    auto pb = b.epochs.pin();
    for (std::uint64_t id : order) {
      const std::string k = decimal_key(id);
      s.insert(s.make(rng, k));
      inode* e = b.make(k);
      sorted[id / 2] = e;
      if (!b.tree.insert(e)) return 1;
    }
  }
  // New keys (odd), in random order, with their entries made ahead.
  std::vector<std::string> fresh_keys(ops);
  for (auto& k : fresh_keys) k = decimal_key(2 * (rng() % num) + 1);
  std::sort(fresh_keys.begin(), fresh_keys.end());
  fresh_keys.erase(std::unique(fresh_keys.begin(), fresh_keys.end()), fresh_keys.end());
  std::shuffle(fresh_keys.begin(), fresh_keys.end(), rng);
  for (const auto& k : fresh_keys) {
    s.fresh.push_back(s.make(rng, k));
    b.fresh.push_back(b.make(k));
  }
  std::vector<std::string> probes(ops);
  for (auto& k : probes) k = decimal_key(2 * (rng() % num) + 1);

  struct measurement {
    const char* name;
    std::function<double()> skiplist, btree;
  };
  std::uint64_t sink = 0;
  auto touch = [&sink](const inode* n) { sink += n->unlocked_newest().version + n->key()[15]; };
  const std::size_t inserts = fresh_keys.size();
  const std::vector<measurement> table = {
      {"last_below",
       [&] {
         auto pinned = s.epochs.pin();
         return ns_per_op(ops, [&] {
           for (const auto& k : probes) sink += s.list.last_below(k)->key_size;
         });
       },
       [&] {
         auto pinned = b.epochs.pin();
         return ns_per_op(ops, [&] {
           for (const auto& k : probes) sink += b.tree.last_below(k)->key_size;
         });
       }},
      {"insert",
       [&] {
         auto pinned = s.epochs.pin();
         const double t = ns_per_op(inserts, [&] {
           for (inode* n : s.fresh) s.insert(n);
         });
         for (inode* n : s.fresh) {  // untimed: back to the built index, entries kept
           s.list.remove(n);
           n->removed.store(false);
         }
         return t;
       },
       [&] {
         auto pinned = b.epochs.pin();
         const double t = ns_per_op(inserts, [&] {
           for (inode* n : b.fresh) sink += b.tree.insert(n);
         });
         for (inode* n : b.fresh) b.tree.erase(n);
         return t;
       }},
      {"seek+10",
       [&] {
         auto pinned = s.epochs.pin();
         return ns_per_op(ops, [&] {
           for (const auto& k : probes) {
             const inode* n = s.list.seek(k);
             for (int i = 0; i <= 10 && n != nullptr; ++i, n = n->load_next(0)) touch(n);
           }
         });
       },
       [&] {
         auto pinned = b.epochs.pin();
         return ns_per_op(ops, [&] {
           inode* out[11];
           for (const auto& k : probes) {
             const std::size_t n = b.tree.at_or_after(k, out, 11);
             for (std::size_t i = 0; i < n; ++i) touch(out[i]);
           }
         });
       }},
  };

  std::vector<std::vector<double>> skip_ns(table.size()), tree_ns(table.size());
  for (int run = 0; run < runs; ++run) {
    for (std::size_t m = 0; m < table.size(); ++m) {
      if (run % 2 == 0) {
        skip_ns[m].push_back(table[m].skiplist());
        tree_ns[m].push_back(table[m].btree());
      } else {
        tree_ns[m].push_back(table[m].btree());
        skip_ns[m].push_back(table[m].skiplist());
      }
    }
    s.epochs.collect();
    b.epochs.collect();
  }

  std::printf("index_bench: %llu keys of 16 bytes, %llu ops, median of %d runs (ns/op)\n",
              static_cast<unsigned long long>(num), static_cast<unsigned long long>(ops), runs);
  std::printf("%-12s %10s %10s %8s\n", "operation", "skiplist", "btree", "ratio");
  for (std::size_t m = 0; m < table.size(); ++m) {
    const double a = median(skip_ns[m]);
    const double c = median(tree_ns[m]);
    std::printf("%-12s %10.1f %10.1f %8.2f\n", table[m].name, a, c, a / c);
  }

  // build(): the whole index from its sorted entries, into a new tree.
  std::vector<double> build_ms;
  for (int run = 0; run < runs; ++run) {
    alloc::node_allocator nodes;
    alloc::epoch_domain epochs;
    btree t{epoch_dram{&nodes, &epochs}};
    const auto start = std::chrono::steady_clock::now();
    if (!t.build(sorted.data(), sorted.size())) return 1;
    const auto end = std::chrono::steady_clock::now();
    build_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    if (run == 0) {
      std::printf("btree: %zu bytes after inserts (%.1f per key), %zu after build\n",
                  b.tree.bytes(), static_cast<double>(b.tree.bytes()) / static_cast<double>(num),
                  t.bytes());
    }
  }
  std::printf("build of %llu entries: %.1f ms (median)\n", static_cast<unsigned long long>(num),
              median(build_ms));
  return sink == 42 ? 2 : 0;
}
