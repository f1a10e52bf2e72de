// Crash-tests durable_queue with the public harness (crashtest), no test framework: each
// campaign runs a workload of enqueues and dequeues on the queue in a pool laid over the pv
// model's region, crashes it at persistence events, recovers every durable image and checks
// it with the FIFO checker (no loss, no duplication, order, pending operations either way).
// Exits 0 if every image passed, 1 otherwise; each failure prints a line that replays it.
//
//   ./durable_queue_crash_test                    # the default campaigns
//   CRASH_POINTS=2000 ./durable_queue_crash_test  # more crash points per campaign
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "allocators/pool_memory.hpp"
#include "crashtest/harness.hpp"
#include "durable_queue.hpp"
#include "flit/flit.hpp"
#include "pv_interface/model.hpp"

namespace {

// The queue as a crashtest::queue_subject: its pool over the model's region.
template <class Mode, class Placement>
class queue_subject {
 public:
  using policy = flit::policy<Placement, pv::model_backend>;  // the model sees every access
  using memory = alloc::pool_memory<typename Mode::template policy_for<policy>>;
  using queue = durable_queue<Mode, policy, memory>;
  static constexpr const char* label = "durable_queue";

  queue_subject(pv::model& m, crashtest::start how) {
    const std::span<std::byte> region(m.base(), m.size());
    if (how == crashtest::start::fresh) {
      // A region smaller than a pool: tell the harness to choose a larger one.
      if (region.size() < alloc::pool::min_size) throw alloc::out_of_space();
      memory_.emplace(unwrap(memory::create(region, label)));
      queue_ = std::make_unique<queue>(*memory_);
      memory_->set_root(queue_->root());
    } else {
      memory_.emplace(unwrap(memory::open(region, label)));
      queue_ = std::make_unique<queue>(
          queue::recover(*memory_, memory_->root(), memory_->live_marker()));
      memory_->finish_recovery();
    }
  }

  void enqueue(std::uint64_t value) { queue_->enqueue(value); }
  std::optional<std::uint64_t> dequeue() { return queue_->dequeue(); }
  std::vector<std::uint64_t> state() const {
    std::vector<std::uint64_t> values;
    queue_->for_each([&](std::uint64_t v) { values.push_back(v); });
    return values;
  }

 private:
  static memory unwrap(alloc::result<memory> r) {
    if (!r) throw std::runtime_error(r.error().to_string());
    return std::move(*r);
  }

  std::optional<memory> memory_;
  std::unique_ptr<queue> queue_;
};

static_assert(crashtest::queue_subject<queue_subject<alloc::manual, flit::plain>>);

crashtest::campaign_config config(std::string name, unsigned writers, unsigned readers) {
  crashtest::campaign_config c;
  c.subject = "durable_queue";
  c.config = std::move(name);
  c.work = {.writer_threads = writers, .reader_threads = readers,
            .ops_per_writer = 60 / writers, .ops_per_reader = 20, .put_percent = 60};
  c.points = 200;  // CRASH_POINTS overrides
  c.random_images = 1;
  if (writers + readers > 1) c.stall_ops = 2;
  return c;
}

template <class Mode, class Placement>
bool campaign(const std::string& name, unsigned writers, unsigned readers) {
  crashtest::campaign_result r = crashtest::run_queue_campaign<queue_subject<Mode, Placement>>(
      config(name, writers, readers));
  return r.failed == 0 && r.points > 0;
}

}  // namespace

int main() {
  bool ok = true;
  ok &= campaign<alloc::manual, flit::hashed<1 << 16>>("manual hashed st", 1, 0);
  ok &= campaign<alloc::manual, flit::hashed<1 << 16>>("manual hashed w2r1", 2, 1);
  ok &= campaign<alloc::manual, flit::link_and_persist>("manual link_and_persist st", 1, 0);
  ok &= campaign<alloc::automatic, flit::adjacent>("automatic adjacent st", 1, 0);
  std::printf("durable_queue crash test: %s\n", ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}
