// Checkers of durable linearizability: given a workload, the history a crashed run
// recorded, and the state a structure recovered, list what the state gets wrong.
//
// Both are pure functions (no processes, no model), so they are tested on hand-made
// histories as well as used by the campaigns. Each returns the problems found, one line
// each; an empty list means the state is allowed.
//
// Key-value stores (check_kv), the rule of DESIGN.md section 7 made concrete with versions:
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
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "crash/workload.hpp"

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

// "thread 0 op 12 (put key 3 value 0x1000c0000)": names an operation in messages.
std::string describe_op(const workload& w, unsigned thread, std::size_t op);

}  // namespace crashtest
