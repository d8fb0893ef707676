// Test support: run N ranks as forked child processes and collect what each reported.
//
// Fork-safety: call RunRanks from a test process that has no other threads running (no
// LibTorch thread pool yet, no TcpStore server alive): the parent only forks and waits,
// the children do all the work and leave with _exit, never returning into gtest.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/net/free_port.h"

namespace headroom::testing {

// Tests ask for a rendezvous port by this name; the one implementation is core's.
using net::FreePort;

struct RankResult {
  int rank = 0;
  bool exited = false;  // normal exit (else killed by a signal, or by us at the deadline)
  int exit_code = -1;
  int signal = 0;
  std::string message;  // what the child wrote to its report pipe (errors, values)
  double seconds = 0;   // from fork to exit
};

// What a rank's body gets: its rank and a way to report text back to the parent.
struct RankContext {
  int rank;
  int report_fd;
  void Report(const std::string& text) const {
    [[maybe_unused]] ssize_t n = ::write(report_fd, text.data(), text.size());
  }
};

// Forks one child per rank; each runs body(ctx). A body that returns exits 0; one that
// throws reports e.what() and exits 1. Children still alive at `deadline` are SIGKILLed
// (exited=false, signal=SIGKILL). `on_started(pids)` runs in the parent after forking.
inline std::vector<RankResult> RunRanks(int world, const std::function<void(const RankContext&)>& body,
                                        std::chrono::milliseconds deadline = std::chrono::seconds(30),
                                        const std::function<void(const std::vector<pid_t>&)>& on_started = {}) {
  using Clock = std::chrono::steady_clock;
  std::vector<pid_t> pids(world);
  std::vector<int> pipes(world);
  std::vector<RankResult> results(world);
  const auto start = Clock::now();
  for (int r = 0; r < world; ++r) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      RankContext ctx{r, fds[1]};
      int code = 0;
      try {
        body(ctx);
      } catch (const std::exception& e) {
        ctx.Report(e.what());
        code = 1;
      } catch (...) {
        ctx.Report("unknown exception");
        code = 1;
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    ::close(fds[1]);
    pids[r] = pid;
    pipes[r] = fds[0];
    results[r].rank = r;
  }
  if (on_started) on_started(pids);
  int remaining = world;
  std::vector<bool> done(world, false);
  while (remaining > 0) {
    for (int r = 0; r < world; ++r) {
      if (done[r]) continue;
      // Drain the report pipe as we go so a chatty child never blocks on it.
      char buf[4096];
      pollfd p{pipes[r], POLLIN, 0};
      while (::poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) {
        ssize_t n = ::read(pipes[r], buf, sizeof(buf));
        if (n <= 0) break;
        results[r].message.append(buf, static_cast<size_t>(n));
      }
      int status = 0;
      pid_t got = ::waitpid(pids[r], &status, WNOHANG);
      if (got == pids[r]) {
        ssize_t n;
        while ((n = ::read(pipes[r], buf, sizeof(buf))) > 0) results[r].message.append(buf, static_cast<size_t>(n));
        ::close(pipes[r]);
        results[r].seconds = std::chrono::duration<double>(Clock::now() - start).count();
        results[r].exited = WIFEXITED(status);
        results[r].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        results[r].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        done[r] = true;
        --remaining;
      }
    }
    if (remaining > 0 && Clock::now() - start > deadline) {
      for (int r = 0; r < world; ++r) {
        if (!done[r]) ::kill(pids[r], SIGKILL);
      }
      deadline = std::chrono::hours(1);  // now just reap them
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return results;
}

// "rank 1: exit 1 (message)" for every rank, for failure messages.
inline std::string Describe(const std::vector<RankResult>& results) {
  std::string out;
  for (const auto& r : results) {
    out += "rank " + std::to_string(r.rank) + ": " +
           (r.exited ? "exit " + std::to_string(r.exit_code) : "signal " + std::to_string(r.signal)) + " after " +
           std::to_string(r.seconds) + " s: " + r.message + "\n";
  }
  return out;
}

}  // namespace headroom::testing
