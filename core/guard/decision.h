// One guard decision: what to do before the next step runs, and why, in words.
//
// The worker puts Decision::ToJson() in its termination message when it exits 76; the
// local runtime and the operator parse it with Decision::FromJson() and turn it into the
// next generation's spec with ApplyDecision() (next_spec.h: restart from the checkpoint,
// relaunch with target_workers, a new microBatchSize, token budget or offload setting). The same JSON feeds status.lastAction and Events.
//
// JSON (keys fixed; `null`/absent targets mean "unchanged"):
//   {"action":"restart","resource":"host","reason":"host working set 812 MiB of 1 GiB ...",
//    "step":7,"forecast_peak_bytes":951619584,"steps_to_limit":2,
//    "growth_bytes_per_step":50331648,"memory_class":"leak","level_bytes":872415232,
//    "restart_reclaimed_nothing":"",
//    "target_workers":null,"target_micro_batch_size":null,
//    "target_max_tokens_per_micro_batch":null,
//    "target_offload_params":null,"target_offload_optimizer":null}
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/spec/guard_actions.h"
#include "core/spec/training_job.h"

namespace headroom::guard {

// none, every spec::GuardAction (the same enumerators, from core/spec/guard_actions.h's
// one list), fail.
enum class DecisionAction {
  kNone,
  HEADROOM_GUARD_ACTIONS(HEADROOM_GUARD_ACTION_ENUMERATOR) kFail,  // nothing left to try: stop the job with the reason
};

// "none", "restart", "reshard", "shrinkMicroBatch", "disableOffload", "enableOffload",
// "fail" (the spec's spellings where they overlap).
const char* DecisionActionName(DecisionAction a);
std::optional<DecisionAction> DecisionActionFromName(const std::string& name);
DecisionAction FromGuardAction(spec::GuardAction a);
std::optional<spec::GuardAction> ToGuardAction(DecisionAction a);  // nullopt for none/fail

struct Decision {
  DecisionAction action = DecisionAction::kNone;
  std::string resource;             // "host", "gpu", or "" when none
  std::string reason;               // for a person: numbers, class, horizon, the action's why
  int step = 0;                     // the last finished step (the checkpoint step)
  int64_t forecast_peak_bytes = 0;  // highest predicted peak within the horizon
  int steps_to_limit = -1;          // -1 = never
  double growth_bytes_per_step = 0;
  std::string memory_class;  // forecaster class of the resource
  int64_t level_bytes = 0;   // the resource's end-of-step bytes at `step`
  // "host", "gpu" or both ("host,gpu"): resources on which this worker saw the guard's
  // last restart reclaim nothing (GuardHistory::restart_reclaimed_nothing); the
  // supervisor records it with the decision, so no later generation restarts for it.
  std::string restart_reclaimed_nothing;
  std::optional<int> target_workers;
  std::optional<int> target_micro_batch_size;
  std::optional<int> target_max_tokens_per_micro_batch;
  std::optional<bool> target_offload_params;
  std::optional<bool> target_offload_optimizer;

  bool acts() const { return action != DecisionAction::kNone; }
  std::string ToJson() const;  // one line
  // Throws std::invalid_argument naming the bad key.
  static Decision FromJson(const std::string& json);
};

}  // namespace headroom::guard
