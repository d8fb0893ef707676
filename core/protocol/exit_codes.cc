#include "core/protocol/exit_codes.h"

namespace headroom::protocol {

std::string ExitReason(int exit_code, bool oom_killed) {
  if (oom_killed) return "OOMKilled";
  switch (exit_code) {
    case kExitFinished: return "Completed";
    case kExitFailure: return "Error";
    case kExitInvalidSpec: return "InvalidSpec";
    case kExitDrained: return "Drained";
    case kExitGuardStop: return "GuardStop";
    case kExitGpuOom: return "GpuOOM";
    default: break;
  }
  if (exit_code > 128) return "Signal " + std::to_string(exit_code - 128);
  return "Exit " + std::to_string(exit_code);
}

}  // namespace headroom::protocol
