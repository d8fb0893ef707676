// What the guard has already done to this job, carried across worker restarts.
//
// A worker process lives only until the next restart, so the supervisor (local runtime or
// operator) owns the history: it records each decision it applies and each crash, and
// hands the history to every new worker in the environment variable
// HEADROOM_GUARD_HISTORY as one line of JSON (small; no file to share). The policy reads
// it to cap restarts (maxRestarts) and to refuse restarts that bought no progress.
//
// JSON: {"restarts":2,"crash_restarts":1,"oom_kills":1,"reshards":0,
//        "micro_batch_shrinks":0,"token_budget_shrinks":0,"checkpointing_enabled":0,"offload_enabled":0,"offload_disabled":0,
//        "last_restart_step":14,"last_action":"restart","last_action_step":14,
//        "guard_restart_step":14,"restart_resource":"host","restart_level_bytes":872415232,
//        "restart_reclaimed_nothing":""}
//
// A restart that reclaimed nothing is not repeated: when the guard restarts, the history
// keeps the resource and its level at that step; the next worker compares the level of
// the first step it runs after that step (MemoryGuard), and when it is back within
// kReclaimedNothingFraction of it (a jump that comes back at the same step, not a leak),
// the resource goes into restart_reclaimed_nothing, which the worker's decisions carry
// back (Decision::restart_reclaimed_nothing) so every later generation keeps it. The
// policy then does not restart for that resource again.
#pragma once

#include <optional>
#include <string>

#include "core/guard/decision.h"
#include "core/protocol/environment.h"

namespace headroom::guard {

// The level of the first step after a restart within this fraction of the level the
// guard restarted at: the restart reclaimed nothing.
inline constexpr double kReclaimedNothingFraction = 0.02;

struct GuardHistory {
  int restarts = 0;        // restarts that count against maxRestarts: guard restarts + crash restarts
  int crash_restarts = 0;  // of which after a crash or kernel OOM kill
  int oom_kills = 0;       // kernel OOM kills seen (exit 137 with oom_kill counted)
  int reshards = 0;
  int micro_batch_shrinks = 0;
  int token_budget_shrinks = 0;   // shrinkTokenBudget decisions applied
  int checkpointing_enabled = 0;  // enableActivationCheckpointing decisions applied
  int offload_enabled = 0;        // enableOffload decisions applied
  int offload_disabled = 0;       // disableOffload decisions applied
  // Step the last relaunch (any applied action, or a crash restart) resumed from; -1 = none
  // yet. Progress is measured from here: a relaunch that buys fewer than horizon+1 steps
  // before the guard fires again is not repeated (the policy escalates).
  int last_restart_step = -1;
  std::string last_action;  // DecisionActionName of the last applied decision
  int last_action_step = -1;
  // The guard's last restart decision (not a crash restart): its step, the resource it
  // acted on and that resource's end-of-step bytes then. -1 / "" / 0 = none.
  int guard_restart_step = -1;
  std::string restart_resource;
  int64_t restart_level_bytes = 0;
  // Resources ("host", "gpu", comma-separated) whose restart reclaimed nothing.
  std::string restart_reclaimed_nothing;

  // Whether a restart for `resource` ("host" | "gpu") reclaimed nothing before.
  bool RestartReclaimedNothing(const std::string& resource) const;
  // Adds `resources` (one, or a comma-separated list) to restart_reclaimed_nothing.
  void AddRestartReclaimedNothing(const std::string& resources);

  // Steps made since the last restart, given the current step (a large number when
  // there was no restart).
  int StepsSinceLastRestart(int current_step) const;

  // Records an applied decision: its counter, last_action*, and last_restart_step (every
  // action relaunches the workers from the checkpoint at decision.step); a restart its
  // step, resource and level; and the decision's restart_reclaimed_nothing.
  void Record(const Decision& decision);
  // Records a crash restart from `checkpoint_step` (oom_kill: a kernel OOM kill).
  void RecordCrashRestart(int checkpoint_step, bool oom_kill);

  std::string ToJson() const;
  // Throws std::invalid_argument naming the bad key.
  static GuardHistory FromJson(const std::string& json);
  // From HEADROOM_GUARD_HISTORY; an empty history when unset. Throws when malformed.
  static GuardHistory FromEnvironment();
  bool operator==(const GuardHistory&) const = default;
};

}  // namespace headroom::guard
