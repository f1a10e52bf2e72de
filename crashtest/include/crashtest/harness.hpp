// The crash harness: runs a workload on a structure whose persistent memory is the pv model,
// crashes it at chosen persistence events, recovers each durable image in a child process
// and checks the recovered state against the history (crashtest/checkers.hpp).
// docs/crash-testing.md is the guide; this header is the contract.
//
// A campaign, step by step:
//  1. The workload (crashtest/workload.hpp) is generated from the seed. A child process runs
//     it to the end once, on a fresh structure in a pv::model region, to count the
//     persistence events (pwb and pfence) it issues after the structure was created.
//  2. Crash points are chosen: every event and the end of the run when there are at most
//     `points` of them, otherwise a seeded sample of `points` (the end always among them).
//  3. The workload runs again and is stopped at each point, at the event (before it takes
//     effect): the durable images are taken (write-back none, all, and `random_images`
//     seeded random subsets per cache line) into shared memory. Single-threaded runs are
//     deterministic, so one run stops at every point in turn and waits while the parent
//     checks; multi-threaded runs fork a new child per point, which exits at its point.
//     Each thread logs into shared memory, before and after each operation, that it was
//     invoked and what it returned.
//  4. For each distinct image, a child (with a time limit per image; one child for all the
//     images of a point unless one kills it) loads it into a model, runs the structure's
//     recovery and reads its state, twice (the states must agree), then
//     crashes right after recovery with no pending write-back, recovers that image and
//     must read the same state again. A signal, an exception or the time limit is a failure
//     of that image.
//  5. The parent checks the state against the history; every failure prints a line with
//     what replays it exactly (single-threaded runs are deterministic).
//
// Plugging a structure in. A subject is a class S built by a factory
// `std::unique_ptr<S>(pv::model&, crashtest::start)` (by default S(model&, start)):
// start::fresh lays out an empty structure in the model's region, start::recover runs its
// recovery on the region's content. Its operations complete (operation_completion) before
// they return. Then either:
//  - it models kv_subject, set_subject, map_subject, queue_subject or stack_subject below,
//    and run_kv_campaign / run_set_campaign / run_queue_campaign / run_stack_campaign run it
//    with the matching checker; or
//  - run_campaign takes its operations (a perform callable), how to read its recovered
//    state, a workload generator and a checker of one's own (campaign_plan).
// A subject names its operations in messages and replays with an optional
//   static std::string_view op_name(crashtest::op_kind k);   // "" keeps the default name
//
// The region: campaign_config::region_bytes = 0 (the default) lets the harness choose: it
// starts at 128 KiB and doubles while the counting run runs out of room (the subject throws
// std::bad_alloc, e.g. alloc::out_of_space), up to max_region_bytes. A size set explicitly
// that is too small fails the campaign with a message naming the size that works.
//
// Environment: CRASH_POINTS=n overrides `points` of every campaign; CRASH_SEED=s overrides
// the workload seed; CRASH_SEEDS=n runs each campaign over n workload seeds from there (the
// long campaign) and adds the results up; CRASH_MIN_IMAGES=n (or config.min_images) runs
// further seeds until at least n images were checked; CRASH_REPLAY=event:writeback:seed
// checks that one image only and prints the history and the recovered state.
//
// No test framework is needed: a campaign returns a campaign_result. crashtest/gtest.hpp
// (optional, header-only) makes replay lines name the running GoogleTest test.
//
// Thread safety: run campaigns from one thread (they fork). The subject's operations are
// called from config.work.threads() threads at once when that is more than one.
#pragma once

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "crashtest/checkers.hpp"
#include "crashtest/workload.hpp"
#include "pv_interface/model.hpp"

