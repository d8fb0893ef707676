#include "operator/runtime/worker_backend.h"

namespace headroom::runtime {

std::string ExitReason(int exit_code, bool oom_killed) {
  if (oom_killed) return "OOMKilled";
  switch (exit_code) {
    case kExitFinished: return "Completed";
    case kExitFailure: return "Error";
    case kExitInvalidSpec: return "InvalidSpec";
    case kExitDrained: return "Drained";
    case kExitGuardStop: return "GuardStop";
    default: break;
  }
  if (exit_code > 128) return "Signal " + std::to_string(exit_code - 128);
  return "Exit " + std::to_string(exit_code);
}

}  // namespace headroom::runtime
