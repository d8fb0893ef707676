#include "operator/runtime/job_driver.h"

#include <exception>
#include <string>

namespace headroom::runtime {

NextStep DriveJob(JobReconciler& reconciler, WorkerBackend& backend, const DriveOptions& options) {
  NextStep next;
  for (int round = 0; round < options.max_rounds; ++round) {
    const Observation observed = backend.Observe();
    next = reconciler.Reconcile(observed);
    if (options.on_step) options.on_step(observed, next);
    switch (next.kind) {
      case NextStep::Kind::kLaunch: try { backend.Launch(next.launch);
        } catch (const std::exception& e) {
          reconciler.MarkFailed("could not start generation " + std::to_string(next.launch.generation) + ": " +
                                e.what());
        }
        continue;
      case NextStep::Kind::kDrain: backend.Drain(next.grace); return next;
      case NextStep::Kind::kKill: backend.Kill(); return next;
      case NextStep::Kind::kWait:
      case NextStep::Kind::kFinished: return next;
    }
  }
  return next;
}

}  // namespace headroom::runtime
