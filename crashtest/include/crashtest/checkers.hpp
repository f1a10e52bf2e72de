// Checkers of durable linearizability: given a workload, the history a crashed run
// recorded, and the state a structure recovered, list what the state gets wrong.
//
// Both are pure functions (no processes, no model), so they are tested on hand-made
// histories as well as used by the campaigns. Each returns the problems found, one line
// each; an empty list means the state is allowed.
//
// Durable linearizability: after a crash, the recovered state must be the state after some
// linearization of the completed operations and a subset of the pending ones (operations
// invoked and not completed when the power failed), in an order that respects real time
// (an operation that completed before another began comes first). Each checker below makes
// that rule concrete for one kind of structure; each lists necessary conditions, so a
// correct structure never fails them.
//
// Key-value stores (check_kv), with versions:
//  (1) Every recovered (key, value) was written to that key by an invoked put or batch entry
//      (values are unique per write); a key nobody wrote is never present.
//  (2) A recovered value carries the version its write was assigned (when known), and no
//      version belongs to two operations (only the entries of one batch share one).
//  (3) Required writes: every completed write; every write whose value a completed get
//      returned; every entry of a batch of which any entry survived (all or nothing).
//      Per key, the recovered version is >= the version of the newest required write, and
//      equal only if it is that write; a key is absent only if that write is a delete, or
//      a pending delete of the key (whose version is unknown) may have come after it.
//  (4) A required write of unknown version (a pending write a completed get returned, with
//      no version reported) is not overtaken by a write that completed before it began.
//  (5) Weak durability (operations marked weak, and persists): a completed weak write is
//      required only if a completed persist began after it completed; a get returning its
//      value requires nothing. The state must be a prefix of the version order: every write
//      of known version below the newest version that survived or is required (by (3) or
//      (5)) is required. With no weak write, (5) adds nothing to (3).
//  Pending writes may or may not survive: any subset is allowed.
//
// Sets and maps (check_map): per key, the recovered presence (and value, for maps) must be
// the state after some operation that can be linearized last among those on the key:
//  - a completed operation leaves a known state (insert: present; remove: absent;
//    contains/get: what it returned); a pending insert or remove leaves its own effect;
//  - an operation can be last unless a completed operation on the key began after it
//    completed; with no completed operation on a key, absence is allowed too.
//  Also: no key is reported twice, keys are ascending for ordered structures, and no key or
//  value appears that no insert wrote.
//
// Queues (check_queue) and stacks (check_stack): the state lists the values as
// sequence_state() encodes them (key = position, 0 the next to be removed; value = the
// element). Values are unique per enqueue / push. Then:
//  - nothing invented: every value in the state, and every value a completed dequeue / pop
//    returned, was written by an invoked enqueue / push;
//  - no duplication: no value appears twice in the state, is returned by two completed
//    dequeues / pops, or is both returned by a completed one and still in the state;
//  - no loss: a value whose enqueue / push completed is in the state, or a completed
//    dequeue / pop returned it, or a pending one may have taken it: at most as many such
//    values are missing as there are pending dequeues / pops, and (stacks) a pending pop
//    may have taken a value only if no value still in the state was certainly above it
//    then;
//  - order (queues, FIFO): a value in the state comes after every value in the state whose
//    enqueue completed before its own enqueue began, and no value whose enqueue completed
//    before that of a value that is gone (returned or missing) is still in the state;
//  - order (stacks, LIFO): a value in the state lies below every value in the state whose
//    push began after its own push completed, and a value still in the state was not
//    pushed above one that a completed pop returned (pushed after it, completed before
//    the pop began).
//  Pending enqueues / pushes may or may not have taken effect; pending dequeues / pops may
//  or may not have removed a value.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "crashtest/workload.hpp"

namespace crashtest {

std::vector<std::string> check_kv(const workload& w, const history& h,
                                  const std::vector<kv_entry>& recovered);

struct map_check_options {
  bool values = true;    // maps: compare values; sets: presence only
  bool ordered = false;  // the structure reports its keys in ascending order
};

std::vector<std::string> check_map(const workload& w, const history& h,
                                   const std::vector<kv_entry>& recovered,
                                   map_check_options options);

std::vector<std::string> check_queue(const workload& w, const history& h,
                                     const std::vector<kv_entry>& recovered);
std::vector<std::string> check_stack(const workload& w, const history& h,
                                     const std::vector<kv_entry>& recovered);

// "thread 0 op 12 (put key 3 value 0x1000c0000)": names an operation in messages, with the
// name the workload gives its kind (workload::names).
std::string describe_op(const workload& w, unsigned thread, std::size_t op);

}  // namespace crashtest
