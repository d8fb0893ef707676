#include "core/protocol/stop_signals.h"

#include <unistd.h>

#include <csignal>
#include <initializer_list>

#include "core/protocol/exit_codes.h"

namespace headroom::protocol {
namespace {

extern "C" void ExitDrained(int) { _exit(kExitDrained); }

}  // namespace

sigset_t StopSignalSet() {
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  return stops;
}

void HandleStopSignals(void (*handler)(int signal_number)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (const int signal_number : {SIGTERM, SIGINT}) sigaction(signal_number, &action, nullptr);
  const sigset_t stops = StopSignalSet();
  pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
}

void ExitDrainedOnStopSignals() { HandleStopSignals(ExitDrained); }

}  // namespace headroom::protocol
