// "How workers run": the one seam between the job reconciler (what to do) and the place
// workers live — local processes in memory cgroups (`headroom run`, local/) or
// pods (the operator, operator/trainingjob/). The reconciler never sees a pid or a pod.
//
// A backend runs at most one *generation* of a job at a time: one launch of N ranks from
// one job spec. Every restart, reshard or re-tune is a new generation with its own spec;
// the workers resume from the shared checkpoint directory (docs/design.md, Checkpoints).
//
// Contract:
//   - Launch() starts every rank of the generation, or throws std::runtime_error naming
//     what failed (nothing of that generation is left running then). It is only called
//     when no rank of an earlier generation is alive.
//   - Observe() never blocks for long; it reports every rank of the current generation,
//     the step records that arrived since the previous call (each exactly once), and how
//     each exited rank ended. Exit codes are core/protocol/exit_codes.h's (docs/design.md):
//     0 finished, 2 invalid spec, 75 drained, 76 guard stop and 77 GPU out of memory
//     (their JSON in termination_message), 1 failure, and 128+signal for a rank killed
//     by a signal (137 = SIGKILL).
//   - A rank whose place was taken from outside (preemption, eviction) carries the cause
//     in RankExit::disruption; its exit code is still how it ended (75 when it drained).
//   - Drain() asks every live rank to checkpoint and stop (SIGTERM / pod deletion with a
//     grace period); a rank still alive after `grace` is killed by the backend.
//   - Kill() stops every live rank now (no checkpoint).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/protocol/exit_codes.h"
#include "core/protocol/model_fetch_record.h"
#include "core/protocol/step_record.h"
#include "core/spec/training_job.h"

namespace headroom::runtime {

struct LaunchRequest {
  int generation = 0;     // 1 for the first launch, +1 for every relaunch
  spec::TrainingJob job;  // the spec this generation runs; job.spec.workers ranks
  // What the guard has done so far (core/guard/guard_history.h), for the workers'
  // environment (protocol::kGuardHistoryEnv): the policy caps restarts with it.
  std::string guard_history_json;
};

// How one rank ended.
struct RankExit {
  int exit_code = 0;        // 0..255; 128+signal for a signal
  bool oom_killed = false;  // the kernel's OOM killer (cgroup oom_kill counter moved)
  std::string reason;       // protocol::ExitReason: "Completed", "GuardStop", "GpuOOM", "OOMKilled", "Signal 9", ...
  std::string termination_message;  // what the worker wrote (core/protocol/termination_message.h)
  std::string last_output = {};     // its output's reason line (protocol::CrashReasonLine), for crash reasons
  // Set when the rank's place was taken from outside the job, not by anything it or the
  // supervisor did: on Kubernetes a pod preempted, evicted or deleted by someone else (its
  // DisruptionTarget condition, or a deletion the operator did not make). What happened,
  // in words ("preempted by the scheduler for a higher-priority pod (PreemptionByScheduler)").
  // The reconciler resumes such a generation without counting a restart. Empty otherwise.
  std::string disruption = {};
};

// How the other ranks of a pod of several (spec.ranksPerPod) ended, given how the pod
// ended, which is reported for its first rank: its launcher stops them together and exits
// as the rank that decided (core/launch/pod_launcher.h). An orderly end (0, 75, 76) is
// every rank's; after a failure the others were stopped with the pod (137, "StoppedWithPod",
// no out-of-memory end of their own), so one pod's failure counts once, as for a pod of one.
inline RankExit PodPeerExit(const RankExit& pod) {
  if (protocol::IsOrderlyExit(pod.exit_code)) return pod;
  RankExit e;
  e.exit_code = protocol::kExitKilled;
  e.reason = "StoppedWithPod";
  e.disruption = pod.disruption;
  return e;
}

struct RankObservation {
  int rank = 0;
  bool running = false;          // alive (starting or stepping)
  std::optional<RankExit> exit;  // set once the rank has ended
};

struct Observation {
  int generation = 0;  // 0 before the first launch
  std::chrono::steady_clock::time_point now{};
  std::vector<RankObservation> ranks;           // every rank of the current generation
  std::vector<protocol::StepRecord> new_steps;  // arrived since the previous Observe(), all ranks
  // The newest model-fetch record (spec.model.hub's download) that arrived since the
  // previous Observe(), any rank; none when none arrived.
  std::optional<protocol::ModelFetchRecord> model_fetch;
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

}  // namespace headroom::runtime
