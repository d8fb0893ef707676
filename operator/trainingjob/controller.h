// TrainingJobController: the operator's reconciler. It keeps one runtime::JobReconciler
// (the decision logic `headroom run` uses, operator/runtime/) per TrainingJob in memory,
// drives it with a PodBackend, and reports through the job's status and Events.
//
// Per reconcile of a job key:
//   - gone or being deleted: the in-memory reconciler is dropped; the children go with
//     their owner (ownerReferences -> the API server's garbage collector).
//   - invalid spec (ParseTrainingJobJson, the core validator): phase Failed with a Failed
//     condition (reason InvalidSpec) naming every problem, one Warning Event, no requeue —
//     the job is looked at again only when it changes. Never a crash loop.
//   - first sight: a fresh reconciler, or, when .status shows an earlier operator ran it,
//     JobReconciler::Restore() from .status, the spec ConfigMap (the spec the running
//     generation was launched with), and the pods (generation label, HEADROOM_GUARD_HISTORY).
//   - spec changes (metadata.generation vs status.observedGeneration): spec.suspend drains
//     to a checkpoint (phase Suspended), unsuspend resumes from it; spec.workers (the
//     scale subresource, `kubectl scale`) reshards through RequestWorkers().
//   - then runtime::DriveJob (Observe -> Reconcile -> Launch/Drain/Kill), an Event for every action the
//     reconciler records (and for Succeeded/Suspended/Failed), guard actions counted in
//     headroom_operator_guard_actions_total{action,reason}, and the status written through
//     the status subresource only when it differs from what is there (a resync of an
//     unchanged job writes nothing). Requeued every running_requeue while workers run, to
//     scrape their /metrics (and to see spec.activeDeadlineSeconds run out).
//   - finished (Succeeded or Failed) with spec.ttlSecondsAfterFinished: requeued until
//     that long after completionTime, then the TrainingJob is deleted (its children with it).
// Pod events (owned pods, by the job-name label) enqueue their job.
// First sight of a job labelled kueue.x-k8s.io/queue-name on a cluster that serves no
// kueue.x-k8s.io API: a KueueNotInstalled Warning Event, and the job runs ungated.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "operator/controllerkit/controller.h"
#include "operator/controllerkit/informer.h"
#include "operator/controllerkit/operator_metrics.h"
#include "operator/controllerkit/work_queue.h"
#include "operator/trainingjob/event_recorder.h"
#include "operator/trainingjob/job_entry.h"
#include "operator/trainingjob/job_restore.h"
#include "operator/trainingjob/pod_backend.h"
#include "operator/trainingjob/status_writer.h"
#include "operator/kubeclient/rest_client.h"
#include "operator/runtime/job_reconciler.h"

namespace headroom::trainingjob {

struct TrainingJobControllerOptions {
  std::string ns;                                   // "" = every namespace
  int workers = 4;                                  // reconcile threads
  std::chrono::milliseconds running_requeue{2000};  // scrape period while workers run
  std::chrono::milliseconds resync_period{30000};   // informers' level-triggered re-check
  runtime::ReconcilerOptions reconciler;            // drain grace, peer timeout
  PodBackendOptions pods;
};

class TrainingJobController {
 public:
  TrainingJobController(kubeclient::RestClient& client, TrainingJobControllerOptions options,
                        std::shared_ptr<controllerkit::OperatorMetrics> metrics);
  ~TrainingJobController();

  // Starts the informers (caches) only: a follower keeps warm caches.
  void StartInformers();
  bool WaitForSync(std::chrono::milliseconds timeout) const;
  // Starts reconciling (the leader). StartInformers first.
  void StartReconciling();
  // Stops reconciles (in-flight ones get `deadline`), then the informers.
  bool Stop(std::chrono::milliseconds deadline);

  // One reconcile of "namespace/name" (what the worker threads call; public for tests).
  controllerkit::Result Reconcile(const std::string& key);

  bool HasSynced() const;
  int64_t status_writes() const { return status_.writes(); }
  int64_t events_emitted() const { return events_.emitted(); }
  size_t jobs_tracked() const;
  controllerkit::Informer& job_informer() { return *jobs_; }
  controllerkit::Informer& pod_informer() { return *pods_; }

 private:
  void OnPod(const nlohmann::json& pod, bool deleted);
  controllerkit::Result InvalidSpec(const std::string& key, const nlohmann::json& object,
                                    const std::vector<spec::SpecError>& errors);
  void SetPhase(const std::string& key, const std::string& phase);
  // A job labelled for a Kueue queue on a cluster without Kueue: a Warning Event; the
  // pods run ungated (docs/design.md, "Gang scheduling").
  void WarnIfNoKueue(const nlohmann::json& object, const spec::TrainingJob& job);
  // A Succeeded or Failed job: deleted spec.ttlSecondsAfterFinished after completionTime
  // (requeued until then), as a Kubernetes Job is.
  controllerkit::Result AfterFinished(const std::string& key, const nlohmann::json& object,
                                      const spec::TrainingJob& job, const StatusTimes& times);

  kubeclient::RestClient* client_;
  TrainingJobControllerOptions options_;
  std::shared_ptr<controllerkit::OperatorMetrics> metrics_;
  std::unique_ptr<controllerkit::Informer> jobs_;
  std::unique_ptr<controllerkit::Informer> pods_;
  std::shared_ptr<controllerkit::WorkQueue> queue_;
  std::unique_ptr<controllerkit::Controller> controller_;
  JobRestorer restorer_;
  EventRecorder events_;
  StatusWriter status_;

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<JobEntry>> entries_;
  std::map<std::string, std::string> phases_;  // key -> phase, for headroom_operator_jobs
  std::map<std::string, int> phase_counts_;    // phase -> jobs in it, kept with phases_
};

}  // namespace headroom::trainingjob
