// The decision logic shared by `headroom run` (local processes) and headroom-operator
// (pods): given what the workers are doing, what happens next to the job.
//
// It knows nothing of processes, pods or clocks it did not get passed: every call to
// Reconcile() gets an Observation from a WorkerBackend and returns one step for the
// caller to carry out (launch a generation, drain, kill, wait, or finish); job_driver.h's
// DriveJob() is the one loop that does, for both supervisors. It is
// deterministic: the same observations give the same steps, so it is unit-tested with a
// scripted backend and reused unchanged by the operator.
//
// What it does with the way a generation ends (docs/design.md, Worker exit codes):
//   - every rank 0                  -> Succeeded.
//   - 76, guard stop                -> apply the decision (restart, reshard within
//                                      [minWorkers, maxWorkers], shrink the micro-batch,
//                                      toggle offload) and launch generation+1; no step is
//                                      lost (the worker checkpointed the step it stopped at).
//   - 75, drained                   -> Suspended when a stop was requested, resharded
//                                      for a scale request, else resume.
//   - a scale request's drain whose first failure is a rank ended by its own signals (143
//     before the worker's handler, 137 at the end of the grace, a deleted pod), no OOM
//                                   -> the reshard still, from the checkpoint, the steps
//                                      lost counted; not a restart.
//   - OOM kill (137 + oom_kill), GPU out of memory (77), or any other crash -> restart
//                                      from the last checkpoint, counting the kill (a GPU
//                                      OOM counts as one, on the GPU) and the steps lost
//                                      (newest step reached - checkpoint step resumed from).
//   - 2, invalid spec               -> Failed (relaunching cannot help).
//   - a rank disrupted from outside (RankExit::disruption: preempted, evicted), with no
//     out-of-memory or guard stop among the ranks and no stop requested
//                                   -> resumeAfterDisruption: relaunch from the checkpoint,
//                                      the cause in the reason; the steps lost counted as
//                                      for a crash when a rank did not drain, but neither
//                                      status.restarts nor memoryGuard.maxRestarts counts it.
//   Relaunches that were not asked for by the user count against memoryGuard.maxRestarts
//   (disruptions excepted); the one that would exceed it fails the job instead, with the reason.
//   - spec.activeDeadlineSeconds, as a Kubernetes Job's: counted from the first launch (a
//     reconciler made for a resume from suspension starts it again, as a Job resets its
//     startTime); once it is up, running ranks drain to a checkpoint and the job ends
//     Failed with condition reason DeadlineExceeded (a generation that succeeds while
//     draining still succeeds). The time comes from Observation::now, nothing else.
// When some ranks have ended and others have not: a crash kills the rest at once; a
// clean end (0/75/76) waits peer_exit_timeout for the others to agree, then kills them.
//
// With guard_enabled = false (`headroom run --no-guard`) every generation's spec has
// memoryGuard.enabled = false, and a stray exit 76 is resumed without applying it; crashes
// and OOM kills still restart from the checkpoint, so the job finishes and the ledger shows
// what the kernel cost.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "core/guard/guard_history.h"
#include "core/guard/planner.h"
#include "core/spec/training_job.h"
#include "operator/runtime/crash_triage.h"
#include "operator/runtime/job_status.h"
#include "operator/runtime/worker_backend.h"
#include "operator/runtime/worst_rank_memory.h"

namespace headroom::runtime {

struct ReconcilerOptions {
  bool guard_enabled = true;
  std::chrono::milliseconds drain_grace{30000};        // SIGTERM -> SIGKILL
  std::chrono::milliseconds peer_exit_timeout{60000};  // first clean exit -> kill the rest
  // Wall-clock time for ActionRecord/Condition timestamps (RFC 3339); injectable for tests.
  std::function<std::string()> wall_clock;
};

struct NextStep {
  enum class Kind { kWait, kLaunch, kDrain, kKill, kFinished };
  Kind kind = Kind::kWait;
  LaunchRequest launch;                // kLaunch
  std::chrono::milliseconds grace{0};  // kDrain
  std::string reason;                  // why (for logs and Events)
};
const char* NextStepKindName(NextStep::Kind kind);

class JobReconciler {
 public:
  JobReconciler(spec::TrainingJob job, ReconcilerOptions options);

  NextStep Reconcile(const Observation& observed);

