// `headroom render` prints what the operator creates for the example cluster jobs: the
// Volcano example's PodGroup, whole (minMember = its 8 pods), before the first pod; the
// Kueue example's group on every pod. Both examples are valid (`headroom validate`).
#include <gtest/gtest.h>

#include <string>

#include "tests/cli/headroom_binary.h"

namespace {

using headroom::testing::CountOf;
using headroom::testing::HaveHeadroomBinary;
using headroom::testing::RunHeadroom;
using Result = headroom::testing::CommandResult;
const std::string& kBinary = headroom::testing::kHeadroomBinary;
const std::string& kSource = headroom::testing::kSourceDir;

TEST(RenderGang, TheVolcanoExampleRendersItsPodGroupBeforeItsPods) {
  if (!HaveHeadroomBinary()) GTEST_SKIP() << kBinary << " is not built";
  const std::string job = kSource + "/configs/cluster-volcano.yaml";
  ASSERT_EQ(RunHeadroom("validate " + job).code, 0);
  const Result r = RunHeadroom("render " + job);
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t group = r.out.find("apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\n");
  ASSERT_NE(group, std::string::npos) << r.out;
  EXPECT_LT(group, r.out.find("kind: Pod\n")) << "the group comes before the pods";
  // Eight ranks in one pod (ranksPerPod 8): a gang of one pod that asks for the whole node.
  EXPECT_NE(r.out.find("  minMember: 1\n", group), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nvidia.com/gpu: \"8\"", group), std::string::npos) << r.out;
  EXPECT_EQ(CountOf(r.out, "kind: Pod\n"), 1u);
  EXPECT_EQ(CountOf(r.out, "scheduling.k8s.io/group-name: qwen25-7b-gsm8k-g1\n"), 1u) << r.out;
}

TEST(RenderGang, TheKueueExampleNamesItsGroupOnEveryPod) {
  if (!HaveHeadroomBinary()) GTEST_SKIP() << kBinary << " is not built";
  const std::string job = kSource + "/configs/cluster-kueue.yaml";
  ASSERT_EQ(RunHeadroom("validate " + job).code, 0);
  const Result r = RunHeadroom("render " + job);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("kind: PodGroup"), std::string::npos) << "Kueue needs no group object";
  // 16 ranks as 2 pods of 8: Kueue's group counts pods.
  EXPECT_EQ(CountOf(r.out, "kind: Pod\n"), 2u);
  EXPECT_EQ(CountOf(r.out, "kueue.x-k8s.io/pod-group-name: qwen25-7b-gsm8k-queued-g1\n"), 2u) << r.out;
  EXPECT_EQ(CountOf(r.out, "kueue.x-k8s.io/pod-group-total-count: \"2\"\n"), 2u) << r.out;
  EXPECT_EQ(CountOf(r.out, "kueue.x-k8s.io/queue-name: team-a\n"), 3u) << "the job's label and each pod's";
}

}  // namespace
