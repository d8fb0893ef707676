// `headroom run`'s flows end to end with the fake worker: the guard restarting before the
// limit, the kernel OOM-killing without it, reshard and micro-batch decisions written into
// the next generation's spec, crashes, maxRestarts, Ctrl-C and resume, and the files left
// in the work directory.
#include "local/local_run.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <sstream>
#include <thread>

#include "core/checkpoint/checkpoint_layout.h"
#include "core/memory/cgroup.h"
#include "local/memory_series.h"
#include "local/workdir_lock.h"
#include "tests/local/local_test_support.h"

namespace headroom::local {
namespace {

using namespace std::chrono_literals;
using testing::JobShape;
using testing::MakeJob;
using testing::ReadAll;
using testing::TempDir;

LocalRunOptions Options(const TempDir& dir, std::vector<std::pair<std::string, std::string>> env = {}) {
  LocalRunOptions o;
  o.workdir = dir.path() + "/run";
  o.worker_binary = testing::FakeWorkerPath();
  o.extra_env = std::move(env);
  o.extra_env.emplace_back("FAKE_STEP_SECONDS", "0.02");
  o.poll = 20ms;
  o.drain_grace = 5s;
  return o;
}

bool HaveCgroups() { return memory::MemoryCgroup::UnsupportedReason().empty(); }

TEST(LocalRun, GuardRestartsBeforeTheLimitAndLosesNothing) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(dir);
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 30, .memory = "256Mi", .leak = "16Mi"}), o);
  EXPECT_EQ(r.exit_code, 0) << r.status.message;
  EXPECT_EQ(r.summary.steps, 30);
  EXPECT_GE(r.summary.restarts, 1);
  EXPECT_EQ(r.summary.oom_kills, 0);
  EXPECT_EQ(r.summary.steps_lost, 0);
  ASSERT_FALSE(r.summary.actions.empty());
  EXPECT_EQ(r.summary.actions[0].type, runtime::ActionType::kRestart);
  // The record in the work directory.
  const std::string csv = ReadAll(o.workdir + "/memory.csv");
  EXPECT_EQ(csv.rfind("step,host_bytes,gpu_bytes,host_peak_bytes,gpu_peak_bytes,tokens,host_limit_bytes,"
                      "gpu_limit_bytes\n",
                      0),
            0u);
  EXPECT_GE(std::count(csv.begin(), csv.end(), '\n'), 31);
  const std::string svg = ReadAll(o.workdir + "/memory.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("restart @"), std::string::npos);
  EXPECT_NE(svg.find("host threshold 85%"), std::string::npos);
  nlohmann::json summary = nlohmann::json::parse(ReadAll(o.workdir + "/summary.json"));
  std::vector<std::string> keys;
  for (auto it = summary.begin(); it != summary.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"actions", "final_reward", "oom_kills", "reshards", "restarts", "steps",
                                            "steps_lost", "wall_seconds"}));
  EXPECT_EQ(summary["actions"][0].size(), 3u);  // step, type, reason
}

TEST(LocalRun, WithoutTheGuardTheKernelKillsAndStepsAreLost) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(dir);
  o.guard_enabled = false;
  // No cgroup here: the backend's soft limit plays the kernel.
  if (!HaveCgroups()) o.cgroups = LocalBackendOptions::Cgroups::kOff;
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 24, .memory = "160Mi", .leak = "16Mi", .checkpoint_every = 4}), o);
  EXPECT_EQ(r.exit_code, 0) << r.status.message;
  EXPECT_EQ(r.summary.steps, 24);
  EXPECT_GE(r.summary.oom_kills, 1);
  EXPECT_GT(r.summary.steps_lost, 0);
  ASSERT_FALSE(r.summary.actions.empty());
  EXPECT_EQ(r.summary.actions[0].type, runtime::ActionType::kRestartAfterOOMKill);
  EXPECT_NE(ReadAll(o.workdir + "/gen-0001/job.yaml").find("enabled: false"), std::string::npos);
}

