// A worker killed (SIGKILL) at each named point of the checkpoint and export sequence
// ($HEADROOM_KILL_AT, core/checkpoint/fault_point.h), with the real headroom-worker and
// the example text job at 2 steps with a checkpoint every step; then `headroom run` on the
// same checkpoints. Whatever had finished before the kill is kept and not redone: a kill
// while saving step 2 costs step 2 only (the rerun resumes at step 1 and trains step 2),
// a kill in the end-of-job export costs no step (the rerun only writes the export), and
// nothing half-written (".partial") is left once the rerun is done. A worker killed in its
// first step leaves its "loaded" phase as its termination message (the supervisor's sign
// that the kill was not while loading); one killed later leaves none.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/checkpoint/checkpoint_layout.h"
#include "core/protocol/termination_message.h"
#include "tests/e2e/example_job_runs.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::e2e {
namespace {

namespace fs = std::filesystem;

constexpr int kSigKillExit = 128 + 9;

struct KilledWorker {
  std::string job, workdir, checkpoints;
  RunResult result;
};

// One worker, alone, on WORKDIR/checkpoints (where `headroom run` keeps them), killed at
// `point`.
KilledWorker RunWorkerKilledAt(const std::string& dir, const std::string& point) {
  KilledWorker w;
  w.job = WriteJob(dir, 2, Train());
  w.workdir = dir + "/run";
  w.checkpoints = w.workdir + "/checkpoints";
  fs::create_directories(w.checkpoints);
  w.result = RunCommand(kBin + "/headroom-worker --job " + w.job + " --checkpoint-dir " + w.checkpoints +
                            " --metrics-port 0 --log " + dir + "/killed-worker.log",
                        dir + "/killed-worker.out",
                        "HEADROOM_KILL_AT=" + point + " HEADROOM_TERMINATION_LOG=" + dir + "/termination.txt");
  return w;
}

class KillAtCheckpointPoint : public ::testing::TestWithParam<const char*> {};

TEST_P(KillAtCheckpointPoint, CostsOnlyTheStepBeingSavedAndTheRerunFinishesTheJob) {
  if (const std::string why = Unrunnable(); !why.empty()) GTEST_SKIP() << why;
  headroom::testing::TempDir dir("headroom-kill-at");
  const KilledWorker w = RunWorkerKilledAt(dir.path(), std::string(GetParam()) + "@2");
  ASSERT_EQ(w.result.exit_code, kSigKillExit) << w.result.output;
  EXPECT_EQ(LoggedSteps(dir.path() + "/killed-worker.log").count(1), 1u) << w.result.output;
  EXPECT_EQ(ReadAll(dir.path() + "/termination.txt"), "") << "the loaded phase outlived the first step";
  EXPECT_EQ(checkpoint::LatestCheckpoint(w.checkpoints), fs::path(w.checkpoints) / "step-000001")
      << "`latest` moved to a step whose save was killed";
  const auto step1 = Checkpoints(w.checkpoints + "/step-000001");

  const RunResult rerun = HeadroomRun(w.job, w.workdir);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  EXPECT_NE(rerun.output.find("resuming from the checkpoint at step 1"), std::string::npos) << rerun.output;
  EXPECT_EQ(LoggedSteps(w.workdir + "/gen-0001/rank-0.log"), (std::set<int64_t>{2})) << "only the lost step is redone";
  EXPECT_EQ(Checkpoints(w.checkpoints + "/step-000001"), step1) << "step 1 was rewritten";
  EXPECT_EQ(checkpoint::CompleteSteps(w.checkpoints), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(fs::exists(w.checkpoints + "/hf-export/model.safetensors")) << rerun.output;
  EXPECT_EQ(PartialEntries(w.checkpoints), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(Points, KillAtCheckpointPoint,
                         ::testing::Values("checkpoint_tensors_written", "checkpoint_manifest_written",
                                           "checkpoint_published"));

TEST(KillAtExportPoint, CostsNoStepAndTheRerunOnlyWritesTheExport) {
  if (const std::string why = Unrunnable(); !why.empty()) GTEST_SKIP() << why;
  headroom::testing::TempDir dir("headroom-kill-at");
  const KilledWorker w = RunWorkerKilledAt(dir.path(), "export_written");
  ASSERT_EQ(w.result.exit_code, kSigKillExit) << w.result.output;
  EXPECT_TRUE(fs::exists(w.checkpoints + "/hf-export.partial/config.json")) << "killed before the export was written";
  EXPECT_FALSE(fs::exists(w.checkpoints + "/hf-export"));
  EXPECT_EQ(checkpoint::LatestCheckpoint(w.checkpoints), fs::path(w.checkpoints) / "step-000002");
  const auto before = Checkpoints(w.checkpoints);

  const RunResult rerun = HeadroomRun(w.job, w.workdir);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  EXPECT_NE(rerun.output.find("already finished (checkpoint at step 2, kept); writing its missing export"),
            std::string::npos)
      << rerun.output;
  EXPECT_EQ(LoggedSteps(w.workdir + "/gen-0001/rank-0.log"), std::set<int64_t>{}) << "a finished step was redone";
  EXPECT_EQ(Checkpoints(w.checkpoints), before) << "a checkpoint was removed or rewritten";
  EXPECT_TRUE(fs::exists(w.checkpoints + "/hf-export/model.safetensors")) << rerun.output;
  EXPECT_EQ(PartialEntries(w.checkpoints), std::vector<std::string>{});
}

TEST(KillAtPoint, AKillInTheFirstStepLeavesTheLoadedPhase) {
  if (const std::string why = Unrunnable(); !why.empty()) GTEST_SKIP() << why;
  headroom::testing::TempDir dir("headroom-kill-at");
  const KilledWorker w = RunWorkerKilledAt(dir.path(), "checkpoint_tensors_written@1");
  ASSERT_EQ(w.result.exit_code, kSigKillExit) << w.result.output;
  EXPECT_EQ(protocol::LoadedPhaseNextStep(ReadAll(dir.path() + "/termination.txt")), 1)
      << ReadAll(dir.path() + "/termination.txt");
  EXPECT_EQ(checkpoint::LatestCheckpoint(w.checkpoints), std::nullopt);
}

}  // namespace
}  // namespace headroom::e2e
