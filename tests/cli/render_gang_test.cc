// `headroom render` prints what the operator creates for the example cluster jobs: the
// Volcano example's PodGroup, whole (minMember = its 8 pods), before the first pod; the
// Kueue example's group on every pod. Both examples are valid (`headroom validate`).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace {

const std::string kBinary = std::string(HEADROOM_BINARY_DIR) + "/bin/headroom";
const std::string kSource = HEADROOM_SOURCE_DIR;

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr
};

Result RunHeadroom(const std::string& args) {
  Result r;
  FILE* p = popen((kBinary + " " + args + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool HaveBinary() {
  struct stat st;
  return ::stat(kBinary.c_str(), &st) == 0;
}

size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(RenderGang, TheVolcanoExampleRendersItsPodGroupBeforeItsPods) {
  if (!HaveBinary()) GTEST_SKIP() << kBinary << " is not built";
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
  EXPECT_EQ(Count(r.out, "kind: Pod\n"), 1u);
  EXPECT_EQ(Count(r.out, "scheduling.k8s.io/group-name: qwen25-7b-gsm8k-g1\n"), 1u) << r.out;
}

TEST(RenderGang, TheKueueExampleNamesItsGroupOnEveryPod) {
  if (!HaveBinary()) GTEST_SKIP() << kBinary << " is not built";
  const std::string job = kSource + "/configs/cluster-kueue.yaml";
  ASSERT_EQ(RunHeadroom("validate " + job).code, 0);
  const Result r = RunHeadroom("render " + job);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("kind: PodGroup"), std::string::npos) << "Kueue needs no group object";
  // 16 ranks as 2 pods of 8: Kueue's group counts pods.
  EXPECT_EQ(Count(r.out, "kind: Pod\n"), 2u);
  EXPECT_EQ(Count(r.out, "kueue.x-k8s.io/pod-group-name: qwen25-7b-gsm8k-queued-g1\n"), 2u) << r.out;
  EXPECT_EQ(Count(r.out, "kueue.x-k8s.io/pod-group-total-count: \"2\"\n"), 2u) << r.out;
  EXPECT_EQ(Count(r.out, "kueue.x-k8s.io/queue-name: team-a\n"), 3u) << "the job's label and each pod's";
}

}  // namespace
