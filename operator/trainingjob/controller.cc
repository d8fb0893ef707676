// The controller's wiring: informers and their handlers, the work queue, and one
// reconcile of a job key from top to bottom. Each step is its own part beside it:
// job_restore.h, spec_changes.h, job_events.h, status_writer.h.
#include "operator/trainingjob/controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/spec/training_job.h"
#include "operator/trainingjob/job_entry.h"
#include "operator/trainingjob/job_events.h"
#include "operator/trainingjob/job_restore.h"
#include "operator/trainingjob/spec_changes.h"
#include "operator/trainingjob/status.h"
#include "operator/kubeclient/resource_client.h"
#include "operator/manifests/children.h"
#include "operator/manifests/gang.h"
#include "operator/runtime/job_driver.h"

namespace headroom::trainingjob {

using nlohmann::json;

namespace {

std::string JoinErrors(const std::vector<spec::SpecError>& errors) {
  std::string out;
  for (const spec::SpecError& e : errors) {
    if (!out.empty()) out += "; ";
    out += e.ToString();
  }
  return out;
}

}  // namespace

TrainingJobController::TrainingJobController(kubeclient::RestClient& client, TrainingJobControllerOptions options,
                                             std::shared_ptr<controllerkit::OperatorMetrics> metrics)
    : client_(&client),
      options_(std::move(options)),
      metrics_(std::move(metrics)),
      restorer_(client, options_.reconciler, options_.pods),
      events_(client),
      status_(client) {
  if (!metrics_) metrics_ = std::make_shared<controllerkit::OperatorMetrics>();
  queue_ = std::make_shared<controllerkit::WorkQueue>();

  controllerkit::Informer::Options job_options;
  job_options.watch.ns = options_.ns;
  job_options.resync_period = options_.resync_period;
  jobs_ = std::make_unique<controllerkit::Informer>(
      kubeclient::ResourceClient(client, kubeclient::resources::kTrainingJobs), job_options);
  controllerkit::Informer::Options pod_options;
  pod_options.watch.ns = options_.ns;
  // Only the pods this operator made.
  pod_options.watch.label_selector = std::string(manifests::kLabelManagedBy) + "=" + manifests::kManagedByValue;
  pods_ = std::make_unique<controllerkit::Informer>(kubeclient::ResourceClient(client, kubeclient::resources::kPods),
                                                    pod_options);
  pods_->AddIndex("job", controllerkit::NamespacedLabelIndex(manifests::kLabelJobName));

  auto enqueue = [this](const json& o) { queue_->Add(kubeclient::KeyOf(o)); };
  jobs_->AddEventHandlers({enqueue,
                           [this](const json& old_object, const json& new_object) {
    // A resync hands (obj, obj): re-check it (level-triggered);
    // the reconcile itself writes nothing when nothing changed.
    (void)old_object;
    queue_->Add(kubeclient::KeyOf(new_object));
                           },
                           enqueue});
  pods_->AddEventHandlers({[this](const json& p) { OnPod(p, false); },
                           [this](const json&, const json& p) { OnPod(p, false); },
                           [this](const json& p) { OnPod(p, true); }});
  controller_ = std::make_unique<controllerkit::Controller>(
      "trainingjob", queue_, [this](const std::string& key) { return Reconcile(key); }, metrics_, options_.workers);
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
  const std::string job = kubeclient::Label(pod, manifests::kLabelJobName);
  if (job.empty()) return;
  const std::string key = kubeclient::Key(kubeclient::Namespace(pod), job);
  std::shared_ptr<JobEntry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) entry = it->second;
  }
  if (entry && entry->backend && kubeclient::ControllerUid(pod) == entry->uid) entry->backend->OnPodEvent(pod, deleted);
  queue_->Add(key);
}

