// PodBackend against the test API server (no kubelet: pod states are written by the test,
// as a kubelet would): launches are idempotent and never duplicate a pod, a new
// generation frees the old one's names, exits come from containerStatuses, drains delete,
// and a pod taken away from outside says why.
#include <gtest/gtest.h>

#include "core/spec/training_job.h"
#include "operator/trainingjob/pod_backend.h"
#include "operator/kubeclient/resource_client.h"
#include "operator/manifests/children.h"
#include "tests/operator/test_cluster.h"

namespace headroom::trainingjob::testing {
namespace {

class PodBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Start();
    client_ = std::make_unique<kubeclient::RestClient>(server_.ClientConfig("default"));
    JobShape shape;
    shape.name = "pb";
    shape.workers = 2;
    job_json_ =
        kubeclient::ResourceClient(*client_, kubeclient::resources::kTrainingJobs).Create("default", JobObject(shape));
    job_ = *spec::ParseTrainingJobJson(job_json_).job;
  }
  std::unique_ptr<PodBackend> Backend() {
    return std::make_unique<PodBackend>(*client_, job_, "default", PodBackendOptions{});
  }
  runtime::LaunchRequest Request(int generation, int workers) {
    runtime::LaunchRequest r;
    r.generation = generation;
    r.job = job_;
    r.job.spec.workers = workers;
    r.guard_history_json = R"({"restarts":0})";
    return r;
  }
  kubeclient::ResourceClient Pods() { return kubeclient::ResourceClient(*client_, kubeclient::resources::kPods); }
  std::vector<json> ListPods() { return Pods().List("default")["items"].get<std::vector<json>>(); }
  // What a kubelet writes when the container ends.
  void Terminate(const std::string& name, int code, const std::string& reason, const std::string& message) {
    Pods().PatchStatus(
        "default", name,
        json{{"status",
              {{"phase", code == 0 ? "Succeeded" : "Failed"},
               {"containerStatuses",
                {{{"name", "worker"},
                  {"state", {{"terminated", {{"exitCode", code}, {"reason", reason}, {"message", message}}}}}}}}}}});
  }

  testserver::TestApiServer server_;
  std::unique_ptr<kubeclient::RestClient> client_;
  json job_json_;
  spec::TrainingJob job_;
};

TEST_F(PodBackendTest, LaunchCreatesOwnedChildrenOnceEvenWhenRepeated) {
  auto backend = Backend();
  backend->Launch(Request(1, 2));
  EXPECT_EQ(backend->pods_created(), 2);
  std::vector<json> pods = ListPods();
  ASSERT_EQ(pods.size(), 2u);
  for (const json& p : pods) {
    EXPECT_EQ(kubeclient::ControllerUid(p), kubeclient::Uid(job_json_));
    EXPECT_EQ(kubeclient::Label(p, manifests::kLabelGeneration), "1");
  }
  EXPECT_TRUE(kubeclient::ResourceClient(*client_, kubeclient::resources::kServices).TryGet("default", "pb"));
  EXPECT_TRUE(kubeclient::ResourceClient(*client_, kubeclient::resources::kConfigMaps).TryGet("default", "pb-spec"));

  // A second launch of the same generation (an operator that lost the answer, or a new
  // operator replaying it) finds the pods and creates nothing.
  auto again = Backend();
  again->Launch(Request(1, 2));
  EXPECT_EQ(again->pods_created(), 0);
  std::vector<json> after = ListPods();
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(kubeclient::Uid(after[0]), kubeclient::Uid(pods[0]));
}

