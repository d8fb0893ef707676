// What a user's edit of the spec means for a running job: spec.suspend drains to a
// checkpoint and back, spec.workers (the scale subresource) reshards.
#include "core/guard/guard_history.h"
#include "core/protocol/exit_codes.h"
#include "core/spec/training_job.h"
#include "operator/trainingjob/spec_changes.h"
#include "operator/trainingjob/job_entry.h"

namespace headroom::trainingjob {

using nlohmann::json;

void ApplySpecChanges(JobEntry& entry, const json& object, const spec::TrainingJob& job,
                      const runtime::ReconcilerOptions& options) {
  const int64_t generation = object["metadata"].value("generation", int64_t{0});
  if (generation == entry.observed_generation && job.spec.suspend == entry.suspend &&
      job.spec.workers == entry.workers) {
    return;
  }
  runtime::JobReconciler& r = *entry.reconciler;
  const runtime::JobStatus& s = r.status();
  if (job.spec.suspend && !entry.suspend) {
    r.RequestStop("spec.suspend is true: drained to a checkpoint");
  } else if (!job.spec.suspend && entry.suspend && s.phase == runtime::JobPhase::kSuspended) {
    // Resume: a reconciler that picks up the drained generation and relaunches it from
    // the checkpoint at the (possibly new) size.
    runtime::JobStatus resumed = s;
    resumed.phase = runtime::JobPhase::kPending;
    resumed.message.clear();
    spec::TrainingJob running = r.current_job();
    running.spec.suspend = false;
    running.metadata = job.metadata;
    // The new pods are launched from the spec as edited now: a paused job is the moment to
    // move it (another pool, another secret), and the template defines no part of the run.
    running.spec.pod_template = job.spec.pod_template;
    const guard::GuardHistory history = r.guard_history();
    auto fresh = std::make_unique<runtime::JobReconciler>(job, options);
    if (resumed.generation == 0) {
      entry.reconciler = std::move(fresh);  // suspended before it ever ran: start it
    } else {
      fresh->Restore(resumed, history, running);
      fresh->Resume("spec.suspend is false: resuming from the checkpoint");
      if (job.spec.workers != running.spec.workers) fresh->RequestWorkers(job.spec.workers);
      entry.reconciler = std::move(fresh);
      // Its pods drained (exit 75) and are gone: that is what the reconciler resumes from.
      entry.backend->AdoptEnded(resumed.generation, running.spec.workers,
                                runtime::RankExit{protocol::kExitDrained, false, "Drained", ""},
                                running.spec.ranks_per_pod);
    }
    entry.actions_reported = entry.reconciler->status().actions.size();
    // As a Job's: resuming resets startTime, and with it spec.activeDeadlineSeconds's count
    // (the fresh reconciler starts it at its first Reconcile).
    entry.times.start_time.clear();
  }
  if (job.spec.workers != entry.workers) {
    if (entry.reconciler->status().generation == 0) {
      entry.reconciler = std::make_unique<runtime::JobReconciler>(job, options);
    } else {
      entry.reconciler->RequestWorkers(job.spec.workers);
    }
  }
  entry.suspend = job.spec.suspend;
  entry.workers = job.spec.workers;
  entry.observed_generation = generation;
}

}  // namespace headroom::trainingjob