TEST(LocalRun, ReshardDecisionRelaunchesWithMoreWorkers) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(
      dir, {{"FAKE_GUARD_AT_STEP", "3"},
            {"FAKE_GUARD_DECISION",
             R"({"action":"reshard","resource":"host","reason":"optimizer state does not fit","target_workers":2})"}});
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 8}), o);
  EXPECT_EQ(r.exit_code, 0) << r.status.message;
  EXPECT_EQ(r.summary.reshards, 1);
  EXPECT_EQ(r.summary.steps_lost, 0);
  EXPECT_EQ(r.status.workers, 2);
  ASSERT_EQ(r.summary.actions.size(), 1u);
  EXPECT_EQ(r.summary.actions[0].step, 3);
  EXPECT_EQ(r.summary.actions[0].type, runtime::ActionType::kReshard);
  EXPECT_NE(ReadAll(o.workdir + "/gen-0002/job.yaml").find("workers: 2"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(o.workdir + "/gen-0002/rank-1.log"));
}

// Pods of two ranks: a reshard asked for 3 workers gets the nearest whole pods, 4 (2 pods).
TEST(LocalRun, AReshardOfPodsOfTwoRanksChangesThePodCount) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(
      dir, {{"FAKE_GUARD_AT_STEP", "3"},
            {"FAKE_GUARD_DECISION",
             R"({"action":"reshard","resource":"host","reason":"optimizer state does not fit","target_workers":3})"}});
  LocalRunResult r = RunJobLocally(MakeJob({.workers = 2, .steps = 8, .ranks_per_pod = 2}), o);
  EXPECT_EQ(r.exit_code, 0) << r.status.message;
  EXPECT_EQ(r.summary.reshards, 1);
  EXPECT_EQ(r.status.workers, 4);
  EXPECT_NE(ReadAll(o.workdir + "/gen-0002/job.yaml").find("workers: 4"), std::string::npos);
  // Two launchers now: each pod's output beside its first rank's name.
  EXPECT_TRUE(std::filesystem::exists(o.workdir + "/gen-0002/rank-2.out"));
  EXPECT_FALSE(std::filesystem::exists(o.workdir + "/gen-0002/rank-1.out"));
  EXPECT_TRUE(std::filesystem::exists(o.workdir + "/gen-0002/rank-3.log"));
}

// A rank OOM-killed in its pod takes the pod down, and the job restarts from the
// checkpoint exactly as a job of one rank a pod does.
TEST(LocalRun, WithoutTheGuardAPodsOomKillRestartsTheJob) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(dir);
  o.guard_enabled = false;
  if (!HaveCgroups()) o.cgroups = LocalBackendOptions::Cgroups::kOff;
  LocalRunResult r = RunJobLocally(
      MakeJob(
          {.workers = 2, .steps = 24, .memory = "160Mi", .leak = "16Mi", .checkpoint_every = 4, .ranks_per_pod = 2}),
      o);
  EXPECT_EQ(r.exit_code, 0) << r.status.message;
  EXPECT_EQ(r.summary.steps, 24);
  EXPECT_GE(r.summary.oom_kills, 1);
  ASSERT_FALSE(r.summary.actions.empty());
  EXPECT_EQ(r.summary.actions[0].type, runtime::ActionType::kRestartAfterOOMKill);
  // One kill a pod, not one for each of its ranks.
  EXPECT_EQ(r.summary.oom_kills, static_cast<int>(r.summary.actions.size()));
}

TEST(LocalRun, ShrinkMicroBatchDecisionRewritesTheSpec) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(
      dir,
      {{"FAKE_GUARD_AT_STEP", "2"},
       {"FAKE_GUARD_DECISION",
        R"({"action":"shrinkMicroBatch","resource":"gpu","reason":"activation peak","target_micro_batch_size":8})"}});
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 6, .micro_batch = 32}), o);
  EXPECT_EQ(r.exit_code, 0) << r.status.message;
  EXPECT_EQ(r.status.micro_batch_size, 8);
  EXPECT_NE(ReadAll(o.workdir + "/gen-0002/job.yaml").find("microBatchSize: 8"), std::string::npos);
  EXPECT_EQ(r.summary.actions.at(0).type, runtime::ActionType::kShrinkMicroBatch);
}

