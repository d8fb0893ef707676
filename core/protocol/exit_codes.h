// headroom-worker's exit codes (docs/design.md, Worker): the one list the worker returns and
// every supervisor (`headroom run`, the operator) branches on.
#pragma once

#include <string>

namespace headroom::protocol {

inline constexpr int kExitFinished = 0;
inline constexpr int kExitFailure = 1;      // anything else; the error line is the termination message
inline constexpr int kExitInvalidSpec = 2;  // each problem printed as `path: message`
inline constexpr int kExitDrained = 75;     // SIGTERM/SIGINT honoured at a step boundary, checkpoint written
                                            // (or before the worker had loaded anything to save)
inline constexpr int kExitGuardStop = 76;   // the memory guard decided; Decision JSON in the termination message
inline constexpr int kExitGpuOom = 77;      // CUDA out of memory caught; GpuOomReport JSON in the termination message
inline constexpr int kExitKilled = 137;     // 128 + SIGKILL: the kernel's OOM killer, or the supervisor

// 0, 75 or 76: an end the ranks agree on at a step boundary (finished, drained, stopped
// for the guard), as opposed to a failure or a kill.
inline constexpr bool IsOrderlyExit(int exit_code) {
  return exit_code == kExitFinished || exit_code == kExitDrained || exit_code == kExitGuardStop;
}

// A readable reason for an exit code ("GuardStop", "GpuOOM", "OOMKilled", "Signal 9",
// "Exit 3", ...), for when a supervisor knows nothing better.
std::string ExitReason(int exit_code, bool oom_killed);

}  // namespace headroom::protocol
