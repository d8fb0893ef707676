#include "operator/runtime/action_type.h"

namespace headroom::runtime {

namespace {

struct WireName {
  ActionType type;
  const char* name;
};

constexpr WireName kWireNames[] = {
#define HEADROOM_ACTION_WIRE_NAME(enumerator, name) {ActionType::enumerator, name},
    HEADROOM_GUARD_ACTIONS(HEADROOM_ACTION_WIRE_NAME)
#undef HEADROOM_ACTION_WIRE_NAME
        {ActionType::kRestartAfterOOMKill, "restartAfterOOMKill"},
    {ActionType::kRestartAfterGpuOOM, "restartAfterGpuOOM"},
    {ActionType::kRestartAfterCrash, "restartAfterCrash"},
    {ActionType::kResume, "resume"},
    {ActionType::kResumeAfterDisruption, "resumeAfterDisruption"},
    {ActionType::kSuspend, "suspend"},
    {ActionType::kUnsuspend, "unsuspend"},
    {ActionType::kScale, "scale"},
    {ActionType::kFail, "fail"},
};

}  // namespace

const char* ToWireName(ActionType type) {
  for (const WireName& w : kWireNames) {
    if (w.type == type) return w.name;
  }
  return "unknown";
}

std::optional<ActionType> FromWireName(std::string_view name) {
  for (const WireName& w : kWireNames) {
    if (name == w.name) return w.type;
  }
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& out, ActionType type) { return out << ToWireName(type); }

ActionType FromDecision(guard::DecisionAction applied) {
  switch (applied) {
    case guard::DecisionAction::kNone: return ActionType::kRestart;
#define HEADROOM_FROM_DECISION(enumerator, name) \
  case guard::DecisionAction::enumerator: return ActionType::enumerator;
      HEADROOM_GUARD_ACTIONS(HEADROOM_FROM_DECISION)
#undef HEADROOM_FROM_DECISION
    case guard::DecisionAction::kFail: return ActionType::kFail;
  }
  return ActionType::kRestart;
}

bool IsUnplannedEnd(ActionType type) {
  switch (type) {
    case ActionType::kRestartAfterOOMKill:
    case ActionType::kRestartAfterGpuOOM:
    case ActionType::kRestartAfterCrash: return true;
    default: return false;
  }
}

}  // namespace headroom::runtime
