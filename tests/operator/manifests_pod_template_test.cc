// A job's spec.template merged into its worker pods: added beside what the operator sets,
// never in its place.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/spec/training_job.h"
#include "operator/manifests/children.h"

namespace headroom::manifests {
namespace {

using nlohmann::json;

// The corpus' GPU pool job: every field a template takes.
const std::string kJob = std::string(HEADROOM_SOURCE_DIR) + "/tests/core/testdata/specs/valid/template-gpu-pool.yaml";

spec::TrainingJob ParsedJob(const std::string& path) {
  spec::ParseResult r = spec::ParseTrainingJobFile(path);
  EXPECT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0].ToString());
  return r.ok() ? *r.job : spec::TrainingJob{};
}

const json* FindByName(const json& list, const std::string& name) {
  for (const auto& e : list)
    if (e.value("name", "") == name) return &e;
  return nullptr;
}

TEST(PodTemplateOverlay, PodCarriesTheTemplateBesideWhatTheOperatorSets) {
  const json pod = BuildWorkerPod({ParsedJob(kJob), 3, ""}, 1, "training");
  const json& meta = pod["metadata"];
  EXPECT_EQ(meta["labels"]["team"], "rl");
  EXPECT_EQ(meta["labels"][kLabelRank], "1");
  EXPECT_EQ(meta["annotations"]["example.com/cost-center"], "42");
  EXPECT_EQ(meta["annotations"][kMetricsPortAnnotation], std::to_string(kMetricsPort));

  const json& s = pod["spec"];
  EXPECT_EQ(s["nodeSelector"]["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(s["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
             ["matchExpressions"][0]["key"],
            "pool");
  ASSERT_EQ(s["tolerations"].size(), 3u);
  EXPECT_EQ(s["tolerations"][0]["key"], "nvidia.com/gpu");  // the operator's first
  EXPECT_EQ(s["tolerations"][1]["value"], "h100");
  EXPECT_EQ(s["priorityClassName"], "training-high");
  EXPECT_EQ(s["schedulerName"], "volcano");
  EXPECT_EQ(s["runtimeClassName"], "nvidia");
  EXPECT_EQ(s["serviceAccountName"], "trainer");
  EXPECT_EQ(s["imagePullSecrets"], json::array({json{{"name", "registry-credentials"}}}));
  EXPECT_EQ(s["securityContext"]["runAsUser"], 1000);
  EXPECT_EQ(s["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(s["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_EQ(s["restartPolicy"], "Never");

  const json* model = FindByName(s["volumes"], "model");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ((*model)["persistentVolumeClaim"]["claimName"], "qwen-model");
  const json* checkpoints = FindByName(s["volumes"], "checkpoints");
  ASSERT_NE(checkpoints, nullptr);
  EXPECT_EQ((*checkpoints)["persistentVolumeClaim"]["claimName"], "corpus-checkpoints");
  EXPECT_EQ(s["volumes"].size(), 6u);
}

TEST(PodTemplateOverlay, WorkerContainerGetsEnvMountsResourcesAndCapabilities) {
  const json pod = BuildWorkerPod({ParsedJob(kJob), 3, ""}, 0, "training");
  const json& c = pod["spec"]["containers"][0];
  ASSERT_EQ(pod["spec"]["containers"].size(), 1u);
  EXPECT_EQ(c["command"], json::array({"headroom-worker"}));
  const json* rank = FindByName(c["env"], "RANK");
  ASSERT_NE(rank, nullptr);
  EXPECT_EQ((*rank)["value"], "0");
  const json* token = FindByName(c["env"], "HF_TOKEN");
  ASSERT_NE(token, nullptr);
  EXPECT_EQ((*token)["valueFrom"]["secretKeyRef"]["name"], "hf-token");
  EXPECT_EQ(c["env"].back()["name"], "HF_TOKEN");  // after the operator's
  EXPECT_EQ(c["envFrom"][0]["secretRef"]["name"], "object-store");
  EXPECT_EQ(c["envFrom"][1]["configMapRef"]["name"], "nccl-settings");
  const json* models = FindByName(c["volumeMounts"], "model");
  ASSERT_NE(models, nullptr);
  EXPECT_EQ((*models)["mountPath"], "/models");
  EXPECT_EQ((*models)["readOnly"], true);
  EXPECT_NE(FindByName(c["volumeMounts"], "checkpoints"), nullptr);
  EXPECT_EQ(c["resources"]["limits"]["rdma/hca"], "1");
  EXPECT_EQ(c["resources"]["requests"]["rdma/hca"], "1");
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(c["resources"]["limits"]["memory"], "64Gi");
  EXPECT_EQ(c["securityContext"]["capabilities"]["add"], json::array({"IPC_LOCK"}));
  EXPECT_EQ(c["securityContext"]["capabilities"]["drop"], json::array({"ALL"}));
  EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
}

TEST(PodTemplateOverlay, AnEmptyTemplateChangesNothing) {
  spec::TrainingJob job = ParsedJob(kJob);
  const json with = BuildWorkerPod({job, 1, ""}, 0, "ns");
  job.spec.pod_template = spec::PodTemplate{};
  const json without = BuildWorkerPod({job, 1, ""}, 0, "ns");
  EXPECT_FALSE(without["spec"].contains("nodeSelector"));
  EXPECT_FALSE(without["spec"].contains("imagePullSecrets"));
  EXPECT_EQ(without["spec"]["tolerations"].size(), 1u);
  EXPECT_EQ(without["spec"]["volumes"].size(), 4u);
  EXPECT_FALSE(without["spec"]["containers"][0].contains("envFrom"));
  EXPECT_NE(with, without);
}

TEST(PodTemplateOverlay, TheSpecConfigMapCarriesTheTemplateTheWorkerReads) {
  const spec::TrainingJob job = ParsedJob(kJob);
  const json cm = BuildSpecConfigMap({job, 1, ""}, "ns");
  spec::ParseResult back = spec::ParseTrainingJob(cm["data"][kSpecFileName].get<std::string>());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.job->spec.pod_template, job.spec.pod_template);
}

// The example cluster job reads its model and data from their own claims, read-only, and
// keeps nothing but checkpoints (and the export) on the checkpoint volume.
TEST(PodTemplateOverlay, ExampleClusterJobReadsModelAndDataFromReadOnlyClaims) {
  spec::ParseResult r =
      spec::ParseTrainingJobFile(std::string(HEADROOM_SOURCE_DIR) + "/configs/cluster-addition-text-qwen2.yaml");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  const spec::TrainingJob& job = *r.job;
  const json pod = BuildWorkerPod({job, 1, ""}, 0, "training");
  const json& c = pod["spec"]["containers"][0];
  std::set<std::string> claims;
  for (const std::string& path : {job.spec.model.path, job.spec.task.dataset.path, job.spec.task.dataset.held_out}) {
    SCOPED_TRACE(path);
    ASSERT_FALSE(path.empty());
    EXPECT_NE(path.rfind(std::string(kCheckpointMountDir) + "/", 0), 0u) << "on the checkpoint volume";
    const json* mount = nullptr;
    for (const json& m : c["volumeMounts"]) {
      const std::string dir = m["mountPath"];
      if (path.rfind(dir + "/", 0) == 0) mount = &m;
    }
    ASSERT_NE(mount, nullptr) << "no volume is mounted above it";
    EXPECT_EQ(mount->value("readOnly", false), true);
    const json* volume = FindByName(pod["spec"]["volumes"], (*mount)["name"]);
    ASSERT_NE(volume, nullptr);
    ASSERT_TRUE(volume->contains("persistentVolumeClaim"));
    EXPECT_EQ((*volume)["persistentVolumeClaim"]["readOnly"], true);
    claims.insert((*volume)["persistentVolumeClaim"]["claimName"].get<std::string>());
  }
  EXPECT_EQ(claims.size(), 2u) << "the model and the data come from two claims";
  EXPECT_EQ(claims.count(job.spec.checkpoint.volume), 0u);
}

}  // namespace
}  // namespace headroom::manifests
