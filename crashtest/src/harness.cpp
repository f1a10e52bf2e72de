// The process side of the harness: shared memory, the workload and recovery children, crash
// points, images, and the report.
#include "crashtest/harness.hpp"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <random>
#include <set>
#include <sstream>

// Under AddressSanitizer: freed memory waits in a quarantine (256 MiB by default) that stays
// resident, and fork() copies the page tables of everything resident, so a campaign that
// forks thousands of children slows down as its parent's quarantine fills. A smaller one
// keeps forks cheap. ASAN_OPTIONS still overrides it. (Unused in builds without ASan.)
// Weak: a program that defines its own wins.
extern "C" __attribute__((weak)) const char* __asan_default_options() {
  return "quarantine_size_mb=16";
}

namespace crashtest {

namespace detail {
namespace {
std::atomic<replay_arguments_fn> replay_arguments{nullptr};
}  // namespace
}  // namespace detail

void set_replay_arguments(replay_arguments_fn f) { detail::replay_arguments.store(f); }

bool campaign_result::any_problem_contains(std::string_view text) const {
  for (const failure& f : failures) {
    for (const std::string& p : f.problems) {
      if (p.find(text) != std::string::npos) return true;
    }
  }
  return false;
}

}  // namespace crashtest

namespace crashtest::detail {

namespace {

constexpr std::uint64_t no_crash = ~std::uint64_t{0};
constexpr std::size_t message_bytes = 4096;
constexpr std::size_t failures_in_full = 5;  // failures printed with every problem

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void copy_message(char* dst, const std::string& s) {
  std::size_t n = std::min(s.size(), message_bytes - 1);
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

// ---- environment -------------------------------------------------------------------------

std::optional<std::uint64_t> env_number(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v, &end, 0);
  if (errno != 0 || *end != '\0') {
    throw std::invalid_argument(std::string(name) + "=" + v + ": not a number");
  }
  return n;
}

struct image_plan {
  pv::writeback writeback;
  std::uint64_t seed;
  friend bool operator==(const image_plan&, const image_plan&) = default;
};

struct replay_request {
  std::uint64_t event;
  image_plan image;
};

std::optional<replay_request> env_replay() {
  const char* v = std::getenv("CRASH_REPLAY");
  if (v == nullptr || *v == '\0') return std::nullopt;
  std::string s(v);
  auto bad = [&] {
    return std::invalid_argument("CRASH_REPLAY=" + s +
                                 ": expected <event>:<none|all|random>:<seed>");
  };
  auto c1 = s.find(':');
  auto c2 = c1 == std::string::npos ? c1 : s.find(':', c1 + 1);
  if (c2 == std::string::npos) throw bad();
  std::string wb = s.substr(c1 + 1, c2 - c1 - 1);
  replay_request r{};
  try {
    r.event = std::stoull(s.substr(0, c1), nullptr, 0);
    r.image.seed = std::stoull(s.substr(c2 + 1), nullptr, 0);
  } catch (const std::exception&) {
    throw bad();
  }
  if (wb == "none") {
    r.image.writeback = pv::writeback::none;
  } else if (wb == "all") {
    r.image.writeback = pv::writeback::all;
  } else if (wb == "random") {
    r.image.writeback = pv::writeback::random;
  } else {
    throw bad();
  }
  return r;
}

// ---- shared memory -----------------------------------------------------------------------

// One anonymous shared mapping, made before fork, laid out as below.
class shared_memory {
 public:
  explicit shared_memory(std::size_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      throw std::runtime_error("crash harness: mmap of " + std::to_string(bytes) +
                               " shared bytes failed: " + std::strerror(errno));
    }
    base_ = static_cast<std::byte*>(p);
  }
  ~shared_memory() { ::munmap(base_, bytes_); }
  shared_memory(const shared_memory&) = delete;
  shared_memory& operator=(const shared_memory&) = delete;
  std::byte* base() const { return base_; }

