// End to end: the leak drill (configs/drill-host-leak.yaml: 48 MiB leaked per step
// against a 1 GiB limit) applied as a TrainingJob to the in-process API server, run by
// the operator as pods of the REAL headroom-worker on the test kubelet, each pod in a
// memory cgroup at its limit. The job must finish through at least one guard restart,
// with no OOM kill, and its status and Events must tell that story. Skipped, with the
// reason, when the worker is not built or memory cgroups cannot be made (not root).
// HEADROOM_WORKER_BINARY overrides the worker's path (e.g. another build directory's).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "tests/operator/test_cluster.h"

namespace headroom::trainingjob::testing {
namespace {

json YamlToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    json o = json::object();
    for (const auto& kv : n) o[kv.first.as<std::string>()] = YamlToJson(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    json a = json::array();
    for (const auto& v : n) a.push_back(YamlToJson(v));
    return a;
  }
  if (n.IsNull()) return nullptr;
  const std::string s = n.as<std::string>();
  if (n.Tag() == "!") return s;  // quoted: a string
  if (s == "true" || s == "false") return s == "true";
  char* end = nullptr;
  const long long i = std::strtoll(s.c_str(), &end, 10);
  if (*end == '\0' && !s.empty()) return i;
  const double d = std::strtod(s.c_str(), &end);
  if (*end == '\0' && !s.empty()) return d;
  return s;
}

TEST(OperatorEndToEnd, LeakDrillFinishesThroughAGuardRestartWithTheRealWorker) {
  const char* override_path = std::getenv("HEADROOM_WORKER_BINARY");
  const std::string worker = override_path ? override_path : BinaryPath("headroom-worker");
  REQUIRE_BINARY(worker);
  Cluster::Options o;
  o.worker = worker;
  o.requeue = 500ms;
  Cluster c(o);
  // The kubelet makes memory cgroups only as root on a machine that allows it; without
  // them the drill would measure the wrong limit.
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for the test kubelet's memory cgroups";
  c.StartOperator();

  json job = YamlToJson(YAML::LoadFile(std::string(HEADROOM_SOURCE_DIR) + "/configs/drill-host-leak.yaml"));
  c.Create(job);
  ASSERT_TRUE(c.WaitForJob(
      "drill-host-leak",
      [](const json& j) {
    const std::string phase = j.value("status", json::object()).value("phase", "");
    return phase == "Succeeded" || phase == "Failed";
      },
      480s, "the drill to end"));
  const json status = c.Status("drill-host-leak");
  std::cout << "Events:\n" << c.EventMessages("drill-host-leak");
  // Memory as scraped from the workers' /metrics (true whatever the worker's stage).
  EXPECT_GT(status["memory"].value("hostBytes", 0), 0) << "memory scraped from /metrics: " << status.dump();
  EXPECT_EQ(status["memory"].value("hostLimitBytes", 0), 1 << 30);
  EXPECT_GT(status.value("step", 0), 0) << "steps scraped from /metrics";
  // A guard restart resumes from the checkpoint the worker writes when it stops (exit 76).
  EXPECT_TRUE(std::filesystem::exists(c.dir() + "/jobs/drill-host-leak/checkpoints/latest"));
  EXPECT_EQ(status.value("phase", ""), "Succeeded") << status.dump();
  EXPECT_GE(status.value("restarts", 0), 1) << status.dump();
  EXPECT_EQ(status.value("oomKills", -1), 0) << status.dump();
  EXPECT_EQ(status.value("stepsLost", -1), 0) << status.dump();
  // Progress is scraped from the workers' /metrics every requeue; the last steps may fall
  // between two scrapes, but a job that succeeded did all of them.
  EXPECT_EQ(status.value("step", 0), 40) << status.dump();
  ASSERT_TRUE(c.WaitUntil(
      [&] {
    const auto r = c.EventReasons("drill-host-leak");
    return !r.empty() && r.back() == "Succeeded";
      },
      10s));
  const std::vector<std::string> reasons = c.EventReasons("drill-host-leak");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "GuardRestart"), reasons.end())
      << c.EventMessages("drill-host-leak");
  EXPECT_EQ(std::find(reasons.begin(), reasons.end(), "OOMKilled"), reasons.end())
      << c.EventMessages("drill-host-leak");
}

