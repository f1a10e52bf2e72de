// Workloads and histories for the crash harness.
//
// A workload is a list of operations per thread, generated from a seed, so that the parent
// process (which checks) and the crashed child (which runs) agree on it without sending it.
// A history is what the child recorded about each operation before it crashed: not invoked,
// invoked but not completed (pending), or completed with its result, with logical
// timestamps that give the real-time order between operations of different threads.
//
// Values are unique per write: value_id(thread, op, entry) encodes who wrote it, so a
// recovered value names exactly one write (a value no write produced is caught).
//
// Operation names: the workload carries the names its history and the checkers' messages
// print for each kind (workload::names). They default to the kind's own name ("put",
// "enqueue", ...); a subject chooses its own (see crashtest/harness.hpp, `op_name`), and a
// campaign of one's own may use kinds from op_kind::user on and name them.
//
// Thread safety: plain values; no sharing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crashtest {

enum class op_kind : std::uint8_t {
  // key-value stores
  put,
  del,
  get,
  batch,
  persist,  // makes the store's weak writes durable (kv_weak_subject)
  // sets and maps
  insert,
  remove,
  contains,
  // queues (FIFO)
  enqueue,
  dequeue,
  // stacks (LIFO)
  push,
  pop,
  // The first kind free for a campaign of one's own: op_kind::user, user + 1, ... (use
  // crashtest::user_kind(n)); name them in workload::names.
  user = 64,
};

constexpr op_kind user_kind(std::uint8_t n) {
  return static_cast<op_kind>(static_cast<std::uint8_t>(op_kind::user) + n);
}

// The kind's own name ("put", ...; "user+3" for user kinds).
std::string to_string(op_kind k);

// What messages call each kind of operation: the kind's own name unless one was set.
class op_names {
 public:
  void set(op_kind k, std::string name);
  std::string operator()(op_kind k) const;

 private:
  std::vector<std::pair<op_kind, std::string>> names_;
};

// One entry of a write batch.
struct kv_write {
  std::uint64_t key = 0;
  std::uint64_t value = 0;  // unique, nonzero; 0 for a delete
  bool del = false;
};

struct operation {
  op_kind kind = op_kind::get;
  std::uint64_t key = 0;    // keys are 1 .. key_space (0 is never used: an erased node has it)
  std::uint64_t value = 0;  // put, insert, enqueue, push: unique and nonzero
  std::uint32_t batch_first = 0;  // batch: entries [batch_first, batch_first + batch_size)
  std::uint32_t batch_size = 0;   //        of workload::batch_entries, distinct keys
  bool weak = false;  // put, del, batch: weakly durable (durable at the next persist, or at
                      // a later write that is not weak)
};

// The value written by entry `entry` of operation `op` of thread `thread`: unique and nonzero.
constexpr std::uint64_t value_id(std::uint32_t thread, std::uint32_t op, std::uint32_t entry) {
  return (std::uint64_t{thread + 1} << 48) | (std::uint64_t{op} << 16) | entry;
}

// What threads do. Writers draw from the mix; readers only read (get / contains; queue and
// stack workloads have no read: their readers only dequeue / pop).
struct workload_config {
  unsigned writer_threads = 1;
  unsigned reader_threads = 0;
  std::size_t ops_per_writer = 40;
  std::size_t ops_per_reader = 200;
  std::uint64_t key_space = 8;
  // Writers' mix in percent; what is left over are reads. Key-value workloads use put, del
  // and batch; set and map workloads use put as insert and del as remove; queue and stack
  // workloads use put as enqueue / push, and everything else is dequeue / pop.
  unsigned put_percent = 55;
  unsigned del_percent = 20;
  unsigned batch_percent = 10;
  unsigned max_batch = 4;  // entries per batch: 2 .. max_batch, distinct keys
  // Key-value workloads with weak durability: the percentage of writers' writes made weak,
  // and of writers' operations that are persists (taken before the mix above). Both 0:
  // every write is durable on return, and the workload is drawn as without them.
  unsigned weak_percent = 0;
  unsigned persist_percent = 0;

  unsigned threads() const { return writer_threads + reader_threads; }
  std::size_t ops_of(unsigned thread) const {
    return thread < writer_threads ? ops_per_writer : ops_per_reader;
  }
  std::size_t max_ops() const;
  // A short label: "w1r0 o40 k8".
  std::string describe() const;
};

enum class workload_family : std::uint8_t { kv, set, queue, stack };

struct workload {
  std::vector<std::vector<operation>> threads;
  std::vector<kv_write> batch_entries;
  op_names names;  // how messages name each kind
};

// Generates the same workload for the same (config, family, seed).
workload make_workload(const workload_config& config, workload_family family,
                       std::uint64_t seed);

// ---- histories ---------------------------------------------------------------------------

enum class op_status : std::uint8_t { not_invoked, pending, completed };

struct op_outcome {
  op_status status = op_status::not_invoked;
  bool found = false;           // get / contains / insert / remove result; dequeue / pop:
                                // whether it returned a value (false: it found none)
  std::uint64_t value = 0;      // get, dequeue, pop: the value returned
  std::uint64_t version = 0;    // put / del / batch: the version assigned; get: the version
                                // of the value returned; 0: unknown
  std::uint64_t invoke_ts = 0;  // logical time of invocation
  std::uint64_t complete_ts = 0;  // logical time of completion (completed only)
};

struct history {
  std::vector<std::vector<op_outcome>> threads;  // threads[t][i]: operation i of thread t

  // Operation a happened before operation b in real time (a completed before b began).
  static bool precedes(const op_outcome& a, const op_outcome& b) {
    return a.status == op_status::completed && b.status != op_status::not_invoked &&
           a.complete_ts < b.invoke_ts;
  }
};

// A recovered key-value pair, as a subject reports its state. Queues and stacks: key is the
// position (0: the next to be removed), value the element.
struct kv_entry {
  std::uint64_t key = 0;
  std::uint64_t value = 0;
  std::uint64_t version = 0;  // key-value stores: the version of the live value
  friend bool operator==(const kv_entry&, const kv_entry&) = default;
};

}  // namespace crashtest
