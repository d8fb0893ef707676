// The children a TrainingJob owns: names, labels, ownership, rendezvous env and the
// security posture docs/design.md requires, plus the JSON->YAML writer render uses.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/protocol/environment.h"
#include "operator/manifests/children.h"
#include "operator/manifests/json_yaml.h"

namespace headroom::manifests {
namespace {

using nlohmann::json;

spec::TrainingJob MakeJob() {
  spec::TrainingJob job;
  job.metadata.name = "addition-tiny";
  job.metadata.uid = "6f1c2f7e-0000-4000-8000-000000000001";
  job.spec.workers = 2;
  job.spec.resources.gpus = 1;
  job.spec.checkpoint.volume = "ckpt-pvc";
  return job;
}

const json* FindByName(const json& list, const std::string& name) {
  for (const auto& e : list)
    if (e.value("name", "") == name) return &e;
  return nullptr;
}

std::string EnvValue(const json& pod, const std::string& name) {
  const json* e = FindByName(pod["spec"]["containers"][0]["env"], name);
  return e && e->contains("value") ? (*e)["value"].get<std::string>() : "";
}

TEST(Children, NamesFollowDesign) {
  EXPECT_EQ(WorkerPodName("j", 3), "j-worker-3");
  EXPECT_EQ(ServiceName("j"), "j");
  EXPECT_EQ(SpecConfigMapName("j"), "j-spec");
  EXPECT_EQ(MasterAddress("j", "ns"), "j-worker-0.j.ns.svc");
}

TEST(Children, PodCarriesLabelsOwnerAndRendezvousEnv) {
  WorkerGeneration gen{MakeJob(), 4, ""};
  json pod = BuildWorkerPod(gen, 1, "training");
  const json& meta = pod["metadata"];
  EXPECT_EQ(meta["name"], "addition-tiny-worker-1");
  EXPECT_EQ(meta["namespace"], "training");
  EXPECT_EQ(meta["labels"][kLabelJobName], "addition-tiny");
  EXPECT_EQ(meta["labels"][kLabelRank], "1");
  EXPECT_EQ(meta["labels"][kLabelGeneration], "4");
  ASSERT_EQ(meta["ownerReferences"].size(), 1u);
  EXPECT_EQ(meta["ownerReferences"][0]["uid"], gen.job.metadata.uid);
  EXPECT_EQ(meta["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(meta["ownerReferences"][0]["kind"], "TrainingJob");

  EXPECT_EQ(EnvValue(pod, "RANK"), "1");
  EXPECT_EQ(EnvValue(pod, "WORLD_SIZE"), "2");
  EXPECT_EQ(EnvValue(pod, "MASTER_ADDR"), "addition-tiny-worker-0.addition-tiny.training.svc");
  EXPECT_EQ(EnvValue(pod, "MASTER_PORT"), std::to_string(kRendezvousPort));
  // DNS for MASTER_ADDR exists only if hostname/subdomain match the headless Service.
  EXPECT_EQ(pod["spec"]["hostname"], "addition-tiny-worker-1");
  EXPECT_EQ(pod["spec"]["subdomain"], "addition-tiny");
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Never");
}

TEST(Children, PodIsLockedDownAndMountsWhatTheWorkerNeeds) {
  json pod = BuildWorkerPod({MakeJob(), 1, ""}, 0, "default");
  const json& c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_EQ(c["securityContext"]["capabilities"]["drop"], json::array({"ALL"}));
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(c["resources"]["limits"]["memory"], "4Gi");

  std::set<std::string> mounts;
  for (const auto& m : c["volumeMounts"]) mounts.insert(m["mountPath"]);
  EXPECT_TRUE(mounts.count("/dev/shm"));
  EXPECT_TRUE(mounts.count(kCheckpointMountDir));
  EXPECT_TRUE(mounts.count(kSpecMountDir));
  const json* shm = FindByName(pod["spec"]["volumes"], "dshm");
  ASSERT_NE(shm, nullptr);
  EXPECT_EQ((*shm)["emptyDir"]["medium"], "Memory");
  const json* ckpt = FindByName(pod["spec"]["volumes"], "checkpoints");
  ASSERT_NE(ckpt, nullptr);
  EXPECT_EQ((*ckpt)["persistentVolumeClaim"]["claimName"], "ckpt-pvc");
}

TEST(Children, APodOfSeveralRanksRunsTheLauncherAndRequestsTheirSum) {
  spec::TrainingJob job = MakeJob();
  job.spec.workers = 4;
  job.spec.ranks_per_pod = 2;
  job.spec.resources.cpu = "1500m";
  job.spec.resources.cpu_millis = 1500;
  job.spec.resources.memory = "3Gi";
  job.spec.resources.memory_bytes = 3LL << 30;
  EXPECT_EQ(PodFirstRanks(job.spec), (std::vector<int>{0, 2}));
  const json pod = BuildWorkerPod({job, 1, ""}, 2, "default");
  EXPECT_EQ(pod["metadata"]["name"], "addition-tiny-worker-2");
  EXPECT_EQ(pod["metadata"]["labels"][kLabelRank], "2");
  const json& c = pod["spec"]["containers"][0];
  for (const char* kind : {"limits", "requests"}) {
    EXPECT_EQ(c["resources"][kind]["cpu"], "3") << kind;
    EXPECT_EQ(c["resources"][kind]["memory"], "6Gi") << kind;
    EXPECT_EQ(c["resources"][kind]["nvidia.com/gpu"], "2") << kind;
  }
  EXPECT_EQ(c["command"], json::array({"headroom-worker"}));
  EXPECT_EQ(c["args"], json::array({"launch", "--ranks-per-pod", "2", "--first-rank", "2", "--metrics-port",
                                    std::to_string(kMetricsPort), "--", "--job", "/etc/headroom/job.yaml",
                                    "--checkpoint-dir", "/checkpoints"}));
  EXPECT_EQ(EnvValue(pod, "RANK"), "2");  // the launcher gives each rank its own
  EXPECT_EQ(EnvValue(pod, "WORLD_SIZE"), "4");
  EXPECT_EQ(EnvValue(pod, "MASTER_ADDR"), "addition-tiny-worker-0.addition-tiny.default.svc");
  // One rank a pod: the pod it always was (no launcher).
  job.spec.ranks_per_pod = 1;
  const json one = BuildWorkerPod({job, 1, ""}, 3, "default");
  EXPECT_EQ(one["spec"]["containers"][0]["args"][0], "--job");
  EXPECT_EQ(one["spec"]["containers"][0]["resources"]["limits"]["cpu"], "1500m");
  EXPECT_EQ(PodFirstRanks(job.spec), (std::vector<int>{0, 1, 2, 3}));
}

TEST(Children, NoOwnerReferenceWithoutUid) {
  spec::TrainingJob job = MakeJob();
  job.metadata.uid.clear();
  EXPECT_FALSE(BuildHeadlessService(job, "default")["metadata"].contains("ownerReferences"));
}

TEST(Children, ServiceIsHeadlessAndPublishesNotReady) {
  json svc = BuildHeadlessService(MakeJob(), "default");
  EXPECT_EQ(svc["spec"]["clusterIP"], "None");
  EXPECT_EQ(svc["spec"]["publishNotReadyAddresses"], true);
  EXPECT_EQ(svc["spec"]["selector"][kLabelJobName], "addition-tiny");
}

TEST(Children, ConfigMapHoldsTheJobYamlTheWorkerReads) {
  WorkerGeneration gen{MakeJob(), 2, ""};
  gen.job.spec.grpo.micro_batch_size = 16;  // a guard-adjusted generation
  json cm = BuildSpecConfigMap(gen, "default");
  std::string text = cm["data"][kSpecFileName];
  spec::ParseResult parsed = spec::ParseTrainingJob(text);
  ASSERT_TRUE(parsed.ok()) << (parsed.errors.empty() ? "" : parsed.errors[0].ToString());
  EXPECT_EQ(parsed.job->spec.grpo.micro_batch_size, 16);
  EXPECT_EQ(parsed.job->spec.workers, 2);
}

TEST(Children, PodCarriesTheGuardHistoryOnlyWhenThereIsOne) {
  WorkerGeneration gen{MakeJob(), 3, ""};
  auto env_value = [](const json& pod, const std::string& name) -> std::optional<std::string> {
    for (const json& e : pod["spec"]["containers"][0]["env"]) {
      if (e["name"] == name) return e.value("value", "");
    }
    return std::nullopt;
  };
  EXPECT_FALSE(env_value(BuildWorkerPod(gen, 0, "default"), protocol::kGuardHistoryEnv).has_value());
  gen.guard_history_json = R"({"restarts":1})";
  json pod = BuildWorkerPod(gen, 0, "default");
  EXPECT_EQ(env_value(pod, protocol::kGuardHistoryEnv), R"({"restarts":1})");
  EXPECT_EQ(pod["metadata"]["annotations"][kMetricsPortAnnotation], std::to_string(kMetricsPort));
}

TEST(JsonYaml, RoundTripKeepsTypes) {
  json v{{"cpu", "2"},
         {"flag", "true"},
         {"empty", ""},
         {"n", 3},
         {"f", 0.25},
         {"b", false},
         {"nil", nullptr},
         {"list", json::array({"1", 2})},
         {"multi", "a: 1\nb: 2\n"},
         {"yes", "yes"},
         {"plain", "hello world"}};
  YAML::Node node = YAML::Load(JsonToYaml(v));
  EXPECT_EQ(node["cpu"].Tag(), "!");  // quoted: a string, not the number 2
  EXPECT_EQ(node["cpu"].as<std::string>(), "2");
  EXPECT_EQ(node["flag"].Tag(), "!");
  EXPECT_EQ(node["yes"].Tag(), "!");
  EXPECT_EQ(node["empty"].as<std::string>(), "");
  EXPECT_EQ(node["n"].as<int>(), 3);
  EXPECT_DOUBLE_EQ(node["f"].as<double>(), 0.25);
  EXPECT_FALSE(node["b"].as<bool>());
  EXPECT_TRUE(node["nil"].IsNull());
  EXPECT_EQ(node["list"][0].Tag(), "!");
  EXPECT_EQ(node["multi"].as<std::string>(), "a: 1\nb: 2\n");
  EXPECT_EQ(node["plain"].as<std::string>(), "hello world");
}

}  // namespace
}  // namespace headroom::manifests
