// What a TrainingJob is doing, in the words of docs/design.md's status block, plus the run's
// ledger (every action taken with its step and reason, OOM kills, steps lost) that the
// local runtime prints as its summary and the operator reports in Events.
//
// Plain data: the reconciler fills it, backends and front-ends (progress view, summary,
// the operator's status writer) read it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/protocol/model_fetch_record.h"
#include "operator/runtime/action_type.h"

namespace headroom::runtime {

enum class JobPhase { kPending, kRunning, kRestarting, kResharding, kSuspended, kSucceeded, kFailed };
const char* JobPhaseName(JobPhase phase);  // "Pending", "Running", ...
bool IsTerminal(JobPhase phase);           // Suspended, Succeeded, Failed

struct MemoryStatus {
  int64_t host_bytes = 0;  // the worst rank's end-of-step working set
  int64_t host_limit_bytes = 0;
  int64_t gpu_bytes = 0;  // the worst rank's reserved GPU bytes
  int64_t gpu_limit_bytes = 0;
  double growth_bytes_per_step = 0;               // host: the worst rank's own forecast trend
  std::optional<double> forecast_steps_to_limit;  // none while memory is not growing
};

// One thing the runtime did to the job and why (the kinds and their wire names:
// action_type.h).
struct ActionRecord {
  int64_t step = 0;
  ActionType type = ActionType::kRestart;
  std::string reason;
  std::string time;  // RFC 3339, UTC
};

struct Condition {
  std::string type;    // Running, MemoryPressure, Succeeded, Failed
  std::string status;  // "True" | "False"
  std::string reason;
  std::string message;
  std::string last_transition_time;
};

struct JobStatus {
  JobPhase phase = JobPhase::kPending;
  int generation = 0;
  int64_t step = 0;         // newest step completed by any generation
  int64_t total_steps = 0;  // spec.grpo.steps
  int workers = 0;
  int micro_batch_size = 0;  // of the running generation (the guard may shrink it)
  int restarts = 0;          // relaunches at the same size (guard, crash, OOM kill, drain; no disruption)
  int reshards = 0;
  int disruptions = 0;                 // resumes after a pod was preempted or evicted (not restarts)
  int oom_kills = 0;                   // out-of-memory ends: the kernel's kills and CUDA OOMs (exit 77)
  int gpu_oom_kills = 0;               // of which CUDA out-of-memory (not in the Kubernetes status)
  int64_t steps_lost = 0;              // steps redone because a crash lost them
  std::optional<double> final_reward;  // reward_mean of the newest step
  // The fraction of held-out problems rank 0 answered exactly right at its latest
  // evaluation (status.heldOutAccuracy); none for a job without a held-out set, or before
  // its first evaluation.
  std::optional<double> heldout_accuracy;
  MemoryStatus memory;
  std::optional<ActionRecord> last_action;
  std::vector<ActionRecord> actions;
  std::vector<Condition> conditions;
  std::string message;  // why it failed / what it is waiting for
  // The newest spec.model.hub download progress a worker reported (status.modelFetch);
  // none for a model from a path, or when every rank found the model already cached.
  std::optional<protocol::ModelFetchRecord> model_fetch;
};

nlohmann::json ToJson(const JobStatus& status);

}  // namespace headroom::runtime