// The guard's token budget reaches the next generation's spec, the status and the
// summary; the micro-batch's row count is left as it was.
TEST(LocalRun, ShrinkTokenBudgetDecisionRewritesTheSpec) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(
      dir, {{"FAKE_GUARD_AT_STEP", "2"},
            {"FAKE_GUARD_DECISION", R"({"action":"shrinkTokenBudget","resource":"host","reason":"a long prompt next",)"
                                    R"("target_max_tokens_per_micro_batch":56})"}});
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 6, .micro_batch = 32}), o);
  EXPECT_EQ(r.exit_code, 0) << r.status.message;
  const std::string next = ReadAll(o.workdir + "/gen-0002/job.yaml");
  EXPECT_NE(next.find("maxTokensPerMicroBatch: 56"), std::string::npos) << next;
  EXPECT_NE(next.find("microBatchSize: 32"), std::string::npos) << next;
  EXPECT_EQ(r.summary.steps_lost, 0);
  ASSERT_EQ(r.summary.actions.size(), 1u);
  EXPECT_EQ(r.summary.actions.at(0).type, runtime::ActionType::kShrinkTokenBudget);
  EXPECT_NE(r.summary.actions.at(0).reason.find("(maxTokensPerMicroBatch off (448) -> 56)"), std::string::npos)
      << r.summary.actions.at(0).reason;
}

TEST(LocalRun, CrashRestartsFromTheLastCheckpointCountingStepsLost) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(dir, {{"FAKE_CRASH_AT_STEP", "8"}});
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 10, .checkpoint_every = 5}), o);
  EXPECT_EQ(r.exit_code, 0) << r.status.message;
  EXPECT_EQ(r.summary.restarts, 1);
  EXPECT_EQ(r.summary.oom_kills, 0);
  EXPECT_EQ(r.summary.steps_lost, 2);  // steps 6 and 7 were after the checkpoint at 5
  EXPECT_EQ(r.summary.actions.at(0).type, runtime::ActionType::kRestartAfterCrash);
}

TEST(LocalRun, GpuOutOfMemoryIsCountedAsAnOomWithItsReportAndStepsLost) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(dir, {{"HEADROOM_SIMULATE_GPU_OOM_AT_STEP", "8"}});
  std::ostringstream shown;
  o.progress = &shown;
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 10, .checkpoint_every = 5}), o);
  EXPECT_EQ(r.exit_code, 0) << r.status.message;
  EXPECT_EQ(r.summary.steps, 10);
  EXPECT_EQ(r.summary.restarts, 1);
  EXPECT_EQ(r.summary.oom_kills, 1);
  EXPECT_EQ(r.summary.gpu_oom_kills, 1);
  EXPECT_EQ(r.summary.steps_lost, 2);  // steps 6 and 7 were after the checkpoint at 5
  ASSERT_EQ(r.summary.actions.size(), 1u);
  EXPECT_EQ(r.summary.actions[0].type, runtime::ActionType::kRestartAfterGpuOOM);
  const std::string& reason = r.summary.actions[0].reason;
  EXPECT_NE(reason.find("ran out of GPU memory during step 8"), std::string::npos) << reason;
  EXPECT_NE(reason.find("tried to allocate 2 GiB with 70 GiB allocated, 74 GiB reserved of 80 GiB"), std::string::npos)
      << reason;
  const nlohmann::json summary = nlohmann::json::parse(ReadAll(o.workdir + "/summary.json"));
  EXPECT_EQ(summary["oom_kills"], 1);
  EXPECT_EQ(summary["steps_lost"], 2);
  std::ostringstream printed;
  r.summary.Print(printed);
  EXPECT_NE(printed.str().find("OOM kills     1 (1 GPU out of memory)"), std::string::npos) << printed.str();
  EXPECT_NE(printed.str().find("restartAfterGpuOOM: rank 0 ran out of GPU memory"), std::string::npos) << printed.str();
}