void TrainingJobController::SetPhase(const std::string& key, const std::string& phase) {
  // Counts kept as phases change, not recounted over every job: this runs once per
  // reconcile, and recounting made a reconcile's cost grow with the number of jobs.
  std::map<std::string, int> counts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = phases_.find(key);
    if (it != phases_.end() && it->second == phase) return;
    if (it == phases_.end() && phase.empty()) return;
    if (it != phases_.end()) {
      if (--phase_counts_[it->second] == 0) phase_counts_.erase(it->second);
      if (phase.empty()) {
        phases_.erase(it);
      } else {
        it->second = phase;
      }
    } else {
      phases_.emplace(key, phase);
    }
    if (!phase.empty()) ++phase_counts_[phase];
    counts = phase_counts_;
  }
  metrics_->SetJobsByPhase(counts);
}

controllerkit::Result TrainingJobController::Reconcile(const std::string& key) {
  std::optional<json> object = jobs_->Get(key);
  if (!object || object->at("metadata").contains("deletionTimestamp")) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      entries_.erase(key);  // children go with the owner (ownerReferences -> GC)
    }
    SetPhase(key, "");
    return {};
  }
  spec::ParseResult parsed = spec::ParseTrainingJobJson(*object);
  if (!parsed.ok()) return InvalidSpec(key, *object, parsed.errors);
  const spec::TrainingJob& job = *parsed.job;

  std::shared_ptr<JobEntry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second->uid == kubeclient::Uid(*object) && it->second->reconciler)
      entry = it->second;
  }
  if (!entry) {
    entry = restorer_.NewEntry(*object, job, pods_->ByIndex("job", key));  // may read the API; outside the map lock
    {
      std::lock_guard<std::mutex> lock(mu_);
      entries_[key] = entry;
    }
    WarnIfNoKueue(*object, job);
  }
  std::lock_guard<std::mutex> lock(entry->mu);
  entry->backend->SetOwner(job);
  {
    std::vector<json> pods;
    for (json& p : pods_->ByIndex("job", key)) {
      if (kubeclient::ControllerUid(p) == entry->uid) pods.push_back(std::move(p));
    }
    entry->backend->Sync(pods);
  }
  ApplySpecChanges(*entry, *object, job, options_.reconciler);
  runtime::DriveJob(*entry->reconciler, *entry->backend);
  ReportJobEvents(*entry, *object, events_, *metrics_);
  const runtime::JobStatus& s = entry->reconciler->status();
  const std::string now = kubeclient::FormatTime(std::chrono::system_clock::now());
  if (entry->times.start_time.empty() && s.generation > 0) entry->times.start_time = now;
  const bool done = s.phase == runtime::JobPhase::kSucceeded || s.phase == runtime::JobPhase::kFailed;
  if (!done) entry->times.completion_time.clear();
  if (done && entry->times.completion_time.empty()) entry->times.completion_time = now;
  try {
    status_.Write(*entry, *object, StatusJson(s, entry->observed_generation, entry->times));
  } catch (const kubeclient::ApiError& e) {
    spdlog::warn("{}: status not written ({}); retrying", key, e.what());
    return {.requeue = true};
  }
  SetPhase(key, runtime::JobPhaseName(s.phase));
  if (done) return AfterFinished(key, *object, job, entry->times);
  if (runtime::IsTerminal(s.phase)) return {};
  return {.requeue_after = options_.running_requeue};
}

void TrainingJobController::WarnIfNoKueue(const json& object, const spec::TrainingJob& job) {
  const std::string queue = manifests::KueueQueueOf(job);
  if (queue.empty()) return;
  try {
    client_->Request("GET", std::string("/apis/") + manifests::kKueueApiGroup);
    return;  // served: Kueue gates the pods and admits the group
  } catch (const kubeclient::ApiError& e) {
    if (e.code() != 404) return;  // cannot tell: say nothing
  }
  // The labels are harmless without Kueue: the pods run ungated, as they would unlabelled.
  events_.Emit(object, "no-kueue", "Warning", "KueueNotInstalled",
               std::string("labelled ") + manifests::kKueueQueueLabel + "=" + queue + " but the cluster serves no " +
                   manifests::kKueueApiGroup + " API: the pods run without Kueue's admission");
}