 private:
  std::byte* base_;
  std::size_t bytes_;
};

struct control {
  std::atomic<std::uint32_t> crashed;  // the run crashed: threads stop logging and park
  std::atomic<std::uint64_t> clock;    // logical time for the history
  std::atomic<std::uint64_t> completed_ops;
  std::uint64_t events;    // events after arm() when the run ended without crashing
  std::uint64_t point;     // single-threaded runs: the crash point whose images are ready
  std::uint32_t reached;   // 1: crashed at the event; 0: ran to the end
  std::uint32_t images;    // images written
  std::uint32_t out_of_room;  // the run failed with std::bad_alloc: the region is too small
  char message[message_bytes];  // why the workload child failed
};

struct record {
  std::atomic<std::uint8_t> state;  // op_status
  std::uint8_t found;
  std::uint64_t value;
  std::uint64_t version;
  std::uint64_t invoke_ts;
  std::uint64_t complete_ts;
};

enum class recovery_status : std::uint32_t {
  ok,
  threw,
  invariant,
  nondeterministic,
  unstable,
  too_large,
};

// Progress of a recovery child through the images of a point.
struct recovery_out {
  std::atomic<std::uint64_t> done;  // images finished; the next one is the one in progress
};

// What recovering one image gave.
struct image_result {
  recovery_status status;
  std::uint64_t count;  // entries of the state
  char message[message_bytes];
};

// ---- processes ---------------------------------------------------------------------------

// Ends this process after `limit` of wall time with SIGALRM (0: no limit).
void limit_time(std::chrono::milliseconds limit) {
  std::signal(SIGALRM, SIG_DFL);
  itimerval t{};
  t.it_value.tv_sec = static_cast<time_t>(limit.count() / 1000);
  t.it_value.tv_usec = static_cast<suseconds_t>(limit.count() % 1000 * 1000);
  ::setitimer(ITIMER_REAL, &t, nullptr);
}

[[noreturn]] void park() {
  for (;;) ::pause();
}

std::string wait_child(pid_t pid, std::chrono::milliseconds limit, const char* what);

// Runs `body` in a child process; returns "" if it exited with 0, else what happened.
template <class Body>
std::string in_child(Body body, std::chrono::milliseconds limit, const char* what) {
  std::cout.flush();
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("crash harness: fork: ") + std::strerror(errno));
  if (pid == 0) {
    limit_time(limit);
    int code = 0;
    try {
      code = body();
    } catch (...) {
      code = 3;
    }
    ::_exit(code);
  }
  return wait_child(pid, limit, what);
}

// Waits for child `pid`; returns "" if it exited with 0, else what happened.
std::string wait_child(pid_t pid, std::chrono::milliseconds limit, const char* what) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("crash harness: waitpid failed");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  std::ostringstream s;
  s << what;
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM) {
      s << " did not finish within " << limit.count() << " ms (an endless loop or a deadlock?)";
    } else {
      s << " died of signal " << sig << " (" << ::strsignal(sig) << ")";
    }
  } else if (WIFEXITED(status)) {
    s << " exited with status " << WEXITSTATUS(status);
  }
  return s.str();
}


std::string executable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "<test binary>";
  return std::string(buf, static_cast<std::size_t>(n));
}

// ---- the workload child ------------------------------------------------------------------

// The images wanted at crash event k.
using image_planner = std::function<std::vector<image_plan>(std::uint64_t k)>;

// Runs in the workload child. Two ways to crash:
//  - crash_at: at that event, take the images and exit (any number of threads);
//  - stops: at each of these events (ascending), take the images, tell the parent through
//    `channel`, and wait until it has checked them; then run on (one thread only: the run
//    is the same as if it had been crashed there).
class workload_child final : public child_context {
 public:
  workload_child(pv::model& m, control* ctl, record* records, std::size_t max_ops,
                 std::byte* images, image_planner plan, const campaign_config& config)
      : model_(m), ctl_(ctl), records_(records), max_ops_(max_ops), images_(images),
        plan_(std::move(plan)), config_(config) {}

  void crash_at(std::uint64_t k) { crash_at_ = k; }
  void stop_at(std::vector<std::uint64_t> stops, int channel) {
    stops_ = std::move(stops);
    channel_ = channel;
  }

  pv::model& model() override { return model_; }