namespace crashtest {

// How a subject is built in a region.
enum class start : std::uint8_t {
  fresh,    // lay out an empty structure (the harness then makes the region durable)
  recover,  // the region holds a crash image: recover from it
};

// Thrown by a subject's state() (or recovery) when the structure is broken: a cycle, keys
// out of order, a node reachable twice, a pointer outside the region.
class invariant_violation : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The result of a get: the value found and the version of that value (0 when unknown).
struct kv_read {
  bool found = false;
  std::uint64_t value = 0;
  std::uint64_t version = 0;
};

// A key-value store with versions. put/del/write_batch return the version the store assigned
// (nonzero); state() lists the live keys with their values and versions.
template <class S>
concept kv_subject = requires(S& s, const S& cs, std::uint64_t key, std::uint64_t value) {
  { s.put(key, value) } -> std::same_as<std::uint64_t>;
  { s.del(key) } -> std::same_as<std::uint64_t>;
  { s.get(key) } -> std::same_as<kv_read>;
  { cs.state() } -> std::same_as<std::vector<kv_entry>>;
};

// A key-value store that also applies batches atomically (entries have distinct keys).
template <class S>
concept kv_batch_subject = kv_subject<S> && requires(S& s, std::span<const kv_write> entries) {
  { s.write_batch(entries) } -> std::same_as<std::uint64_t>;
};

// How durable a write of a kv_weak_subject is: on return, or at the next persist() (or the
// next sync write, of any thread).
enum class durability : std::uint8_t { sync, weak };

// A key-value store with weak durability: writes that are durable only once persist() (or
// a later sync write) covered them. After a crash the store must hold a prefix of the
// version order (check_kv says what that requires).
template <class S>
concept kv_weak_subject = kv_batch_subject<S> &&
    requires(S& s, std::uint64_t key, std::uint64_t value, std::span<const kv_write> entries) {
  { s.put(key, value, durability::weak) } -> std::same_as<std::uint64_t>;
  { s.del(key, durability::weak) } -> std::same_as<std::uint64_t>;
  { s.write_batch(entries, durability::weak) } -> std::same_as<std::uint64_t>;
  s.persist();
};

// A set of keys. insert/remove return whether they changed the set.
template <class S>
concept set_subject = requires(S& s, const S& cs, std::uint64_t key) {
  { s.insert(key) } -> std::same_as<bool>;
  { s.remove(key) } -> std::same_as<bool>;
  { s.contains(key) } -> std::same_as<bool>;
  { cs.state() } -> std::same_as<std::vector<std::uint64_t>>;
};

// A map with insert-if-absent. state() lists (key, value) pairs; versions are ignored.
template <class S>
concept map_subject = requires(S& s, const S& cs, std::uint64_t key, std::uint64_t value) {
  { s.insert(key, value) } -> std::same_as<bool>;
  { s.remove(key) } -> std::same_as<bool>;
  { s.get(key) } -> std::same_as<std::optional<std::uint64_t>>;
  { cs.state() } -> std::same_as<std::vector<kv_entry>>;
};

// A FIFO queue of 64-bit values (every value the workload enqueues is unique and nonzero).
// dequeue returns nothing when the queue is empty; state() lists the values front to back.
template <class S>
concept queue_subject = requires(S& s, const S& cs, std::uint64_t value) {
  s.enqueue(value);
  { s.dequeue() } -> std::same_as<std::optional<std::uint64_t>>;
  { cs.state() } -> std::same_as<std::vector<std::uint64_t>>;
};

// A LIFO stack of 64-bit values. pop returns nothing when the stack is empty; state() lists
// the values top to bottom (the next to be popped first).
template <class S>
concept stack_subject = requires(S& s, const S& cs, std::uint64_t value) {
  s.push(value);
  { s.pop() } -> std::same_as<std::optional<std::uint64_t>>;
  { cs.state() } -> std::same_as<std::vector<std::uint64_t>>;
};

// Sets and maps may declare `static constexpr bool ordered = true;`: state() is then
// required to list keys in ascending order.
template <class S>
constexpr bool ordered_subject() {
  if constexpr (requires { S::ordered; }) {
    return S::ordered;
  } else {
    return false;
  }
}

// The names S gives its operations (S::op_name, if it has one) put into w.names.
template <class S>
void name_operations(workload& w) {
  if constexpr (requires(op_kind k) {
                  { S::op_name(k) } -> std::convertible_to<std::string_view>;
                }) {
    for (const auto& ops : w.threads) {
      for (const operation& o : ops) {
        std::string_view n = S::op_name(o.kind);
        if (!n.empty()) w.names.set(o.kind, std::string(n));
      }
    }
  }
}

// The default factory: S(model, how).
template <class S>
struct construct {
  std::unique_ptr<S> operator()(pv::model& m, start how) const {
    return std::make_unique<S>(m, how);
  }
};

struct campaign_config {
  std::string subject;  // printed: the structure
  std::string config;   // printed: its configuration (placement, mode, ...)
  workload_config work;
  std::uint64_t workload_seed = 1;
  // The model's region (each image is this large). 0: chosen by the harness (see above).
  std::size_t region_bytes = 0;
  std::size_t max_region_bytes = 64 << 20;  // the largest region the harness chooses
  std::size_t points = 300;      // crash points to check (CRASH_POINTS overrides)
  unsigned random_images = 2;    // random write-back images per point, besides none and all
  std::chrono::milliseconds recovery_timeout{10000};  // per recovery child
  std::chrono::milliseconds workload_timeout{60000};  // per workload child
  // Multi-threaded runs: the thread that reaches the crash event waits there until the
  // other threads complete `stall_ops` more operations (or stall_timeout passes), so that
  // what they observe of its unfinished operation is in the history.
  unsigned stall_ops = 0;
  std::chrono::milliseconds stall_timeout{10};
  // Run workload seeds from workload_seed on until at least this many images were checked
  // (0: one seed; CRASH_MIN_IMAGES overrides). The long suite's per-campaign budget.
  std::size_t min_images = 0;
  std::size_t stop_after_failures = 0;  // stop the campaign after this many (0: never)
  std::size_t max_state_entries = 1 << 14;  // capacity for a recovered state
  bool print_failures = true;  // print each failure (the first few in full)
};

// The region the harness starts from when region_bytes is 0.
inline constexpr std::size_t default_region_bytes = 128 << 10;

// One image that failed.
struct failure {
  std::uint64_t event = 0;  // crash event; == campaign_result::events: after the run
  pv::writeback writeback = pv::writeback::none;
  std::uint64_t writeback_seed = 0;
  std::vector<std::string> problems;
  std::string replay;  // the environment and command that check this image again
};

struct campaign_result {
  std::uint64_t events = 0;        // persistence events of the counting run (summed over seeds)
  std::size_t budget = 0;          // points asked for: config.points or CRASH_POINTS (summed
                                   // over seeds)
  std::size_t points = 0;          // crash points run
  std::size_t points_past_end = 0; // multi-threaded points whose run ended before the event
  std::size_t images = 0;          // distinct images recovered and checked
  std::size_t failed = 0;          // images that failed
  std::size_t failed_points = 0;   // points with at least one failed image
  std::size_t region_bytes = 0;    // the region the campaign ran in (the last seed's)
  std::vector<failure> failures;   // the first ones, in full
  // "crash: <subject> <config>: N points, M images, F failed (...)"
  std::string summary;

