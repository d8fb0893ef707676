#include "worker/train/stop_request.h"

#include <atomic>
#include <csignal>

namespace headroom::worker {
namespace {

std::atomic<int> g_stop_signal{0};

extern "C" void HandleStopSignal(int signal_number) { g_stop_signal.store(signal_number); }

}  // namespace

void InstallStopSignalHandlers() {
  struct sigaction action {};
  action.sa_handler = HandleStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

bool StopRequested() { return g_stop_signal.load() != 0; }
int StopSignal() { return g_stop_signal.load(); }
void RequestStop(int signal_number) { g_stop_signal.store(signal_number); }
void ClearStopRequest() { g_stop_signal.store(0); }

}  // namespace headroom::worker
