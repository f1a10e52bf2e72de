// Durability modes: which accesses of a concurrent structure are p-instructions. A building
// block for durable structures (with allocators/node_memory.hpp): the structures of
// structures/ use it, and so may any structure written on the toolkit.
//
// Every field access of such a structure names its *role* (why it happens in the
// algorithm); a mode maps each role to flit::persisted or flit::volatile_, and
// access_for<Mode, role> is the access tag to pass to persist<T>'s load, store or CAS. One
// algorithm per structure, four modes over it:
//
//   original   plain atomics: every role volatile, and the policy's placement replaced by
//              flit::nonpersistent (no flush, no fence, no counter). The volatile baseline.
//   automatic  every load and store a p-instruction (FliT paper, Theorem 3.1): correct for
//              any linearizable algorithm, with no reasoning at all.
//   traversal  NVTraverse (Friedman et al., PLDI 2020): v-loads while searching; at the
//              transition, p-loads of the locations the search read that the rest depends on
//              (the link into each node of the window and the window's fields); every access
//              in the critical part a p-instruction.
//   manual     hand-placed choices in the style of David et al.'s log-free structures: the
//              search is volatile, only the words an outcome depends on are p-loaded, reads
//              inside the critical part are volatile (the p-CAS that follows persists what it
//              writes), and words that recovery rebuilds or ignores (skiplist index levels,
//              the BST's tag bits) are written with v-instructions.
//
// Roles (the comments at each access in structures/ say which applies):
//   traverse     a load while searching, before the operation decides anything.
//   transition   NVTraverse's flush at the end of the search of a location it read that no
//                `dependency` load covers (the link into the left node, fields of nodes in
//                the window). Issued as a p-load whose value is discarded.
//   dependency   a (re-)load of a word the outcome depends on: the link into the node an
//                update is about to write, the link into the node whose presence or absence
//                is the answer, a deletion mark that makes a key absent.
//   critical     a load inside the critical part (re-reading a word before a CAS, helping).
//   publish      the CAS that linearizes an update: linking a new node, marking one deleted.
//   unlink       the CAS that physically removes a logically deleted node. Persisted in
//                every persistent mode: the node is freed afterwards, and a durable image
//                must never lead to memory that was reused.
//   index        accesses to words that only speed up searches and that recovery rebuilds
//                (a skiplist's levels above 0): links, marks, and the initial values.
//   freeze       a CAS that only stops a word from changing (the BST's tag bit).
//   init         a node's contents, written privately before it is published: flushed (one
//                pwb per line) in every persistent mode.
//
// A role mapped to volatile_ on a load whose value is discarded (transition, dependency in
// `automatic`, where the search's own p-loads already covered the word) is not issued at all.
//
// Thread safety: types and constants only.
#pragma once

#include <cstddef>
#include <string_view>

#include "flit/persist.hpp"
#include "flit/placement.hpp"
#include "flit/policy.hpp"

namespace alloc {

enum class role {
  traverse,
  transition,
  dependency,
  critical,
  publish,
  unlink,
  index,
  freeze,
  init,
};

// A mode: persisted(r) says whether role r is a p-instruction; policy_for<P> is the policy
// the structure runs on when built with policy P.
template <class M>
concept durability_mode = requires {
  { M::name } -> std::convertible_to<std::string_view>;
  { M::persisted(role::traverse) } -> std::same_as<bool>;
  typename M::template policy_for<flit::policy<flit::plain, flit::clwb>>;
};

struct original {
  static constexpr std::string_view name = "original";
  static constexpr bool persisted(role) { return false; }
  template <class Policy>
  using policy_for = flit::policy<flit::nonpersistent, typename Policy::backend>;
};

struct automatic {
  static constexpr std::string_view name = "automatic";
  static constexpr bool persisted(role r) {
    // The search's p-loads already persisted what re-loads at the transition would.
    return r != role::transition && r != role::dependency;
  }
  template <class Policy>
  using policy_for = Policy;
};

struct traversal {
  static constexpr std::string_view name = "traversal";
  static constexpr bool persisted(role r) { return r != role::traverse; }
  template <class Policy>
  using policy_for = Policy;
};

struct manual {
  static constexpr std::string_view name = "manual";
  static constexpr bool persisted(role r) {
    switch (r) {
      case role::dependency:
      case role::publish:
      case role::unlink:
      case role::init:
        return true;
      case role::traverse:
      case role::transition:
      case role::critical:
      case role::index:
      case role::freeze:
        return false;
    }
    return true;
  }
  template <class Policy>
  using policy_for = Policy;
};

static_assert(durability_mode<original>);
static_assert(durability_mode<automatic>);
static_assert(durability_mode<traversal>);
static_assert(durability_mode<manual>);

// The access tag of role R under Mode: flit::persisted or flit::volatile_.
template <durability_mode Mode, role R>
inline constexpr auto access_for = [] {
  if constexpr (Mode::persisted(R)) {
    return flit::persisted;
  } else {
    return flit::volatile_;
  }
}();

// Issues the p-load of role R on `word` for its effect only (the write-back of a tagged
// location); nothing at all when the mode maps R to volatile.
template <durability_mode Mode, role R, class Word>
inline void persist_read(const Word& word) {
  if constexpr (Mode::persisted(R)) (void)word.load(flit::persisted);
}

// Ends the private initialization of a node [node, node + bytes) that is about to be
// published: one pwb per cache line when the mode persists `init`. The next shared p-store
// of this thread (the store or CAS that publishes the node) fences them, so the node's
// contents are durable before any durable link reaches it.
template <durability_mode Mode, class Policy>
inline void finish_init(const void* node, std::size_t bytes) {
  if constexpr (Mode::persisted(role::init)) Policy::flush_range(node, bytes);
}

}  // namespace alloc
