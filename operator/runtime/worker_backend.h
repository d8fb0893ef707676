// "How workers run": the one seam between the job reconciler (what to do) and the place
// workers live — local processes in memory cgroups (`headroom run`, operator/local/) or
// pods (the operator, operator/k8s/). The reconciler never sees a pid or a pod.
//
// A backend runs at most one *generation* of a job at a time: one launch of N ranks from
// one job spec. Every restart, reshard or re-tune is a new generation with its own spec;
// the workers resume from the shared checkpoint directory (design.md, Checkpoints).
//
// Contract:
//   - Launch() starts every rank of the generation, or throws std::runtime_error naming
//     what failed (nothing of that generation is left running then). It is only called
//     when no rank of an earlier generation is alive.
//   - Observe() never blocks for long; it reports every rank of the current generation,
//     the step records that arrived since the previous call (each exactly once), and how
//     each exited rank ended. Exit codes follow design.md: 0 finished, 2 invalid spec,
//     75 drained, 76 guard stop (decision JSON in termination_message), 1 failure, and
//     128+signal for a rank killed by a signal (137 = SIGKILL).
//   - Drain() asks every live rank to checkpoint and stop (SIGTERM / pod deletion with a
//     grace period); a rank still alive after `grace` is killed by the backend.
//   - Kill() stops every live rank now (no checkpoint).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/spec/training_job.h"
#include "operator/runtime/step_record.h"

namespace headroom::runtime {

// Exit codes of headroom-worker (design.md, Worker).
inline constexpr int kExitFinished = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitInvalidSpec = 2;
inline constexpr int kExitDrained = 75;
inline constexpr int kExitGuardStop = 76;
inline constexpr int kExitKilled = 137;  // 128 + SIGKILL: the kernel's OOM killer, or us

struct LaunchRequest {
  int generation = 0;            // 1 for the first launch, +1 for every relaunch
  spec::TrainingJob job;         // the spec this generation runs; job.spec.workers ranks
  // What the guard has done so far (core/guard/guard_history.h), for the workers'
  // environment (HEADROOM_GUARD_HISTORY): the policy caps restarts with it.
  std::string guard_history_json;
};

// How one rank ended.
struct RankExit {
  int exit_code = 0;             // 0..255; 128+signal for a signal
  bool oom_killed = false;       // the kernel's OOM killer (cgroup oom_kill counter moved)
  std::string reason;            // "Completed", "Drained", "GuardStop", "OOMKilled", "Error", "Signal 9", ...
  std::string termination_message;  // what the worker wrote ($HEADROOM_TERMINATION_LOG / /dev/termination-log)
  std::string last_output = {};     // the last line it printed (stderr/stdout), for crash reasons
};

struct RankObservation {
  int rank = 0;
  bool running = false;          // alive (starting or stepping)
  std::optional<RankExit> exit;  // set once the rank has ended
};

struct Observation {
  int generation = 0;                  // 0 before the first launch
  std::chrono::steady_clock::time_point now{};
  std::vector<RankObservation> ranks;  // every rank of the current generation
  std::vector<StepRecord> new_steps;   // arrived since the previous Observe(), all ranks
  // The newest complete checkpoint the backend can see (DIR/latest), if it can see one.
  std::optional<int64_t> checkpoint_step;
};

class WorkerBackend {
 public:
  virtual ~WorkerBackend() = default;
  virtual void Launch(const LaunchRequest& request) = 0;
  virtual Observation Observe() = 0;
  virtual void Drain(std::chrono::milliseconds grace) = 0;
  virtual void Kill() = 0;
};

// A readable reason for an exit code ("GuardStop", "OOMKilled", ...), used when a backend
// knows nothing better.
std::string ExitReason(int exit_code, bool oom_killed);

}  // namespace headroom::runtime
