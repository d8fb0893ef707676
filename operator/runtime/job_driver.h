// Carries out the reconciler's next step on a backend: the one loop body both
// supervisors share (`headroom run` polls it, the operator calls it once per reconcile of
// a job). Observe the workers, ask the JobReconciler what happens next, do it on the
// WorkerBackend (launch a generation, drain, kill).
//
// The reconciler stays pure (it decides from what it is shown, nothing more); this is
// where its decisions meet processes or pods, so a failure to carry one out is turned
// back into a decision here: a launch that throws marks the job Failed with the backend's
// reason (JobReconciler::MarkFailed).
#pragma once

#include <functional>

#include "operator/runtime/job_reconciler.h"
#include "operator/runtime/worker_backend.h"

namespace headroom::runtime {

struct DriveOptions {
  // A launch is observed again at once (what follows it may already be due, such as the
  // Failed phase after a launch that threw); a drain, a kill or a wait is left for the
  // caller's next call, when the workers have had time to react. Bounds the rounds of one
  // call so a job that keeps relaunching cannot hold the caller.
  int max_rounds = 3;
  // Called after every Reconcile(), before its step is carried out: the observation
  // (its new step records, each seen once) and the step. Progress views and memory
  // series read the reconciler's status here.
  std::function<void(const Observation&, const NextStep&)> on_step;
};

// Returns the last step decided: kFinished when the job is over (nothing left to carry
// out; the caller stops calling), else the step that was carried out.
NextStep DriveJob(JobReconciler& reconciler, WorkerBackend& backend, const DriveOptions& options = {});

}  // namespace headroom::runtime
