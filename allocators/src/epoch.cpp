#include <cassert>
#include <memory>
#include <utility>

#include "allocators/internal/epoch_core.hpp"

namespace alloc::detail {

epoch_core::~epoch_core() {
  epoch_record* r = records_.load(std::memory_order_acquire);
  while (r != nullptr) {
    assert(r->announced.load(std::memory_order_relaxed) == 0 && "domain destroyed while pinned");
    for (std::vector<retired>& bag : r->bags) reclaim(bag);
    epoch_record* next = r->next;
    delete r;
    r = next;
  }
  for (const orphan& o : orphans_) o.item.reclaim(o.item);
}

std::vector<retired>& epoch_core::bag_for_retiring(epoch_record& r) {
  // The fence orders the caller's unlinks before the epoch read: any reader that can still
  // see the objects announced an epoch no later than the stamp.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const std::uint64_t e = global_.load(std::memory_order_relaxed);
  const std::size_t slot = e % 3;
  if (r.bag_epoch[slot] != e) {
    // Whatever the slot holds is from epoch e - 3 or older: safe now.
    reclaim(r.bags[slot]);
    r.bag_epoch[slot] = e;
  }
  return r.bags[slot];
}

void epoch_core::count_retired(epoch_record& r, std::size_t n) {
  pending_.fetch_add(n, std::memory_order_relaxed);
  if (n >= collect_every || (r.since_collect += static_cast<std::uint32_t>(n)) >= collect_every) {
    collect(r);
  }
}

std::size_t epoch_core::collect(epoch_record& r) {
  r.since_collect = 0;
  try_advance();
  const std::uint64_t e = global_.load(std::memory_order_acquire);
  std::size_t n = 0;
  for (std::size_t slot = 0; slot < 3; ++slot) {
    if (!r.bags[slot].empty() && r.bag_epoch[slot] + 2 <= e) n += reclaim(r.bags[slot]);
  }
  if (has_orphans_.load(std::memory_order_acquire)) n += reclaim_orphans();
  return n;
}

bool epoch_core::try_advance() noexcept {
  std::uint64_t e = global_.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (epoch_record* r = records_.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    const std::uint64_t a = r->announced.load(std::memory_order_relaxed);
    if (a != 0 && a != e) return false;
  }
  return global_.compare_exchange_strong(e, e + 1, std::memory_order_seq_cst);
}

std::size_t epoch_core::reclaim(std::vector<retired>& bag) noexcept {
  // Deleters may retire more objects: run them on a bag of our own.
  std::vector<retired> items = std::exchange(bag, {});
  for (const retired& item : items) item.reclaim(item);
  const std::size_t n = items.size();
  pending_.fetch_sub(n, std::memory_order_relaxed);
  // Keep the capacity for the next epoch's retirements.
  if (bag.empty()) {
    items.clear();
    bag = std::move(items);
  }
  return n;
}

std::size_t epoch_core::reclaim_orphans() {
  std::vector<orphan> ready;
  {
    std::lock_guard lock(orphans_mutex_);
    const std::uint64_t e = global_.load(std::memory_order_acquire);
    std::erase_if(orphans_, [&](const orphan& o) {
      if (o.epoch + 2 > e) return false;
      ready.push_back(o);
      return true;
    });
    has_orphans_.store(!orphans_.empty(), std::memory_order_release);
  }
  for (const orphan& o : ready) o.item.reclaim(o.item);
  pending_.fetch_sub(ready.size(), std::memory_order_relaxed);
  return ready.size();
}

void* epoch_core::create_thread_state() {
  for (epoch_record* r = records_.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    bool unused = false;
    if (r->in_use.compare_exchange_strong(unused, true, std::memory_order_acq_rel)) return r;
  }
  auto* r = new epoch_record;
  r->in_use.store(true, std::memory_order_relaxed);
  epoch_record* head = records_.load(std::memory_order_relaxed);
  do {
    r->next = head;
  } while (!records_.compare_exchange_weak(head, r, std::memory_order_acq_rel));
  return r;
}

void epoch_core::release_thread_state(void* state) noexcept {
  auto* r = static_cast<epoch_record*>(state);
  r->nesting = 0;
  r->announced.store(0, std::memory_order_release);
  {
    std::lock_guard lock(orphans_mutex_);
    for (std::size_t slot = 0; slot < 3; ++slot) {
      for (const retired& item : r->bags[slot]) orphans_.push_back({r->bag_epoch[slot], item});
      r->bags[slot].clear();
    }
    has_orphans_.store(!orphans_.empty(), std::memory_order_release);
  }
  r->since_collect = 0;
  r->in_use.store(false, std::memory_order_release);
}

}  // namespace alloc::detail