  // Whether a problem of a recorded failure contains `text`.
  bool any_problem_contains(std::string_view text) const;
};

// What a replay line appends after the executable's path (e.g. "--gtest_filter=Suite.Test"),
// asked when a failure is recorded; nullptr (the default) appends nothing.
// crashtest/gtest.hpp installs one for GoogleTest.
using replay_arguments_fn = std::string (*)();
void set_replay_arguments(replay_arguments_fn f);

// A checker: the problems of a recovered state (empty: allowed). See crashtest/checkers.hpp.
using checker = std::function<std::vector<std::string>(const workload&, const history&,
                                                       const std::vector<kv_entry>&)>;
// Makes the workload of a seed. Called in the parent and in every child with the same
// arguments: it must be deterministic.
using workload_generator = std::function<workload(const workload_config&, std::uint64_t seed)>;

// What a campaign of one's own runs, besides the subject: its workloads and its checker.
struct campaign_plan {
  workload_generator generate;
  checker check;
};

// A generator of the ready-made families (make_workload), with S's operation names.
template <class S>
workload_generator family_generator(workload_family family) {
  return [family](const workload_config& c, std::uint64_t seed) {
    workload w = make_workload(c, family, seed);
    name_operations<S>(w);
    return w;
  };
}

namespace detail {

// What a workload child sees: the model, and the log of what its threads do.
class child_context {
 public:
  virtual ~child_context() = default;
  virtual pv::model& model() = 0;
  // Counts events from here on and arms the crash point. REQUIRES: the subject is built.
  virtual void arm() = 0;
  // Logs that thread t invokes its operation i; does not return once the run crashed.
  virtual void invoked(unsigned thread, std::size_t op) = 0;
  // Logs the result of thread t's operation i, unless the run already crashed.
  virtual void completed(unsigned thread, std::size_t op, const op_outcome& result) = 0;
  // Ends the run as failed (an operation threw on a worker thread); out_of_room: it threw
  // std::bad_alloc (the region is too small).
  [[noreturn]] virtual void fail(const std::string& why, bool out_of_room) = 0;
};

using workload_body = std::function<void(child_context&, const workload&)>;
using recovery_body = std::function<std::vector<kv_entry>(pv::model&)>;

campaign_result run_campaign(const campaign_config& config, const workload_generator& generate,
                             const workload_body& run, const recovery_body& recover,
                             const checker& check);

// Runs every thread's operations of w, logging each (two indirect calls per operation, next
// to the model's locking for every access they are noise).
template <class Perform>
void run_threads(child_context& ctx, const workload& w, Perform perform) {
  const bool several = w.threads.size() > 1;
  auto one = [&](unsigned t) {
    for (std::size_t i = 0; i < w.threads[t].size(); ++i) {
      ctx.invoked(t, i);
      op_outcome out;
      perform(w.threads[t][i], out);
      ctx.completed(t, i, out);
      // Operations are short: without this, one thread often runs its whole list within
      // one time slice, and the threads never interleave.
      if (several) std::this_thread::yield();
    }
  };
  if (w.threads.size() == 1) {
    one(0);
    return;
  }
  // All threads start together: the first one created must not run its whole list alone.
  std::atomic<std::size_t> ready{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < w.threads.size(); ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < w.threads.size()) std::this_thread::yield();
      try {
        one(t);
      } catch (const std::bad_alloc& e) {
        ctx.fail("thread " + std::to_string(t) + " threw: " + e.what(), true);
      } catch (const std::exception& e) {
        ctx.fail("thread " + std::to_string(t) + " threw: " + e.what(), false);
      }
    });
  }
  for (auto& th : pool) th.join();
}

}  // namespace detail

