// hash_table: a lock-free hash table of 64-bit keys and values whose buckets are Harris
// lists (the FliT paper's hash table), durable in any mode of allocators/modes.hpp. The
// number of buckets is fixed at creation (a power of two); there is no resizing.
//
//   structures::hash_table<structures::traversal, Policy, Memory> t(memory, 1 << 14);
//   t.insert(7, 70); t.find(7);   // -> 70
//   auto r = decltype(t)::recover(memory, t.root(), live);
//
// Thread safety: insert, remove, find, contains from any threads concurrently. recover,
// for_each and TEST_Validate require that no operation runs.
// Invariants:
//  (1) A key lives in the bucket bucket_of(key) only; each bucket is a harris_chain (keys
//      strictly increase, deleted nodes are unlinked by their remover or a later search).
//  (2) bucket_count is immutable after creation.
// Persistence:
//  (1) Durable linearizability of every completed operation, in every mode but `original`:
//      each bucket is an independent Harris list with the persistence rules of
//      detail::harris_chain.
//  (2) The root block (bucket count, heads) is durable before the constructor returns.
//  (3) recover() repairs each bucket as harris_list does.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>

#include "flit/persist.hpp"
#include "structures/internal/harris_chain.hpp"
#include "structures/internal/nodes.hpp"
#include "allocators/node_memory.hpp"
#include "allocators/modes.hpp"

namespace structures {

template <durability_mode Mode, class Policy, node_memory Memory>
class hash_table {
 public:
  using mode = Mode;
  using policy = typename Mode::template policy_for<Policy>;
  static constexpr std::string_view name = "hash_table";

  // An empty table of `buckets` buckets (a power of two). Throws std::invalid_argument for
  // another count, out_of_space if the region is full.
  hash_table(Memory& memory, std::size_t buckets) : memory_(memory), chain_(memory) {
    if (buckets == 0 || !std::has_single_bit(buckets)) {
      throw std::invalid_argument("hash_table: bucket count " + std::to_string(buckets) +
                                  " is not a power of two");
    }
    const std::size_t bytes = block_bytes(buckets);
    auto [ref, block] = alloc::create_node<root_block>(memory_, bytes);
    const std::uint64_t count = buckets;
    policy::write_range(&block->bucket_count, &count, sizeof count, flit::volatile_);
    for (std::size_t i = 0; i < buckets; ++i) {
      new (&block->heads()[i]) link();
      block->heads()[i].store(node_ref{}, flit::volatile_, flit::private_);
    }
    policy::flush_range(block, bytes);
    policy::operation_completion();
    attach(ref.offset());
  }

  // The table whose root block is at `root`, after a crash. Calls live(offset, bytes) for
  // the root block and every node kept. REQUIRES: nothing else uses the region.
  template <class Live>
  static hash_table recover(Memory& memory, std::uint64_t root, Live&& live) {
    hash_table t(memory, root, attach_tag{});
    live(root, block_bytes(t.buckets_));
    for (std::size_t i = 0; i < t.buckets_; ++i) t.chain_.recover(t.heads_[i], live);
    policy::operation_completion();
    return t;
  }

  bool insert(std::uint64_t key, std::uint64_t value) {
    [[maybe_unused]] auto pin = memory_.pin();
    flit::completion_scope<policy> done;
    return chain_.insert(bucket(key), key, value);
  }

  bool remove(std::uint64_t key) {
    [[maybe_unused]] auto pin = memory_.pin();
    flit::completion_scope<policy> done;
    return chain_.remove(bucket(key), key);
  }

  std::optional<std::uint64_t> find(std::uint64_t key) const {
    [[maybe_unused]] auto pin = memory_.pin();
    flit::completion_scope<policy> done;
    return chain_.find(bucket(key), key);
  }

  bool contains(std::uint64_t key) const { return find(key).has_value(); }

  // f(key, value) for every key, bucket by bucket. REQUIRES: no operation runs.
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < buckets_; ++i) chain_.for_each(heads_[i], f);
  }

  std::uint64_t root() const noexcept { return root_; }
  std::size_t bucket_count() const noexcept { return buckets_; }

  // The first broken invariant (order in a bucket, a deleted node still linked, a key in
  // the wrong bucket), if any. REQUIRES: no operation runs.
  std::optional<std::string> TEST_Validate() const {
    for (std::size_t i = 0; i < buckets_; ++i) {
      if (auto broken = chain_.validate(heads_[i])) return "bucket " + std::to_string(i) + ": " + *broken;
      std::optional<std::string> misplaced;
      chain_.for_each(heads_[i], [&](std::uint64_t key, std::uint64_t) {
        if (index_of(key) != i && !misplaced) {
          misplaced = "key " + std::to_string(key) + " in bucket " + std::to_string(i);
        }
      });
      if (misplaced) return misplaced;
    }
    return std::nullopt;
  }

 private:
  using chain = detail::harris_chain<Mode, policy, Memory>;
  using link = typename chain::link;

  // The root block: the bucket count, then the heads.
  struct root_block {
    alignas(alignof(link)) std::uint64_t bucket_count;
    link* heads() noexcept {
      return std::launder(reinterpret_cast<link*>(reinterpret_cast<std::byte*>(this) + heads_offset));
    }
  };
  static constexpr std::size_t heads_offset =
      (sizeof(std::uint64_t) + alignof(link) - 1) / alignof(link) * alignof(link);
  static std::size_t block_bytes(std::size_t buckets) {
    return heads_offset + buckets * sizeof(link);
  }

  struct attach_tag {};
  hash_table(Memory& memory, std::uint64_t root, attach_tag) : memory_(memory), chain_(memory) {
    attach(root);
  }

  void attach(std::uint64_t root) {
    root_ = root;
    auto* block = alloc::node_at<root_block>(memory_, node_ref::at(root));
    buckets_ = static_cast<std::size_t>(block->bucket_count);
    shift_ = 64 - std::countr_zero(buckets_);
    heads_ = block->heads();
  }

  std::size_t index_of(std::uint64_t key) const noexcept {
    // Fibonacci hashing: the top bits of key times 2^64 / phi.
    return buckets_ == 1 ? 0 : static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ULL) >> shift_);
  }
  link& bucket(std::uint64_t key) const noexcept { return heads_[index_of(key)]; }

  Memory& memory_;
  chain chain_;
  std::uint64_t root_ = 0;
  std::size_t buckets_ = 0;
  int shift_ = 64;
  link* heads_ = nullptr;
};

}  // namespace structures
