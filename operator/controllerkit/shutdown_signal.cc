#include "operator/controllerkit/shutdown_signal.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>

#include "core/protocol/stop_signals.h"

namespace headroom::controllerkit {
namespace {

int g_pipe[2] = {-1, -1};
std::atomic<int> g_signals{0};

extern "C" void OnShutdownSignal(int) {
  if (g_signals.fetch_add(1) >= 1) _exit(1);  // second signal: stop now
  char byte = 1;
  ssize_t ignored = write(g_pipe[1], &byte, 1);
  (void)ignored;
}

}  // namespace

ShutdownSignal::ShutdownSignal() {
  if (pipe2(g_pipe, O_CLOEXEC) != 0) throw std::runtime_error("shutdown signal: pipe2 failed");
  protocol::HandleStopSignals(OnShutdownSignal);
  watcher_ = std::thread([this] { Watch(); });
  watcher_.detach();  // lives as long as the process
}

ShutdownSignal& ShutdownSignal::Install() {
  static ShutdownSignal* instance = new ShutdownSignal();  // never destroyed: handlers stay valid
  return *instance;
}

void ShutdownSignal::Watch() {
  char byte;
  while (true) {
    ssize_t n = read(g_pipe[0], &byte, 1);
    if (n == 1) {
      Request();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;
  }
}

bool ShutdownSignal::requested() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requested_;
}

void ShutdownSignal::Request() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    requested_ = true;
  }
  cv_.notify_all();
}

void ShutdownSignal::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return requested_; });
}

bool ShutdownSignal::WaitFor(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return requested_; });
}

int ShutdownSignal::signals_received() const { return g_signals.load(); }

}  // namespace headroom::controllerkit