// The same story in seconds with the fake worker, which really leaks (and measures its
// cgroup) but does no training: a 24 MiB/step leak against a 256 MiB limit.
TEST(OperatorEndToEnd, FastLeakDrillWithTheFakeWorker) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster::Options o;
  o.worker_env = {{"FAKE_STEP_SECONDS", "0.03"}};
  Cluster c(o);
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for the test kubelet's memory cgroups";
  c.StartOperator();
  JobShape shape;
  shape.name = "fast-drill";
  shape.steps = 24;
  shape.memory = "256Mi";
  shape.leak = "24Mi";
  shape.max_workers = 1;  // restarts only: the fake worker does not shard
  c.Create(JobObject(shape));
  ASSERT_TRUE(c.WaitForJob(
      "fast-drill",
      [](const json& j) {
    const std::string phase = j.value("status", json::object()).value("phase", "");
    return phase == "Succeeded" || phase == "Failed";
      },
      60s, "the drill to end"));
  const json status = c.Status("fast-drill");
  EXPECT_EQ(status.value("phase", ""), "Succeeded") << status.dump() << "\n" << c.EventMessages("fast-drill");
  EXPECT_GE(status.value("restarts", 0), 1) << status.dump();
  EXPECT_EQ(status.value("oomKills", -1), 0) << status.dump();
  EXPECT_EQ(status.value("stepsLost", -1), 0) << status.dump();
  // Memory as scraped from the fake worker's /metrics.
  EXPECT_GT(status["memory"].value("hostBytes", 0), 0) << status.dump();
  EXPECT_EQ(status["memory"].value("hostLimitBytes", 0), 256 << 20) << status.dump();
  ASSERT_TRUE(c.WaitUntil(
      [&] {
    const auto r = c.EventReasons("fast-drill");
    return !r.empty() && r.back() == "Succeeded";
      },
      10s));
  const std::vector<std::string> reasons = c.EventReasons("fast-drill");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "GuardRestart"), reasons.end()) << c.EventMessages("fast-drill");
  EXPECT_EQ(std::find(reasons.begin(), reasons.end(), "OOMKilled"), reasons.end()) << c.EventMessages("fast-drill");
  EXPECT_TRUE(std::filesystem::exists(c.dir() + "/jobs/fast-drill/checkpoints/latest"));
}

// Without the guard the kernel's OOM killer acts at the cgroup limit: the pod ends
// OOMKilled, the operator restarts it from the last checkpoint, and the status and an
// OOMKilled Event say how many steps were lost.
TEST(OperatorEndToEnd, OomKilledPodRestartsFromTheCheckpointAndCountsStepsLost) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster::Options o;
  o.worker_env = {{"FAKE_STEP_SECONDS", "0.03"}};
  Cluster c(o);
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for the test kubelet's memory cgroups";
  c.StartOperator();
  JobShape shape;
  shape.name = "oom";
  shape.steps = 10;
  shape.memory = "128Mi";
  shape.leak = "24Mi";
  shape.max_workers = 1;
  shape.checkpoint_every = 3;
  json job = JobObject(shape);
  job["spec"]["memoryGuard"]["enabled"] = false;
  c.Create(job);
  ASSERT_TRUE(c.WaitForJob(
      "oom", [](const json& j) { return j.value("status", json::object()).value("oomKills", 0) >= 1; }, 60s,
      "an OOM kill"));
  ASSERT_TRUE(c.WaitUntil(
      [&] {
    const auto r = c.EventReasons("oom");
    return std::find(r.begin(), r.end(), "OOMKilled") != r.end();
      },
      10s))
      << c.EventMessages("oom");
  const std::string events = c.EventMessages("oom");
  EXPECT_NE(events.find("OOM-killed by the kernel"), std::string::npos) << events;
  EXPECT_NE(events.find("steps lost"), std::string::npos) << events;
  const json status = c.Status("oom");
  EXPECT_GE(status.value("generation", 0), 2) << "relaunched after the kill: " << status.dump();
  EXPECT_EQ(status["lastAction"].value("type", "").rfind("restartAfterOOMKill", 0), 0u) << status.dump();
}

}  // namespace
}  // namespace headroom::trainingjob::testing