  // The user's requests. RequestStop: drain, keep the checkpoint, end Suspended.
  // RequestWorkers: reshard to n workers at the next step boundary (kubectl scale).
  void RequestStop(const std::string& reason);
  void RequestWorkers(int n);
  // The user lifts a stop (spec.suspend back to false) on a Restore()d drained
  // generation: the next Reconcile() relaunches from the checkpoint. Not a restart: it
  // counts against neither status.restarts nor memoryGuard.maxRestarts.
  void Resume(const std::string& reason);
  // The caller could not carry out a step (a launch failed: no such binary, no cgroup,
  // the API server refused a pod): the job ends Failed with `reason`.
  void MarkFailed(const std::string& reason);
  // When the job became active (its first launch, on the Observation::now clock), for
  // spec.activeDeadlineSeconds. Set by the first Reconcile(); a supervisor that Restore()s
  // a job sets it from what it recorded (the operator: status.startTime).
  void SetActiveSince(std::chrono::steady_clock::time_point since) { active_since_ = since; }
  std::optional<std::chrono::steady_clock::time_point> active_since() const { return active_since_; }

  // Picks up a job some earlier supervisor was running (the operator after a restart
  // reads these back from status, pod labels and the workers' environment): the status
  // with its generation and counters, the guard history, and the spec the running
  // generation was launched with. The next Reconcile() observes that generation.
  void Restore(const JobStatus& status, const guard::GuardHistory& history, const spec::TrainingJob& running);

  const JobStatus& status() const { return status_; }
  // The spec the current (or next) generation runs.
  const spec::TrainingJob& current_job() const { return job_; }
  const guard::GuardHistory& guard_history() const { return history_; }

 private:
  // The steps of Reconcile().
  NextStep Finished() const;
  NextStep FirstLaunch();
  NextStep OnSomeRanksEnded(const Observation& observed, const RankObservation* crashed);
  NextStep OnEveryRankRunning();
  NextStep Launch(const std::string& reason);
  // condition_reason: the Failed condition's reason (a Job's vocabulary: DeadlineExceeded).
  NextStep Finish(JobPhase phase, const std::string& message, const std::string& condition_reason = "GaveUp");
  // spec.activeDeadlineSeconds: whether it is up at `now` (sets deadline_exceeded_), and
  // the job's end when it is.
  bool DeadlineUp(std::chrono::steady_clock::time_point now);
  NextStep FailForDeadline(bool workers_ended);
  // What the end of a generation leads to: job_reconciler_outcomes.cc.
  NextStep OnGenerationEnded(const Observation& observed);
  // A crash: counted (crash_triage.h), then a restart from the checkpoint, or with the
  // guard on an escalation when it repeats at the same step.
  NextStep OnCrash(const Observation& observed, const RankObservation& crashed, int oom_kills);
  NextStep OnGuardStop(const RankObservation& stopped);
  // The scale request the generation drained for: relaunch at the nearest worker count
  // the spec allows; `cost` is appended to the reason (steps a rank lost not draining).
  NextStep ReshardOnRequest(const std::string& cost);
  // A rank's place was taken from outside: a resume that costs no restart.
  NextStep OnDisruption(const Observation& observed, const RankObservation& disrupted, bool some_rank_crashed);
  // counts_as_restart: against memoryGuard.maxRestarts; counted: in status.restarts (or
  // status.reshards), which every relaunch is but a disruption's.
  NextStep Relaunch(int64_t step, ActionType type, const std::string& reason, bool counts_as_restart, bool reshard,
                    bool counted = true);
  void Ingest(const Observation& observed);
  // The memory part of the status: worst_rank_memory.h.
  void UpdateMemoryStatus();
  void Record(int64_t step, ActionType type, const std::string& reason);
  void SetCondition(const std::string& type, bool on, const std::string& reason, const std::string& message);
  std::string Now() const;

  spec::TrainingJob job_;
  ReconcilerOptions options_;
  // What the crash escalation plans with (guard::JobModelShape, read once). A supervisor
  // that cannot read a spec.model.path (on Kubernetes the model may be on a volume only
  // the pods mount) plans with the preset's dimensions: the escalation compares plans of
  // the same model at different worker counts, so only their shape matters there.
  guard::PlanOptions plan_options_;
  JobStatus status_;
  guard::GuardHistory history_;

  std::optional<std::string> stop_requested_;
  std::optional<int> workers_requested_;
  std::optional<std::chrono::steady_clock::time_point> active_since_;
  std::optional<std::string> deadline_exceeded_;  // why, once spec.activeDeadlineSeconds is up
  std::optional<std::string> resume_requested_;
  bool drain_sent_ = false;
  bool kill_sent_ = false;
  std::optional<std::chrono::steady_clock::time_point> first_exit_at_;
  std::optional<int> first_crashed_rank_;  // the rank whose crash ended this generation
  int unrequested_relaunches_ = 0;         // what memoryGuard.maxRestarts caps
  bool saw_step_this_generation_ = false;
  int64_t generation_resumed_from_ = 0;  // first step of this generation - 1
  CrashLedger crashes_;                  // out-of-memory ends and steps lost
  WorstRankMemory memory_;               // this generation's per-step memory, the worst over ranks
};

}  // namespace headroom::runtime
