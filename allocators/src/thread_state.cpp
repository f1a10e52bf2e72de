#include "allocators/internal/thread_state.hpp"

#include <atomic>
#include <vector>

namespace alloc::detail {

namespace {

std::atomic<std::uint64_t> next_owner_id{1};

struct registration {
  std::uint64_t id;
  std::weak_ptr<per_thread_owner> owner;
  void* state;
};

// Every state this thread was given; hands them back when the thread exits.
struct thread_registrations {
  std::vector<registration> entries;

  ~thread_registrations() {
    thread_states = {};
    for (registration& r : entries) {
      if (std::shared_ptr<per_thread_owner> owner = r.owner.lock()) {
        owner->release_thread_state(r.state);
      }
    }
  }
};

thread_local thread_registrations registrations;

}  // namespace

per_thread_owner::per_thread_owner()
    : id_(next_owner_id.fetch_add(1, std::memory_order_relaxed)) {}

void* thread_state_slow(per_thread_owner& owner) {
  void* state = nullptr;
  for (const registration& r : registrations.entries) {
    if (r.id == owner.id()) {
      state = r.state;
      break;
    }
  }
  if (state == nullptr) {
    std::erase_if(registrations.entries, [](const registration& r) { return r.owner.expired(); });
    state = owner.create_thread_state();
    registrations.entries.push_back({owner.id(), owner.weak_from_this(), state});
  }
  thread_states[owner.id() % thread_state_ways] = {owner.id(), state};
  return state;
}

}  // namespace alloc::detail