  void arm() override {
    base_ = model_.persistence_events();
    model_.set_event_hook([this](pv::event_kind, std::uint64_t index) {
      std::uint64_t k = index - base_;
      if (k == crash_at_) crash_here(k);
      if (next_stop_ < stops_.size() && k == stops_[next_stop_]) {
        ++next_stop_;
        stop_here(k, 1);
      }
      if (ctl_->crashed.load()) park();
    });
  }

  void invoked(unsigned thread, std::size_t op) override {
    if (ctl_->crashed.load()) park();
    record& r = at(thread, op);
    r.invoke_ts = ctl_->clock.fetch_add(1);
    r.state.store(static_cast<std::uint8_t>(op_status::pending), std::memory_order_release);
  }

  void completed(unsigned thread, std::size_t op, const op_outcome& result) override {
    // A result logged after the crash flag could belong to an operation that completed after
    // the images were taken: leave it pending.
    if (ctl_->crashed.load()) return;
    record& r = at(thread, op);
    r.found = result.found ? 1 : 0;
    r.value = result.value;
    r.version = result.version;
    r.complete_ts = ctl_->clock.fetch_add(1);
    r.state.store(static_cast<std::uint8_t>(op_status::completed), std::memory_order_release);
    ctl_->completed_ops.fetch_add(1);
  }

  [[noreturn]] void fail(const std::string& why, bool out_of_room) override {
    copy_message(ctl_->message, why);
    ctl_->out_of_room = out_of_room ? 1 : 0;
    ::_exit(2);
  }

  // The run ended: the end of the run is a crash point too.
  void finished() {
    model_.set_event_hook(nullptr);
    ctl_->events = model_.persistence_events() - base_;
    if (channel_ >= 0) {
      stop_here(ctl_->events, 0);
      return;
    }
    ctl_->crashed.store(1);
    take_images(crash_at_ == no_crash ? ctl_->events : crash_at_);
    ctl_->reached = 0;
  }

 private:
  record& at(unsigned thread, std::size_t op) { return records_[thread * max_ops_ + op]; }

  [[noreturn]] void crash_here(std::uint64_t k) {
    if (config_.stall_ops > 0 && config_.work.threads() > 1) {
      std::uint64_t target = ctl_->completed_ops.load() + config_.stall_ops;
      auto deadline = std::chrono::steady_clock::now() + config_.stall_timeout;
      while (ctl_->completed_ops.load() < target && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
    }
    ctl_->crashed.store(1);
    take_images(k);
    ctl_->reached = 1;
    ::_exit(0);
  }

  void stop_here(std::uint64_t k, std::uint32_t reached) {
    take_images(k);
    ctl_->point = k;
    ctl_->reached = reached;
    char c = 'p';
    limit_time(std::chrono::milliseconds(0));  // no time limit while the parent checks
    if (::send(channel_, &c, 1, MSG_NOSIGNAL) != 1) ::_exit(4);  // the parent is gone
    ssize_t n;
    while ((n = ::recv(channel_, &c, 1, 0)) < 0 && errno == EINTR) {
    }
    if (n != 1) ::_exit(0);  // the parent stopped the campaign
    limit_time(config_.workload_timeout);
  }

  void take_images(std::uint64_t k) {
    std::vector<image_plan> plan = plan_(k);
    for (std::size_t j = 0; j < plan.size(); ++j) {
      std::vector<std::byte> image = model_.crash(plan[j].writeback, plan[j].seed);
      std::memcpy(images_ + j * model_.size(), image.data(), image.size());
    }
    ctl_->images = static_cast<std::uint32_t>(plan.size());
  }

  pv::model& model_;
  control* ctl_;
  record* records_;
  std::size_t max_ops_;
  std::byte* images_;
  image_planner plan_;
  const campaign_config& config_;
  std::uint64_t crash_at_ = no_crash;
  std::vector<std::uint64_t> stops_;
  std::size_t next_stop_ = 0;
  int channel_ = -1;
  std::uint64_t base_ = 0;
};

// ---- the campaign ------------------------------------------------------------------------

class campaign {
 public:
  campaign(const campaign_config& config, std::size_t region_bytes,
           const workload_generator& generate, const workload_body& run,
           const recovery_body& recover, const checker& check)
      : config_(config), run_(run), recover_(recover), check_(check) {
    if (auto points = env_number("CRASH_POINTS")) config_.points = *points;
    replay_ = env_replay();
    if (config_.points == 0) throw std::invalid_argument("crash harness: points must be > 0");
    if (config_.work.threads() == 0) {
      throw std::invalid_argument("crash harness: the workload has no thread");
    }
    work_ = generate(config_.work, config_.workload_seed);
    if (work_.threads.size() != config_.work.threads()) {
      throw std::invalid_argument("crash harness: the workload generator made " +
                                  std::to_string(work_.threads.size()) + " thread lists for " +
                                  std::to_string(config_.work.threads()) + " threads");
    }
    max_ops_ = 1;
    for (const auto& ops : work_.threads) max_ops_ = std::max(max_ops_, ops.size());
    region_ = (region_bytes + pv::cache_line - 1) / pv::cache_line * pv::cache_line;
    result_.region_bytes = region_;
    images_per_point_ = replay_ ? 1 : 2 + config_.random_images;

    // Layout of the shared mapping.
    std::size_t offset = 0;
    auto take = [&](std::size_t bytes) {
      std::size_t at = offset;
      offset += (bytes + 63) / 64 * 64;
      return at;
    };
    std::size_t ctl_at = take(sizeof(control));
    std::size_t rec_at = take(sizeof(record) * config_.work.threads() * max_ops_);
    std::size_t img_at = take(region_ * images_per_point_);
    std::size_t out_at = take(sizeof(recovery_out));
    std::size_t res_at = take(sizeof(image_result) * images_per_point_);
    std::size_t ent_at = take(sizeof(kv_entry) * config_.max_state_entries * images_per_point_);
    shm_ = std::make_unique<shared_memory>(offset);
    ctl_ = reinterpret_cast<control*>(shm_->base() + ctl_at);
    records_ = reinterpret_cast<record*>(shm_->base() + rec_at);
    images_ = shm_->base() + img_at;
    out_ = reinterpret_cast<recovery_out*>(shm_->base() + out_at);
    results_ = reinterpret_cast<image_result*>(shm_->base() + res_at);
    entries_ = reinterpret_cast<kv_entry*>(shm_->base() + ent_at);
  }

