// Gang scheduling and queueing of one generation's pods (docs/design.md, "Gang
// scheduling"): a generation's pods start together or not at all, so a half-placed job
// never waits on a rendezvous that cannot complete.
//
//   - spec.template.spec.schedulerName "volcano": a Volcano PodGroup
//     (scheduling.volcano.sh/v1beta1) with minMember = the generation's pods, named on
//     every pod by the annotation scheduling.k8s.io/group-name;
//   - schedulerName "scheduler-plugins-scheduler" (the name the scheduler-plugins chart
//     gives its second scheduler, which runs the coscheduling plugin): a PodGroup
//     (scheduling.x-k8s.io/v1alpha1) named on every pod by the label
//     scheduling.x-k8s.io/pod-group;
//   - a TrainingJob labelled kueue.x-k8s.io/queue-name: Kueue's plain-pod group on every
//     pod (the queue-name and pod-group-name labels, the pod-group-total-count
//     annotation), so Kueue admits the generation's pods all or none. Independent of the
//     scheduler: Kueue admits, the scheduler places.
// Every generation is a group of its own, "<job>-g<generation>": a reshard changes the
// number of pods, and Kueue admits the new group again. Pure functions, as children.h's:
// the operator creates what `headroom render` prints.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/spec/training_job.h"
#include "operator/manifests/children.h"

namespace headroom::manifests {

enum class GangScheduler { kNone, kVolcano, kCoscheduling };

inline constexpr const char* kVolcanoSchedulerName = "volcano";
inline constexpr const char* kCoschedulingSchedulerName = "scheduler-plugins-scheduler";
inline constexpr const char* kVolcanoGroupAnnotation = "scheduling.k8s.io/group-name";
inline constexpr const char* kVolcanoQueueAnnotation = "scheduling.volcano.sh/queue-name";
inline constexpr const char* kCoschedulingGroupLabel = "scheduling.x-k8s.io/pod-group";
inline constexpr const char* kKueueQueueLabel = "kueue.x-k8s.io/queue-name";
inline constexpr const char* kKueueGroupNameLabel = "kueue.x-k8s.io/pod-group-name";
inline constexpr const char* kKueueGroupCountAnnotation = "kueue.x-k8s.io/pod-group-total-count";
inline constexpr const char* kKueueApiGroup = "kueue.x-k8s.io";

// Where a PodGroup kind lives in the API.
struct PodGroupKind {
  const char* group;
  const char* version;
  const char* plural;
  const char* kind;
  std::string ApiVersion() const { return std::string(group) + "/" + version; }
};
inline constexpr PodGroupKind kVolcanoPodGroup{"scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup"};
inline constexpr PodGroupKind kCoschedulingPodGroup{"scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup"};

GangScheduler GangSchedulerOf(const spec::TrainingJob& job);
const PodGroupKind* PodGroupKindOf(GangScheduler scheduler);  // null for kNone
// The Kueue queue the job is labelled for; "" when none.
std::string KueueQueueOf(const spec::TrainingJob& job);
// "<job>-g<generation>": the PodGroup's and the Kueue group's name.
std::string PodGroupName(const std::string& job_name, int64_t generation);

// The generation's PodGroup (owned by the TrainingJob, labelled as its other children plus
// the generation), or null when the job's scheduler takes none. minMember = the
// generation's pods; minResources = what they request together.
nlohmann::json BuildPodGroup(const WorkerGeneration& gen, const std::string& namespace_);
// Names the generation's group on one of its pods (Volcano's annotation, coscheduling's
// label, Kueue's labels and annotation); nothing for a job with none.
void JoinPodGroup(const WorkerGeneration& gen, nlohmann::json& pod);

}  // namespace headroom::manifests
