// What DB::NewIterator returns when DRAM ran out: an iterator over nothing whose status() is
// NoSpace. It has to exist when nothing else can be allocated, so the class takes its memory
// from a small static reserve when the heap has none (engine/src/no_memory_iterator.cpp).
//
// Thread safety: make() and destruction from any thread; one iterator by one thread at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "flintkv/iterator.hpp"
#include "flintkv/status.hpp"

namespace flintkv::internal {

class no_memory_iterator final : public Iterator {
 public:
  // Iterators from the reserve that may be alive at once, besides those from the heap.
  static constexpr std::size_t kReserve = 64;

  // nullptr only when the heap has no room for it and kReserve of them are alive.
  static std::unique_ptr<Iterator> make() noexcept {
    return std::unique_ptr<Iterator>(new no_memory_iterator);
  }

  bool Valid() const override { return false; }
  void SeekToFirst() override {}
  void SeekToLast() override {}
  void Seek(std::string_view) override {}
  void SeekForPrev(std::string_view) override {}
  void Next() override {}
  void Prev() override {}
  std::string_view key() const override { return {}; }
  std::string_view value() const override { return {}; }
  // The message is short enough for std::string's inline buffer: nothing is allocated.
  Status status() const override { return Status::NoSpace("out of DRAM"); }
  Status Refresh() override { return status(); }

  // The heap, or else a slot of the reserve; nullptr if neither has room.
  static void* operator new(std::size_t size) noexcept;
  static void operator delete(void* p) noexcept;

 private:
  no_memory_iterator() = default;
};

}  // namespace flintkv::internal
