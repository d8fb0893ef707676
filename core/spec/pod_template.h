// spec.template: what a user adds to every worker pod, in the shape of a Kubernetes
// PodTemplateSpec (as Kubeflow's replica templates take it), and the names in a worker pod
// that the operator owns and a template may not touch.
//
//   template:
//     metadata: {labels: {...}, annotations: {...}}
//     spec:
//       nodeSelector, affinity, tolerations, priorityClassName, schedulerName,
//       runtimeClassName, imagePullSecrets, serviceAccountName, volumes, securityContext
//       containers:
//       - name: worker            # the one container; optional name, must be "worker"
//         env, envFrom, volumeMounts, resources: {limits, requests}, securityContext
//
// Contract:
//   - Kubernetes sub-objects the operator only passes on (affinity, tolerations, volumes,
//     env, envFrom, volumeMounts, security contexts) are kept as JSON trees as written; the
//     fields the operator relies on inside them are checked by CheckPodTemplate, the rest
//     by the API server.
//   - CheckPodTemplate refuses, by the field's path, what would break what the operator
//     owns: the worker's command and args (refused by the parser: the template has no such
//     fields), the environment the supervisor sets (core/protocol/environment.h), the spec
//     and checkpoint mounts (their volume names and mount paths), the resources spec.resources
//     sets, the labels and annotations the operator selects and scrapes by, and the security
//     context's non-root guarantees.
//   - An empty template (the default) changes nothing: the worker pod is what it was
//     without one, and ToYaml leaves `template` out.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace headroom::spec {

struct SpecError;

// --- what the operator owns in a worker pod --------------------------------------------
inline constexpr const char* kLabelJobName = "headroom.dev/job-name";
inline constexpr const char* kLabelRank = "headroom.dev/rank";
inline constexpr const char* kLabelGeneration = "headroom.dev/generation";
inline constexpr const char* kLabelManagedBy = "app.kubernetes.io/managed-by";
inline constexpr const char* kWorkerContainerName = "worker";
// Volumes and where the worker container mounts them.
inline constexpr const char* kSpecVolumeName = "spec";
inline constexpr const char* kSpecMountDir = "/etc/headroom";
inline constexpr const char* kCheckpointVolumeName = "checkpoints";
inline constexpr const char* kCheckpointMountDir = "/checkpoints";
inline constexpr const char* kShmVolumeName = "dshm";
inline constexpr const char* kShmMountDir = "/dev/shm";
inline constexpr const char* kTmpVolumeName = "tmp";
inline constexpr const char* kTmpMountDir = "/tmp";
// The downward-API environment of every worker pod (logs and metrics name the pod).
inline constexpr const char* kPodNameEnv = "POD_NAME";
inline constexpr const char* kPodNamespaceEnv = "POD_NAMESPACE";
// The resource names spec.resources sets on the worker container.
inline constexpr const char* kGpuResourceName = "nvidia.com/gpu";

// The environment variables the supervisor sets on a worker (rendezvous, job identity,
// guard history, ...): a template's env may not name them.
std::vector<std::string> OperatorOwnedEnvNames();
// The annotations the operator sets on a worker pod and reads back (the metrics scrape).
std::vector<std::string> OperatorOwnedAnnotations();

// spec.template.spec.containers[0]: additions to the worker container.
struct WorkerContainerTemplate {
  nlohmann::json env = nlohmann::json::array();            // [EnvVar]
  nlohmann::json env_from = nlohmann::json::array();       // "envFrom": [EnvFromSource]
  nlohmann::json volume_mounts = nlohmann::json::array();  // "volumeMounts": [VolumeMount]
  // resources.limits / resources.requests: extra resources (rdma/hca, ephemeral-storage),
  // quantities as written; merged with what spec.resources sets.
  std::map<std::string, std::string> limits;
  std::map<std::string, std::string> requests;
  nlohmann::json security_context = nlohmann::json::object();  // "securityContext"
  bool empty() const;
  bool operator==(const WorkerContainerTemplate&) const = default;
};

struct PodTemplate {
  std::map<std::string, std::string> labels;                   // metadata.labels
  std::map<std::string, std::string> annotations;              // metadata.annotations
  std::map<std::string, std::string> node_selector;            // "nodeSelector"
  nlohmann::json affinity = nlohmann::json::object();          // Affinity; {} = none
  nlohmann::json tolerations = nlohmann::json::array();        // [Toleration], after the operator's GPU one
  std::string priority_class_name;                             // "priorityClassName"
  std::string scheduler_name;                                  // "schedulerName"
  std::string runtime_class_name;                              // "runtimeClassName"
  std::string service_account_name;                            // "serviceAccountName"
  std::vector<std::string> image_pull_secrets;                 // "imagePullSecrets": [{name}]
  nlohmann::json volumes = nlohmann::json::array();            // [Volume], beside the operator's
  nlohmann::json security_context = nlohmann::json::object();  // the pod's "securityContext"
  WorkerContainerTemplate worker;                              // spec.containers[0]
  bool empty() const;
  // The single-valued string fields by their YAML names (priorityClassName, ...).
  std::vector<std::pair<const char*, const std::string*>> NamedStrings() const;
  bool operator==(const PodTemplate&) const = default;
};

// Every problem of `t`, by path under `path` ("spec.template").
void CheckPodTemplate(const PodTemplate& t, const std::string& path, std::vector<SpecError>& errors);

// The template in its Kubernetes shape ({metadata, spec: {..., containers: [{name: worker,
// ...}]}}), only the fields that are set; {} for an empty template.
nlohmann::ordered_json PodTemplateJson(const PodTemplate& t);

}  // namespace headroom::spec