  // The counting run: "" if it ran to its end. Runs once; run() reuses it.
  const std::string& count() {
    if (!counted_) {
      counting_error_ = run_workload(no_crash);
      out_of_room_ = !counting_error_.empty() && ctl_->out_of_room != 0;
      counted_ = true;
    }
    return counting_error_;
  }
  // Whether the counting run failed for want of room (std::bad_alloc).
  bool out_of_room() {
    count();
    return out_of_room_;
  }

  // Ends the campaign as failed before any crash point: the region is too small. `works`:
  // a region size in which the run completes (0: none up to max_region_bytes).
  campaign_result region_too_small(std::size_t works) {
    std::ostringstream s;
    s << "the workload ran out of room in the region of " << region_
      << " bytes (campaign_config::region_bytes): " << counting_error_ << "; ";
    if (works != 0) {
      s << "it runs to its end in a region of " << works << " bytes: set region_bytes to at "
        << "least " << works << ", or to 0 to let the harness choose";
    } else {
      s << "it does not run to its end in max_region_bytes (" << config_.max_region_bytes
        << " bytes) either";
    }
    add_failure(0, {pv::writeback::none, 0}, {s.str()});
    return finish();
  }

  campaign_result run() {
    std::string err = count();
    if (!err.empty()) {
      add_failure(0, {pv::writeback::none, 0}, {"the workload failed without a crash: " + err});
      return finish();
    }
    result_.events = ctl_->events;
    result_.budget = config_.points;
    std::vector<std::uint64_t> points = choose_points();
    if (config_.work.threads() == 1) {
      run_stopping(points);
    } else {
      for (std::uint64_t k : points) {
        if (done()) break;
        err = run_workload(k);
        result_.points += 1;
        if (!err.empty()) {
          add_failure(k, plan_for(k)[0], {"the crashed run failed: " + err});
          result_.failed_points += 1;
          continue;
        }
        if (ctl_->reached == 0 && k < result_.events) result_.points_past_end += 1;
        check_point(k);
      }
    }
    return finish();
  }