controllerkit::Result TrainingJobController::AfterFinished(const std::string& key, const json& object,
                                                           const spec::TrainingJob& job, const StatusTimes& times) {
  const std::optional<int64_t>& ttl = job.spec.ttl_seconds_after_finished;
  if (!ttl || times.completion_time.empty()) return {};
  std::chrono::system_clock::time_point finished;
  try {
    finished = kubeclient::ParseTime(times.completion_time);
  } catch (const std::invalid_argument&) {
    return {};  // written by this operator; unreadable only if edited by hand
  }
  const auto left = finished + std::chrono::seconds(*ttl) - std::chrono::system_clock::now();
  if (left > std::chrono::seconds(0)) {
    return {.requeue_after =
                std::chrono::duration_cast<std::chrono::milliseconds>(left) + std::chrono::milliseconds(1)};
  }
  // As the TTL-after-finished controller does: the job goes, and its children with it
  // (their ownerReferences). Only this incarnation: a job re-created under the same name is not ours.
  kubeclient::DeleteOptions options;
  options.propagation_policy = "Background";
  options.precondition_uid = kubeclient::Uid(object);
  try {
    kubeclient::ResourceClient(*client_, kubeclient::resources::kTrainingJobs)
        .Delete(kubeclient::Namespace(object), kubeclient::Name(object), options);
  } catch (const kubeclient::ApiError& e) {
    if (e.IsConflict()) return {};  // another incarnation by now
    spdlog::warn("{}: not deleted after ttlSecondsAfterFinished ({}); retrying", key, e.what());
    return {.requeue = true};
  }
  spdlog::info("{}: deleted {} s after it finished (spec.ttlSecondsAfterFinished)", key, *ttl);
  return {};
}

controllerkit::Result TrainingJobController::InvalidSpec(const std::string& key, const json& object,
                                                         const std::vector<spec::SpecError>& errors) {
  std::shared_ptr<JobEntry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = entries_[key];
    if (!slot || slot->uid != kubeclient::Uid(object)) {
      slot = std::make_shared<JobEntry>();
      slot->uid = kubeclient::Uid(object);
    }
    entry = slot;
  }
  std::lock_guard<std::mutex> lock(entry->mu);
  if (entry->backend) entry->backend->Kill();  // a spec made invalid under running workers
  entry->backend.reset();
  entry->reconciler.reset();
  const int64_t generation = object["metadata"].value("generation", int64_t{0});
  const std::string problems = JoinErrors(errors);
  const json current = object.value("status", json::object());
  runtime::JobStatus s;
  s.phase = runtime::JobPhase::kFailed;
  s.message = "invalid spec: " + problems;
  // Keep the condition's transition time when it is already there with the same message,
  // so an unchanged invalid job compares equal and is not written again.
  std::string since = kubeclient::FormatTime(std::chrono::system_clock::now());
  for (const json& c : current.value("conditions", json::array())) {
    if (c.value("type", "") == "Failed" && c.value("reason", "") == "InvalidSpec") {
      since = c.value("lastTransitionTime", since);
    }
  }
  s.conditions.push_back({"Failed", "True", "InvalidSpec", problems, since});
  const json status = StatusJson(s, generation);
  status_.Write(*entry, object, status);
  if (entry->phase_reported != "InvalidSpec/" + std::to_string(generation)) {
    events_.Emit(object, "invalid-" + std::to_string(generation), "Warning", "InvalidSpec",
                 std::to_string(errors.size()) + " problem(s): " + problems);
    entry->phase_reported = "InvalidSpec/" + std::to_string(generation);
  }
  SetPhase(key, "Failed");
  return {};  // nothing to retry: the job is looked at again when it changes
}

}  // namespace headroom::trainingjob
