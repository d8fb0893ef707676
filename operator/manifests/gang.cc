#include "operator/manifests/gang.h"

#include <algorithm>
#include <string>

#include "core/spec/pod_template.h"

namespace headroom::manifests {

using nlohmann::json;

namespace {

std::string ValueOr(const std::map<std::string, std::string>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

// Bytes as a quantity a person reads: whole Gi or Mi where exact.
std::string BytesQuantity(int64_t bytes) {
  if (bytes > 0 && bytes % (int64_t{1} << 30) == 0) return std::to_string(bytes >> 30) + "Gi";
  if (bytes > 0 && bytes % (int64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + "Mi";
  return std::to_string(bytes);
}

// What the generation's pods request together (requests equal limits: children.cc).
json MinResources(const spec::TrainingJobSpec& s) {
  const int64_t ranks = s.workers;
  const int64_t millis = ranks * s.resources.cpu_millis;
  json r{{"cpu", millis % 1000 == 0 ? std::to_string(millis / 1000) : std::to_string(millis) + "m"},
         {"memory", BytesQuantity(ranks * s.resources.memory_bytes)}};
  if (s.resources.gpus > 0) r[spec::kGpuResourceName] = std::to_string(ranks * s.resources.gpus);
  return r;
}

}  // namespace

GangScheduler GangSchedulerOf(const spec::TrainingJob& job) {
  const std::string& name = job.spec.pod_template.scheduler_name;
  if (name == kVolcanoSchedulerName) return GangScheduler::kVolcano;
  if (name == kCoschedulingSchedulerName) return GangScheduler::kCoscheduling;
  return GangScheduler::kNone;
}

const PodGroupKind* PodGroupKindOf(GangScheduler scheduler) {
  switch (scheduler) {
    case GangScheduler::kVolcano: return &kVolcanoPodGroup;
    case GangScheduler::kCoscheduling: return &kCoschedulingPodGroup;
    case GangScheduler::kNone: return nullptr;
  }
  return nullptr;
}

std::string KueueQueueOf(const spec::TrainingJob& job) { return ValueOr(job.metadata.labels, kKueueQueueLabel); }

std::string PodGroupName(const std::string& job_name, int64_t generation) {
  return job_name + "-g" + std::to_string(generation);
}

json BuildPodGroup(const WorkerGeneration& gen, const std::string& namespace_) {
  const spec::TrainingJob& job = gen.job;
  const GangScheduler scheduler = GangSchedulerOf(job);
  const PodGroupKind* kind = PodGroupKindOf(scheduler);
  if (kind == nullptr) return nullptr;
  json labels{{kLabelJobName, job.metadata.name},
              {kLabelManagedBy, kManagedByValue},
              {kLabelGeneration, std::to_string(gen.generation)}};
  json meta{{"name", PodGroupName(job.metadata.name, gen.generation)},
            {"namespace", namespace_},
            {"labels", std::move(labels)}};
  json owner = OwnerReference(job);
  if (!owner.is_null()) meta["ownerReferences"] = json::array({owner});
  json spec{{"minMember", PodsPerGeneration(job.spec)}, {"minResources", MinResources(job.spec)}};
  if (scheduler == GangScheduler::kVolcano) {
    const spec::PodTemplate& t = job.spec.pod_template;
    if (!t.priority_class_name.empty()) spec["priorityClassName"] = t.priority_class_name;
    std::string queue = ValueOr(t.annotations, kVolcanoQueueAnnotation);
    if (queue.empty()) queue = ValueOr(job.metadata.annotations, kVolcanoQueueAnnotation);
    if (!queue.empty()) spec["queue"] = queue;
  }
  return json{{"apiVersion", kind->ApiVersion()},
              {"kind", kind->kind},
              {"metadata", std::move(meta)},
              {"spec", std::move(spec)}};
}

void JoinPodGroup(const WorkerGeneration& gen, json& pod) {
  const spec::TrainingJob& job = gen.job;
  const std::string group = PodGroupName(job.metadata.name, gen.generation);
  json& meta = pod["metadata"];
  switch (GangSchedulerOf(job)) {
    case GangScheduler::kVolcano: meta["annotations"][kVolcanoGroupAnnotation] = group; break;
    case GangScheduler::kCoscheduling: meta["labels"][kCoschedulingGroupLabel] = group; break;
    case GangScheduler::kNone: break;
  }
  const std::string queue = KueueQueueOf(job);
  if (!queue.empty()) {
    meta["labels"][kKueueQueueLabel] = queue;
    meta["labels"][kKueueGroupNameLabel] = group;
    meta["annotations"][kKueueGroupCountAnnotation] = std::to_string(PodsPerGeneration(job.spec));
  }
}

}  // namespace headroom::manifests