 private:
  bool done() const {
    return config_.stop_after_failures != 0 && result_.failed >= config_.stop_after_failures;
  }

  std::vector<std::uint64_t> choose_points() const {
    if (replay_) return {replay_->event};
    std::uint64_t events = result_.events;
    std::vector<std::uint64_t> points;
    if (events + 1 <= config_.points) {
      for (std::uint64_t k = 0; k <= events; ++k) points.push_back(k);
      return points;
    }
    std::set<std::uint64_t> chosen;
    std::mt19937_64 rng(mix(config_.workload_seed ^ 0x63726173680aULL));
    while (chosen.size() + 1 < config_.points) chosen.insert(rng() % events);
    points.assign(chosen.begin(), chosen.end());
    points.push_back(events);
    return points;
  }

  std::vector<image_plan> plan_for(std::uint64_t k) const {
    if (replay_) return {replay_->image};
    std::vector<image_plan> plan{{pv::writeback::none, 0}, {pv::writeback::all, 0}};
    for (unsigned j = 0; j < config_.random_images; ++j) {
      plan.push_back({pv::writeback::random, mix(config_.workload_seed * 1000003 + k * 31 + j)});
    }
    return plan;
  }

  void reset_logs() {
    std::memset(static_cast<void*>(ctl_), 0, sizeof(control));
    std::memset(static_cast<void*>(records_), 0,
                sizeof(record) * config_.work.threads() * max_ops_);
  }

  // The body of a workload child; `setup` chooses how it crashes.
  template <class Setup>
  int workload_main(Setup setup) {
    try {
      pv::model m(region_);
      pv::scoped_activation on(m);
      workload_child ctx(m, ctl_, records_, max_ops_, images_,
                         [this](std::uint64_t k) { return plan_for(k); }, config_);
      setup(ctx);
      run_(ctx, work_);
      ctx.finished();
    } catch (const std::bad_alloc& e) {
      copy_message(ctl_->message, e.what());
      ctl_->out_of_room = 1;
      return 2;
    } catch (const std::exception& e) {
      copy_message(ctl_->message, e.what());
      return 2;
    }
    return 0;
  }

  // Runs the workload in a child, crashing at event k (or at its end). "" on success.
  std::string run_workload(std::uint64_t k) {
    reset_logs();
    std::string err = in_child(
        [&] { return workload_main([k](workload_child& ctx) { ctx.crash_at(k); }); },
        config_.workload_timeout, "the workload child");
    if (!err.empty() && ctl_->message[0] != '\0') err += ": " + std::string(ctl_->message);
    return err;
  }

  // Single-threaded: one run stops at every point in turn while the parent checks it.
  void run_stopping(const std::vector<std::uint64_t>& points) {
    reset_logs();
    int channel[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, channel) != 0) {
      throw std::runtime_error(std::string("crash harness: socketpair: ") + std::strerror(errno));
    }
    std::vector<std::uint64_t> stops(points.begin(), points.end());
    if (!stops.empty() && stops.back() >= result_.events) stops.pop_back();  // the end: finished()
    std::cout.flush();
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("crash harness: fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::close(channel[0]);
      limit_time(config_.workload_timeout);
      int code = workload_main([&](workload_child& ctx) { ctx.stop_at(stops, channel[1]); });
      ::_exit(code);
    }
    ::close(channel[1]);
    std::size_t checked = 0;
    bool stopped_early = false;
    while (checked < points.size()) {
      char c;
      ssize_t n;
      while ((n = ::recv(channel[0], &c, 1, 0)) < 0 && errno == EINTR) {
      }
      if (n != 1) break;  // the child ended
      std::uint64_t k = ctl_->point;
      result_.points += 1;
      if (ctl_->reached == 0 && k < result_.events) result_.points_past_end += 1;
      check_point(k);
      ++checked;
      if (done()) {
        stopped_early = checked < points.size();
        break;
      }
      if (::send(channel[0], "c", 1, MSG_NOSIGNAL) != 1) break;
    }
    ::close(channel[0]);  // a child waiting for the go-ahead reads end-of-file and exits
    std::string err = wait_child(pid, config_.workload_timeout, "the workload child");
    if (!stopped_early && checked < points.size()) {
      std::uint64_t k = points[checked];
      if (err.empty()) err = "the workload child ended early";
      if (ctl_->message[0] != '\0') err += ": " + std::string(ctl_->message);
      add_failure(k, plan_for(k)[0],
                  {"the run died before crash event " + std::to_string(k) +
                   " (same workload as the counting run): " + err});
      result_.failed_points += 1;
    }
  }

