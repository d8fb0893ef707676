// spec.template: parsed into the typed job, serialized back, outside the run-definition
// hash, and refused by path wherever it would override what the operator owns.
#include <gtest/gtest.h>

#include <string>

#include "core/spec/pod_template.h"
#include "core/spec/training_job.h"
#include "tests/core/spec_test_util.h"

namespace headroom::spec {
namespace {

using nlohmann::json;
using testing_util::AllErrors;
using testing_util::ErrorPaths;

// kGoodJob with `text` (indented under spec) as spec.template.
std::string JobWithTemplate(const std::string& text) {
  return std::string(testing_util::kGoodJob) + "  template:\n" + text;
}

// The corpus' GPU pool job: every field a template takes.
ParseResult GpuPoolJob() {
  return ParseTrainingJobFile(std::string(HEADROOM_SOURCE_DIR) +
                              "/tests/core/testdata/specs/valid/template-gpu-pool.yaml");
}

TEST(PodTemplate, ParsesEveryFieldIntoTheTypedJob) {
  ParseResult r = GpuPoolJob();
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const PodTemplate& t = r.job->spec.pod_template;
  EXPECT_EQ(t.labels.at("team"), "rl");
  EXPECT_EQ(t.annotations.at("example.com/cost-center"), "42");
  EXPECT_EQ(t.node_selector.at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(t.affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
                      ["matchExpressions"][0]["values"][1],
            "gpu-b");
  ASSERT_EQ(t.tolerations.size(), 2u);
  EXPECT_EQ(t.tolerations[0]["value"], "h100");
  EXPECT_EQ(t.priority_class_name, "training-high");
  EXPECT_EQ(t.scheduler_name, "volcano");
  EXPECT_EQ(t.runtime_class_name, "nvidia");
  EXPECT_EQ(t.service_account_name, "trainer");
  EXPECT_EQ(t.image_pull_secrets, std::vector<std::string>{"registry-credentials"});
  EXPECT_EQ(t.security_context["runAsUser"], 1000);
  ASSERT_EQ(t.volumes.size(), 2u);
  EXPECT_EQ(t.volumes[0]["persistentVolumeClaim"]["readOnly"], true);
  EXPECT_EQ(t.worker.env[1]["valueFrom"]["secretKeyRef"]["key"], "token");
  EXPECT_EQ(t.worker.env_from[0]["secretRef"]["name"], "object-store");
  EXPECT_EQ(t.worker.env_from[1]["prefix"], "NCCL_");
  EXPECT_EQ(t.worker.volume_mounts[0]["mountPath"], "/models");
  EXPECT_EQ(t.worker.limits.at("rdma/hca"), "1");
  EXPECT_EQ(t.worker.requests.at("rdma/hca"), "1");
  EXPECT_EQ(t.worker.security_context["capabilities"]["add"][0], "IPC_LOCK");
}

TEST(PodTemplate, RoundTripsThroughYamlAndJson) {
  ParseResult r = GpuPoolJob();
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  ParseResult yaml = ParseTrainingJob(ToYaml(*r.job));
  ASSERT_TRUE(yaml.ok()) << AllErrors(yaml) << ToYaml(*r.job);
  EXPECT_EQ(*yaml.job, *r.job);
  ParseResult json_back = ParseTrainingJobJson(ToJsonValue(*r.job));
  ASSERT_TRUE(json_back.ok()) << AllErrors(json_back);
  EXPECT_EQ(*json_back.job, *r.job);
}

TEST(PodTemplate, AnEmptyTemplateIsLeftOutOfTheSerializedJob) {
  ParseResult r = ParseTrainingJob(testing_util::kGoodJob);
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_TRUE(r.job->spec.pod_template.empty());
  EXPECT_FALSE(ToJsonValue(*r.job)["spec"].contains("template"));
  ParseResult with_empty = ParseTrainingJob(JobWithTemplate("    spec: {containers: [{name: worker}]}\n"));
  ASSERT_TRUE(with_empty.ok()) << AllErrors(with_empty);
  EXPECT_EQ(*with_empty.job, *r.job);
}

TEST(PodTemplate, IsNotPartOfTheRunDefinition) {
  ParseResult templated = GpuPoolJob();
  ASSERT_TRUE(templated.ok()) << AllErrors(templated);
  TrainingJob plain = *templated.job;
  plain.spec.pod_template = PodTemplate{};
  // Moving a job to another node pool or giving it a token resumes its checkpoints.
  EXPECT_EQ(RunDefinitionHash(plain.spec), RunDefinitionHash(templated.job->spec));
}

struct Refusal {
  std::string template_text;
  std::string path;
  std::string message;  // a part of the message
};

class PodTemplateRefuses : public ::testing::TestWithParam<Refusal> {};

TEST_P(PodTemplateRefuses, WhatWouldBreakWhatTheOperatorOwns) {
  const Refusal& c = GetParam();
  ParseResult r = ParseTrainingJob(JobWithTemplate(c.template_text));
  ASSERT_FALSE(r.ok()) << c.template_text;
  bool found = false;
  for (const SpecError& e : r.errors) {
    if (e.path == c.path && e.message.find(c.message) != std::string::npos) found = true;
  }
  EXPECT_TRUE(found) << "want " << c.path << ": ..." << c.message << "...; got\n" << AllErrors(r);
  EXPECT_GT(r.errors.front().line, 0) << "a template error points at its line: " << AllErrors(r);
}

INSTANTIATE_TEST_SUITE_P(
    Paths, PodTemplateRefuses,
    ::testing::Values(
        Refusal{"    spec:\n      containers:\n      - env: [{name: A, value: a}, {name: B, value: b}, {name: "
                "MASTER_ADDR, value: x}]\n",
                "spec.template.spec.containers[0].env[2].name", "MASTER_ADDR is set by the operator"},
        Refusal{"    spec:\n      containers: [{env: [{name: RANK, value: \"0\"}]}]\n",
                "spec.template.spec.containers[0].env[0].name", "RANK is set by the operator"},
        Refusal{"    spec:\n      containers: [{env: [{name: HEADROOM_GUARD_HISTORY, value: \"{}\"}]}]\n",
                "spec.template.spec.containers[0].env[0].name", "is set by the operator"},
        Refusal{"    spec:\n      containers: [{command: [sh]}]\n", "spec.template.spec.containers[0].command",
                "is set by the operator"},
        Refusal{"    spec:\n      containers: [{args: [--job, /x]}]\n", "spec.template.spec.containers[0].args",
                "is set by the operator"},
        Refusal{"    spec:\n      containers: [{name: sidecar}]\n", "spec.template.spec.containers[0].name",
                "must be \"worker\""},
        Refusal{"    spec:\n      containers: [{name: worker}, {name: proxy}]\n", "spec.template.spec.containers[1]",
                "no other containers"},
        Refusal{"    spec:\n      volumes: [{name: checkpoints, emptyDir: {}}]\n", "spec.template.spec.volumes[0].name",
                "operator's volume (mounted at /checkpoints)"},
        Refusal{"    spec:\n      containers: [{volumeMounts: [{name: spec, mountPath: /x}]}]\n",
                "spec.template.spec.containers[0].volumeMounts[0].name", "operator's volume, mounted at /etc/headroom"},
        Refusal{"    spec:\n      volumes: [{name: data, emptyDir: {}}]\n      containers: [{volumeMounts: [{name: "
                "data, mountPath: /checkpoints/x}]}]\n",
                "spec.template.spec.containers[0].volumeMounts[0].mountPath",
                "overlaps the operator's mount /checkpoints"},
        Refusal{"    spec:\n      volumes: [{name: data, emptyDir: {}}]\n      containers: [{volumeMounts: [{name: "
                "data, mountPath: /etc}]}]\n",
                "spec.template.spec.containers[0].volumeMounts[0].mountPath",
                "overlaps the operator's mount /etc/headroom"},
        Refusal{"    spec:\n      containers: [{volumeMounts: [{name: nowhere, mountPath: /data}]}]\n",
                "spec.template.spec.containers[0].volumeMounts[0].name", "names no volume"},
        Refusal{"    spec:\n      volumes: [{name: data}]\n", "spec.template.spec.volumes[0]",
                "exactly one volume source"},
        Refusal{"    spec:\n      securityContext: {runAsNonRoot: false}\n",
                "spec.template.spec.securityContext.runAsNonRoot", "non-root"},
        Refusal{"    spec:\n      securityContext: {runAsUser: 0}\n", "spec.template.spec.securityContext.runAsUser",
                "root"},
        Refusal{"    spec:\n      containers: [{securityContext: {privileged: true}}]\n",
                "spec.template.spec.containers[0].securityContext.privileged", "unprivileged"},
        Refusal{"    spec:\n      containers: [{securityContext: {allowPrivilegeEscalation: true}}]\n",
                "spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation", "escalate"},
        Refusal{"    spec:\n      containers: [{securityContext: {runAsUser: 0}}]\n",
                "spec.template.spec.containers[0].securityContext.runAsUser", "root"},
        Refusal{"    spec:\n      containers: [{securityContext: {capabilities: {drop: [NET_RAW]}}}]\n",
                "spec.template.spec.containers[0].securityContext.capabilities.drop", "set by the operator"},
        Refusal{"    metadata: {labels: {headroom.dev/rank: \"0\"}}\n",
                "spec.template.metadata.labels[headroom.dev/rank]", "set by the operator"},
        Refusal{"    metadata: {labels: {app.kubernetes.io/managed-by: me}}\n",
                "spec.template.metadata.labels[app.kubernetes.io/managed-by]", "set by the operator"},
        Refusal{"    metadata: {annotations: {prometheus.io/port: \"1\"}}\n",
                "spec.template.metadata.annotations[prometheus.io/port]", "set by the operator"},
        Refusal{"    spec:\n      containers: [{resources: {limits: {memory: 8Gi}}}]\n",
                "spec.template.spec.containers[0].resources.limits[memory]", "spec.resources"},
        Refusal{"    spec:\n      containers: [{resources: {requests: {nvidia.com/gpu: 2}}}]\n",
                "spec.template.spec.containers[0].resources.requests[nvidia.com/gpu]", "spec.resources"},
        Refusal{"    spec:\n      containers: [{resources: {limits: {rdma/hca: 1KB}}}]\n",
                "spec.template.spec.containers[0].resources.limits[rdma/hca]", "invalid quantity"},
        Refusal{"    spec:\n      restartPolicy: Always\n", "spec.template.spec.restartPolicy", "set by the operator"},
        Refusal{"    spec:\n      hostNetwork: true\n", "spec.template.spec.hostNetwork", "unknown field"},
        Refusal{"    spec:\n      tolerations: [{key: gpu, operator: Exists, value: x}]\n",
                "spec.template.spec.tolerations[0].value", "must be empty"},
        Refusal{"    spec:\n      tolerations: [{key: gpu, operator: Maybe}]\n",
                "spec.template.spec.tolerations[0].operator", "Exists or Equal"},
        Refusal{"    spec:\n      nodeSelector: {gpu: \"not a label value\"}\n", "spec.template.spec.nodeSelector[gpu]",
                ""},
        Refusal{"    spec:\n      priorityClassName: High_Priority\n", "spec.template.spec.priorityClassName",
                "DNS-1123 subdomain"},
        Refusal{"    spec:\n      imagePullSecrets: [{}]\n", "spec.template.spec.imagePullSecrets[0].name", "required"},
        Refusal{"    spec:\n      containers: [{envFrom: [{prefix: X_}]}]\n",
                "spec.template.spec.containers[0].envFrom[0]", "exactly one of configMapRef and secretRef"},
        Refusal{"    spec:\n      containers: [{env: [{name: A, value: a}, {name: A, value: b}]}]\n",
                "spec.template.spec.containers[0].env[1].name", "duplicate"},
        Refusal{"    spec:\n      affinity: {nodeAfinity: {}}\n", "spec.template.spec.affinity.nodeAfinity",
                "did you mean"}));

}  // namespace
}  // namespace headroom::spec
