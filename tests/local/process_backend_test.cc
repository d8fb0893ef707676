// LocalProcessBackend with the fake worker: real processes, real signals, real memory
// cgroups where this machine allows them (the cgroup cases skip, saying why, where not).
#include "local/local_process_backend.h"

#include <signal.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>
#include <thread>

#include "core/memory/cgroup.h"
#include "core/protocol/exit_codes.h"
#include "tests/local/local_test_support.h"

namespace headroom::local {
namespace {

using namespace std::chrono_literals;
using testing::JobShape;
using testing::MakeJob;
using testing::TempDir;

struct Collected {
  std::vector<protocol::StepRecord> steps;
  runtime::Observation last;
};

// Observes until every rank has ended (or `timeout`), collecting step records.
Collected RunUntilEnded(LocalProcessBackend& backend, std::chrono::milliseconds timeout = 20s,
                        std::function<void(const Collected&)> each = nullptr) {
  Collected c;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    c.last = backend.Observe();
    c.steps.insert(c.steps.end(), c.last.new_steps.begin(), c.last.new_steps.end());
    if (each) each(c);
    bool all = !c.last.ranks.empty();
    for (const auto& r : c.last.ranks) all = all && r.exit.has_value();
    if (all) return c;
    std::this_thread::sleep_for(20ms);
  }
  ADD_FAILURE() << "ranks did not end within " << timeout.count() << " ms";
  return c;
}

LocalBackendOptions Options(const TempDir& dir,
                            LocalBackendOptions::Cgroups cgroups = LocalBackendOptions::Cgroups::kAuto,
                            std::vector<std::pair<std::string, std::string>> env = {}) {
  LocalBackendOptions o;
  o.workdir = dir.path() + "/work";
  o.worker_binary = testing::FakeWorkerPath();
  o.cgroups = cgroups;
  o.extra_env = std::move(env);
  o.extra_env.emplace_back("FAKE_STEP_SECONDS", "0.02");
  return o;
}

TEST(LocalProcessBackend, RunsEveryRankWithRendezvousEnvAndTailsStepLogs) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalProcessBackend backend(Options(dir));
  backend.Launch({1, MakeJob({.workers = 2, .steps = 5}), "{}"});
  Collected c = RunUntilEnded(backend);
  ASSERT_EQ(c.last.ranks.size(), 2u);
  for (const auto& r : c.last.ranks) {
    ASSERT_TRUE(r.exit);
    EXPECT_EQ(r.exit->exit_code, 0) << r.exit->reason;
    EXPECT_EQ(r.exit->reason, "Completed");
  }
  ASSERT_EQ(c.steps.size(), 10u);
  for (const auto& s : c.steps) EXPECT_EQ(s.generation, 1);
  EXPECT_EQ(c.last.checkpoint_step, 5);
  // Each rank saw its own RANK, the shared loopback rendezvous and the soft limit.
  int port = -1;
  for (int rank = 0; rank < 2; ++rank) {
    std::istringstream log(testing::ReadAll(backend.generation_dir(1) + "/rank-" + std::to_string(rank) + ".log"));
    std::string line;
    ASSERT_TRUE(std::getline(log, line));
    nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j["env_rank"], rank);
    EXPECT_EQ(j["env_master_addr"], "127.0.0.1");
    EXPECT_EQ(j["env_memory_limit"], 256LL << 20);
    EXPECT_GT(j["env_master_port"].get<int>(), 0);
    if (port < 0) port = j["env_master_port"];
    EXPECT_EQ(j["env_master_port"], port);
  }
  EXPECT_NE(testing::ReadAll(backend.generation_dir(1) + "/job.yaml").find("workers: 2"), std::string::npos);
}

TEST(LocalProcessBackend, DrainCheckpointsAndExits75) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalProcessBackend backend(Options(dir));
  backend.Launch({1, MakeJob({.workers = 2, .steps = 1000}), "{}"});
  bool drained = false;
  int64_t seen = 0;
  Collected c = RunUntilEnded(backend, 20s, [&](const Collected& c) {
    if (!c.steps.empty()) seen = c.steps.back().step;
    if (!drained && seen >= 3) {
      backend.Drain(5s);
      drained = true;
    }
  });
  ASSERT_TRUE(drained);
  for (const auto& r : c.last.ranks) {
    ASSERT_TRUE(r.exit);
    EXPECT_EQ(r.exit->exit_code, 75);
  }
  ASSERT_TRUE(c.last.checkpoint_step);
  EXPECT_GE(*c.last.checkpoint_step, 3);
  EXPECT_LT(*c.last.checkpoint_step, 1000);
}

