// SIGTERM / SIGINT become a stop request honoured at the next step boundary: a step is
// never cut in half, so the state at the boundary is a consistent one to checkpoint.
#pragma once

namespace headroom::worker {

// Installs the handlers (idempotent). The handler only sets a flag (async-signal-safe).
void InstallStopSignalHandlers();
bool StopRequested();
int StopSignal();                     // the signal number that asked, 0 if none
void RequestStop(int signal_number);  // what the handler does; also for tests
void ClearStopRequest();              // tests

}  // namespace headroom::worker