// A campaign of one's own.
//  - plan.generate(config.work, seed): the workload (make_workload of a family, or lists of
//    operations of kinds from op_kind::user on, named in workload::names);
//  - perform(S& s, const operation& o, const workload& w, op_outcome& out): runs operation
//    o on s and records in out what it returned (found, value, version: what the checker
//    reads); called directly, with no type erasure per operation;
//  - read_state(const S& s) -> std::vector<kv_entry>: the recovered state, encoded for the
//    checker (called on the subject that start::recover built);
//  - plan.check(w, history, state): the problems (crashtest/checkers.hpp has the ready
//    ones, and describe_op to name an operation in a message);
//  - make: the factory.
template <class S, class Perform, class ReadState, class Factory = construct<S>>
campaign_result run_campaign(const campaign_config& config, const campaign_plan& plan,
                             Perform perform, ReadState read_state, Factory make = {}) {
  detail::workload_body body = [make, perform](detail::child_context& ctx, const workload& w) {
    std::unique_ptr<S> s = make(ctx.model(), start::fresh);
    ctx.model().persist_all();
    ctx.arm();
    detail::run_threads(ctx, w,
                        [&](const operation& o, op_outcome& out) { perform(*s, o, w, out); });
  };
  detail::recovery_body recover = [make, read_state](pv::model& m) -> std::vector<kv_entry> {
    std::unique_ptr<S> s = make(m, start::recover);
    const S& recovered = *s;
    return read_state(recovered);
  };
  return detail::run_campaign(config, plan.generate, body, recover, plan.check);
}

// Runs operation `o` of workload `w` on key-value subject `s`, recording what it returned.
template <kv_subject S>
void perform_kv(S& s, const operation& o, const workload& w, op_outcome& out) {
  if constexpr (kv_weak_subject<S>) {
    const std::span<const kv_write> entries(w.batch_entries.data() + o.batch_first,
                                            o.batch_size);
    if (o.kind == op_kind::persist) {
      s.persist();
      return;
    }
    if (o.weak) {
      switch (o.kind) {
        case op_kind::put: out.version = s.put(o.key, o.value, durability::weak); return;
        case op_kind::del: out.version = s.del(o.key, durability::weak); return;
        case op_kind::batch: out.version = s.write_batch(entries, durability::weak); return;
        default: break;
      }
    }
  }
  switch (o.kind) {
    case op_kind::put: out.version = s.put(o.key, o.value); break;
    case op_kind::del: out.version = s.del(o.key); break;
    case op_kind::get: {
      kv_read r = s.get(o.key);
      out.found = r.found;
      out.value = r.value;
      out.version = r.version;
      break;
    }
    case op_kind::batch:
      if constexpr (kv_batch_subject<S>) {
        out.version = s.write_batch(
            std::span<const kv_write>(w.batch_entries.data() + o.batch_first, o.batch_size));
      }
      break;
    default: break;
  }
}

