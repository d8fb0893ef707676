// The pod's launcher (core/launch/pod_launcher.h) running the fake worker's ranks: the
// pod ends with the deciding rank's exit code and termination message, stop signals reach
// every rank, one /metrics serves every rank's series.
#include "core/launch/pod_launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/metrics/prometheus_text.h"
#include "core/net/free_port.h"
#include "core/net/http_get.h"
#include "core/protocol/environment.h"
#include "core/protocol/exit_codes.h"
#include "core/protocol/step_record.h"
#include "core/protocol/termination_message.h"
#include "core/spec/training_job.h"
#include "tests/local/local_test_support.h"

namespace headroom::launch {
namespace {

using local::testing::FakeWorkerPath;
using local::testing::JobShape;
using local::testing::MakeJob;
using local::testing::ReadAll;
using local::testing::TempDir;
using Clock = std::chrono::steady_clock;

struct Pod {
  pid_t pid = -1;
  std::string termination;  // the pod's termination message file
  std::string log;          // the ranks' shared step log
};

// Starts `headroom-fake-worker launch` for a pod of `k` ranks from `first_rank`, in a job of
// `workers` ranks, with extra environment `env`.
Pod StartPod(const TempDir& dir, int k, int first_rank, int workers, int steps,
             const std::vector<std::pair<std::string, std::string>>& env, int metrics_port = -1) {
  JobShape shape;
  shape.workers = workers;
  shape.max_workers = workers;
  shape.steps = steps;
  shape.guard = false;
  const std::string job_path = dir.path() + "/job.yaml";
  std::ofstream(job_path) << spec::ToYaml(MakeJob(shape));
  Pod pod;
  pod.termination = dir.path() + "/pod.termination";
  pod.log = dir.path() + "/steps.log";
  std::vector<std::string> args{FakeWorkerPath(),
                                "launch",
                                "--ranks-per-pod",
                                std::to_string(k),
                                "--first-rank",
                                std::to_string(first_rank),
                                "--stop-grace-seconds",
                                "2",
                                "--metrics-port",
                                std::to_string(metrics_port),
                                "--",
                                "--job",
                                job_path,
                                "--checkpoint-dir",
                                dir.path() + "/ckpt",
                                "--log",
                                pod.log};
  std::vector<std::pair<std::string, std::string>> all = env;
  all.emplace_back(protocol::kWorldSizeEnv, std::to_string(workers));
  all.emplace_back(protocol::kTerminationLogEnv, pod.termination);
  std::filesystem::create_directories(dir.path() + "/ckpt");
  pod.pid = fork();
  if (pod.pid == 0) {
    for (const auto& [k_, v] : all) setenv(k_.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int out = open((dir.path() + "/pod.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pod;
}

// Waits for the pod; the raw wait status.
int Wait(const Pod& pod, std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto deadline = Clock::now() + limit;
  int status = 0;
  while (waitpid(pod.pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pod.pid, SIGKILL);
      waitpid(pod.pid, &status, 0);
      ADD_FAILURE() << "the pod did not end within " << limit.count() << " s";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

std::set<int> RanksLogged(const std::string& log) {
  std::set<int> ranks;
  std::istringstream in(ReadAll(log));
  for (std::string line; std::getline(in, line);) {
    if (auto rec = protocol::ParseStepLogLine(line)) ranks.insert(rec->rank);
  }
  return ranks;
}

TEST(PodLauncher, EveryRankRunsWithItsGlobalRankAndThePodFinishes) {
  REQUIRE_FAKE_WORKER();
  TempDir dir("launch");
  const Pod pod = StartPod(dir, 2, 2, 4, 3, {});
  const int status = Wait(pod);
  ASSERT_TRUE(WIFEXITED(status)) << ReadAll(dir.path() + "/pod.out");
  EXPECT_EQ(WEXITSTATUS(status), protocol::kExitFinished) << ReadAll(dir.path() + "/pod.out");
  EXPECT_EQ(RanksLogged(pod.log), (std::set<int>{2, 3}));
}

TEST(PodLauncher, OneRanksCrashEndsThePodWithItsCodeAndMessage) {
  REQUIRE_FAKE_WORKER();
  TempDir dir("launch");
  // 10,000 steps of 20 ms: the other rank only ends this soon if the launcher stops it.
  const auto start = Clock::now();
  const Pod pod = StartPod(dir, 2, 0, 2, 10000, {{"FAKE_CRASH_AT_STEP", "3"}, {"FAKE_CRASH_RANK", "1"}});
  const int status = Wait(pod);
  ASSERT_TRUE(WIFEXITED(status)) << ReadAll(dir.path() + "/pod.out");
  EXPECT_EQ(WEXITSTATUS(status), protocol::kExitFailure);
  EXPECT_EQ(protocol::ReadTerminationFile(pod.termination), "crashed on demand at step 3");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));
}

TEST(PodLauncher, AGpuOutOfMemoryKeepsItsCodeAndReport) {
  REQUIRE_FAKE_WORKER();
  TempDir dir("launch");
  const Pod pod = StartPod(dir, 2, 2, 4, 10000, {{protocol::kSimulateGpuOomAtStepEnv, "2"}});
  const int status = Wait(pod);
  ASSERT_TRUE(WIFEXITED(status)) << ReadAll(dir.path() + "/pod.out");
  EXPECT_EQ(WEXITSTATUS(status), protocol::kExitGpuOom);
  const auto report = protocol::GpuOomReport::FromJson(protocol::ReadTerminationFile(pod.termination));
  ASSERT_TRUE(report.has_value()) << protocol::ReadTerminationFile(pod.termination);
  // The rank that ran out (the fake's once-marker lets one rank do it) names its device.
  EXPECT_TRUE(report->device == "cuda:2" || report->device == "cuda:3") << report->device;
}

TEST(PodLauncher, ARankKilledBySigkillTakesThePodDownTheSameWay) {
  REQUIRE_FAKE_WORKER();
  TempDir dir("launch");
  const Pod pod = StartPod(dir, 2, 0, 2, 10000,
                           {{"FAKE_CRASH_AT_STEP", "2"}, {"FAKE_CRASH_RANK", "0"}, {"FAKE_CRASH_SIGNAL", "9"}});
  const int status = Wait(pod);
  ASSERT_TRUE(WIFSIGNALED(status)) << status << "\n" << ReadAll(dir.path() + "/pod.out");
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST(PodLauncher, SigtermReachesEveryRankAndThePodDrains) {
  REQUIRE_FAKE_WORKER();
  TempDir dir("launch");
  const Pod pod = StartPod(dir, 2, 0, 2, 100000, {});
  // Every rank stepping first.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (RanksLogged(pod.log).size() < 2 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(RanksLogged(pod.log).size(), 2u) << ReadAll(dir.path() + "/pod.out");
  const auto start = Clock::now();
  kill(pod.pid, SIGTERM);
  const int status = Wait(pod);
  ASSERT_TRUE(WIFEXITED(status)) << ReadAll(dir.path() + "/pod.out");
  EXPECT_EQ(WEXITSTATUS(status), protocol::kExitDrained);
  // Had one rank not been told, the launcher would wait its orderly grace (100 s) for it.
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));
  // Rank 0 (the fake's writer) checkpointed as it drained.
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/ckpt/latest"));
}

TEST(PodLauncher, OneMetricsEndpointServesEveryRanksSeries) {
  REQUIRE_FAKE_WORKER();
  TempDir dir("launch");
  const int port = net::FreePorts(3);  // the pod's, then its two ranks'
  const Pod pod = StartPod(dir, 2, 6, 8, 100000, {}, port);
  std::set<std::string> ranks;
  std::string body;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (ranks.size() < 2 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto got = net::HttpGet("127.0.0.1", port, "/metrics", std::chrono::seconds(2));
    if (!got) continue;
    body = *got;
    ranks.clear();
    for (const auto& s : metrics::ParsePrometheusText(body)) {
      if (s.name == "headroom_worker_step") ranks.insert(s.labels.at("rank"));
    }
  }
  kill(pod.pid, SIGTERM);
  Wait(pod);
  EXPECT_EQ(ranks, (std::set<std::string>{"6", "7"})) << body;
  // One family, one header: a strict Prometheus parser refuses a repeated TYPE line.
  size_t types = 0;
  for (size_t at = 0; (at = body.find("# TYPE headroom_worker_step ", at)) != std::string::npos; ++at) ++types;
  EXPECT_EQ(types, 1u) << body;
}

TEST(PodLauncher, MergeKeepsEachFamilyTogether) {
  const std::string a = "# HELP x help x\n# TYPE x gauge\nx{rank=\"0\"} 1\n# HELP y help y\n# TYPE y counter\ny 2\n";
  const std::string b = "# HELP x help x\n# TYPE x gauge\nx{rank=\"1\"} 3\n# HELP y help y\n# TYPE y counter\ny 4\n";
  EXPECT_EQ(MergeExpositions({a, b}), "# HELP x help x\n# TYPE x gauge\nx{rank=\"0\"} 1\nx{rank=\"1\"} 3\n"
                                      "# HELP y help y\n# TYPE y counter\ny 2\ny 4\n");
}

TEST(PodLauncher, RefusesABadCommandLine) {
  LaunchOptions o;
  std::ostringstream err;
  const char* args[] = {"launch", "--ranks-per-pod", "0", "--", "x"};
  EXPECT_FALSE(ParseLaunchArguments(5, const_cast<char**>(args), o, err));
  EXPECT_NE(err.str().find("--ranks-per-pod"), std::string::npos) << err.str();
}

}  // namespace
}  // namespace headroom::launch