// A drain that reaches the workers while they still load (FAKE_LOAD_SECONDS: before their
// stop handler exists) is held until the handler, so they drain (75) instead of dying of
// SIGTERM (143, a crash): one rank per process, and ranks under a pod's launcher.
TEST(LocalProcessBackend, ADrainWhileTheWorkersLoadIsADrainNotACrash) {
  REQUIRE_FAKE_WORKER();
  for (const int ranks_per_pod : {1, 2}) {
    SCOPED_TRACE("ranksPerPod " + std::to_string(ranks_per_pod));
    TempDir dir;
    LocalProcessBackend backend(Options(dir, LocalBackendOptions::Cgroups::kAuto, {{"FAKE_LOAD_SECONDS", "1"}}));
    backend.Launch({1, MakeJob({.workers = 2, .steps = 1000, .ranks_per_pod = ranks_per_pod}), "{}"});
    backend.Drain(10s);
    Collected c = RunUntilEnded(backend, 30s);
    ASSERT_EQ(c.last.ranks.size(), 2u);
    for (const auto& r : c.last.ranks) {
      ASSERT_TRUE(r.exit);
      EXPECT_EQ(r.exit->exit_code, protocol::kExitDrained) << r.rank << ": " << r.exit->reason;
    }
    EXPECT_TRUE(c.steps.empty());
  }
}

TEST(LocalProcessBackend, KillIsAPlainSigkillNotAnOomKill) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalProcessBackend backend(Options(dir));
  backend.Launch({1, MakeJob({.steps = 1000}), "{}"});
  backend.Kill();
  Collected c = RunUntilEnded(backend);
  ASSERT_TRUE(c.last.ranks[0].exit);
  EXPECT_EQ(c.last.ranks[0].exit->exit_code, 137);
  EXPECT_FALSE(c.last.ranks[0].exit->oom_killed);
}

TEST(LocalProcessBackend, KernelOomKillInTheRanksCgroupIsReportedAsOomKilled) {
  REQUIRE_FAKE_WORKER();
  const std::string why = memory::MemoryCgroup::UnsupportedReason();
  if (!why.empty()) GTEST_SKIP() << "no memory cgroup on this machine: " << why;
  TempDir dir;
  LocalProcessBackend backend(Options(dir, LocalBackendOptions::Cgroups::kRequire));
  ASSERT_TRUE(backend.using_cgroups());
  backend.Launch({1, MakeJob({.steps = 100, .memory = "64Mi", .leak = "16Mi", .guard = false}), "{}"});
  Collected c = RunUntilEnded(backend);
  ASSERT_TRUE(c.last.ranks[0].exit);
  EXPECT_EQ(c.last.ranks[0].exit->exit_code, 137);
  EXPECT_TRUE(c.last.ranks[0].exit->oom_killed);
  EXPECT_EQ(c.last.ranks[0].exit->reason, "OOMKilled");
  EXPECT_LT(c.steps.size(), 5u);  // 64 MiB hold at most 3 leaks of 16 MiB plus the program
}

TEST(LocalProcessBackend, RanksPerPodRunUnderOneLauncherPerPod) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalProcessBackend backend(Options(dir));
  backend.Launch({1, MakeJob({.workers = 4, .steps = 5, .ranks_per_pod = 2}), "{}"});
  EXPECT_EQ(backend.live_pids().size(), 2u);  // one process per pod: its launcher
  Collected c = RunUntilEnded(backend);
  ASSERT_EQ(c.last.ranks.size(), 4u);
  for (const auto& r : c.last.ranks) {
    ASSERT_TRUE(r.exit);
    EXPECT_EQ(r.exit->exit_code, 0) << r.rank << ": " << r.exit->reason;
  }
  ASSERT_EQ(c.steps.size(), 20u);
  std::set<int> ranks;
  for (const auto& s : c.steps) ranks.insert(s.rank);
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
  for (int rank = 0; rank < 4; ++rank) {
    std::istringstream log(testing::ReadAll(backend.generation_dir(1) + "/rank-" + std::to_string(rank) + ".log"));
    std::string line;
    ASSERT_TRUE(std::getline(log, line)) << rank;
    EXPECT_EQ(nlohmann::json::parse(line)["env_rank"], rank);
  }
}

