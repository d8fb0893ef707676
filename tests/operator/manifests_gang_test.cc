// Gang scheduling and Kueue groups (operator/manifests/gang.h): which scheduler takes a
// PodGroup, what the group asks for, how each pod names its group, one group per
// generation.
#include <gtest/gtest.h>

#include <string>

#include "operator/manifests/children.h"
#include "operator/manifests/gang.h"

namespace headroom::manifests {
namespace {

using nlohmann::json;

WorkerGeneration Generation(const std::string& scheduler, int64_t generation = 3) {
  WorkerGeneration gen;
  gen.job.metadata.name = "qwen";
  gen.job.metadata.uid = "6f1c2f7e-0000-4000-8000-000000000002";
  gen.job.spec.workers = 4;
  gen.job.spec.resources.cpu = "1500m";
  gen.job.spec.resources.cpu_millis = 1500;
  gen.job.spec.resources.memory = "2Gi";
  gen.job.spec.resources.memory_bytes = 2LL << 30;
  gen.job.spec.resources.gpus = 1;
  gen.job.spec.pod_template.scheduler_name = scheduler;
  gen.generation = generation;
  return gen;
}

TEST(Gang, SchedulerNameSelectsThePodGroupKind) {
  EXPECT_EQ(GangSchedulerOf(Generation("volcano").job), GangScheduler::kVolcano);
  EXPECT_EQ(GangSchedulerOf(Generation("scheduler-plugins-scheduler").job), GangScheduler::kCoscheduling);
  EXPECT_EQ(GangSchedulerOf(Generation("").job), GangScheduler::kNone);
  EXPECT_EQ(GangSchedulerOf(Generation("default-scheduler").job), GangScheduler::kNone);
  EXPECT_TRUE(BuildPodGroup(Generation(""), "ml").is_null());
  const json pod = BuildWorkerPod(Generation(""), 0, "ml");
  EXPECT_FALSE(pod["metadata"]["annotations"].contains(kVolcanoGroupAnnotation));
  EXPECT_FALSE(pod["metadata"]["labels"].contains(kCoschedulingGroupLabel));
  EXPECT_FALSE(pod["metadata"]["labels"].contains(kKueueGroupNameLabel));
}

TEST(Gang, VolcanoPodGroupHoldsTheWholeGenerationAndEveryPodNamesIt) {
  WorkerGeneration gen = Generation("volcano");
  gen.job.spec.pod_template.priority_class_name = "training-high";
  gen.job.spec.pod_template.annotations[kVolcanoQueueAnnotation] = "research";
  const json group = BuildPodGroup(gen, "ml");
  EXPECT_EQ(group["apiVersion"], "scheduling.volcano.sh/v1beta1");
  EXPECT_EQ(group["kind"], "PodGroup");
  EXPECT_EQ(group["metadata"]["name"], "qwen-g3");
  EXPECT_EQ(group["metadata"]["namespace"], "ml");
  EXPECT_EQ(group["metadata"]["labels"][kLabelJobName], "qwen");
  EXPECT_EQ(group["metadata"]["labels"][kLabelGeneration], "3");
  EXPECT_EQ(group["metadata"]["ownerReferences"][0]["uid"], gen.job.metadata.uid);
  EXPECT_EQ(group["spec"]["minMember"], 4);
  EXPECT_EQ(group["spec"]["minResources"]["cpu"], "6");       // 4 x 1500m
  EXPECT_EQ(group["spec"]["minResources"]["memory"], "8Gi");  // 4 x 2Gi
  EXPECT_EQ(group["spec"]["minResources"]["nvidia.com/gpu"], "4");
  EXPECT_EQ(group["spec"]["priorityClassName"], "training-high");
  EXPECT_EQ(group["spec"]["queue"], "research");
  for (int rank = 0; rank < 4; ++rank) {
    const json pod = BuildWorkerPod(gen, rank, "ml");
    EXPECT_EQ(pod["metadata"]["annotations"][kVolcanoGroupAnnotation], "qwen-g3");
    EXPECT_EQ(pod["spec"]["schedulerName"], "volcano");
  }
}

TEST(Gang, CoschedulingPodGroupIsNamedByALabel) {
  const WorkerGeneration gen = Generation("scheduler-plugins-scheduler", 1);
  const json group = BuildPodGroup(gen, "ml");
  EXPECT_EQ(group["apiVersion"], "scheduling.x-k8s.io/v1alpha1");
  EXPECT_EQ(group["metadata"]["name"], "qwen-g1");
  EXPECT_EQ(group["spec"]["minMember"], 4);
  EXPECT_FALSE(group["spec"].contains("queue"));
  const json pod = BuildWorkerPod(gen, 2, "ml");
  EXPECT_EQ(pod["metadata"]["labels"][kCoschedulingGroupLabel], "qwen-g1");
  EXPECT_FALSE(pod["metadata"]["annotations"].contains(kVolcanoGroupAnnotation));
}

TEST(Gang, MinMemberCountsPodsNotRanks) {
  WorkerGeneration gen = Generation("volcano");
  gen.job.spec.workers = 16;
  gen.job.spec.ranks_per_pod = 8;
  EXPECT_EQ(PodsPerGeneration(gen.job.spec), 2);
  EXPECT_EQ(BuildPodGroup(gen, "ml")["spec"]["minMember"], 2);
  EXPECT_EQ(BuildPodGroup(gen, "ml")["spec"]["minResources"]["nvidia.com/gpu"], "16");
  gen.job.spec.resources.memory_bytes = 1000LL << 20;  // 16 x 1000Mi: whole Mi, not whole Gi
  EXPECT_EQ(BuildPodGroup(gen, "ml")["spec"]["minResources"]["memory"], "16000Mi");
  gen.job.spec.resources.memory_bytes = 1000;
  EXPECT_EQ(BuildPodGroup(gen, "ml")["spec"]["minResources"]["memory"], "16000");
}

TEST(Gang, KueueGroupLabelsEveryPodWithANewGroupPerGeneration) {
  for (const char* scheduler : {"", "volcano"}) {
    WorkerGeneration gen = Generation(scheduler, 1);
    gen.job.metadata.labels[kKueueQueueLabel] = "team-a";
    const json g1 = BuildWorkerPod(gen, 0, "ml");
    EXPECT_EQ(g1["metadata"]["labels"][kKueueQueueLabel], "team-a");
    EXPECT_EQ(g1["metadata"]["labels"][kKueueGroupNameLabel], "qwen-g1");
    EXPECT_EQ(g1["metadata"]["annotations"][kKueueGroupCountAnnotation], "4");
    // A reshard is a new generation: a new group, admitted again at its new size.
    gen.generation = 2;
    gen.job.spec.workers = 2;
    const json g2 = BuildWorkerPod(gen, 1, "ml");
    EXPECT_EQ(g2["metadata"]["labels"][kKueueGroupNameLabel], "qwen-g2");
    EXPECT_EQ(g2["metadata"]["annotations"][kKueueGroupCountAnnotation], "2");
  }
}

}  // namespace
}  // namespace headroom::manifests