  history read_history() const {
    history h;
    h.threads.resize(work_.threads.size());
    for (unsigned t = 0; t < work_.threads.size(); ++t) {
      for (std::size_t i = 0; i < work_.threads[t].size(); ++i) {
        const record& r = records_[t * max_ops_ + i];
        op_outcome o;
        o.status = static_cast<op_status>(r.state.load(std::memory_order_acquire));
        if (o.status != op_status::not_invoked) o.invoke_ts = r.invoke_ts;
        if (o.status == op_status::completed) {
          o.found = r.found != 0;
          o.value = r.value;
          o.version = r.version;
          o.complete_ts = r.complete_ts;
        }
        h.threads[t].push_back(o);
      }
    }
    return h;
  }

  // Recovers one image, in the recovery child; fills results_[slot] and its entries.
  void recover_one(std::span<const std::byte> image, std::size_t slot) {
    image_result& out = results_[slot];
    kv_entry* entries = entries_ + slot * config_.max_state_entries;
    out = image_result{};
    pv::model m(region_);
    pv::scoped_activation on(m);
    std::string stage = "recovery";
    try {
      m.load_image(image);
      std::vector<kv_entry> first = recover_(m);
      if (first.size() > config_.max_state_entries) {
        out.status = recovery_status::too_large;
        copy_message(out.message, "the recovered state has " + std::to_string(first.size()) +
                                      " entries, more than max_state_entries");
        return;
      }
      if (!first.empty()) {
        std::memcpy(static_cast<void*>(entries), first.data(), first.size() * sizeof(kv_entry));
      }
      out.count = first.size();
      stage = "the second recovery of the same image";
      m.load_image(image);
      std::vector<kv_entry> second = recover_(m);
      if (second != first) {
        out.status = recovery_status::nondeterministic;
        copy_message(out.message, "recovering the same image twice gave different states (" +
                                      std::to_string(first.size()) + " and " +
                                      std::to_string(second.size()) + " entries)");
        return;
      }
      stage = "recovery after a crash right after recovery";
      std::vector<std::byte> again = m.crash(pv::writeback::none);
      m.load_image(again);
      if (recover_(m) != first) {
        out.status = recovery_status::unstable;
        copy_message(out.message,
                     "a crash right after recovery (no pending write-back) recovers to a "
                     "different state: recovery left its repairs half durable");
      }
    } catch (const invariant_violation& e) {
      out.status = recovery_status::invariant;
      copy_message(out.message, stage + ": invariant violated: " + e.what());
    } catch (const std::exception& e) {
      out.status = recovery_status::threw;
      copy_message(out.message, stage + " threw: " + e.what());
    }
  }

  // Recovers the images `which` (indices into the point's images) in as few children as
  // possible: one, unless a recovery kills its child. Returns the problems of each.
  std::vector<std::vector<std::string>> recover_all(const std::vector<std::size_t>& which,
                                                    const history& h) {
    std::vector<std::vector<std::string>> problems(which.size());
    std::size_t from = 0;
    while (from < which.size()) {
      out_->done.store(from);
      std::string err = in_child(
          [&]() -> int {
            for (std::size_t i = from; i < which.size(); ++i) {
              limit_time(config_.recovery_timeout);
              recover_one({images_ + which[i] * region_, region_}, i);
              out_->done.store(i + 1);
            }
            return 0;
          },
          config_.recovery_timeout, "the recovery child");
      std::size_t done = out_->done.load();
      for (std::size_t i = from; i < done; ++i) problems[i] = result_problems(i, h);
      if (err.empty()) break;
      if (done < which.size()) problems[done] = {err};
      from = done + 1;
    }
    return problems;
  }

