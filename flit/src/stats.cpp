#include "flit/stats.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

namespace flit {

namespace {

struct registry {
  std::mutex mutex;
  std::vector<const detail::thread_counts*> live;
  counts exited;
};

registry& the_registry() {
  static registry* r = new registry;  // never destroyed: threads may exit after main
  return *r;
}

counts read(const detail::thread_counts& t) {
  return {t.pwb.load(std::memory_order_relaxed), t.pfence.load(std::memory_order_relaxed),
          t.tagged_flush.load(std::memory_order_relaxed)};
}

// Unregisters the thread's counters when the thread exits, folding them into `exited`.
struct unregister_at_exit {
  ~unregister_at_exit() {
    registry& r = the_registry();
    std::lock_guard lock(r.mutex);
    const detail::thread_counts* mine = &detail::this_thread_counts;
    r.exited = r.exited + read(*mine);
    std::erase(r.live, mine);
  }
};

}  // namespace

namespace detail {

void register_this_thread() {
  static thread_local unregister_at_exit at_exit;
  (void)at_exit;
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  this_thread_counts.registered = true;
  r.live.push_back(&this_thread_counts);
}

}  // namespace detail

counts all_threads() {
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  counts total = r.exited;
  for (const detail::thread_counts* t : r.live) total = total + read(*t);
  return total;
}

}  // namespace flit