TEST(LocalRun, GivesUpAfterMaxRestartsWithANonZeroExit) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  // An empty FAKE_ONCE_DIR makes the crash happen on every attempt.
  LocalRunOptions o = Options(dir, {{"FAKE_CRASH_AT_STEP", "2"}, {"FAKE_ONCE_DIR", ""}});
  o.guard_enabled = false;
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 5, .max_restarts = 2}), o);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.summary.phase, "Failed");
  EXPECT_NE(r.summary.message.find("gave up after 2 restarts"), std::string::npos) << r.summary.message;
  EXPECT_EQ(r.summary.actions.back().type, runtime::ActionType::kFail);
}

// spec.activeDeadlineSeconds holds on one machine too: the workers drain to a checkpoint
// and the run fails, saying why, with nothing relaunched.
TEST(LocalRun, AnActiveDeadlineDrainsAndFailsTheRun) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  spec::TrainingJob job = MakeJob({.steps = 100000});
  job.spec.active_deadline_seconds = 1;
  LocalRunResult r = RunJobLocally(job, Options(dir));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.summary.phase, "Failed");
  EXPECT_NE(r.summary.message.find("spec.activeDeadlineSeconds (1 s) exceeded"), std::string::npos)
      << r.summary.message;
  EXPECT_EQ(r.summary.restarts, 0);
  EXPECT_GT(r.summary.steps, 0);
  EXPECT_LT(r.summary.steps, 100000);
}

TEST(LocalRun, CtrlCDrainsToAResumableCheckpointAndARerunResumes) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(dir);
  std::atomic<int> interrupts{0};
  o.interrupts = &interrupts;
  std::thread presser([&] {
    // Press Ctrl-C once the run is under way.
    for (int i = 0; i < 500 && !std::filesystem::exists(o.workdir + "/checkpoints/latest"); ++i) {
      std::this_thread::sleep_for(10ms);
    }
    interrupts = 1;
  });
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 400, .checkpoint_every = 2}), o);
  presser.join();
  EXPECT_EQ(r.exit_code, 130);
  EXPECT_EQ(r.summary.phase, "Suspended");
  const std::optional<int64_t> at = checkpoint::LatestCheckpointStep(o.workdir + "/checkpoints");
  ASSERT_TRUE(at);
  EXPECT_EQ(*at, r.summary.steps);  // drained at a step boundary: nothing to redo
  EXPECT_LT(*at, 400);

  LocalRunOptions again = Options(dir);
  LocalRunResult resumed = RunJobLocally(MakeJob({.steps = static_cast<int>(*at) + 3}), again);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.status.message;
  const std::string first_log = ReadAll(again.workdir + "/gen-0001/rank-0.log");
  EXPECT_EQ(nlohmann::json::parse(first_log.substr(0, first_log.find('\n')))["step"], *at + 1);
}

}  // namespace
}  // namespace headroom::local

namespace headroom::local {
namespace {

TEST(LocalRun, AWorkerThatCannotStartFailsTheRunWithTheReason) {
  testing::TempDir dir;
  LocalRunOptions o = Options(dir);
  o.worker_binary = dir.path() + "/missing-worker";
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 3}), o);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.summary.phase, "Failed");
  EXPECT_NE(r.summary.message.find("missing-worker"), std::string::npos) << r.summary.message;
  EXPECT_TRUE(std::filesystem::exists(o.workdir + "/summary.json"));
}

}  // namespace
}  // namespace headroom::local

