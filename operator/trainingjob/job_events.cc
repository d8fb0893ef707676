#include "operator/trainingjob/job_events.h"

#include <string>

#include "operator/runtime/action_type.h"

namespace headroom::trainingjob {

using nlohmann::json;

namespace {

// Event reason and metric labels for an action the reconciler recorded.
struct ActionLabels {
  std::string event_reason;
  std::string action;  // headroom_operator_guard_actions_total{action}
  std::string reason;  // ... {reason}: why, in one word (bounded cardinality)
  bool warning = false;
};

ActionLabels LabelsFor(runtime::ActionType type) {
  using runtime::ActionType;
  switch (type) {
    case ActionType::kRestart: return {"GuardRestart", "restart", "memoryGuard", false};
    case ActionType::kReshard: return {"Reshard", "reshard", "memoryGuard", false};
    case ActionType::kShrinkMicroBatch: return {"ShrinkMicroBatch", "shrinkMicroBatch", "memoryGuard", false};
    case ActionType::kShrinkTokenBudget: return {"ShrinkTokenBudget", "shrinkTokenBudget", "memoryGuard", false};
    case ActionType::kEnableActivationCheckpointing:
      return {"EnableActivationCheckpointing", "enableActivationCheckpointing", "memoryGuard", false};
    case ActionType::kDisableOffload: return {"DisableOffload", "disableOffload", "memoryGuard", false};
    case ActionType::kEnableOffload: return {"EnableOffload", "enableOffload", "memoryGuard", false};
    case ActionType::kRestartAfterOOMKill: return {"OOMKilled", "restart", "oomKill", true};
    case ActionType::kRestartAfterGpuOOM: return {"GpuOutOfMemory", "restart", "gpuOom", true};
    case ActionType::kRestartAfterCrash: return {"CrashRestart", "restart", "crash", true};
    case ActionType::kResume: return {"Resumed", "restart", "drained", false};
    // The cluster took a pod away (preemption, eviction): no restart, no fault of the job.
    case ActionType::kResumeAfterDisruption: return {"Disrupted", "resume", "disruption", false};
    case ActionType::kScale: return {"Reshard", "reshard", "scale", false};
    case ActionType::kSuspend: return {"Suspended", "suspend", "user", false};
    case ActionType::kUnsuspend: return {"Resumed", "resume", "user", false};
    case ActionType::kFail: return {"Failed", "fail", "gaveUp", true};
  }
  const std::string name = runtime::ToWireName(type);
  return {name, name, "other", false};
}

}  // namespace

void ReportJobEvents(JobEntry& entry, const json& object, EventRecorder& events,
                     controllerkit::OperatorMetrics& metrics) {
  const runtime::JobStatus& s = entry.reconciler->status();
  for (size_t i = entry.actions_reported; i < s.actions.size(); ++i) {
    const runtime::ActionRecord& a = s.actions[i];
    const ActionLabels l = LabelsFor(a.type);
    metrics.CountGuardAction(l.action, l.reason);
    std::string message = "step " + std::to_string(a.step) + ": " + a.reason;
    if (runtime::IsUnplannedEnd(a.type)) {
      message += " (steps lost so far: " + std::to_string(s.steps_lost) + ")";
    }
    events.Emit(object, std::to_string(s.generation) + "-" + runtime::ToWireName(a.type),
                l.warning ? "Warning" : "Normal", l.event_reason, message);
  }
  entry.actions_reported = s.actions.size();
  const std::string phase = runtime::JobPhaseName(s.phase);
  if (phase != entry.phase_reported) {
    if (s.phase == runtime::JobPhase::kSucceeded) {
      events.Emit(object, "succeeded", "Normal", "Succeeded",
                  s.message + "; " + std::to_string(s.restarts) + " restart(s), " + std::to_string(s.reshards) +
                      " reshard(s), " + std::to_string(s.oom_kills) + " OOM kill(s), " + std::to_string(s.steps_lost) +
                      " step(s) lost" +
                      (s.disruptions > 0 ? ", " + std::to_string(s.disruptions) +
                                               " disruption(s) (pods preempted or evicted; resumed, not restarts)"
                                         : ""));
    } else if (s.phase == runtime::JobPhase::kSuspended &&
               (s.actions.empty() || s.actions.back().type != runtime::ActionType::kSuspend)) {
      events.Emit(object, "suspended-" + std::to_string(s.generation), "Normal", "Suspended", s.message);
    } else if (s.phase == runtime::JobPhase::kFailed &&
               (s.actions.empty() || s.actions.back().type != runtime::ActionType::kFail)) {
      events.Emit(object, "failed", "Warning", "Failed", s.message);
    } else if (s.phase == runtime::JobPhase::kPending || s.phase == runtime::JobPhase::kRunning) {
      if (s.generation == 1 && entry.phase_reported.empty()) {
        events.Emit(object, "launched", "Normal", "Launched",
                    "generation 1 with " + std::to_string(s.workers) + " worker(s)");
      }
    }
    entry.phase_reported = phase;
  }
}

}  // namespace headroom::trainingjob
