// What a rerun, a refusal and a second run do with the real headroom and headroom-worker
// binaries and the example text job (configs/addition-text-qwen2.yaml, a few steps):
//   - a run killed during its end-of-job export (every step's checkpoint saved, the export
//     half-written) is completed by a rerun that retrains nothing and rewrites no checkpoint;
//   - a dataset with a malformed line in its middle: the first failure line `headroom run`
//     prints, and the summary's "error", name the file and line;
//   - a second `headroom run` on a work directory in use is refused, naming the first's pid.
// Each test skips, saying why, without the binaries or the example model's weights.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "tests/e2e/example_job_runs.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::e2e {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(LifecycleE2E, ARunKilledDuringItsExportIsCompletedByARerunThatRetrainsNothing) {
  if (const std::string why = Unrunnable(); !why.empty()) GTEST_SKIP() << why;
  headroom::testing::TempDir dir("headroom-lifecycle");
  const std::string job = WriteJob(dir.path(), 3, Train());
  const std::string workdir = dir.path() + "/run";
  const RunResult first = HeadroomRun(job, workdir);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // What a kill -9 during the export leaves: the export half-written, none in place.
  const std::string checkpoints = workdir + "/checkpoints";
  fs::remove_all(checkpoints + "/hf-export");
  fs::create_directories(checkpoints + "/hf-export.partial");
  std::ofstream(checkpoints + "/hf-export.partial/model.safetensors") << "truncated";
  const auto before = Checkpoints(checkpoints);
  ASSERT_FALSE(before.empty());

  const RunResult rerun = HeadroomRun(job, workdir);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  EXPECT_NE(rerun.output.find("already finished (checkpoint at step 3, kept); writing its missing export"),
            std::string::npos)
      << rerun.output;
  EXPECT_EQ(rerun.output.find("starting over"), std::string::npos) << rerun.output;
  EXPECT_EQ(Checkpoints(checkpoints), before) << "no checkpoint removed or rewritten";
  EXPECT_TRUE(fs::exists(checkpoints + "/hf-export/config.json")) << rerun.output;
  EXPECT_TRUE(fs::exists(checkpoints + "/hf-export/model.safetensors")) << rerun.output;
  EXPECT_EQ(ReadAll(workdir + "/gen-0001/rank-0.log").find("\"step\""), std::string::npos) << "no step was rerun";

  // And once complete, a rerun runs nothing and says where the results are.
  const RunResult again = HeadroomRun(job, workdir);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("already finished"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("nothing to train"), std::string::npos) << again.output;
}

TEST(LifecycleE2E, AMalformedLineInTheDatasetIsTheFirstFailureLineAndTheSummarysError) {
  if (const std::string why = Unrunnable(); !why.empty()) GTEST_SKIP() << why;
  headroom::testing::TempDir dir("headroom-lifecycle");
  // Three good lines, then one that is not JSON.
  std::istringstream good(ReadAll(Train()));
  const std::string train = dir.path() + "/train.jsonl";
  {
    std::ofstream out(train);
    std::string line;
    for (int i = 0; i < 3 && std::getline(good, line); ++i) out << line << "\n";
    out << "{\"question\": \"What is 1 + 1?\", \"answer\": \n";
    while (std::getline(good, line)) out << line << "\n";
  }
  const std::string workdir = dir.path() + "/run";
  const RunResult r = HeadroomRun(WriteJob(dir.path(), 3, train), workdir, "--summary " + dir.path() + "/summary.json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const size_t fail = r.output.find("fail: ");
  ASSERT_NE(fail, std::string::npos) << r.output;
  const std::string line = r.output.substr(fail, r.output.find('\n', fail) - fail);
  const std::string cause = "spec.task.dataset.path: " + train + ":4: invalid JSON";
  EXPECT_EQ(line.rfind("fail: " + cause, 0), 0u) << line;
  const nlohmann::json summary = nlohmann::json::parse(ReadAll(dir.path() + "/summary.json"));
  EXPECT_EQ(summary["error"].get<std::string>().rfind(cause, 0), 0u) << summary.dump();
  EXPECT_EQ(summary["oom_kills"], 0);
}

TEST(LifecycleE2E, ASecondRunOnAWorkdirInUseIsRefusedNamingTheFirstsPid) {
  if (const std::string why = Unrunnable(); !why.empty()) GTEST_SKIP() << why;
  headroom::testing::TempDir dir("headroom-lifecycle");
  const std::string job = WriteJob(dir.path(), 200, Train());
  const std::string workdir = dir.path() + "/run";
  const pid_t first = fork();
  ASSERT_GE(first, 0);
  if (first == 0) {
    const std::string out = workdir + "-first.out";
    freopen(out.c_str(), "w", stdout);
    execl((kBin + "/headroom").c_str(), "headroom", "run", job.c_str(), "--workdir", workdir.c_str(), nullptr);
    _exit(127);
  }
  // The first run holds the lock once it has written its pid there.
  const std::string lock = workdir + "/run.lock";
  for (int i = 0; i < 600 && ReadAll(lock).find(std::to_string(first)) == std::string::npos; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(ReadAll(lock).find(std::to_string(first)), std::string::npos);

  const RunResult second = HeadroomRun(job, workdir);
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_NE(second.output.find(workdir + " is in use by another headroom run (pid " + std::to_string(first) + ")"),
            std::string::npos)
      << second.output;
  kill(first, SIGINT);  // the first drains to a checkpoint
  int status = 0;
  waitpid(first, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 130 || WEXITSTATUS(status) == 0))
      << ReadAll(workdir + "-first.out");
}

}  // namespace
}  // namespace headroom::e2e
