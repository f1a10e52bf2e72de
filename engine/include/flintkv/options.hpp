// Options for opening a database, reading and writing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace flintkv {

class Snapshot;

// Limits, enforced with Status::InvalidArgument.
inline constexpr std::size_t kMaxKeySize = 4096;           // bytes; keys are never empty
inline constexpr std::size_t kMaxValueSize = 1u << 20;     // bytes; values may be empty
inline constexpr std::size_t kMinPoolSize = 8u << 20;      // bytes
inline constexpr unsigned kMaxThreadSlots = 1024;

struct Options {
  // Create the pool file if it does not exist.
  bool create_if_missing = false;
  // Fail with InvalidArgument if the pool file already exists.
  bool error_if_exists = false;
  // Size of a pool created by this open (ignored when opening an existing pool).
  std::size_t pool_size = std::size_t{1} << 30;
  // Open the pool read-only: the file is opened O_RDONLY under a shared lock (read-only opens
  // of a pool coexist; a read-write open and a read-only one exclude each other with Busy)
  // and mapped read-only, so nothing can change it, and it may be a file the user cannot
  // write. Recovery repairs nothing (writes that did not complete are skipped, not
  // unlinked); Put, Delete and Write return InvalidArgument. Never creates a pool: a missing
  // one is NotFound whatever create_if_missing says.
  bool read_only = false;
  // Advertisement slots for flat combining: how many writers can be attaching at once.
  // Any number of threads may write; a thread that finds every slot taken waits for one.
  unsigned thread_slots = 64;
  // Writes with WriteOptions::sync = false become durable at the latest this long after
  // they were made: a background thread calls DB::Persist() at this interval while such
  // writes are waiting. Zero (the default): no thread; they wait for Persist(), a sync
  // write, or the close.
  std::chrono::milliseconds persist_interval{0};
  // Keys not written for a while move from the per-key list, where each version is a node
  // of its own, to the packed tier, where many keys share a node (docs/engine-guide.md,
  // "Merges"): a background thread looks at this interval and moves the keys whose newest
  // version every reader reads, while writes go on leaving the newest versions in the
  // list. Zero (the default): no thread, and keys stay in the list.
  std::chrono::milliseconds merge_interval{0};
};

struct ReadOptions {
  // Read as of this snapshot; nullptr reads the newest visible state (an iterator takes
  // an implicit snapshot when it is created).
  const Snapshot* snapshot = nullptr;
  // Iterators only: keys below lower_bound (inclusive bound) or at or above upper_bound
  // (exclusive bound) are not visited.
  std::optional<std::string> lower_bound;
  std::optional<std::string> upper_bound;
  // Check each value read (Get, and each entry an iterator stops at) against its node's
  // checksum; a damaged node is reported as Status::Corruption (an iterator stops and
  // returns it from status()) instead of being returned. Open and Check verify every node
  // whatever this says; this guards against damage after the store was opened.
  bool verify_checksums = true;
};

struct WriteOptions {
  // true: the write is durable when it returns (a crash never loses it).
  // false: the write is visible to every reader when it returns, and becomes durable at the
  // next DB::Persist(), at the next sync write (of any thread), at the background interval
  // (Options::persist_interval), or when the DB is closed, whichever comes first. A crash
  // before then may lose it, and every write after it with it: recovery restores the
  // writes up to some point of their order (docs/engine-guide.md, "Weak writes"). Costs no
  // fence of the engine's own besides making the node durable.
  bool sync = true;
};

// For DB::BeginTransaction.
struct TransactionOptions {
  // Check each value the transaction reads from the store (Get, and each entry its
  // iterators stop at) against its node's checksum, as ReadOptions::verify_checksums does.
  bool verify_checksums = true;
};

}  // namespace flintkv