  std::vector<std::string> result_problems(std::size_t slot, const history& h) const {
    const image_result& r = results_[slot];
    if (r.status != recovery_status::ok) return {r.message};
    const kv_entry* entries = entries_ + slot * config_.max_state_entries;
    std::vector<kv_entry> state(entries, entries + r.count);
    if (replay_) print_replay_details(h, state);
    return check_(work_, h, state);
  }

  // Checks the images the workload child left for crash point k.
  void check_point(std::uint64_t k) {
    std::vector<image_plan> plan = plan_for(k);
    history h = read_history();
    std::vector<std::size_t> distinct;
    for (std::size_t j = 0; j < ctl_->images; ++j) {
      bool seen = false;
      for (std::size_t i : distinct) {
        seen = seen || std::memcmp(images_ + i * region_, images_ + j * region_, region_) == 0;
      }
      if (!seen) distinct.push_back(j);
    }
    result_.images += distinct.size();
    std::vector<std::vector<std::string>> problems = recover_all(distinct, h);
    bool point_failed = false;
    for (std::size_t i = 0; i < distinct.size(); ++i) {
      if (problems[i].empty()) continue;
      add_failure(k, plan[distinct[i]], std::move(problems[i]));
      point_failed = true;
    }
    if (point_failed) result_.failed_points += 1;
  }

  std::string replay_line(std::uint64_t k, const image_plan& p) const {
    std::ostringstream s;
    s << "CRASH_REPLAY=" << k << ":" << pv::to_string(p.writeback) << ":0x" << std::hex
      << p.seed << std::dec << " CRASH_SEED=" << config_.workload_seed << " CRASH_SEEDS=1 "
      << executable();
    if (replay_arguments_fn f = replay_arguments.load()) {
      std::string args = f();
      if (!args.empty()) s << " " << args;
    }
    return s.str();
  }

  void add_failure(std::uint64_t k, const image_plan& p, std::vector<std::string> problems) {
    result_.failed += 1;
    failure f{k, p.writeback, p.seed, std::move(problems), replay_line(k, p)};
    if (config_.print_failures) {
      std::ostringstream s;
      s << "crash FAILED: subject=" << config_.subject << " config=" << config_.config
        << " workload=" << config_.work.describe() << " workload_seed=" << config_.workload_seed
        << " event=" << k << " writeback=" << pv::to_string(p.writeback) << " seed=0x"
        << std::hex << p.seed << std::dec << "\n";
      std::size_t shown = result_.failed <= failures_in_full ? f.problems.size() : 1;
      for (std::size_t i = 0; i < std::min(shown, f.problems.size()); ++i) {
        s << "  " << f.problems[i] << "\n";
      }
      if (shown < f.problems.size()) s << "  (" << f.problems.size() - shown << " more)\n";
      s << "  replay: " << f.replay
        << (config_.work.threads() > 1 ? "  (multi-threaded: the interleaving may differ)" : "")
        << "\n";
      std::cout << s.str() << std::flush;
    }
    if (result_.failures.size() < 20) result_.failures.push_back(std::move(f));
  }

  void print_replay_details(const history& h, const std::vector<kv_entry>& state) const {
    std::ostringstream s;
    s << "replay: history\n";
    for (unsigned t = 0; t < work_.threads.size(); ++t) {
      for (std::size_t i = 0; i < work_.threads[t].size(); ++i) {
        const op_outcome& o = h.threads[t][i];
        if (o.status == op_status::not_invoked) continue;
        s << "  " << describe_op(work_, t, i) << ": ";
        if (o.status == op_status::pending) {
          s << "pending\n";
          continue;
        }
        s << "completed found=" << o.found << " value=0x" << std::hex << o.value << std::dec
          << " version=" << o.version << " [" << o.invoke_ts << ", " << o.complete_ts << "]\n";
      }
    }
    s << "replay: recovered state (" << state.size() << " entries)\n";
    for (const kv_entry& e : state) {
      s << "  key " << e.key << " value 0x" << std::hex << e.value << std::dec << " version "
        << e.version << "\n";
    }
    std::cout << s.str() << std::flush;
  }