// A TrainingJob with spec.template, read back from the API server as JSON: the pods the
// backend creates carry it, beside everything the operator sets.
TEST_F(PodBackendTest, CreatedPodsCarryTheJobsTemplate) {
  JobShape shape;
  shape.name = "tpl";
  json object = JobObject(shape);
  object["spec"]["template"] = json::parse(R"({
    "metadata": {"labels": {"team": "rl"}},
    "spec": {
      "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
      "tolerations": [{"key": "gpu-type", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}],
      "priorityClassName": "training-high",
      "imagePullSecrets": [{"name": "registry"}],
      "volumes": [{"name": "model", "persistentVolumeClaim": {"claimName": "qwen", "readOnly": true}}],
      "containers": [{"name": "worker",
                      "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}],
                      "volumeMounts": [{"name": "model", "mountPath": "/models", "readOnly": true}]}]}})");
  const json created =
      kubeclient::ResourceClient(*client_, kubeclient::resources::kTrainingJobs).Create("default", object);
  spec::ParseResult parsed = spec::ParseTrainingJobJson(created);
  ASSERT_TRUE(parsed.ok()) << parsed.errors[0].ToString();
  PodBackend backend(*client_, *parsed.job, "default", PodBackendOptions{});
  runtime::LaunchRequest request;
  request.generation = 1;
  request.job = *parsed.job;
  backend.Launch(request);

  const json pod = Pods().Get("default", "tpl-worker-0");
  EXPECT_EQ(pod["metadata"]["labels"]["team"], "rl");
  EXPECT_EQ(kubeclient::Label(pod, manifests::kLabelJobName), "tpl");
  EXPECT_EQ(pod["spec"]["nodeSelector"]["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(pod["spec"]["tolerations"].back()["value"], "h100");
  EXPECT_EQ(pod["spec"]["priorityClassName"], "training-high");
  EXPECT_EQ(pod["spec"]["imagePullSecrets"][0]["name"], "registry");
  EXPECT_EQ(pod["spec"]["volumes"].back()["persistentVolumeClaim"]["claimName"], "qwen");
  const json& c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["env"].back()["valueFrom"]["secretKeyRef"]["name"], "hf");
  EXPECT_EQ(c["volumeMounts"].back()["mountPath"], "/models");
  EXPECT_EQ(c["command"], json::array({"headroom-worker"}));
  // The spec ConfigMap the workers read holds the template too.
  const json cm = kubeclient::ResourceClient(*client_, kubeclient::resources::kConfigMaps).Get("default", "tpl-spec");
  EXPECT_NE(cm["data"][manifests::kSpecFileName].get<std::string>().find("claimName: qwen"), std::string::npos);
}

TEST_F(PodBackendTest, ObserveReadsExitsFromContainerStatuses) {
  auto backend = Backend();
  backend->Launch(Request(1, 2));
  runtime::Observation o = backend->Observe();
  ASSERT_EQ(o.ranks.size(), 2u);
  EXPECT_TRUE(o.ranks[0].running) << "created, not yet seen: starting";

  Terminate("pb-worker-0", 76, "Error", R"({"action":"restart","step":12})");
  Terminate("pb-worker-1", 137, "OOMKilled", "");
  backend->Sync(ListPods());
  o = backend->Observe();
  EXPECT_EQ(o.generation, 1);
  ASSERT_TRUE(o.ranks[0].exit && o.ranks[1].exit);
  EXPECT_EQ(o.ranks[0].exit->exit_code, 76);
  EXPECT_EQ(o.ranks[0].exit->termination_message, R"({"action":"restart","step":12})");
  EXPECT_EQ(o.checkpoint_step, 12) << "a guard stop checkpoints the step it names";
  EXPECT_EQ(o.ranks[1].exit->exit_code, 137);
  EXPECT_TRUE(o.ranks[1].exit->oom_killed);
}

TEST_F(PodBackendTest, ANewGenerationFreesTheOldNamesAndShrinks) {
  auto backend = Backend();
  backend->Launch(Request(1, 2));
  Terminate("pb-worker-0", 76, "Error", "{}");
  Terminate("pb-worker-1", 76, "Error", "{}");
  backend->Sync(ListPods());
  backend->Launch(Request(2, 1));  // reshard down to one worker
  // Finished pods go at once; rank 0's name is free again, or taken on the next Observe.
  for (int i = 0; i < 3 && ListPods().size() != 1; ++i) {
    backend->Sync(ListPods());
    backend->Observe();
  }
  backend->Observe();
  std::vector<json> pods = ListPods();
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(kubeclient::Name(pods[0]), "pb-worker-0");
  EXPECT_EQ(kubeclient::Label(pods[0], manifests::kLabelGeneration), "2");
}

