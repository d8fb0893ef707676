// The controller's wiring: informers and their handlers, the work queue, and one
// reconcile of a job key from top to bottom. What each step does lives beside it:
// trainingjob_restore.cc, trainingjob_spec_changes.cc, trainingjob_events.cc,
// trainingjob_status_write.cc.
#include "operator/k8s/trainingjob_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/spec/training_job.h"
#include "operator/k8s/trainingjob_job_entry.h"
#include "operator/k8s/trainingjob_status.h"
#include "operator/kube/resource_client.h"
#include "operator/manifests/children.h"
#include "operator/runtime/job_driver.h"

namespace headroom::k8s {

using nlohmann::json;

TrainingJobController::TrainingJobController(kube::RestClient& client, TrainingJobControllerOptions options,
                                             std::shared_ptr<controller::OperatorMetrics> metrics)
    : client_(&client), options_(std::move(options)), metrics_(std::move(metrics)) {
  if (!metrics_) metrics_ = std::make_shared<controller::OperatorMetrics>();
  queue_ = std::make_shared<controller::WorkQueue>();

  controller::Informer::Options job_options;
  job_options.watch.ns = options_.ns;
  job_options.resync_period = options_.resync_period;
  jobs_ = std::make_unique<controller::Informer>(kube::ResourceClient(client, kube::resources::kTrainingJobs),
                                                 job_options);
  controller::Informer::Options pod_options;
  pod_options.watch.ns = options_.ns;
  // Only the pods this operator made.
  pod_options.watch.label_selector = std::string(manifests::kLabelManagedBy) + "=" + manifests::kManagedByValue;
  pods_ = std::make_unique<controller::Informer>(kube::ResourceClient(client, kube::resources::kPods), pod_options);
  pods_->AddIndex("job", controller::NamespacedLabelIndex(manifests::kLabelJobName));

  auto enqueue = [this](const json& o) { queue_->Add(kube::KeyOf(o)); };
  jobs_->AddEventHandlers({enqueue, [this](const json& old_object, const json& new_object) {
                             // A resync hands (obj, obj): re-check it (level-triggered);
                             // the reconcile itself writes nothing when nothing changed.
                             (void)old_object;
                             queue_->Add(kube::KeyOf(new_object));
                           },
                           enqueue});
  pods_->AddEventHandlers({[this](const json& p) { OnPod(p, false); },
                           [this](const json&, const json& p) { OnPod(p, false); },
                           [this](const json& p) { OnPod(p, true); }});
  controller_ = std::make_unique<controller::Controller>(
      "trainingjob", queue_, [this](const std::string& key) { return Reconcile(key); }, metrics_,
      options_.workers);
}

TrainingJobController::~TrainingJobController() { Stop(std::chrono::milliseconds(5000)); }

void TrainingJobController::StartInformers() {
  jobs_->Start();
  pods_->Start();
}

bool TrainingJobController::WaitForSync(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  return jobs_->WaitForSync(timeout) &&
         pods_->WaitForSync(std::chrono::duration_cast<std::chrono::milliseconds>(
             std::max(deadline - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration(0))));
}

bool TrainingJobController::HasSynced() const { return jobs_->HasSynced() && pods_->HasSynced(); }

void TrainingJobController::StartReconciling() { controller_->Start(); }

bool TrainingJobController::Stop(std::chrono::milliseconds deadline) {
  bool ok = true;
  if (controller_) ok = controller_->Stop(deadline);
  if (jobs_) jobs_->Stop();
  if (pods_) pods_->Stop();
  return ok;
}

size_t TrainingJobController::jobs_tracked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void TrainingJobController::OnPod(const json& pod, bool deleted) {
  const std::string job = kube::Label(pod, manifests::kLabelJobName);
  if (job.empty()) return;
  const std::string key = kube::Key(kube::Namespace(pod), job);
  std::shared_ptr<JobEntry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) entry = it->second;
  }
  if (entry && entry->backend && kube::ControllerUid(pod) == entry->uid) entry->backend->OnPodEvent(pod, deleted);
  queue_->Add(key);
}

void TrainingJobController::SetPhase(const std::string& key, const std::string& phase) {
  std::map<std::string, int> counts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (phase.empty()) {
      phases_.erase(key);
    } else {
      auto [it, inserted] = phases_.try_emplace(key, phase);
      if (!inserted && it->second == phase) return;
      it->second = phase;
    }
    for (const auto& [k, p] : phases_) ++counts[p];
  }
  metrics_->SetJobsByPhase(counts);
}

controller::Result TrainingJobController::Reconcile(const std::string& key) {
  std::optional<json> object = jobs_->Get(key);
  if (!object || object->at("metadata").contains("deletionTimestamp")) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.erase(key);  // children go with the owner (ownerReferences -> GC)
    phases_.erase(key);
    std::map<std::string, int> counts;
    for (const auto& [k, p] : phases_) ++counts[p];
    metrics_->SetJobsByPhase(counts);
    return {};
  }
  spec::ParseResult parsed = spec::ParseTrainingJobJson(*object);
  if (!parsed.ok()) return InvalidSpec(key, *object, parsed.errors);
  const spec::TrainingJob& job = *parsed.job;

  std::shared_ptr<JobEntry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second->uid == kube::Uid(*object) && it->second->reconciler) entry = it->second;
  }
  if (!entry) {
    entry = NewEntry(*object, job);  // may read the API (restore); outside the map lock
    std::lock_guard<std::mutex> lock(mu_);
    entries_[key] = entry;
  }
  std::lock_guard<std::mutex> lock(entry->mu);
  entry->backend->SetOwner(job);
  {
    std::vector<json> pods;
    for (json& p : pods_->ByIndex("job", key)) {
      if (kube::ControllerUid(p) == entry->uid) pods.push_back(std::move(p));
    }
    entry->backend->Sync(pods);
  }
  ApplySpecChanges(*entry, *object, job);
  runtime::DriveJob(*entry->reconciler, *entry->backend);
  ReportActions(*entry, *object);
  const runtime::JobStatus& s = entry->reconciler->status();
  const std::string now = kube::FormatTime(std::chrono::system_clock::now());
  if (entry->times.start_time.empty() && s.generation > 0) entry->times.start_time = now;
  const bool done = s.phase == runtime::JobPhase::kSucceeded || s.phase == runtime::JobPhase::kFailed;
  if (!done) entry->times.completion_time.clear();
  if (done && entry->times.completion_time.empty()) entry->times.completion_time = now;
  try {
    WriteStatus(*entry, *object, StatusJson(s, entry->observed_generation, entry->times));
  } catch (const kube::ApiError& e) {
    spdlog::warn("{}: status not written ({}); retrying", key, e.what());
    return {.requeue = true};
  }
  SetPhase(key, runtime::JobPhaseName(s.phase));
  if (runtime::IsTerminal(s.phase)) return {};
  return {.requeue_after = options_.running_requeue};
}

}  // namespace headroom::k8s
