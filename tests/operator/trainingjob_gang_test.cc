// Gang scheduling on the test cluster (operator/manifests/gang.h): the PodGroup kinds are
// served as a real cluster serves them once Volcano or scheduler-plugins is installed, by
// their CustomResourceDefinitions. The group exists, with minMember = the generation's
// pods, before the first pod; pods that wait to be placed cost no restart; a reshard is a
// new group and the old one goes; Kueue's labels name a new group per generation; a
// queue label without Kueue is said in an Event and the job runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>

#include "operator/manifests/gang.h"
#include "tests/operator/test_cluster.h"

namespace headroom::trainingjob::testing {
namespace {

const kubeclient::ResourceType kCrds{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                     "CustomResourceDefinition", false};

kubeclient::ResourceType TypeOf(const manifests::PodGroupKind& k) {
  return kubeclient::ResourceType{k.group, k.version, k.plural, k.kind, true};
}

// A CRD with an open schema: enough for the server to serve the kind with real API
// semantics (names, ownerReferences and garbage collection, label selectors).
json OpenCrd(const std::string& group, const std::string& version, const std::string& plural, const std::string& kind) {
  return json{
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", plural + "." + group}}},
      {"spec",
       {{"group", group},
        {"scope", "Namespaced"},
        {"names", {{"plural", plural}, {"singular", kind == "PodGroup" ? "podgroup" : plural}, {"kind", kind}}},
        {"versions",
         json::array(
             {json{{"name", version},
                   {"served", true},
                   {"storage", true},
                   {"schema",
                    {{"openAPIV3Schema", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}}})}}}};
}

Cluster::Options NoKubelet() {
  Cluster::Options o;
  o.kubelet = false;  // nothing places the pods until the test starts a kubelet
  o.worker_env = {{"FAKE_STEP_SECONDS", "0.03"}};
  return o;
}

int64_t Rv(const json& object) { return std::stoll(object["metadata"].value("resourceVersion", "0")); }

std::string GenerationOf(const json& pod) { return pod["metadata"]["labels"].value(manifests::kLabelGeneration, ""); }

TEST(GangScheduling, VolcanoGroupComesFirstPendingCostsNothingAndEachGenerationIsANewGroup) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster c(NoKubelet());
  kubeclient::ResourceClient crds(c.Jobs().rest(), kCrds);
  crds.Create("", OpenCrd("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup"));
  c.StartOperator();
  kubeclient::ResourceClient groups(c.Jobs().rest(), TypeOf(manifests::kVolcanoPodGroup));

  JobShape shape;
  shape.name = "gang";
  shape.workers = 2;
  shape.steps = 100000;  // runs until the test is done with it
  shape.max_restarts = 0;
  json job = JobObject(shape);
  job["metadata"]["labels"][manifests::kKueueQueueLabel] = "team-a";
  job["spec"]["template"] = {{"spec", {{"schedulerName", "volcano"}}}};
  c.Create(job);

  // Generation 1: the group, then its pods (no kubelet: they stay Pending, untouched, so
  // each one's resourceVersion is its creation's).
  ASSERT_TRUE(c.WaitUntil([&] { return c.PodsOf("gang").size() == 2; }, 20s));
  const json g1 = groups.Get("default", "gang-g1");
  EXPECT_EQ(g1["spec"].value("minMember", 0), 2) << g1.dump();
  EXPECT_EQ(g1["metadata"]["ownerReferences"][0].value("uid", ""), kubeclient::Uid(c.Job("gang")));
  for (const json& pod : c.PodsOf("gang")) {
    EXPECT_LT(Rv(g1), Rv(pod)) << "the PodGroup is created before every pod of its generation";
    EXPECT_EQ(pod["metadata"]["annotations"].value(manifests::kVolcanoGroupAnnotation, ""), "gang-g1");
    EXPECT_EQ(pod["spec"].value("schedulerName", ""), "volcano");
    EXPECT_EQ(pod["metadata"]["labels"].value(manifests::kKueueQueueLabel, ""), "team-a");
    EXPECT_EQ(pod["metadata"]["labels"].value(manifests::kKueueGroupNameLabel, ""), "gang-g1");
    EXPECT_EQ(pod["metadata"]["annotations"].value(manifests::kKueueGroupCountAnnotation, ""), "2");
  }
  // This cluster serves no kueue.x-k8s.io: said once, and the job runs anyway.
  EXPECT_TRUE(c.WaitUntil(
      [&] {
    const std::vector<std::string> r = c.EventReasons("gang");
    return std::count(r.begin(), r.end(), "KueueNotInstalled") == 1;
      },
      10s))
      << c.EventMessages("gang");

  // A group nobody places: Pending, not a failure; maxRestarts 0 would fail on any restart.
  std::this_thread::sleep_for(3s);
  json status = c.Status("gang");
  EXPECT_EQ(status.value("phase", ""), "Pending") << status.dump();
  EXPECT_EQ(status.value("restarts", -1), 0) << status.dump();
  EXPECT_EQ(status.value("generation", 0), 1) << status.dump();

  // Placed: a kubelet binds and runs them, the job steps.
  testserver::TestKubelet::Options k;
  k.work_dir = c.dir() + "/kubelet";
  testserver::TestKubelet kubelet(c.server().ClientConfig(), k);
  kubelet.Start();
  ASSERT_TRUE(c.WaitForJob(
      "gang", [](const json& j) { return j.value("status", json::object()).value("step", 0) > 2; }, 30s, "steps"));

  // A reshard to 1 worker: generation 2 is a group of its own, and generation 1's goes.
  json scale = c.Jobs().GetScale("default", "gang");
  scale["spec"]["replicas"] = 1;
  c.Jobs().UpdateScale("default", "gang", scale);
  ASSERT_TRUE(c.WaitUntil(
      [&] {
    const std::vector<json> pods = c.PodsOf("gang");
    return pods.size() == 1 && GenerationOf(pods[0]) == "2";
      },
      30s))
      << c.Status("gang").dump();
  const json g2 = groups.Get("default", "gang-g2");
  EXPECT_EQ(g2["spec"].value("minMember", 0), 1) << g2.dump();
  const json pod = c.PodsOf("gang")[0];
  EXPECT_EQ(pod["metadata"]["annotations"].value(manifests::kVolcanoGroupAnnotation, ""), "gang-g2");
  EXPECT_EQ(pod["metadata"]["labels"].value(manifests::kKueueGroupNameLabel, ""), "gang-g2");
  EXPECT_EQ(pod["metadata"]["annotations"].value(manifests::kKueueGroupCountAnnotation, ""), "1");
  EXPECT_TRUE(c.WaitUntil([&] { return !groups.TryGet("default", "gang-g1"); }, 10s))
      << "generation 1's group goes with its pods";

  // Deleting the job takes the group with it (ownerReferences).
  c.Jobs().Delete("default", "gang");
  EXPECT_TRUE(c.WaitUntil([&] { return !groups.TryGet("default", "gang-g2"); }, 20s));
  kubelet.Stop();
}

TEST(GangScheduling, AQueueLabelWithKueueInstalledIsNotWarnedAbout) {
  Cluster c(NoKubelet());
  kubeclient::ResourceClient crds(c.Jobs().rest(), kCrds);
  crds.Create("", OpenCrd(manifests::kKueueApiGroup, "v1beta1", "localqueues", "LocalQueue"));
  c.StartOperator();
  JobShape shape;
  shape.name = "queued";
  json job = JobObject(shape);
  job["metadata"]["labels"][manifests::kKueueQueueLabel] = "team-a";
  c.Create(job);
  ASSERT_TRUE(c.WaitUntil([&] { return c.PodsOf("queued").size() == 1; }, 20s));
  ASSERT_TRUE(c.WaitUntil([&] { return !c.EventReasons("queued").empty(); }, 10s));
  std::this_thread::sleep_for(500ms);
  const std::vector<std::string> reasons = c.EventReasons("queued");
  EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "KueueNotInstalled"), 0) << c.EventMessages("queued");
}

// The coscheduling scheduler named with no PodGroup kind served: the job fails at once,
// saying which kind is missing, instead of pods that no scheduler will ever place.
TEST(GangScheduling, ASchedulerWhosePodGroupKindIsNotServedFailsTheJobSayingSo) {
  Cluster c(NoKubelet());
  c.StartOperator();
  JobShape shape;
  shape.name = "nogang";
  json job = JobObject(shape);
  job["spec"]["template"] = {{"spec", {{"schedulerName", "scheduler-plugins-scheduler"}}}};
  c.Create(job);
  ASSERT_TRUE(c.WaitForPhase("nogang", "Failed", 20s));
  const std::string message = c.Status("nogang").value("message", "");
  EXPECT_NE(message.find("scheduling.x-k8s.io/v1alpha1 podgroups"), std::string::npos) << message;
  EXPECT_TRUE(c.PodsOf("nogang").empty()) << "no pod without its group";
}

}  // namespace
}  // namespace headroom::trainingjob::testing