// The pod's cgroup holds both its ranks at twice a rank's limit; the kernel kills one of
// them, and the pod (its launcher) goes down with 137, read as an OOM kill for both ranks,
// as a pod of one rank would be.
TEST(LocalProcessBackend, ARankOomKilledInItsPodsCgroupTakesThePodDown) {
  REQUIRE_FAKE_WORKER();
  const std::string why = memory::MemoryCgroup::UnsupportedReason();
  if (!why.empty()) GTEST_SKIP() << "no memory cgroup on this machine: " << why;
  TempDir dir;
  LocalProcessBackend backend(Options(dir, LocalBackendOptions::Cgroups::kRequire));
  ASSERT_TRUE(backend.using_cgroups());
  backend.Launch(
      {1, MakeJob({.workers = 2, .steps = 100, .memory = "64Mi", .leak = "16Mi", .guard = false, .ranks_per_pod = 2}),
       "{}"});
  Collected c = RunUntilEnded(backend);
  ASSERT_EQ(c.last.ranks.size(), 2u);
  // The pod's end on its first rank; the other was stopped with it (one OOM kill, not two).
  ASSERT_TRUE(c.last.ranks[0].exit && c.last.ranks[1].exit);
  EXPECT_EQ(c.last.ranks[0].exit->exit_code, 137);
  EXPECT_TRUE(c.last.ranks[0].exit->oom_killed);
  EXPECT_EQ(c.last.ranks[0].exit->reason, "OOMKilled");
  EXPECT_EQ(c.last.ranks[1].exit->exit_code, 137);
  EXPECT_FALSE(c.last.ranks[1].exit->oom_killed);
  EXPECT_EQ(c.last.ranks[1].exit->reason, "StoppedWithPod");
  // 128 MiB for two ranks hold at most 3 leaks of 16 MiB each plus the programs.
  EXPECT_LT(c.steps.size(), 10u);
}

TEST(LocalProcessBackend, WithoutCgroupsTheLimitIsSoftAndEnforcedByTheBackend) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  std::vector<std::string> notices;
  LocalBackendOptions o = Options(dir, LocalBackendOptions::Cgroups::kOff);
  LocalProcessBackend backend(o);
  EXPECT_FALSE(backend.using_cgroups());
  backend.Launch({1, MakeJob({.steps = 100, .memory = "64Mi", .leak = "16Mi", .guard = false}), "{}"});
  Collected c = RunUntilEnded(backend);
  ASSERT_TRUE(c.last.ranks[0].exit);
  EXPECT_EQ(c.last.ranks[0].exit->exit_code, 137);
  EXPECT_TRUE(c.last.ranks[0].exit->oom_killed);
  EXPECT_EQ(c.last.ranks[0].exit->reason, "SoftLimitExceeded");
  ASSERT_FALSE(c.steps.empty());
  EXPECT_EQ(c.steps.back().host_limit_bytes, 64LL << 20);  // the worker saw the soft limit
}

// Without cgroups a pod's soft limit is ranksPerPod times a rank's, over its launcher's and
// its ranks' resident sets together (each rank alone stays under a rank's limit longer).
TEST(LocalProcessBackend, WithoutCgroupsAPodsRanksShareItsSoftLimit) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalProcessBackend backend(Options(dir, LocalBackendOptions::Cgroups::kOff));
  backend.Launch(
      {1, MakeJob({.workers = 2, .steps = 30, .memory = "64Mi", .leak = "16Mi", .guard = false, .ranks_per_pod = 2}),
       "{}"});
  Collected c = RunUntilEnded(backend);
  ASSERT_EQ(c.last.ranks.size(), 2u);
  ASSERT_TRUE(c.last.ranks[0].exit && c.last.ranks[1].exit);
  EXPECT_EQ(c.last.ranks[0].exit->exit_code, 137);
  EXPECT_TRUE(c.last.ranks[0].exit->oom_killed);
  EXPECT_EQ(c.last.ranks[0].exit->reason, "SoftLimitExceeded");
  EXPECT_EQ(c.last.ranks[1].exit->reason, "StoppedWithPod");
  // Two ranks leaking 16 MiB a step cross 128 MiB within 4 steps each.
  EXPECT_LT(c.steps.size(), 12u);
}

TEST(LocalProcessBackend, DestructorKillsLiveRanksAndRemovesCgroups) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  std::vector<pid_t> pids;
  std::string cgroup_dirs;
  {
    LocalProcessBackend backend(Options(dir));
    backend.Launch({1, MakeJob({.workers = 2, .steps = 100000}), "{}"});
    pids = backend.live_pids();
  }
  ASSERT_EQ(pids.size(), 2u);
  for (pid_t p : pids) EXPECT_NE(kill(p, 0), 0) << "pid " << p << " outlived the backend";
  if (!std::filesystem::is_directory("/sys/fs/cgroup/memory")) return;  // no v1 hierarchy to check
  for (const auto& e : std::filesystem::directory_iterator("/sys/fs/cgroup/memory")) {
    EXPECT_EQ(e.path().filename().string().find("headroom-fake-" + std::to_string(getpid())), std::string::npos)
        << e.path() << " left behind";
  }
}

TEST(LocalProcessBackend, MissingWorkerBinaryIsAClearError) {
  TempDir dir;
  LocalBackendOptions o = Options(dir);
  o.worker_binary = dir.path() + "/no-such-worker";
  LocalProcessBackend backend(o);
  try {
    backend.Launch({1, MakeJob({}), "{}"});
    FAIL() << "Launch did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-worker"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headroom::local
