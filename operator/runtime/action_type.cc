#include "operator/runtime/action_type.h"

namespace headroom::runtime {

namespace {

struct WireName {
  ActionType type;
  const char* name;
};

constexpr WireName kWireNames[] = {
    {ActionType::kRestart, "restart"},
    {ActionType::kReshard, "reshard"},
    {ActionType::kShrinkMicroBatch, "shrinkMicroBatch"},
    {ActionType::kDisableOffload, "disableOffload"},
    {ActionType::kEnableOffload, "enableOffload"},
    {ActionType::kRestartAfterOOMKill, "restartAfterOOMKill"},
    {ActionType::kRestartAfterGpuOOM, "restartAfterGpuOOM"},
    {ActionType::kRestartAfterCrash, "restartAfterCrash"},
    {ActionType::kResume, "resume"},
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
    case guard::DecisionAction::kNone:
    case guard::DecisionAction::kRestart: return ActionType::kRestart;
    case guard::DecisionAction::kReshard: return ActionType::kReshard;
    case guard::DecisionAction::kShrinkMicroBatch: return ActionType::kShrinkMicroBatch;
    case guard::DecisionAction::kDisableOffload: return ActionType::kDisableOffload;
    case guard::DecisionAction::kEnableOffload: return ActionType::kEnableOffload;
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