namespace headroom::local {
namespace {

// The state a kill -9 of `headroom run` after the last step leaves (the export it was
// writing half done): a rerun keeps the finished training instead of starting over.
TEST(LocalRun, ARerunOfAFinishedJobKeepsItsCheckpointsAndTrainsNothing) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(dir);
  ASSERT_EQ(RunJobLocally(MakeJob({.steps = 3, .checkpoint_every = 1}), o).exit_code, 0);
  const std::string checkpoints = o.workdir + "/checkpoints";
  std::filesystem::create_directories(checkpoints + "/hf-export.partial");
  std::ostringstream progress;
  o.progress = &progress;
  LocalRunResult rerun = RunJobLocally(MakeJob({.steps = 3, .checkpoint_every = 1}), o);
  EXPECT_EQ(rerun.exit_code, 0) << rerun.status.message;
  EXPECT_EQ(checkpoint::LatestCheckpointStep(checkpoints), std::optional<int64_t>(3));
  EXPECT_TRUE(std::filesystem::exists(checkpoints + "/step-000001")) << "an earlier checkpoint was deleted";
  EXPECT_EQ(ReadAll(o.workdir + "/gen-0001/rank-0.log").find("\"step\""), std::string::npos)
      << "the rerun trained again";
  EXPECT_NE(progress.str().find("already finished (checkpoint at step 3, kept)"), std::string::npos) << progress.str();
  EXPECT_NE(progress.str().find("another --workdir"), std::string::npos) << progress.str();
}

TEST(LocalRun, ASecondRunOnABusyWorkdirIsRefusedNamingTheHolderAndTouchesNothing) {
  TempDir dir;
  LocalRunOptions o = Options(dir);
  std::filesystem::create_directories(o.workdir + "/gen-0001");
  const WorkdirLock held(o.workdir);
  try {
    RunJobLocally(MakeJob({.steps = 3}), o);
    ADD_FAILURE() << "the second run was not refused";
  } catch (const WorkdirBusyError& e) {
    EXPECT_NE(std::string(e.what()).find("pid " + std::to_string(getpid())), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::exists(o.workdir + "/gen-0001")) << "the refused run deleted the holder's logs";
  EXPECT_FALSE(std::filesystem::exists(o.workdir + "/checkpoints"));
}

TEST(LocalRun, TheWorkdirLockIsFreeAgainOnceItsHolderIsGone) {
  TempDir dir;
  { const WorkdirLock first(dir.path()); }
  EXPECT_NO_THROW(WorkdirLock second(dir.path()));
}

}  // namespace
}  // namespace headroom::local

namespace headroom::local {
namespace {

// Intact checkpoints and no `latest` (deleted by hand, lost with its directory entry):
// the run resumes from the newest complete step, never from step 1 over them.
TEST(LocalRun, AMissingLatestResumesFromTheNewestCheckpointInsteadOfStartingOver) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(dir);
  ASSERT_EQ(RunJobLocally(MakeJob({.steps = 18, .checkpoint_every = 5}), o).exit_code, 0);
  const std::string checkpoints = o.workdir + "/checkpoints";
  const std::string step5 = ReadAll(checkpoints + "/step-000005/manifest.json");
  std::filesystem::remove(checkpoints + "/latest");
  std::ostringstream progress;
  o.progress = &progress;
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 20, .checkpoint_every = 5}), o);
  EXPECT_EQ(r.exit_code, 0) << r.status.message;
  const std::string log = ReadAll(o.workdir + "/gen-0001/rank-0.log");
  EXPECT_EQ(nlohmann::json::parse(log.substr(0, log.find('\n')))["step"], 19) << "trained over the checkpoints";
  EXPECT_EQ(ReadAll(checkpoints + "/step-000005/manifest.json"), step5) << "step 5 was overwritten";
  EXPECT_NE(progress.str().find("latest is missing"), std::string::npos) << progress.str();
  EXPECT_NE(progress.str().find("resuming from the checkpoint at step 18"), std::string::npos) << progress.str();
}

// The newest checkpoint fails its checks when the worker resumes: the run says the step
// the worker really resumed from, and why not the newer one.
TEST(LocalRun, AResumeFromAnOlderStepIsReportedWithTheStepResumedFrom) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(dir);
  ASSERT_EQ(RunJobLocally(MakeJob({.steps = 13, .checkpoint_every = 5}), o).exit_code, 0);
  o = Options(dir, {{"FAKE_DAMAGED_STEP", "13"}});
  std::ostringstream progress;
  o.progress = &progress;
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 16, .checkpoint_every = 5}), o);
  EXPECT_EQ(r.exit_code, 0) << r.status.message;
  const std::string said = progress.str();
  EXPECT_EQ(said.find("resuming from the checkpoint at step 13"), std::string::npos) << said;
  EXPECT_NE(said.find("resuming from the checkpoint at step 10 in " + o.workdir +
                      "/checkpoints (not step 13: it "
                      "failed its checks and is set aside as " +
                      o.workdir + "/checkpoints/step-000013.corrupt)"),
            std::string::npos)
      << said;
}

