// Ranks per pod with the real binaries: `headroom run` of configs/reverse-tiny.yaml as 2
// pods x 2 ranks (each pod one launcher in one memory cgroup, the ranks over Gloo),
// stopped after a checkpoint; resumed from it as 1 pod x 2 ranks (the checkpoint
// resharded from 4 ranks to 2), stopped again; and finished as 2 x 2 again (resharded
// back). Skips, saying why, without headroom-worker or memory cgroups.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "core/checkpoint/checkpoint_layout.h"
#include "core/memory/cgroup.h"
#include "core/spec/training_job.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::e2e {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kBin = std::string(HEADROOM_BINARY_DIR) + "/bin";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Unrunnable() {
  for (const char* b : {"headroom", "headroom-worker"}) {
    if (access((kBin + "/" + b).c_str(), X_OK) != 0) return "no " + kBin + "/" + b + " (build the " + b + " target)";
  }
  const std::string why = memory::MemoryCgroup::UnsupportedReason();
  if (!why.empty()) return "no memory cgroup can be created here (" + why + ")";
  return "";
}

struct RunOutcome {
  int exit_code = -1;
  std::string output;
  nlohmann::json summary;
};

// `headroom run JOB --workdir W`; with `stop_after`, SIGTERM once the checkpoint directory
// holds a step at least that far (the run drains to a checkpoint, exit 130).
RunOutcome HeadroomRun(const std::string& job, const std::string& workdir, const std::string& out_dir,
                       std::optional<int64_t> stop_after) {
  const std::string out = out_dir + "/output.txt", summary = out_dir + "/summary.json";
  fs::remove(summary);
  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(out.c_str(), "w", stdout) || dup2(STDOUT_FILENO, STDERR_FILENO) < 0) _exit(126);
    execl((kBin + "/headroom").c_str(), "headroom", "run", job.c_str(), "--workdir", workdir.c_str(), "--summary",
          summary.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  RunOutcome r;
  const auto deadline = Clock::now() + std::chrono::minutes(10);
  bool stopped = false;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "headroom run did not end within 10 minutes";
      break;
    }
    if (stop_after && !stopped &&
        checkpoint::LatestCheckpointStep(workdir + "/checkpoints").value_or(0) >= *stop_after) {
      kill(pid, SIGTERM);
      stopped = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.output = ReadAll(out);
  if (fs::exists(summary)) r.summary = nlohmann::json::parse(ReadAll(summary));
  return r;
}

std::string WriteJob(const std::string& dir, int workers, int ranks_per_pod) {
  spec::ParseResult parsed =
      spec::ParseTrainingJobFile(std::string(HEADROOM_SOURCE_DIR) + "/configs/reverse-tiny.yaml");
  EXPECT_TRUE(parsed.ok());
  spec::TrainingJob job = *parsed.job;
  job.spec.workers = workers;
  job.spec.max_workers = 4;
  job.spec.ranks_per_pod = ranks_per_pod;
  job.spec.grpo.steps = 60;
  job.spec.checkpoint.every_steps = 2;
  job.spec.resources.cpu = "1";
  job.spec.resources.cpu_millis = 1000;
  const std::string path =
      dir + "/reverse-tiny-" + std::to_string(workers) + "x" + std::to_string(ranks_per_pod) + ".yaml";
  std::ofstream(path) << spec::ToYaml(job);
  return path;
}

TEST(RanksPerPodE2E, TwoPodsOfTwoTrainAndTheirCheckpointReshardsToOnePodAndBack) {
  if (const std::string why = Unrunnable(); !why.empty()) GTEST_SKIP() << why;
  testing::TempDir dir("rpp-e2e");
  const std::string workdir = dir.path() + "/run";

  const RunOutcome first = HeadroomRun(WriteJob(dir.path(), 4, 2), workdir, dir.path(), 4);
  ASSERT_EQ(first.exit_code, 130) << first.output;
  const int64_t after_first = checkpoint::LatestCheckpointStep(workdir + "/checkpoints").value_or(0);
  ASSERT_GE(after_first, 4) << first.output;
  // Two launchers, four ranks: each rank's step log in the first generation.
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(fs::exists(workdir + "/gen-0001/rank-" + std::to_string(rank) + ".log")) << rank;
  }

  const RunOutcome second = HeadroomRun(WriteJob(dir.path(), 2, 2), workdir, dir.path(), after_first + 4);
  ASSERT_EQ(second.exit_code, 130) << second.output;
  EXPECT_NE(second.output.find("resuming from the checkpoint at step " + std::to_string(after_first)),
            std::string::npos)
      << second.output;
  const int64_t after_second = checkpoint::LatestCheckpointStep(workdir + "/checkpoints").value_or(0);
  ASSERT_GT(after_second, after_first) << second.output;

  const RunOutcome last = HeadroomRun(WriteJob(dir.path(), 4, 2), workdir, dir.path(), std::nullopt);
  ASSERT_EQ(last.exit_code, 0) << last.output;
  EXPECT_EQ(checkpoint::LatestCheckpointStep(workdir + "/checkpoints").value_or(0), 60) << last.output;
  EXPECT_EQ(last.summary.value("steps", 0), 60) << last.summary.dump();
  EXPECT_EQ(last.summary.value("oom_kills", -1), 0) << last.summary.dump();
  EXPECT_TRUE(std::isfinite(last.summary.value("final_reward", NAN))) << last.summary.dump();
}

}  // namespace
}  // namespace headroom::e2e
