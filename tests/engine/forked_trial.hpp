// Runs one trial of the corruption fuzz test in a forked child under a time limit, so that
// a crash, a sanitizer report or an endless loop on a damaged pool is an outcome of that
// trial and not the end of the test.
//
// The child reports over a pipe, one line per message: "step <name>" before each step, and
// "verdict <outcome number> <detail>" at the end. The parent reads until the pipe closes or
// the deadline passes (poll with a timeout: no sleeps), then reaps the child:
//  - no verdict and a signal: `crash` (SIGALRM, the child's own timer: `hang`);
//  - no verdict and a non-zero exit: `crash` (the sanitizers exit with 1 after a report);
//  - the deadline passed (a child that blocks SIGALRM): killed, `hang`;
//  - a sanitizer report on the child's stderr (ASan "ERROR:", UBSan "runtime error:"),
//    even with a verdict: `crash`;
//  - else the child's verdict.
//
// Thread safety: REQUIRES a single-threaded caller (it forks).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "corruption_judge.hpp"

namespace corruption_test {

// The child's end of the pipe.
class trial_channel {
 public:
  trial_channel(int fd, bool verbose) : fd_(fd), verbose_(verbose) {}

  void step(std::string_view name) {
    send("step " + std::string(name) + "\n");
    if (verbose_) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start_);
      std::fprintf(stderr, "  step: %.*s (at %lld ms)\n", int(name.size()), name.data(),
                   static_cast<long long>(ms.count()));
    }
  }
  // Printed only when replaying a trial.
  void note(const std::string& text) const {
    if (verbose_) std::fprintf(stderr, "    %s\n", text.c_str());
  }
  bool verbose() const { return verbose_; }
  // The outcome, the step it was decided in, and what happened.
  void verdict(outcome o, std::string_view step, std::string_view detail) {
    std::string line = "verdict " + std::to_string(static_cast<int>(o)) + " ";
    for (char c : step) line += c == '\n' || c == '\t' ? ' ' : c;
    line += '\t';
    for (char c : detail) line += c == '\n' ? ' ' : c;
    send(line + "\n");
  }

 private:
  void send(std::string_view s) {
    while (!s.empty()) {
      ssize_t n = ::write(fd_, s.data(), s.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return;
      }
      s.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  int fd_;
  bool verbose_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

struct trial_report {
  outcome result = outcome::intact;
  std::string step;       // where the outcome was decided (for a crash or hang: the last step)
  std::string detail;
  std::string last_step;  // the last step the child announced
};

namespace detail {

// The first line of `path` that holds a sanitizer's report, or "".
inline std::string sanitizer_report(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("ERROR: AddressSanitizer") != std::string::npos ||
        line.find("ERROR: LeakSanitizer") != std::string::npos ||
        line.find("runtime error:") != std::string::npos) {
      return line.size() > 300 ? line.substr(0, 300) : line;
    }
  }
  return "";
}

inline trial_report parse(const std::string& received) {
  trial_report r;
  bool have_verdict = false;
  std::istringstream in(received);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("step ", 0) == 0) {
      r.last_step = line.substr(5);
    } else if (line.rfind("verdict ", 0) == 0) {
      const std::size_t space = line.find(' ', 8);
      const std::size_t tab = line.find('\t', 8);
      r.result = static_cast<outcome>(std::stoi(line.substr(8, space - 8)));
      if (space != std::string::npos && tab != std::string::npos && tab > space) {
        r.step = line.substr(space + 1, tab - space - 1);
        r.detail = line.substr(tab + 1);
      }
      have_verdict = true;
    }
  }
  if (!have_verdict) r.result = outcome::crash;  // refined by the caller
  return r;
}

}  // namespace detail

// Runs body(trial_channel&) in a child process. The child's timer fires after `limit`; the
// parent kills it after `limit` plus a grace period. With `stderr_path`, the child's stderr
// goes to that file (truncated), and a sanitizer report in it makes the trial a crash.
template <class Body>
trial_report run_forked(Body&& body, std::chrono::milliseconds limit, bool verbose,
                        const std::string& stderr_path = "") {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("corruption test: pipe: ") + std::strerror(errno));
  }
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("corruption test: fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    if (!stderr_path.empty()) {
      int fd = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd >= 0) {
        ::dup2(fd, STDERR_FILENO);
        ::close(fd);
      }
    }
    std::signal(SIGALRM, SIG_DFL);
    itimerval t{};
    t.it_value.tv_sec = static_cast<time_t>(limit.count() / 1000);
    t.it_value.tv_usec = static_cast<suseconds_t>(limit.count() % 1000 * 1000);
    ::setitimer(ITIMER_REAL, &t, nullptr);
    trial_channel channel(fds[1], verbose);
    try {
      body(channel);
    } catch (const std::exception& e) {
      channel.verdict(outcome::crash, "", std::string("an exception escaped: ") + e.what());
    } catch (...) {
      channel.verdict(outcome::crash, "", "an exception escaped");
    }
    ::_exit(0);  // no atexit handlers, no destructors of the parent's objects
  }
  ::close(fds[1]);

  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + limit + limit / 2 + std::chrono::milliseconds(500);
  std::string received;
  bool timed_out = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()) + 1);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child is gone (or closed its end by exiting)
    received.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

  trial_report r = detail::parse(received);
  const std::string where = r.last_step.empty() ? "" : " during " + r.last_step;
  const outcome reported = r.result;
  const std::string report = detail::sanitizer_report(stderr_path);
  if (timed_out) {
    r.result = outcome::hang;
    r.detail = "still running " + std::to_string((limit + limit / 2).count() + 500) +
               " ms after the start" + where + " (killed)";
  } else if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    r.result = sig == SIGALRM ? outcome::hang : outcome::crash;
    r.detail = sig == SIGALRM
                   ? "did not finish within " + std::to_string(limit.count()) + " ms" + where
                   : "signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")" + where;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    r.result = outcome::crash;
    r.detail = "exited with status " + std::to_string(WEXITSTATUS(status)) + where +
               (report.empty() ? "" : ": " + report);
  } else if (!report.empty()) {
    r.result = outcome::crash;
    r.detail = "sanitizer report" + where + ": " + report;
  } else if (received.find("verdict ") == std::string::npos) {
    r.result = outcome::crash;
    r.detail = "exited without a verdict" + where;
  } else {
    r.result = reported;
  }
  if ((r.result == outcome::crash || r.result == outcome::hang) && r.step.empty()) {
    r.step = r.last_step;
  }
  return r;
}

}  // namespace corruption_test
