// harris_list: Harris's lock-free sorted linked list of 64-bit keys and values, durable in
// any mode of allocators/modes.hpp under any counter placement. An example to copy: the
// node's link is a flit::persist<node_ref>, every access names its role, and the mode
// decides which roles are p-instructions.
//
//   using list = structures::harris_list<structures::manual, flit::default_policy, Memory>;
//   list l(memory);                 // an empty list in memory's region
//   pool_root = l.root();           // where recovery will find it
//   l.insert(7, 70); l.find(7);     // -> 70
//   ...crash, restart...
//   list r = list::recover(memory, pool_root, [&](std::uint64_t offset, std::size_t bytes) {
//     /* offset..offset+bytes is a live node: tell the allocator */ });
//
// Thread safety: insert, remove, find, contains from any threads concurrently. recover,
// for_each and TEST_Validate require that no operation runs.
// Invariants: those of detail::harris_chain (keys strictly increase; a marked node's next
// never changes; a node is retired once, by its unlinker).
// Persistence:
//  (1) Every completed operation is durable when it returns (durable linearizability), in
//      every mode but `original`.
//  (2) The root block (the head link) is durable before the constructor returns.
//  (3) recover() removes deleted nodes whose unlink was lost, clears flit metadata (counters
//      beside words, flush flags in words), and reports every node it keeps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <string>

#include "flit/persist.hpp"
#include "structures/internal/harris_chain.hpp"
#include "structures/internal/nodes.hpp"
#include "allocators/node_memory.hpp"
#include "allocators/modes.hpp"

namespace structures {

template <durability_mode Mode, class Policy, node_memory Memory>
class harris_list {
 public:
  using mode = Mode;
  using policy = typename Mode::template policy_for<Policy>;
  static constexpr std::string_view name = "list";

  // An empty list in memory's region. Throws out_of_space if the region is full.
  explicit harris_list(Memory& memory) : memory_(memory), chain_(memory) {
    auto [ref, block] = alloc::create_node<root_block>(memory_, sizeof(root_block));
    block->head.store(node_ref{}, flit::volatile_, flit::private_);
    policy::flush_range(block, sizeof(root_block));
    policy::operation_completion();
    root_ = ref.offset();
    block_ = block;
  }

  // The list whose root block is at `root`, after a crash (the region holds the durable
  // image). Calls live(offset, bytes) for the root block and every node kept.
  // REQUIRES: nothing else uses the region.
  template <class Live>
  static harris_list recover(Memory& memory, std::uint64_t root, Live&& live) {
    harris_list l(memory, root);
    live(root, sizeof(root_block));
    l.chain_.recover(l.block_->head, live);
    policy::operation_completion();
    return l;
  }

  bool insert(std::uint64_t key, std::uint64_t value) {
    [[maybe_unused]] auto pin = memory_.pin();
    flit::completion_scope<policy> done;
    return chain_.insert(block_->head, key, value);
  }

  bool remove(std::uint64_t key) {
    [[maybe_unused]] auto pin = memory_.pin();
    flit::completion_scope<policy> done;
    return chain_.remove(block_->head, key);
  }

  std::optional<std::uint64_t> find(std::uint64_t key) const {
    [[maybe_unused]] auto pin = memory_.pin();
    flit::completion_scope<policy> done;
    return chain_.find(block_->head, key);
  }

  bool contains(std::uint64_t key) const { return find(key).has_value(); }

  // f(key, value) for every key in increasing order. REQUIRES: no operation runs.
  template <class F>
  void for_each(F&& f) const {
    chain_.for_each(block_->head, f);
  }

  // Offset of the root block in the region: what recover() needs.
  std::uint64_t root() const noexcept { return root_; }

  // The first broken invariant (order, a deleted node still linked), if any.
  // REQUIRES: no operation runs.
  std::optional<std::string> TEST_Validate() const { return chain_.validate(block_->head); }

 private:
  using chain = detail::harris_chain<Mode, policy, Memory>;

  struct root_block {
    typename chain::link head;
  };

  harris_list(Memory& memory, std::uint64_t root)
      : memory_(memory),
        chain_(memory),
        root_(root),
        block_(alloc::node_at<root_block>(memory, node_ref::at(root))) {}

  Memory& memory_;
  chain chain_;
  std::uint64_t root_ = 0;
  root_block* block_ = nullptr;
};

}  // namespace structures