// A campaign on a key-value store, checked by check_kv.
template <kv_subject S, class Factory = construct<S>>
campaign_result run_kv_campaign(const campaign_config& config, Factory make = {}) {
  if (config.work.batch_percent > 0 && !kv_batch_subject<S>) {
    throw std::invalid_argument(config.subject +
                                ": the subject has no write_batch; set work.batch_percent = 0");
  }
  if ((config.work.weak_percent > 0 || config.work.persist_percent > 0) &&
      !kv_weak_subject<S>) {
    throw std::invalid_argument(config.subject +
                                ": the subject has no weak writes and no persist (see "
                                "kv_weak_subject); set work.weak_percent and "
                                "work.persist_percent to 0");
  }
  return run_campaign<S>(config, {family_generator<S>(workload_family::kv), check_kv},
                         &perform_kv<S>, [](const S& s) { return s.state(); }, make);
}

// A campaign on a set or a map, checked by check_map.
template <class S, class Factory = construct<S>>
  requires set_subject<S> || map_subject<S>
campaign_result run_set_campaign(const campaign_config& config, Factory make = {}) {
  auto perform = [](S& s, const operation& o, const workload&, op_outcome& out) {
    switch (o.kind) {
      case op_kind::insert:
        if constexpr (map_subject<S>) {
          out.found = s.insert(o.key, o.value);
        } else {
          out.found = s.insert(o.key);
        }
        break;
      case op_kind::remove: out.found = s.remove(o.key); break;
      case op_kind::contains:
        if constexpr (map_subject<S>) {
          std::optional<std::uint64_t> v = s.get(o.key);
          out.found = v.has_value();
          out.value = v.value_or(0);
        } else {
          out.found = s.contains(o.key);
        }
        break;
      default: break;
    }
  };
  auto read_state = [](const S& s) {
    if constexpr (map_subject<S>) {
      return s.state();
    } else {
      std::vector<kv_entry> entries;
      for (std::uint64_t key : s.state()) entries.push_back({key, 0, 0});
      return entries;
    }
  };
  map_check_options options{.values = map_subject<S>, .ordered = ordered_subject<S>()};
  checker check = [options](const workload& w, const history& h,
                            const std::vector<kv_entry>& state) {
    return check_map(w, h, state, options);
  };
  return run_campaign<S>(config, {family_generator<S>(workload_family::set), check}, perform,
                         read_state, make);
}

// A sequence (queue front to back, stack top to bottom) as the checkers read it.
inline std::vector<kv_entry> sequence_state(const std::vector<std::uint64_t>& values) {
  std::vector<kv_entry> entries;
  entries.reserve(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) entries.push_back({i, values[i], 0});
  return entries;
}

namespace detail {
// A campaign on a sequence: `add` puts a value in, `take` takes one out or finds it empty.
template <class S, class Factory, class Add, class Take>
campaign_result run_sequence_campaign(const campaign_config& config, Factory make,
                                      workload_family family, checker check, op_kind add_kind,
                                      Add add, op_kind take_kind, Take take) {
  auto perform = [=](S& s, const operation& o, const workload&, op_outcome& out) {
    if (o.kind == add_kind) {
      add(s, o.value);
    } else if (o.kind == take_kind) {
      std::optional<std::uint64_t> v = take(s);
      out.found = v.has_value();
      out.value = v.value_or(0);
    }
  };
  return run_campaign<S>(config, {family_generator<S>(family), check}, perform,
                         [](const S& s) { return sequence_state(s.state()); }, make);
}
}  // namespace detail

// A campaign on a FIFO queue, checked by check_queue.
template <queue_subject S, class Factory = construct<S>>
campaign_result run_queue_campaign(const campaign_config& config, Factory make = {}) {
  return detail::run_sequence_campaign<S>(
      config, make, workload_family::queue, check_queue,
      op_kind::enqueue, [](S& s, std::uint64_t v) { s.enqueue(v); },
      op_kind::dequeue, [](S& s) { return s.dequeue(); });
}

// A campaign on a LIFO stack, checked by check_stack.
template <stack_subject S, class Factory = construct<S>>
campaign_result run_stack_campaign(const campaign_config& config, Factory make = {}) {
  return detail::run_sequence_campaign<S>(
      config, make, workload_family::stack, check_stack,
      op_kind::push, [](S& s, std::uint64_t v) { s.push(v); },
      op_kind::pop, [](S& s) { return s.pop(); });
}

}  // namespace crashtest
