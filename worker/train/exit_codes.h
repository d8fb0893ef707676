// headroom-worker's exit codes (design.md, Worker). Supervisors branch on these.
#pragma once

namespace headroom::worker {

inline constexpr int kExitFinished = 0;
inline constexpr int kExitFailure = 1;       // anything else
inline constexpr int kExitInvalidSpec = 2;   // each problem printed as `path: message`
inline constexpr int kExitDrained = 75;      // SIGTERM/SIGINT honoured at a step boundary
inline constexpr int kExitGuardStop = 76;    // the memory guard decided; reason in the termination message

}  // namespace headroom::worker