// Two interrupts between two polls (GNU timeout signals the process and its group): the
// stop stands, the workers are killed, the job ends Suspended and is never restarted.
TEST(LocalRun, TwoInterruptsAtOnceStopTheJobAndNeverRestartIt) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(dir);
  std::atomic<int> interrupts{0};
  o.interrupts = &interrupts;
  std::thread presser([&] {
    for (int i = 0; i < 500 && !std::filesystem::exists(o.workdir + "/checkpoints/latest"); ++i) {
      std::this_thread::sleep_for(10ms);
    }
    interrupts = 2;  // both arrive before the run looks
  });
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 400, .checkpoint_every = 2}), o);
  presser.join();
  EXPECT_EQ(r.exit_code, 130) << r.status.message;
  EXPECT_EQ(r.summary.phase, "Suspended") << r.status.message;
  EXPECT_EQ(r.summary.restarts, 0) << r.status.message;
  EXPECT_LT(r.summary.steps, 400);
  EXPECT_FALSE(std::filesystem::exists(o.workdir + "/gen-0002")) << "a generation was launched after the stop";
  EXPECT_NE(r.status.message.find("the workers were killed"), std::string::npos) << r.status.message;
}

// A reason a worker states is kept whole: a 2,000-byte reason of several lines reaches
// the summary and summary.json as the worker wrote it, no line and no byte dropped.
TEST(LocalRun, AWorkersReasonReachesTheSummaryWhole) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  std::string reason = "checkpoint /data/run/checkpoints: no intact step to resume from (2 tried):";
  for (int i = 0; reason.size() < 1900; ++i) {
    reason += "\n  /data/run/checkpoints/step-0000" + std::to_string(10 + i) +
              "/rank-00000.bin has 1024 bytes, the manifest recorded 2048 (truncated)";
  }
  reason += "\nThe damaged steps are kept as step-N.corrupt; to start over, use a new checkpoint directory";
  ASSERT_GE(reason.size(), 2000u);
  LocalRunOptions o = Options(dir, {{"FAKE_REFUSE", reason}, {"FAKE_REFUSE_STATED", "1"}});
  LocalRunResult r = RunJobLocally(MakeJob({.steps = 3}), o);
  EXPECT_EQ(r.summary.phase, "Failed");
  EXPECT_NE(r.summary.message.find(reason), std::string::npos) << r.summary.message;
  const nlohmann::json summary = nlohmann::json::parse(ReadAll(o.workdir + "/summary.json"));
  EXPECT_NE(summary.value("error", "").find(reason), std::string::npos) << summary.dump(2);
  ASSERT_FALSE(summary["actions"].empty());
  EXPECT_NE(summary["actions"].back().value("reason", "").find(reason), std::string::npos) << summary.dump(2);
  std::ostringstream printed;
  r.summary.Print(printed);
  EXPECT_NE(printed.str().find(reason), std::string::npos) << printed.str();
}

// The next run keeps what the last one's workers wrote: their generation folders move to
// earlier-runs/, whole.
TEST(LocalRun, TheNextRunKeepsTheWorkersOutputOfTheLastOne) {
  REQUIRE_FAKE_WORKER();
  TempDir dir;
  LocalRunOptions o = Options(dir, {{"FAKE_REFUSE", "the reason of the first run"}});
  RunJobLocally(MakeJob({.steps = 3}), o);
  const std::string first = ReadAll(o.workdir + "/gen-0001/rank-0.out");
  ASSERT_NE(first.find("the reason of the first run"), std::string::npos) << first;
  RunJobLocally(MakeJob({.steps = 3}), Options(dir));
  EXPECT_EQ(ReadAll(o.workdir + "/earlier-runs/run-1/gen-0001/rank-0.out"), first);
  EXPECT_TRUE(std::filesystem::exists(o.workdir + "/gen-0001/rank-0.log")) << "the second run's own";
}

}  // namespace
}  // namespace headroom::local
