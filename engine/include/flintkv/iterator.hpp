// An iterator over the keys of a snapshot, in bytewise key order, forward and backward.
//
// Thread safety: one iterator is used by one thread at a time. Iterators must be destroyed
// before the DB that made them.
#pragma once

#include <string_view>

#include "flintkv/status.hpp"

namespace flintkv {

class Iterator {
 public:
  virtual ~Iterator() = default;

  virtual bool Valid() const = 0;
  virtual void SeekToFirst() = 0;
  virtual void SeekToLast() = 0;
  // The first key at or after `target`.
  virtual void Seek(std::string_view target) = 0;
  // The last key at or before `target`.
  virtual void SeekForPrev(std::string_view target) = 0;
  // REQUIRES: Valid().
  virtual void Next() = 0;
  // REQUIRES: Valid().
  virtual void Prev() = 0;
  // REQUIRES: Valid(). The views stay valid until the iterator moves or is destroyed.
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  virtual Status status() const = 0;
  // Reads the newest committed state from now on, as an iterator made now would, keeping
  // what the iterator allocated (a scan loop may refresh one iterator instead of making
  // one per scan). On OK the iterator is not Valid() until the next seek. NotSupported for
  // an iterator over a snapshot (ReadOptions::snapshot) and for a transaction's, NoSpace
  // when out of DRAM: the iterator is then as it was, reading what it read before.
  virtual Status Refresh() { return Status::NotSupported("this iterator cannot be refreshed"); }
};

}  // namespace flintkv
