// A guard decision (decision.h: what a worker wrote in its termination message when it
// stopped with exit 76, or what DecideAfterCrash chose after a crash) turned into the job
// spec of the next generation. This is the only place that writes a decision into a spec.
//
// The spec is the contract between the supervisor and the workers: every change the
// guard asks for (more workers, a smaller micro-batch, offload off or on) is written into
// the next generation's TrainingJob, never passed on the side. Only what the guard may
// change is touched (workers, grpo.microBatchSize, sharding offload flags), so
// RunDefinitionHash() stays equal and the checkpoint resumes.
//
// Contract: ApplyDecision() never produces a spec the worker would refuse: the worker
// count is one NearestWorkerCount() (planner.h) picks, within [minWorkers, maxWorkers] and
// one the GRPO batch divides over; the micro-batch stays >= 1. When a decision cannot be
// honoured as asked (no fitting count other than the current one, nothing would change)
// the change falls back to a same-size restart and its reason says why.
#pragma once

#include <string>

#include "core/guard/decision.h"
#include "core/spec/training_job.h"

namespace headroom::guard {

struct NextSpec {
  spec::TrainingJob job;  // the next generation's spec (unchanged for a restart or a failure)
  // What was actually applied: kRestart after a fallback (and for kNone: a guard stop with
  // nothing to change is a restart), kFail when the guard gave up (no next generation).
  DecisionAction applied = DecisionAction::kRestart;
  std::string reason;    // the guard's reason, plus what was changed or why it fell back
  bool reshard = false;  // the worker count changed

  bool fail() const { return applied == DecisionAction::kFail; }
};

NextSpec ApplyDecision(const spec::TrainingJob& current, const Decision& decision);

}  // namespace headroom::guard
