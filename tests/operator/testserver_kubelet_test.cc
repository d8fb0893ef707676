// The test kubelet: pods become local processes with their env resolved, report status
// and exit codes (OOMKilled under a real memory cgroup), and terminate gracefully.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "operator/kubeclient/resource_client.h"
#include "tests/operator/testserver/api_server.h"
#include "tests/operator/testserver/test_kubelet.h"

namespace headroom::testserver {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

json ShellPod(const std::string& name, const std::string& script, int64_t grace = 30) {
  return {{"metadata", {{"name", name}, {"labels", {{"app", "t"}}}}},
          {"spec",
           {{"restartPolicy", "Never"},
            {"terminationGracePeriodSeconds", grace},
            {"containers",
             {{{"name", "worker"},
               {"image", "unused"},
               {"command", {"/bin/sh", "-c"}},
               {"args", {script}},
               {"env",
                {{{"name", "MY_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
                 {{"name", "MY_NS"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}},
                 {{"name", "GREETING"}, {"value", "hi-$(MY_NAME)"}}}}}}}}}};
}

class KubeletTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Start();
    client_ = std::make_unique<kubeclient::RestClient>(server_.ClientConfig());
    TestKubelet::Options options;
    kubelet_ = std::make_unique<TestKubelet>(server_.ClientConfig(), options);
    kubelet_->Start();
  }
  void TearDown() override { kubelet_->Stop(); }
  kubeclient::ResourceClient Pods() { return kubeclient::ResourceClient(*client_, kubeclient::resources::kPods); }

  // Polls the pod until pred holds; returns the last read (or null when gone).
  template <typename Pred>
  json WaitFor(const std::string& name, Pred pred, std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    json pod;
    while (std::chrono::steady_clock::now() < deadline) {
      auto got = Pods().TryGet("ns1", name);
      pod = got ? *got : json(nullptr);
      if (pred(pod)) return pod;
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "timed out waiting on pod " << name << ": " << pod.dump();
    return pod;
  }
  // A pod is Running once its process is exec'd, as in Kubernetes; a shell installs its
  // trap a moment later. Scripts that must handle SIGTERM touch $HEADROOM_TERMINATION_LOG.ready
  // after the trap, and the test sends the signal only once that file exists.
  void WaitForTrapInstalled(const std::string& name, std::chrono::milliseconds timeout = 10s) {
    const std::string ready = kubelet_->PodDir("ns1", name) + "/termination-log.ready";
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!std::ifstream(ready).good()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        ADD_FAILURE() << "pod " << name << " never installed its SIGTERM trap (" << ready << ")";
        return;
      }
      std::this_thread::sleep_for(10ms);
    }
  }
  static std::string Phase(const json& pod) {
    return pod.is_object() && pod.contains("status") ? pod["status"].value("phase", "") : "";
  }

  TestApiServer server_;
  std::unique_ptr<kubeclient::RestClient> client_;
  std::unique_ptr<TestKubelet> kubelet_;
};

TEST_F(KubeletTest, RunsThePodWithItsEnvAndReportsTheExit) {
  Pods().Create("ns1",
                ShellPod("fails", "echo \"$GREETING from $MY_NAME in $MY_NS\" > $HEADROOM_TERMINATION_LOG; exit 3"));
  json pod = WaitFor("fails", [](const json& p) { return Phase(p) == "Failed"; });
  EXPECT_EQ(pod["spec"]["nodeName"], "test-node") << "bound by the kubelet";
  const json& term = pod["status"]["containerStatuses"][0]["state"]["terminated"];
  EXPECT_EQ(term["exitCode"], 3);
  EXPECT_EQ(term["reason"], "Error");
  EXPECT_EQ(term["message"], "hi-fails from fails in ns1\n");

  Pods().Create("ns1", ShellPod("ok", "test \"$HOSTNAME\" = ok"));
  pod = WaitFor("ok", [](const json& p) { return Phase(p) == "Succeeded"; });
  EXPECT_EQ(pod["status"]["podIP"], "127.0.0.1");
  EXPECT_EQ(pod["status"]["containerStatuses"][0]["state"]["terminated"]["reason"], "Completed");
  EXPECT_EQ(pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 0);
}

TEST_F(KubeletTest, RunningPodReportsRunning) {
  Pods().Create("ns1", ShellPod("runs", "sleep 5"));
  json pod = WaitFor("runs", [](const json& p) { return Phase(p) == "Running"; });
  EXPECT_TRUE(pod["status"]["containerStatuses"][0]["state"].contains("running"));
  EXPECT_TRUE(pod["status"]["containerStatuses"][0]["ready"]);
  EXPECT_EQ(kubelet_->running(), 1);
}

TEST_F(KubeletTest, DeletionSendsSigtermAndFinalisesWhenTheProcessExits) {
  Pods().Create("ns1", ShellPod("drains", "trap 'echo drained > $HEADROOM_TERMINATION_LOG; exit 75' TERM; "
                                          ": > $HEADROOM_TERMINATION_LOG.ready; "
                                          "while true; do sleep 0.02; done"));
  WaitFor("drains", [](const json& p) { return Phase(p) == "Running"; });
  WaitForTrapInstalled("drains");
  const auto t0 = std::chrono::steady_clock::now();
  Pods().Delete("ns1", "drains", {int64_t{20}, "", ""});
  WaitFor("drains", [](const json& p) { return p.is_null(); });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "the process exited on SIGTERM, well within its grace";
  std::ifstream log(kubelet_->PodDir("ns1", "drains") + "/termination-log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "drained\n");
}

TEST_F(KubeletTest, ProcessIgnoringSigtermIsKilledAfterTheGracePeriod) {
  Pods().Create("ns1", ShellPod("stubborn", "trap '' TERM; : > $HEADROOM_TERMINATION_LOG.ready; "
                                            "while true; do sleep 0.02; done"));
  WaitFor("stubborn", [](const json& p) { return Phase(p) == "Running"; });
  WaitForTrapInstalled("stubborn");
  const auto t0 = std::chrono::steady_clock::now();
  Pods().Delete("ns1", "stubborn", {int64_t{1}, "", ""});
  WaitFor("stubborn", [](const json& p) { return p.is_null(); });
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 900ms) << "SIGKILL waits for the grace period";
  EXPECT_LT(took, 5s);
  EXPECT_EQ(kubelet_->running(), 0);
}

TEST_F(KubeletTest, MemoryLimitBreachIsOomKilled) {
  if (!kubelet_->memory_cgroups()) GTEST_SKIP() << "needs root and a writable memory cgroup hierarchy";
  json pod = ShellPod("hog", "");
  pod["spec"]["containers"][0]["command"] = {"/usr/bin/tail", "/dev/zero"};  // buffers forever
  pod["spec"]["containers"][0].erase("args");
  pod["spec"]["containers"][0]["resources"] = {{"limits", {{"memory", "48Mi"}}}};
  Pods().Create("ns1", pod);
  json done = WaitFor(
      "hog", [](const json& p) { return Phase(p) == "Failed"; }, 20s);
  const json& term = done["status"]["containerStatuses"][0]["state"]["terminated"];
  EXPECT_EQ(term["reason"], "OOMKilled");
  EXPECT_EQ(term["exitCode"], 137);
}

}  // namespace
}  // namespace headroom::testserver
