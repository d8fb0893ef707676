#include "operator/k8s/trainingjob_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <thread>

#include "core/guard/guard_history.h"
#include "core/protocol/environment.h"
#include "core/spec/training_job.h"
#include "operator/k8s/trainingjob_status.h"
#include "operator/runtime/job_driver.h"
#include "operator/kube/resource_client.h"
#include "operator/manifests/children.h"

namespace headroom::k8s {

using nlohmann::json;

struct TrainingJobController::JobEntry {
  std::mutex mu;  // the reconcile of this key vs pod events routed to its backend
  std::string uid;
  std::unique_ptr<PodBackend> backend;
  std::unique_ptr<runtime::JobReconciler> reconciler;
  int64_t observed_generation = 0;
  bool suspend = false;          // spec.suspend as last applied
  int workers = 0;               // spec.workers as last applied
  size_t actions_reported = 0;   // of reconciler->status().actions
  std::string phase_reported;    // the phase the last phase Event was for
  std::optional<json> written;   // the status this operator last wrote
  StatusTimes times;             // startTime / completionTime
};

namespace {

// Eight characters of the uid for Event names: the tail, which differs between two
// incarnations of a job with the same name on any server (real uids are random; the
// test server counts).
std::string Uid8(const json& object) {
  const std::string uid = kube::Uid(object);
  return uid.size() > 8 ? uid.substr(uid.size() - 8) : uid;
}

std::string JoinErrors(const std::vector<spec::SpecError>& errors) {
  std::string out;
  for (const spec::SpecError& e : errors) {
    if (!out.empty()) out += "; ";
    out += e.ToString();
  }
  return out;
}

// Event reason and metric labels for an action the reconciler recorded.
struct ActionLabels {
  std::string event_reason;
  std::string action;  // headroom_operator_guard_actions_total{action}
  std::string reason;  // ... {reason}: why, in one word (bounded cardinality)
  bool warning = false;
};

ActionLabels LabelsFor(runtime::ActionType type) {
  using runtime::ActionType;
  switch (type) {
    case ActionType::kRestart: return {"GuardRestart", "restart", "memoryGuard", false};
    case ActionType::kReshard: return {"Reshard", "reshard", "memoryGuard", false};
    case ActionType::kShrinkMicroBatch: return {"ShrinkMicroBatch", "shrinkMicroBatch", "memoryGuard", false};
    case ActionType::kDisableOffload: return {"DisableOffload", "disableOffload", "memoryGuard", false};
    case ActionType::kEnableOffload: return {"EnableOffload", "enableOffload", "memoryGuard", false};
    case ActionType::kRestartAfterOOMKill: return {"OOMKilled", "restart", "oomKill", true};
    case ActionType::kRestartAfterGpuOOM: return {"GpuOutOfMemory", "restart", "gpuOom", true};
    case ActionType::kRestartAfterCrash: return {"CrashRestart", "restart", "crash", true};
    case ActionType::kResume: return {"Resumed", "restart", "drained", false};
    case ActionType::kScale: return {"Reshard", "reshard", "scale", false};
    case ActionType::kSuspend: return {"Suspended", "suspend", "user", false};
    case ActionType::kUnsuspend: return {"Resumed", "resume", "user", false};
    case ActionType::kFail: return {"Failed", "fail", "gaveUp", true};
  }
  const std::string name = runtime::ToWireName(type);
  return {name, name, "other", false};
}

}  // namespace

json MergePatchBetween(const json& from, const json& to) {
  if (!from.is_object() || !to.is_object()) return to;
  json patch = json::object();
  for (auto it = from.begin(); it != from.end(); ++it) {
    if (!to.contains(it.key())) patch[it.key()] = nullptr;
  }
  for (auto it = to.begin(); it != to.end(); ++it) {
    if (!from.contains(it.key())) {
      patch[it.key()] = it.value();
    } else if (from[it.key()] != it.value()) {
      patch[it.key()] = it.value().is_object() ? MergePatchBetween(from[it.key()], it.value()) : it.value();
    }
  }
  return patch;
}

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

void TrainingJobController::Event(const json& object, const std::string& name_suffix, const std::string& type,
                                  const std::string& reason, const std::string& message) {
  const std::string ns = kube::Namespace(object);
  const std::string now = kube::FormatTime(std::chrono::system_clock::now());
  // A name that is a function of what happened: a retry, or a second operator replaying
  // it after a restart, answers AlreadyExists instead of a duplicate Event. Lowercase:
  // names are RFC 1123 subdomains, and action types are camelCase.
  std::string suffix = name_suffix;
  for (char& ch : suffix) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  json event{{"apiVersion", "v1"},
             {"kind", "Event"},
             {"metadata", {{"name", kube::Name(object) + "." + Uid8(object) + "." + suffix}, {"namespace", ns}}},
             {"involvedObject",
              {{"apiVersion", spec::kApiVersion},
               {"kind", spec::kKind},
               {"name", kube::Name(object)},
               {"namespace", ns},
               {"uid", kube::Uid(object)}}},
             {"reason", reason},
             {"message", message.substr(0, 1024)},
             {"type", type},
             {"source", {{"component", "headroom-operator"}}},
             {"reportingComponent", "headroom-operator"},
             {"firstTimestamp", now},
             {"lastTimestamp", now},
             {"count", 1}};
  kube::ResourceClient events(*client_, kube::resources::kEvents);
  for (int attempt = 0; attempt < 5; ++attempt) {
    try {
      events.Create(ns, event);
      ++events_emitted_;
      return;
    } catch (const kube::ApiError& e) {
      if (e.IsAlreadyExists()) return;
      if (e.code() != 0 && e.code() != 429 && e.code() < 500) {
        spdlog::warn("event {} for {}: {}", reason, kube::KeyOf(object), e.what());
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10 << attempt));
  }
  spdlog::warn("event {} for {} not recorded: the API server kept failing", reason, kube::KeyOf(object));
}

void TrainingJobController::WriteStatus(JobEntry& entry, const json& object, const json& written_status) {
  // The scale subresource's labelSelectorPath (.status.selector) lets `kubectl scale` and
  // autoscalers find the job's pods.
  json status = written_status;
  status["selector"] = std::string(manifests::kLabelJobName) + "=" + kube::Name(object);
  const json current = object.value("status", json::object());
  // Compare with what we last wrote too: the cache may not have caught up with our own
  // write yet, and writing it again would be a wasted (and conflicting) write.
  if ((entry.written && *entry.written == status) || current == status) {
    if (current == status) entry.written = status;
    return;
  }
  const json patch{{"status", MergePatchBetween(current, status)}};
  kube::ResourceClient jobs(*client_, kube::resources::kTrainingJobs);
  jobs.PatchStatus(kube::Namespace(object), kube::Name(object), patch);
  entry.written = status;
  ++status_writes_;
}

controller::Result TrainingJobController::InvalidSpec(const std::string& key, const json& object,
                                                      const std::vector<spec::SpecError>& errors) {
  std::shared_ptr<JobEntry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = entries_[key];
    if (!slot || slot->uid != kube::Uid(object)) {
      slot = std::make_shared<JobEntry>();
      slot->uid = kube::Uid(object);
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
  std::string since = kube::FormatTime(std::chrono::system_clock::now());
  for (const json& c : current.value("conditions", json::array())) {
    if (c.value("type", "") == "Failed" && c.value("reason", "") == "InvalidSpec") {
      since = c.value("lastTransitionTime", since);
    }
  }
  s.conditions.push_back({"Failed", "True", "InvalidSpec", problems, since});
  const json status = StatusJson(s, generation);
  WriteStatus(*entry, object, status);
  if (entry->phase_reported != "InvalidSpec/" + std::to_string(generation)) {
    Event(object, "invalid-" + std::to_string(generation), "Warning", "InvalidSpec",
          std::to_string(errors.size()) + " problem(s): " + problems);
    entry->phase_reported = "InvalidSpec/" + std::to_string(generation);
  }
  SetPhase(key, "Failed");
  return {};  // nothing to retry: the job is looked at again when it changes
}

std::shared_ptr<TrainingJobController::JobEntry> TrainingJobController::NewEntry(const json& object,
                                                                                 const spec::TrainingJob& job) {
  auto entry = std::make_shared<JobEntry>();
  entry->uid = kube::Uid(object);
  entry->backend = std::make_unique<PodBackend>(*client_, job, kube::Namespace(object), options_.pods);
  entry->reconciler = std::make_unique<runtime::JobReconciler>(job, options_.reconciler);
  entry->suspend = job.spec.suspend;
  entry->workers = job.spec.workers;
  entry->observed_generation = object["metadata"].value("generation", int64_t{0});
  const json status = object.value("status", json::object());
  bool invalid_before = false;
  for (const json& c : status.value("conditions", json::array())) {
    if (c.value("reason", "") == "InvalidSpec") invalid_before = true;
  }
  if (status.value("generation", 0) > 0 && !invalid_before) RestoreEntry(*entry, object, job);
  return entry;
}

void TrainingJobController::RestoreEntry(JobEntry& entry, const json& object, const spec::TrainingJob& job) {
  const json status_json = object.value("status", json::object());
  runtime::JobStatus status = JobStatusFromJson(status_json);
  const std::string ns = kube::Namespace(object);
  const std::vector<json> pods = pods_->ByIndex("job", kube::Key(ns, kube::Name(object)));
  // The pods may be a generation ahead of .status (the operator stopped between creating
  // them and writing status).
  guard::GuardHistory history;
  int generation = status.generation;
  for (const json& p : pods) {
    if (kube::ControllerUid(p) != entry.uid) continue;
    try {
      generation = std::max(generation, std::stoi(kube::Label(p, manifests::kLabelGeneration)));
    } catch (const std::exception&) {
    }
  }
  for (const json& p : pods) {
    if (kube::Label(p, manifests::kLabelGeneration) != std::to_string(generation)) continue;
    for (const json& env : p["spec"]["containers"][0].value("env", json::array())) {
      if (env.value("name", "") != protocol::kGuardHistoryEnv) continue;
      try {
        history = guard::GuardHistory::FromJson(env.value("value", "{}"));
      } catch (const std::exception& e) {
        spdlog::warn("{}: unreadable guard history on a pod ({}); starting from none", kube::KeyOf(object), e.what());
      }
    }
  }
  // The spec the running generation was launched with (the guard may have changed
  // workers, microBatchSize, offload), from the ConfigMap the workers read.
  spec::TrainingJob running = job;
  try {
    kube::ResourceClient configmaps(*client_, kube::resources::kConfigMaps);
    if (std::optional<json> cm = configmaps.TryGet(ns, manifests::SpecConfigMapName(kube::Name(object)))) {
      spec::ParseResult parsed = spec::ParseTrainingJob(cm->value("data", json::object()).value(manifests::kSpecFileName, ""));
      if (parsed.ok()) {
        running = *parsed.job;
        running.metadata = job.metadata;
      }
    }
  } catch (const kube::ApiError& e) {
    throw std::runtime_error("restoring " + kube::KeyOf(object) + ": reading its spec ConfigMap: " + e.what());
  }
  status.generation = generation;
  status.total_steps = running.spec.grpo.steps;
  status.micro_batch_size = running.spec.grpo.micro_batch_size;
  if (status.workers == 0) status.workers = running.spec.workers;
  entry.reconciler->Restore(status, history, running);
  entry.backend->Adopt(generation, running.spec.workers);
  for (const json& p : pods) {
    if (kube::ControllerUid(p) == entry.uid) entry.backend->OnPodEvent(p, false);
  }
  entry.observed_generation = status_json.value("observedGeneration", int64_t{0});
  entry.times = StatusTimesFromJson(status_json);
  entry.actions_reported = 0;
  entry.phase_reported = runtime::JobPhaseName(status.phase);
  entry.suspend = status.phase == runtime::JobPhase::kSuspended;
  entry.workers = running.spec.workers;
  spdlog::info("{}: picked up at generation {} ({}, step {})", kube::KeyOf(object), generation,
               runtime::JobPhaseName(status.phase), status.step);
}

void TrainingJobController::ApplySpecChanges(JobEntry& entry, const json& object, const spec::TrainingJob& job) {
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
    const guard::GuardHistory history = r.guard_history();
    auto fresh = std::make_unique<runtime::JobReconciler>(job, options_.reconciler);
    if (resumed.generation == 0) {
      entry.reconciler = std::move(fresh);  // suspended before it ever ran: start it
    } else {
      fresh->Restore(resumed, history, running);
      fresh->Resume("spec.suspend is false: resuming from the checkpoint");
      if (job.spec.workers != running.spec.workers) fresh->RequestWorkers(job.spec.workers);
      entry.reconciler = std::move(fresh);
      // Its pods drained (exit 75) and are gone: that is what the reconciler resumes from.
      entry.backend->AdoptEnded(resumed.generation, running.spec.workers,
                                runtime::RankExit{protocol::kExitDrained, false, "Drained", ""});
    }
    entry.actions_reported = entry.reconciler->status().actions.size();
  }
  if (job.spec.workers != entry.workers) {
    if (entry.reconciler->status().generation == 0) {
      entry.reconciler = std::make_unique<runtime::JobReconciler>(job, options_.reconciler);
    } else {
      entry.reconciler->RequestWorkers(job.spec.workers);
    }
  }
  entry.suspend = job.spec.suspend;
  entry.workers = job.spec.workers;
  entry.observed_generation = generation;
}

void TrainingJobController::ReportActions(JobEntry& entry, const json& object) {
  const runtime::JobStatus& s = entry.reconciler->status();
  for (size_t i = entry.actions_reported; i < s.actions.size(); ++i) {
    const runtime::ActionRecord& a = s.actions[i];
    const ActionLabels l = LabelsFor(a.type);
    metrics_->CountGuardAction(l.action, l.reason);
    std::string message = "step " + std::to_string(a.step) + ": " + a.reason;
    if (runtime::IsUnplannedEnd(a.type)) {
      message += " (steps lost so far: " + std::to_string(s.steps_lost) + ")";
    }
    Event(object, std::to_string(s.generation) + "-" + runtime::ToWireName(a.type), l.warning ? "Warning" : "Normal", l.event_reason,
          message);
  }
  entry.actions_reported = s.actions.size();
  const std::string phase = runtime::JobPhaseName(s.phase);
  if (phase != entry.phase_reported) {
    if (s.phase == runtime::JobPhase::kSucceeded) {
      Event(object, "succeeded", "Normal", "Succeeded",
            s.message + "; " + std::to_string(s.restarts) + " restart(s), " + std::to_string(s.reshards) +
                " reshard(s), " + std::to_string(s.oom_kills) + " OOM kill(s), " + std::to_string(s.steps_lost) +
                " step(s) lost");
    } else if (s.phase == runtime::JobPhase::kSuspended &&
               (s.actions.empty() || s.actions.back().type != runtime::ActionType::kSuspend)) {
      Event(object, "suspended-" + std::to_string(s.generation), "Normal", "Suspended", s.message);
    } else if (s.phase == runtime::JobPhase::kFailed && (s.actions.empty() || s.actions.back().type != runtime::ActionType::kFail)) {
      Event(object, "failed", "Warning", "Failed", s.message);
    } else if (s.phase == runtime::JobPhase::kPending || s.phase == runtime::JobPhase::kRunning) {
      if (s.generation == 1 && entry.phase_reported.empty()) {
        Event(object, "launched", "Normal", "Launched",
              "generation 1 with " + std::to_string(s.workers) + " worker(s)");
      }
    }
    entry.phase_reported = phase;
  }
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
