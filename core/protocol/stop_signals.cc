#include "core/protocol/stop_signals.h"

#include <csignal>
#include <initializer_list>

namespace headroom::protocol {

void HandleStopSignals(void (*handler)(int signal_number)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (const int signal_number : {SIGTERM, SIGINT}) sigaction(signal_number, &action, nullptr);
}

}  // namespace headroom::protocol
