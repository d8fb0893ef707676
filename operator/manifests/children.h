// The Kubernetes objects one TrainingJob owns (docs/design.md, "Kubernetes objects per
// TrainingJob"): worker Pods `<job>-worker-<rank>` (a pod's first rank), a headless Service `<job>`, and a
// ConfigMap `<job>-spec` holding the job YAML the workers read.
//
// Contract:
//   - Pure functions of their inputs: the operator's reconciler and `headroom render`
//     build children with the same code, so what render prints is what the operator
//     creates.
//   - Every child carries an ownerReference to the TrainingJob (controller: true,
//     blockOwnerDeletion: true) when the job has a uid (a job read from the API server);
//     render, working from a file, has none and omits it.
//   - Pods are restartPolicy Never: restarts are the operator's decision (checkpoint,
//     reshard, re-tune), never the kubelet's.
//   - A worker pod is the operator's pod with the job's spec.template merged in (see
//     BuildWorkerPod); the job must have passed spec::Validate, which refuses a template
//     that would override what the operator sets.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/spec/training_job.h"

namespace headroom::manifests {

// The names a pod template may not touch are spec's (core/spec/pod_template.h), which
// refuses them in spec.template.
inline constexpr const char* kLabelJobName = spec::kLabelJobName;
inline constexpr const char* kLabelRank = spec::kLabelRank;
inline constexpr const char* kLabelGeneration = spec::kLabelGeneration;
inline constexpr const char* kLabelManagedBy = spec::kLabelManagedBy;
inline constexpr const char* kManagedByValue = "headroom-operator";

inline constexpr int kRendezvousPort = 29500;  // MASTER_PORT (torchrun's default)
inline constexpr int kMetricsPort = 9400;      // the worker's /metrics and /healthz
inline constexpr const char* kSpecMountDir = spec::kSpecMountDir;
inline constexpr const char* kSpecFileName = "job.yaml";
inline constexpr const char* kCheckpointMountDir = spec::kCheckpointMountDir;
// The annotation naming the worker's metrics port: Prometheus' scrape convention, and
// where the operator's own scraper looks (a pod may move the port, e.g. on a test node
// where every pod shares one IP).
inline constexpr const char* kMetricsPortAnnotation = "prometheus.io/port";

std::string WorkerPodName(const std::string& job_name, int rank);
std::string ServiceName(const std::string& job_name);
std::string SpecConfigMapName(const std::string& job_name);
// DNS name of rank 0 through the headless Service: `<job>-worker-0.<job>.<ns>.svc`.
std::string MasterAddress(const std::string& job_name, const std::string& namespace_);

// What a generation of workers runs: the job as the guard last adjusted it (workers,
// microBatchSize, offload may differ from the user's spec) and its generation number.
struct WorkerGeneration {
  spec::TrainingJob job;   // effective spec for this generation
  int64_t generation = 1;  // headroom.dev/generation label; bumps on every relaunch
  // What the guard has done so far (core/guard/guard_history.h JSON): the workers read it
  // from HEADROOM_GUARD_HISTORY, so the policy caps restarts across generations, and the
  // operator reads it back from a pod after its own restart. Empty: the env is left out.
  std::string guard_history_json;
};

nlohmann::json BuildSpecConfigMap(const WorkerGeneration& gen, const std::string& namespace_);
nlohmann::json BuildHeadlessService(const spec::TrainingJob& job, const std::string& namespace_);
// The template's labels and annotations join the operator's; its pod fields are set
// (tolerations after the operator's nvidia.com/gpu one, volumes after the operator's);
// the worker container gets its env after the operator's, its envFrom, volumeMounts after
// the operator's, its extra resources in limits/requests beside spec.resources', and its
// securityContext fields over the operator's (capabilities: the template's add beside the
// operator's drop ALL); the pod's securityContext likewise.
//
// `rank` is the pod's first rank. With spec.ranksPerPod = K > 1 (docs/design.md, "Ranks
// per pod") the pod holds ranks rank..rank+K-1: its container runs `headroom-worker launch`
// (core/launch/pod_launcher.h), which starts them, and requests K times spec.resources
// (a rank's); with K = 1 it runs the worker itself, as it always has.
nlohmann::json BuildWorkerPod(const WorkerGeneration& gen, int rank, const std::string& namespace_);

// The first ranks of a generation's pods, 0, K, 2K, ... below spec.workers (K =
// ranksPerPod): one pod each, named and labelled after it.
std::vector<int> PodFirstRanks(const spec::TrainingJobSpec& s);
// The pods of one generation: PodFirstRanks(s).size(), workers / ranksPerPod.
int PodsPerGeneration(const spec::TrainingJobSpec& s);

// The ownerReference every child carries; null json when the job has no uid.
nlohmann::json OwnerReference(const spec::TrainingJob& job);

}  // namespace headroom::manifests
