// JobRestorer (job_restore.h): a fresh entry, or one picked up from .status, the spec
// ConfigMap and the pods.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/guard/guard_history.h"
#include "core/protocol/environment.h"
#include "core/spec/training_job.h"
#include "operator/trainingjob/job_restore.h"
#include "operator/trainingjob/job_entry.h"
#include "operator/trainingjob/status.h"
#include "operator/kubeclient/resource_client.h"
#include "operator/manifests/children.h"

namespace headroom::trainingjob {

using nlohmann::json;

std::shared_ptr<JobEntry> JobRestorer::NewEntry(const json& object, const spec::TrainingJob& job,
                                                const std::vector<json>& pods) {
  auto entry = std::make_shared<JobEntry>();
  entry->uid = kubeclient::Uid(object);
  entry->backend = std::make_unique<PodBackend>(*client_, job, kubeclient::Namespace(object), pods_options_);
  entry->reconciler = std::make_unique<runtime::JobReconciler>(job, reconciler_options_);
  entry->suspend = job.spec.suspend;
  entry->workers = job.spec.workers;
  entry->observed_generation = object["metadata"].value("generation", int64_t{0});
  const json status = object.value("status", json::object());
  bool invalid_before = false;
  for (const json& c : status.value("conditions", json::array())) {
    if (c.value("reason", "") == "InvalidSpec") invalid_before = true;
  }
  if (status.value("generation", 0) > 0 && !invalid_before) Restore(*entry, object, job, pods);
  return entry;
}

void JobRestorer::Restore(JobEntry& entry, const json& object, const spec::TrainingJob& job,
                          const std::vector<json>& pods) {
  const json status_json = object.value("status", json::object());
  runtime::JobStatus status = JobStatusFromJson(status_json);
  const std::string ns = kubeclient::Namespace(object);
  // The pods may be a generation ahead of .status (the operator stopped between creating
  // them and writing status).
  guard::GuardHistory history;
  int generation = status.generation;
  for (const json& p : pods) {
    if (kubeclient::ControllerUid(p) != entry.uid) continue;
    try {
      generation = std::max(generation, std::stoi(kubeclient::Label(p, manifests::kLabelGeneration)));
    } catch (const std::exception&) {
    }
  }
  for (const json& p : pods) {
    if (kubeclient::Label(p, manifests::kLabelGeneration) != std::to_string(generation)) continue;
    for (const json& env : p["spec"]["containers"][0].value("env", json::array())) {
      if (env.value("name", "") != protocol::kGuardHistoryEnv) continue;
      try {
        history = guard::GuardHistory::FromJson(env.value("value", "{}"));
      } catch (const std::exception& e) {
        spdlog::warn("{}: unreadable guard history on a pod ({}); starting from none", kubeclient::KeyOf(object),
                     e.what());
      }
    }
  }
  // The spec the running generation was launched with (the guard may have changed
  // workers, microBatchSize, offload), from the ConfigMap the workers read.
  spec::TrainingJob running = job;
  try {
    kubeclient::ResourceClient configmaps(*client_, kubeclient::resources::kConfigMaps);
    if (std::optional<json> cm = configmaps.TryGet(ns, manifests::SpecConfigMapName(kubeclient::Name(object)))) {
      spec::ParseResult parsed =
          spec::ParseTrainingJob(cm->value("data", json::object()).value(manifests::kSpecFileName, ""));
      if (parsed.ok()) {
        running = *parsed.job;
        running.metadata = job.metadata;
      }
    }
  } catch (const kubeclient::ApiError& e) {
    throw std::runtime_error("restoring " + kubeclient::KeyOf(object) + ": reading its spec ConfigMap: " + e.what());
  }
  status.generation = generation;
  status.total_steps = running.spec.grpo.steps;
  status.micro_batch_size = running.spec.grpo.micro_batch_size;
  if (status.workers == 0) status.workers = running.spec.workers;
  entry.reconciler->Restore(status, history, running);
  entry.backend->Adopt(generation, running.spec.workers, running.spec.ranks_per_pod);
  for (const json& p : pods) {
    if (kubeclient::ControllerUid(p) == entry.uid) entry.backend->OnPodEvent(p, false);
  }
  entry.observed_generation = status_json.value("observedGeneration", int64_t{0});
  entry.times = StatusTimesFromJson(status_json);
  // spec.activeDeadlineSeconds counts from startTime, not from this operator's start.
  if (!entry.times.start_time.empty()) {
    try {
      const auto active_for = std::chrono::system_clock::now() - kubeclient::ParseTime(entry.times.start_time);
      entry.reconciler->SetActiveSince(std::chrono::steady_clock::now() -
                                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(active_for));
    } catch (const std::invalid_argument&) {
      // Edited by hand: the deadline counts from now.
    }
  }
  entry.actions_reported = 0;
  entry.phase_reported = runtime::JobPhaseName(status.phase);
  entry.suspend = status.phase == runtime::JobPhase::kSuspended;
  entry.workers = running.spec.workers;
  spdlog::info("{}: picked up at generation {} ({}, step {})", kubeclient::KeyOf(object), generation,
               runtime::JobPhaseName(status.phase), status.step);
}

}  // namespace headroom::trainingjob
