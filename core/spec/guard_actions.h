// The memory guard's actions, listed once. Three enums are generated from this list, so
// they cannot drift: spec::GuardAction (what a spec may allow, below), guard::DecisionAction
// (what the guard decided: none, these, fail) and runtime::ActionType (what the runtime
// did: these, then relaunches nobody planned and the user's). Their names and the
// conversions between them are generated from it too.
//
// HEADROOM_GUARD_ACTIONS(X) calls X(enumerator, "specName") once per action, in escalation
// order (the default order of spec.memoryGuard.actions).
#pragma once

#include <optional>
#include <string>
#include <vector>

#define HEADROOM_GUARD_ACTIONS(X)                                    \
  X(kRestart, "restart")                                             \
  X(kReshard, "reshard")                                             \
  X(kShrinkMicroBatch, "shrinkMicroBatch")                           \
  X(kShrinkTokenBudget, "shrinkTokenBudget")                         \
  X(kEnableActivationCheckpointing, "enableActivationCheckpointing") \
  X(kDisableOffload, "disableOffload")                               \
  X(kEnableOffload, "enableOffload")

// For the enums: `HEADROOM_GUARD_ACTIONS(HEADROOM_GUARD_ACTION_ENUMERATOR)`.
#define HEADROOM_GUARD_ACTION_ENUMERATOR(enumerator, name) enumerator,

namespace headroom::spec {

// Guard actions, in the order a spec lists them (that order is the escalation order).
enum class GuardAction { HEADROOM_GUARD_ACTIONS(HEADROOM_GUARD_ACTION_ENUMERATOR) };
const char* GuardActionName(GuardAction a);  // "restart", "reshard", ...
std::optional<GuardAction> GuardActionFromName(const std::string& name);
std::vector<std::string> GuardActionNames();  // every action, in enum order

}  // namespace headroom::spec
