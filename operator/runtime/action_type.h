// What the runtime did to a job: one enumerator per kind of action, each with the name
// it has on the wire (status.lastAction.type, the --summary JSON's actions[].type, Event
// names). Code matches the enum, never the string, so a new kind of action is a compile
// error everywhere it must be handled (the operator's Event reasons and metric labels,
// the local chart's marks) instead of a silent fall-through.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "core/guard/decision.h"
#include "core/spec/guard_actions.h"

namespace headroom::runtime {

enum class ActionType {
  // The guard's actions, the same enumerators with the spec's spellings, from
  // core/spec/guard_actions.h's one list (restart, reshard, shrinkMicroBatch, ...).
  HEADROOM_GUARD_ACTIONS(HEADROOM_GUARD_ACTION_ENUMERATOR)
  // Relaunches after an end nobody planned.
  kRestartAfterOOMKill,  // "restartAfterOOMKill": the kernel's OOM killer
  kRestartAfterGpuOOM,   // "restartAfterGpuOOM": CUDA out of memory (exit 77)
  kRestartAfterCrash,    // "restartAfterCrash": any other crash
  kResume,               // "resume": drained (exit 75) without a stop request
  // "resumeAfterDisruption": a rank's place was taken from outside (preempted, evicted:
  // RankExit::disruption); not a restart, so memoryGuard.maxRestarts does not count it.
  kResumeAfterDisruption,
  // The user's.
  kSuspend,    // "suspend": drained to a checkpoint on request
  kUnsuspend,  // "unsuspend": a suspended job resumed
  kScale,      // "scale": resharded on request (kubectl scale)
  // The end.
  kFail,  // "fail": the job gave up
};

const char* ToWireName(ActionType type);
std::optional<ActionType> FromWireName(std::string_view name);

// The action that carries out a guard decision as applied (guard::NextSpec::applied):
// the guard's actions map one to one; none is a restart; fail is fail.
ActionType FromDecision(guard::DecisionAction applied);

std::ostream& operator<<(std::ostream& out, ActionType type);  // the wire name

// A relaunch after an out-of-memory end or a crash: the steps since the checkpoint were lost.
bool IsUnplannedEnd(ActionType type);

}  // namespace headroom::runtime
