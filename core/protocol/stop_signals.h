// The signals that ask a headroom process to stop in order: SIGTERM (what a kubelet sends
// a pod it stops, and a supervisor a worker it drains) and SIGINT (a terminal's Ctrl-C).
// Each process decides what stopping means (a worker: at the next step boundary, exit 75;
// the operator: release its lease; `headroom run`: drain its workers).
//
// A supervisor starts its workers with the stop signals blocked (launch::
// BecomeSupervisedWorker): a stop sent while a worker still loads its libraries is held
// until the worker handles it, instead of killing it with the default action (exit 143,
// which reads as a crash). Installing a handler here unblocks them.
#pragma once

#include <signal.h>

namespace headroom::protocol {

// The stop signals as a set, for sigprocmask: SIGTERM and SIGINT.
sigset_t StopSignalSet();

// Makes `handler` (async-signal-safe calls only) the handler of every stop signal, with
// interrupted system calls restarted, then unblocks them in the calling thread (call it
// from the main thread: a stop sent to the process goes to a thread that takes it).
void HandleStopSignals(void (*handler)(int signal_number));

// For a worker that has nothing to save yet (it has not connected to its peers): a stop
// ends it at once with exit 75, drained; it resumes from the checkpoint it would have
// resumed from anyway. Replace with HandleStopSignals once a stop must wait
// for a step boundary.
void ExitDrainedOnStopSignals();

}  // namespace headroom::protocol
