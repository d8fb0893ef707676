// Picking a job up: a fresh reconciler for a new job, or, when .status shows an earlier
// operator ran it, one restored from .status, the spec ConfigMap (the spec the running
// generation was launched with) and the pods (generation label, guard history).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/guard/guard_history.h"
#include "core/protocol/environment.h"
#include "core/spec/training_job.h"
#include "operator/k8s/trainingjob_controller.h"
#include "operator/k8s/trainingjob_job_entry.h"
#include "operator/k8s/trainingjob_status.h"
#include "operator/kube/resource_client.h"
#include "operator/manifests/children.h"

namespace headroom::k8s {

using nlohmann::json;

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

}  // namespace headroom::k8s
