// Crash triage for the job reconciler (job_reconciler.h): which rank's end explains a
// generation's, how to say what happened to it, and what the crash cost: the status's
// out-of-memory counts and steps lost (newest step reached - checkpoint step resumed
// from, settled when the next generation reports its first step when the checkpoint was
// not visible), and the inputs-out-of-memory rule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "operator/runtime/job_status.h"
#include "operator/runtime/worker_backend.h"

namespace headroom::runtime {

// Why a worker says it ended, whole: the reason its termination message states, else (a
// worker that stated none, or on Kubernetes the log tail the pod falls back to) the error
// line of its output (core/protocol's rule). "" when it said nothing.
std::string ReasonTheWorkerGave(const RankExit& e);

// The rank that says the most about why a generation ended, of `so_far` and `r` (a rank
// that crashed): an out-of-memory (the kernel's kill or a CUDA OOM the worker caught),
// else the rank that ended first (its peers were killed after it).
const RankObservation* MostTellingCrash(const RankObservation* so_far, const RankObservation& r,
                                        std::optional<int> first_crashed_rank);

// A rank that the supervisor's own stop ended, not a failure of its own: SIGTERM's
// default action (143: the stop came before the worker's handler), SIGKILL that is not
// the OOM killer's (137: the end of a drain's grace, or its pod stopped with a peer), or
// its pod deleted before it reported (PodDeleted). Only meaningful after a drain was sent.
bool EndedByTheStop(const RankExit& e);

// An OOM kill before the generation's first step and before the worker said it had
// loaded its inputs: the inputs' memory, not a step's, so the guard does not act on it.
bool KilledWhileLoading(const RankExit& e, bool saw_step_this_generation);

// What happened to `crashed` during the step after `reached`, in the words of its exit
// (the kernel's kill against `memory_limit`, CUDA's report, or the worker's error line).
std::string DescribeCrash(const RankObservation& crashed, int64_t reached, bool saw_step_this_generation,
                          const std::string& memory_limit);

// What crashes cost, kept across generations.
class CrashLedger {
 public:
  // A generation's first step was `first_step`: it resumed from first_step - 1. Settles a
  // loss left open; ends a run of kills while loading.
  void OnFirstStep(int64_t first_step, JobStatus& status);
  // The next generation is expected to resume right after `step` (a planned stop
  // checkpointed it), unless a crash already set where the loss is counted from.
  void ExpectResumeAfter(int64_t step);
  // Adds a generation's out-of-memory ends to the status (kernel kills, and of those the
  // CUDA out-of-memory exits).
  void CountOutOfMemoryEnds(const Observation& observed, int oom_kills, JobStatus& status);
  // Adds the steps a crash lost since the checkpoint to the status and marks where the
  // next generation's loss is settled from; returns the reason's "; resuming from ..." part.
  std::string CountStepsLost(const Observation& observed, JobStatus& status);
  // Counts a kill while loading (any other end resets the count); true once that happened
  // kOomKillsBeforeAStepLimit generations in a row.
  bool EndsForInputsOutOfMemory(const RankExit& e, bool saw_step_this_generation);
  // The Failed message then: the cause (the inputs) first, `what` the last kill.
  std::string OutOfMemoryReadingInputs(const std::string& what) const;

 private:
  int oom_kills_before_a_step_ = 0;
  std::optional<int64_t> unsettled_loss_from_step_;
};

}  // namespace headroom::runtime
