// epoch_domain: epoch-based reclamation. Readers pin the domain for the duration of a
// critical region; an object unlinked from a shared structure is retired, and freed only
// once no thread that was pinned when it was retired can still be pinned.
//
//   alloc::epoch_domain domain;
//   {
//     auto g = domain.pin();          // readers: every traversal inside a pinned region
//     ... load and use shared nodes ...
//   }
//   unlink(node);                     // writers: make the node unreachable first, then
//   domain.retire(nodes, node, size); // hand it to the domain (node_allocator block)
//   domain.retire(nodes, blocks);     // or many blocks, behind one fence
//   domain.retire(heap, block);       // or a persistent block, back to its allocator
//
// Reclamation runs on retiring threads (every 32 retirements) and in collect(). Objects
// retired by a thread that exits are adopted by the domain and reclaimed by others.
//
// Thread safety: every member may be called from any thread; pins nest.
// Invariants:
//  (1) An object is reclaimed at most once, and only after every thread that was pinned
//      when it was retired has unpinned (see internal/epoch_core.hpp).
//  (2) A thread that stays pinned holds back reclamation for everyone: keep pins short.
// Persistence: none of its own. A persistent block must be unlinked durably before it is
// retired (persistent_allocator.hpp, U2).
// REQUIRES: the domain is destroyed only when no thread is pinned; its destructor reclaims
// everything still retired, so the allocators used by deleters must outlive it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "allocators/internal/epoch_core.hpp"
#include "allocators/node_allocator.hpp"
#include "allocators/persistent_allocator.hpp"
#include "allocators/pptr.hpp"

namespace alloc {

// A node_allocator block: where it is, and the size it was allocated with.
struct node_block {
  void* node;
  std::size_t bytes;
};

class epoch_domain {
 public:
  // Unpins on destruction.
  class [[nodiscard]] guard {
   public:
    guard(guard&& other) noexcept
        : core_(other.core_), record_(std::exchange(other.record_, nullptr)) {}
    guard& operator=(guard&&) = delete;
    ~guard() {
      if (record_ != nullptr) core_->unpin(*record_);
    }

   private:
    friend class epoch_domain;
    guard(detail::epoch_core* core, detail::epoch_record* record) noexcept
        : core_(core), record_(record) {}
    detail::epoch_core* core_;
    detail::epoch_record* record_;
  };

  epoch_domain() : core_(std::make_shared<detail::epoch_core>()) {}

  guard pin() {
    detail::epoch_record* r = record();
    core_->pin(*r);
    return guard(core_.get(), r);
  }

  // Calls deleter(object) once it is safe. REQUIRES: object is unreachable for new readers.
  void retire(void* object, void (*deleter)(void*)) {
    retire_item({[](const detail::retired& r) noexcept {
                   r.deleter(reinterpret_cast<void*>(r.object));
                 },
                 deleter, nullptr, reinterpret_cast<std::uintptr_t>(object), 0});
  }
  // Deletes `object` once it is safe.
  template <class T>
  void retire(T* object) {
    retire(static_cast<void*>(object), [](void* p) { delete static_cast<T*>(p); });
  }
  // Returns a node_allocator block (of `bytes`, as allocated) once it is safe.
  void retire(node_allocator& nodes, void* node, std::size_t bytes) {
    retire_item(node_item(nodes, {node, bytes}));
  }
  // Returns node_allocator blocks once it is safe, all behind one fence (a retirement of
  // each costs one); unlinked before the call, as one retirement's. Throws std::bad_alloc
  // with none of them retired.
  void retire(node_allocator& nodes, std::span<const node_block> blocks) {
    if (blocks.empty()) return;
    detail::epoch_record& r = *record();
    std::vector<detail::retired>& bag = core_->bag_for_retiring(r);
    if (bag.capacity() - bag.size() < blocks.size()) {
      bag.reserve(std::max(bag.size() + blocks.size(), 2 * bag.capacity()));
    }
    for (const node_block& b : blocks) bag.push_back(node_item(nodes, b));
    core_->count_retired(r, blocks.size());
  }
  // Frees a persistent block once it is safe. REQUIRES: its unlink is durable.
  template <class Policy>
  void retire(persistent_allocator<Policy>& heap, pptr<> block) {
    retire_item({[](const detail::retired& r) noexcept {
                   static_cast<persistent_allocator<Policy>*>(r.context)->free(pptr<>(r.object));
                 },
                 nullptr, &heap, block.offset(), 0});
  }

  // Advances the epoch if no thread holds it back and reclaims what is safe; returns how
  // many objects were reclaimed. REQUIRES: the calling thread is not pinned, or it may be
  // the one holding reclamation back.
  std::size_t collect() { return core_->collect(*record()); }
  // Objects retired and not yet reclaimed.
  std::uint64_t pending() const noexcept { return core_->pending(); }
  std::uint64_t epoch() const noexcept { return core_->epoch(); }

 private:
  detail::epoch_record* record() {
    return detail::thread_state<detail::epoch_record>(*core_);
  }
  void retire_item(const detail::retired& item) { core_->retire(*record(), item); }
  static detail::retired node_item(node_allocator& nodes, const node_block& b) noexcept {
    return {[](const detail::retired& r) noexcept {
              static_cast<node_allocator*>(r.context)
                  ->deallocate(reinterpret_cast<void*>(r.object), r.size);
            },
            nullptr, &nodes, reinterpret_cast<std::uintptr_t>(b.node), b.bytes};
  }

  std::shared_ptr<detail::epoch_core> core_;
};

}  // namespace alloc
