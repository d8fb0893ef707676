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
//     scrape their /metrics.
// Pod events (owned pods, by the job-name label) enqueue their job.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "operator/controller/controller.h"
#include "operator/controller/informer.h"
#include "operator/controller/operator_metrics.h"
#include "operator/controller/work_queue.h"
#include "operator/k8s/pod_backend.h"
#include "operator/kube/rest_client.h"
#include "operator/runtime/job_reconciler.h"

namespace headroom::k8s {

struct TrainingJobControllerOptions {
  std::string ns;                                       // "" = every namespace
  int workers = 4;                                      // reconcile threads
  std::chrono::milliseconds running_requeue{2000};      // scrape period while workers run
  std::chrono::milliseconds resync_period{30000};       // informers' level-triggered re-check
  runtime::ReconcilerOptions reconciler;                // drain grace, peer timeout
  PodBackendOptions pods;
};

class TrainingJobController {
 public:
  TrainingJobController(kube::RestClient& client, TrainingJobControllerOptions options,
                        std::shared_ptr<controller::OperatorMetrics> metrics);
  ~TrainingJobController();

  // Starts the informers (caches) only: a follower keeps warm caches.
  void StartInformers();
  bool WaitForSync(std::chrono::milliseconds timeout) const;
  // Starts reconciling (the leader). StartInformers first.
  void StartReconciling();
  // Stops reconciles (in-flight ones get `deadline`), then the informers.
  bool Stop(std::chrono::milliseconds deadline);

  // One reconcile of "namespace/name" (what the worker threads call; public for tests).
  controller::Result Reconcile(const std::string& key);

  bool HasSynced() const;
  int64_t status_writes() const { return status_writes_; }
  int64_t events_emitted() const { return events_emitted_; }
  size_t jobs_tracked() const;
  controller::Informer& job_informer() { return *jobs_; }
  controller::Informer& pod_informer() { return *pods_; }

 private:
  struct JobEntry;
  void OnPod(const nlohmann::json& pod, bool deleted);
  std::shared_ptr<JobEntry> NewEntry(const nlohmann::json& object, const spec::TrainingJob& job);
  void RestoreEntry(JobEntry& entry, const nlohmann::json& object, const spec::TrainingJob& job);
  void ApplySpecChanges(JobEntry& entry, const nlohmann::json& object, const spec::TrainingJob& job);
  void ReportActions(JobEntry& entry, const nlohmann::json& object);
  void Event(const nlohmann::json& object, const std::string& name_suffix, const std::string& type,
             const std::string& reason, const std::string& message);
  // Writes status when it differs from what is there; false when the write failed.
  void WriteStatus(JobEntry& entry, const nlohmann::json& object, const nlohmann::json& status);
  controller::Result InvalidSpec(const std::string& key, const nlohmann::json& object,
                                 const std::vector<spec::SpecError>& errors);
  void SetPhase(const std::string& key, const std::string& phase);

  kube::RestClient* client_;
  TrainingJobControllerOptions options_;
  std::shared_ptr<controller::OperatorMetrics> metrics_;
  std::unique_ptr<controller::Informer> jobs_;
  std::unique_ptr<controller::Informer> pods_;
  std::shared_ptr<controller::WorkQueue> queue_;
  std::unique_ptr<controller::Controller> controller_;

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<JobEntry>> entries_;
  std::map<std::string, std::string> phases_;  // key -> phase, for headroom_operator_jobs
  std::atomic<int64_t> status_writes_{0};
  std::atomic<int64_t> events_emitted_{0};
};

// RFC 7386 merge patch turning `from` into `to` (null for removed keys).
nlohmann::json MergePatchBetween(const nlohmann::json& from, const nlohmann::json& to);

}  // namespace headroom::k8s