  campaign_result finish() {
    std::ostringstream s;
    s << "crash: " << config_.subject << " " << config_.config << ": " << result_.points
      << " points, " << result_.images << " images, " << result_.failed << " failed ("
      << result_.events << " events; workload " << config_.work.describe() << ", seed "
      << config_.workload_seed;
    if (result_.points_past_end > 0) s << "; " << result_.points_past_end << " past the end";
    if (result_.failed_points > 0) s << "; " << result_.failed_points << " points failed";
    s << ")";
    result_.summary = s.str();
    std::cout << result_.summary << "\n" << std::flush;
    return std::move(result_);
  }

  campaign_config config_;
  const workload_body& run_;
  const recovery_body& recover_;
  const checker& check_;
  bool counted_ = false;
  bool out_of_room_ = false;
  std::string counting_error_;
  std::optional<replay_request> replay_;
  workload work_;
  std::size_t region_ = 0;
  std::size_t max_ops_ = 0;
  std::size_t images_per_point_ = 0;
  std::unique_ptr<shared_memory> shm_;
  control* ctl_ = nullptr;
  record* records_ = nullptr;
  std::byte* images_ = nullptr;
  recovery_out* out_ = nullptr;
  image_result* results_ = nullptr;
  kv_entry* entries_ = nullptr;
  campaign_result result_;
};

}  // namespace

// One campaign of one seed, in the region config.region_bytes, or in one the harness
// chooses (region_bytes 0): the smallest of 128 KiB, 256 KiB, ... in which the counting run
// does not run out of room.
campaign_result run_one(const campaign_config& c, const workload_generator& generate,
                        const workload_body& run, const recovery_body& recover,
                        const checker& check) {
  const bool automatic = c.region_bytes == 0;
  std::size_t bytes = automatic ? default_region_bytes : c.region_bytes;
  campaign first(c, bytes, generate, run, recover, check);
  if (!first.out_of_room()) return first.run();
  // Find a region that fits: doubling, up to max_region_bytes.
  std::size_t works = 0;
  for (std::size_t b = bytes * 2; b <= c.max_region_bytes; b *= 2) {
    campaign probe(c, b, generate, run, recover, check);
    if (!probe.out_of_room()) {
      if (automatic) return probe.run();
      works = b;
      break;
    }
  }
  return first.region_too_small(works);
}

campaign_result run_campaign(const campaign_config& config, const workload_generator& generate,
                             const workload_body& run, const recovery_body& recover,
                             const checker& check) {
  campaign_config c = config;
  if (auto seed = env_number("CRASH_SEED")) c.workload_seed = *seed;
  std::uint64_t seeds = env_number("CRASH_SEEDS").value_or(1);
  if (seeds == 0) throw std::invalid_argument("CRASH_SEEDS=0: at least one seed");
  const std::uint64_t min_images = env_number("CRASH_MIN_IMAGES").value_or(c.min_images);
  if ((seeds == 1 && min_images == 0) || env_replay()) {
    return run_one(c, generate, run, recover, check);
  }
  // One campaign per seed, added up: `seeds` of them, and more until min_images were checked.
  campaign_result total;
  const std::uint64_t first = c.workload_seed;
  for (std::uint64_t s = 0; s < seeds || total.images < min_images; ++s) {
    c.workload_seed = first + s;
    campaign_result r = run_one(c, generate, run, recover, check);
    total.events += r.events;
    total.budget += r.budget;
    total.points += r.points;
    total.points_past_end += r.points_past_end;
    total.images += r.images;
    total.failed += r.failed;
    total.failed_points += r.failed_points;
    total.region_bytes = r.region_bytes;
    for (failure& f : r.failures) {
      if (total.failures.size() < 20) total.failures.push_back(std::move(f));
    }
    if (c.stop_after_failures != 0 && total.failed >= c.stop_after_failures) break;
    // Past the seeds asked for, a seed that checks nothing (its run failed) ends the search.
    if (r.images == 0 && s + 1 >= seeds) break;
  }
  std::ostringstream line;
  line << "crash: " << c.subject << " " << c.config << ": " << total.points << " points, "
       << total.images << " images, " << total.failed << " failed (in all, over workload seeds "
       << first << ".." << c.workload_seed << ")";
  total.summary = line.str();
  std::cout << total.summary << "\n" << std::flush;
  return total;
}

}  // namespace crashtest::detail
