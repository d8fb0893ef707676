// Turns a memory-guard decision (core/guard/decision.h: what a worker wrote in its
// termination message when it stopped with exit 76, or what DecideAfterCrash chose after
// a crash) into the job spec of the next generation.
//
// The spec is the contract between the supervisor and the workers: every change the
// guard asks for — more workers, a smaller micro-batch, offload off or on — is written
// into the next generation's TrainingJob, never passed on the side. Only what the guard
// may change is touched (workers, grpo.microBatchSize, sharding offload flags), so
// RunDefinitionHash() stays equal and the checkpoint resumes.
//
// Contract: ApplyDecision() never produces a spec the worker would refuse: the worker
// count is kept within [minWorkers, maxWorkers] and to one that spec::WorkerCountFits();
// the micro-batch stays >= 1. When a decision cannot be honoured as asked (no fitting
// count above the current one, nothing would change) the change falls back to a
// same-size restart and its reason says why.
#pragma once

#include <string>

#include "core/guard/decision.h"
#include "core/spec/training_job.h"

namespace headroom::runtime {

struct SpecChange {
  spec::TrainingJob job;     // the next generation's spec
  std::string type;          // the action actually applied ("restart" after a fallback)
  std::string reason;        // the guard's reason, plus what was changed
  bool reshard = false;      // the worker count changed
  bool fail = false;         // the guard gave up: no next generation
};

SpecChange ApplyDecision(const spec::TrainingJob& current, const guard::Decision& decision);

// The worker count nearest to `wanted` within [minWorkers, maxWorkers] that the GRPO
// batch divides over (spec::WorkerCountFits), searching away from `current` first.
// Returns `current` when none fits.
int FittingWorkerCount(const spec::TrainingJobSpec& spec, int wanted, int current);

}  // namespace headroom::runtime