TEST_F(PodBackendTest, DeletedPodWithoutAnExitReadsAsKilled) {
  auto backend = Backend();
  backend->Launch(Request(1, 1));
  backend->Sync(ListPods());
  backend->Kill();
  EXPECT_TRUE(ListPods().empty());
  backend->Sync(ListPods());
  runtime::Observation o = backend->Observe();
  ASSERT_TRUE(o.ranks[0].exit);
  EXPECT_EQ(o.ranks[0].exit->exit_code, protocol::kExitKilled);
  EXPECT_EQ(o.ranks[0].exit->reason, "PodDeleted");
  EXPECT_EQ(o.ranks[0].exit->disruption, "") << "the backend's own kill is no disruption";
}

// A pod the cluster takes away says why: its DisruptionTarget condition (set before the
// deletion, as the scheduler and the eviction API do), else a deletion the backend did
// not make. Ranks that only drained along with it carry no cause.
TEST_F(PodBackendTest, DisruptionsComeFromTheConditionOrAForeignDeletion) {
  auto backend = Backend();
  backend->Launch(Request(1, 2));
  backend->Sync(ListPods());
  Pods().PatchStatus("default", "pb-worker-0",
                     json{{"status",
                           {{"conditions",
                             {{{"type", "DisruptionTarget"},
                               {"status", "True"},
                               {"reason", "PreemptionByScheduler"},
                               {"message", "preempting to accommodate a higher priority pod"}}}}}}});
  backend->Sync(ListPods());
  runtime::Observation o = backend->Observe();
  EXPECT_TRUE(o.ranks[0].running) << "the condition alone ends nothing";
  Terminate("pb-worker-0", 75, "Error", "");
  Terminate("pb-worker-1", 75, "Error", "");
  backend->Sync(ListPods());
  o = backend->Observe();
  ASSERT_TRUE(o.ranks[0].exit && o.ranks[1].exit);
  EXPECT_EQ(o.ranks[0].exit->disruption,
            "pod pb-worker-0 was preempted by the scheduler for a higher-priority pod (DisruptionTarget "
            "PreemptionByScheduler: preempting to accommodate a higher priority pod)");
  EXPECT_EQ(o.ranks[1].exit->disruption, "");

  // The next generation's rank 0 is deleted by someone else while it runs.
  backend->Launch(Request(2, 1));
  backend->Observe();  // creates rank 0 if the old pod still held its name
  backend->Sync(ListPods());
  ASSERT_EQ(ListPods().size(), 1u);
  ASSERT_EQ(kubeclient::Label(ListPods()[0], manifests::kLabelGeneration), "2");
  Pods().Delete("default", "pb-worker-0");
  backend->Sync(ListPods());  // gone from the cache: its deletion event was missed
  o = backend->Observe();
  ASSERT_TRUE(o.ranks[0].exit);
  EXPECT_EQ(o.ranks[0].exit->reason, "PodDeleted");
  EXPECT_NE(o.ranks[0].exit->disruption.find("pod pb-worker-0 was deleted by someone other than the operator"),
            std::string::npos)
      << o.ranks[0].exit->disruption;

  EXPECT_EQ(PodDisruption(json{{"status", {{"conditions", {{{"type", "DisruptionTarget"}, {"status", "False"}}}}}}}),
            "")
      << "a condition that is not True says nothing";
  EXPECT_NE(PodDisruption(
                json{{"status",
                      {{"conditions",
                        {{{"type", "DisruptionTarget"}, {"status", "True"}, {"reason", "EvictionByEvictionAPI"}}}}}}})
                .find("evicted by a node drain"),
            std::string::npos);
  // Kueue's own mark on the pods it stops (its workload preempted from the ClusterQueue).
  EXPECT_EQ(PodDisruption(json{{"status",
                                {{"conditions",
                                  {{{"type", "TerminationTarget"},
                                    {"status", "True"},
                                    {"reason", "StoppedByKueue"},
                                    {"message", "Preempted to accommodate a higher priority Workload"}}}}}}}),
            "stopped by Kueue (TerminationTarget StoppedByKueue: Preempted to accommodate a higher priority Workload)");
}

}  // namespace
}  // namespace headroom::trainingjob::testing
