// The signals that ask a headroom process to stop in order: SIGTERM (what a kubelet sends
// a pod it stops, and a supervisor a worker it drains) and SIGINT (a terminal's Ctrl-C).
// Each process decides what stopping means (a worker: at the next step boundary, exit 75;
// the operator: release its lease; `headroom run`: drain its workers).
#pragma once

namespace headroom::protocol {

// Makes `handler` (async-signal-safe calls only) the handler of every stop signal, with
// interrupted system calls restarted.
void HandleStopSignals(void (*handler)(int signal_number));

}  // namespace headroom::protocol
