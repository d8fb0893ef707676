#include "operator/manifests/children.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/protocol/environment.h"
#include "operator/manifests/gang.h"
#include "operator/manifests/pod_template_overlay.h"

namespace headroom::manifests {

using nlohmann::json;

std::string WorkerPodName(const std::string& job_name, int rank) {
  return job_name + "-worker-" + std::to_string(rank);
}

std::string ServiceName(const std::string& job_name) { return job_name; }

std::string SpecConfigMapName(const std::string& job_name) { return job_name + "-spec"; }

std::string MasterAddress(const std::string& job_name, const std::string& namespace_) {
  return WorkerPodName(job_name, 0) + "." + ServiceName(job_name) + "." + namespace_ + ".svc";
}

json OwnerReference(const spec::TrainingJob& job) {
  if (job.metadata.uid.empty()) return nullptr;
  return json{{"apiVersion", job.api_version}, {"kind", job.kind},   {"name", job.metadata.name},
              {"uid", job.metadata.uid},       {"controller", true}, {"blockOwnerDeletion", true}};
}

namespace {

json ChildMetadata(const spec::TrainingJob& job, const std::string& name, const std::string& namespace_, json labels) {
  labels[kLabelJobName] = job.metadata.name;
  labels[kLabelManagedBy] = kManagedByValue;
  json meta{{"name", name}, {"namespace", namespace_}, {"labels", std::move(labels)}};
  json owner = OwnerReference(job);
  if (!owner.is_null()) meta["ownerReferences"] = json::array({owner});
  return meta;
}

json EnvVar(const std::string& name, const std::string& value) { return json{{"name", name}, {"value", value}}; }

json FieldRefEnv(const std::string& name, const std::string& field_path) {
  return json{{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", field_path}}}}}};
}

}  // namespace

json BuildSpecConfigMap(const WorkerGeneration& gen, const std::string& namespace_) {
  const spec::TrainingJob& job = gen.job;
  json meta = ChildMetadata(job, SpecConfigMapName(job.metadata.name), namespace_,
                            json{{kLabelGeneration, std::to_string(gen.generation)}});
  return json{{"apiVersion", "v1"},
              {"kind", "ConfigMap"},
              {"metadata", std::move(meta)},
              {"data", {{kSpecFileName, spec::ToYaml(job)}}}};
}

json BuildHeadlessService(const spec::TrainingJob& job, const std::string& namespace_) {
  json meta = ChildMetadata(job, ServiceName(job.metadata.name), namespace_, json::object());
  return json{{"apiVersion", "v1"},
              {"kind", "Service"},
              {"metadata", std::move(meta)},
              {"spec",
               {{"clusterIP", "None"},
                // Rank 0 must resolve before it is Ready: the other ranks rendezvous with it
                // while it is still starting.
                {"publishNotReadyAddresses", true},
                {"selector", {{kLabelJobName, job.metadata.name}}},
                {"ports", json::array({json{{"name", "rendezvous"}, {"port", kRendezvousPort}, {"protocol", "TCP"}},
                                       json{{"name", "metrics"}, {"port", kMetricsPort}, {"protocol", "TCP"}}})}}}};
}

namespace {

// The worker's environment: torchrun's rendezvous names, the job and generation, the
// pod's own name and namespace, and what the guard did so far. In a pod of several ranks
// RANK is the first one's; the launcher sets each rank's RANK and LOCAL_RANK.
json WorkerEnv(const WorkerGeneration& gen, int rank, const std::string& namespace_) {
  const std::string& name = gen.job.metadata.name;
  json env = json::array(
      {EnvVar(protocol::kRankEnv, std::to_string(rank)),
       EnvVar(protocol::kWorldSizeEnv, std::to_string(gen.job.spec.workers)),
       EnvVar(protocol::kMasterAddrEnv, MasterAddress(name, namespace_)),
       EnvVar(protocol::kMasterPortEnv, std::to_string(kRendezvousPort)), EnvVar(protocol::kJobNameEnv, name),
       EnvVar(protocol::kGenerationEnv, std::to_string(gen.generation)),
       FieldRefEnv(spec::kPodNameEnv, "metadata.name"), FieldRefEnv(spec::kPodNamespaceEnv, "metadata.namespace")});
  if (!gen.guard_history_json.empty()) env.push_back(EnvVar(protocol::kGuardHistoryEnv, gen.guard_history_json));
  return env;
}

// A quantity `times` a rank's, written as the spec wrote it for one rank.
std::string TimesCpu(const spec::Resources& r, int times) {
  if (times == 1) return r.cpu;
  const int64_t millis = r.cpu_millis * times;
  return millis % 1000 == 0 ? std::to_string(millis / 1000) : std::to_string(millis) + "m";
}

std::string TimesMemory(const spec::Resources& r, int times) {
  if (times == 1) return r.memory;
  const int64_t bytes = r.memory_bytes * times;
  for (const auto& [suffix, unit] : {std::pair{"Gi", int64_t{1} << 30}, {"Mi", int64_t{1} << 20}, {"Ki", 1024}}) {
    if (bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
  }
  return std::to_string(bytes);
}

// What the container runs: the worker itself for one rank; for several, the launcher,
// which gives each rank its RANK, LOCAL_RANK and a metrics port above the pod's.
json WorkerCommand(const spec::TrainingJobSpec& s, int first_rank) {
  const std::string spec_path = std::string(kSpecMountDir) + "/" + kSpecFileName;
  json worker_args = json::array({"--job", spec_path, "--checkpoint-dir", kCheckpointMountDir});
  if (s.ranks_per_pod == 1) {
    worker_args.push_back("--metrics-port");
    worker_args.push_back(std::to_string(kMetricsPort));
    return worker_args;
  }
  json args = json::array({"launch", "--ranks-per-pod", std::to_string(s.ranks_per_pod), "--first-rank",
                           std::to_string(first_rank), "--metrics-port", std::to_string(kMetricsPort), "--"});
  for (const json& a : worker_args) args.push_back(a);
  return args;
}

json WorkerContainer(const spec::TrainingJobSpec& s, int first_rank, json env) {
  const int k = s.ranks_per_pod;
  json limits{{"cpu", TimesCpu(s.resources, k)}, {"memory", TimesMemory(s.resources, k)}};
  if (s.resources.gpus > 0) limits[spec::kGpuResourceName] = std::to_string(s.resources.gpus * k);
  // Requests equal limits: the memory limit is what the guard protects, and a pod that
  // may be squeezed below it by its neighbours would be guarding the wrong number.
  json resources{{"limits", limits}, {"requests", limits}};
  return json{{"name", spec::kWorkerContainerName},
              {"image", s.image},
              {"imagePullPolicy", "IfNotPresent"},
              {"command", json::array({"headroom-worker"})},
              {"args", WorkerCommand(s, first_rank)},
              {"env", std::move(env)},
              {"ports", json::array({json{{"name", "rendezvous"}, {"containerPort", kRendezvousPort}},
                                     json{{"name", "metrics"}, {"containerPort", kMetricsPort}}})},
              {"resources", std::move(resources)},
              {"readinessProbe", {{"httpGet", {{"path", "/healthz"}, {"port", "metrics"}}}, {"periodSeconds", 10}}},
              {"terminationMessagePath", "/dev/termination-log"},
              {"terminationMessagePolicy", "FallbackToLogsOnError"},
              {"securityContext",
               {{"runAsNonRoot", true},
                {"readOnlyRootFilesystem", true},
                {"allowPrivilegeEscalation", false},
                {"capabilities", {{"drop", json::array({"ALL"})}}}}},
              {"volumeMounts",
               json::array({json{{"name", spec::kSpecVolumeName}, {"mountPath", kSpecMountDir}, {"readOnly", true}},
                            json{{"name", spec::kCheckpointVolumeName}, {"mountPath", kCheckpointMountDir}},
                            json{{"name", spec::kShmVolumeName}, {"mountPath", spec::kShmMountDir}},
                            json{{"name", spec::kTmpVolumeName}, {"mountPath", spec::kTmpMountDir}}})}};
}

json WorkerVolumes(const spec::TrainingJobSpec& s, const std::string& name) {
  json checkpoints = s.checkpoint.volume.empty()
                         ? json{{"name", spec::kCheckpointVolumeName}, {"emptyDir", json::object()}}
                         : json{{"name", spec::kCheckpointVolumeName},
                                {"persistentVolumeClaim", {{"claimName", s.checkpoint.volume}}}};
  return json::array({json{{"name", spec::kSpecVolumeName}, {"configMap", {{"name", SpecConfigMapName(name)}}}},
                      checkpoints,
                      // NCCL and the data loader use /dev/shm; the container default of 64 MiB is too small.
                      json{{"name", spec::kShmVolumeName}, {"emptyDir", {{"medium", "Memory"}}}},
                      json{{"name", spec::kTmpVolumeName}, {"emptyDir", json::object()}}});
}

}  // namespace

json BuildWorkerPod(const WorkerGeneration& gen, int rank, const std::string& namespace_) {
  const spec::TrainingJob& job = gen.job;
  const spec::TrainingJobSpec& s = job.spec;
  const std::string& name = job.metadata.name;

  json labels{{kLabelRank, std::to_string(rank)}, {kLabelGeneration, std::to_string(gen.generation)}};
  json meta = ChildMetadata(job, WorkerPodName(name, rank), namespace_, std::move(labels));
  meta["annotations"] = json{{"prometheus.io/scrape", "true"},
                             {kMetricsPortAnnotation, std::to_string(kMetricsPort)},
                             {"prometheus.io/path", "/metrics"}};

  json pod_spec{{"restartPolicy", "Never"},
                // Rank 0's stable DNS name comes from hostname + subdomain = the headless Service.
                {"hostname", WorkerPodName(name, rank)},
                {"subdomain", ServiceName(name)},
                // Long enough for a worker to write its checkpoint after SIGTERM.
                {"terminationGracePeriodSeconds", 120},
                {"securityContext",
                 {{"runAsNonRoot", true},
                  {"runAsUser", 65532},
                  {"runAsGroup", 65532},
                  {"fsGroup", 65532},
                  {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
                {"containers", json::array({WorkerContainer(s, rank, WorkerEnv(gen, rank, namespace_))})},
                {"volumes", WorkerVolumes(s, name)}};
  if (s.resources.gpus > 0) {
    pod_spec["tolerations"] =
        json::array({json{{"key", spec::kGpuResourceName}, {"operator", "Exists"}, {"effect", "NoSchedule"}}});
  }
  json pod{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", std::move(meta)}, {"spec", std::move(pod_spec)}};
  OverlayPodTemplate(s.pod_template, pod);
  JoinPodGroup(gen, pod);  // the scheduler's gang and Kueue's group: gang.h
  return pod;
}

std::vector<int> PodFirstRanks(const spec::TrainingJobSpec& s) {
  const int k = std::max(1, s.ranks_per_pod);
  std::vector<int> firsts;
  for (int r = 0; r < s.workers; r += k) firsts.push_back(r);
  return firsts;
}

int PodsPerGeneration(const spec::TrainingJobSpec& s) { return static_cast<int>(PodFirstRanks(s).size()); }

}  // namespace headroom::manifests
