// The real headroom-worker binary as 2 processes on loopback (Gloo): a finished run, a
// SIGTERM to one rank draining both at the same step with 75, and a peer killed mid-run
// ending the survivor with a non-zero exit within a bounded time instead of a hang.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/worker/helpers/multirank.h"

extern char** environ;

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class RunWorkerMultirankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("headroom-multirank-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    job_ = (dir_ / "job.yaml").string();
  }
  void TearDown() override {
    for (pid_t p : pids_) {
      if (p > 0) ::kill(p, SIGKILL), ::waitpid(p, nullptr, 0);
    }
    fs::remove_all(dir_);
  }

  void WriteJob(int steps) {
    std::ofstream(job_) << "apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: multirank}\n"
                           "spec:\n  workers: 2\n  resources: {cpu: \"1\", memory: 2Gi}\n"
                           "  model: {preset: tiny}\n  task: {name: reverse, digits: 2, seed: 1}\n"
                           "  grpo: {steps: "
                        << steps
                        << ", promptsPerStep: 4, groupSize: 4, maxPromptLength: 4,"
                           " maxResponseLength: 4, microBatchSize: 16, learningRate: 0.003, klCoef: 0.0}\n"
                           "  sharding: {stage: 0}\n  memoryGuard: {enabled: false}\n";
  }

  std::string LogPath(int rank) const { return (dir_ / ("steps-" + std::to_string(rank) + ".jsonl")).string(); }
  size_t LogLines(int rank) const {
    std::ifstream in(LogPath(rank));
    size_t n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }

  void Start(int world) {
    const int port = headroom::testing::FreePort();
    const std::string bin = std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-worker";
    for (int r = 0; r < world; ++r) {
      std::vector<std::string> env_strings = {
          "RANK=" + std::to_string(r),
          "WORLD_SIZE=" + std::to_string(world),
          "MASTER_ADDR=127.0.0.1",
          "MASTER_PORT=" + std::to_string(port),
          "HEADROOM_COLLECTIVE_TIMEOUT_SECONDS=10",
          "HEADROOM_RENDEZVOUS_TIMEOUT_SECONDS=20",
          "HEADROOM_TERMINATION_LOG=" + (dir_ / ("term-" + std::to_string(r))).string()};
      std::vector<std::string> arg_strings = {bin, "--job", job_, "--log", LogPath(r), "--metrics-port", "0"};
      std::vector<char*> env, args;
      for (auto& s : env_strings) env.push_back(s.data());
      env.push_back(nullptr);
      for (auto& s : arg_strings) args.push_back(s.data());
      args.push_back(nullptr);
      pid_t pid = 0;
      ASSERT_EQ(::posix_spawn(&pid, bin.c_str(), nullptr, nullptr, args.data(), env.data()), 0) << bin;
      pids_.push_back(pid);
    }
  }

  // Exit code of rank r (-signal when killed), or -1000 past the deadline.
  int Wait(int r, std::chrono::seconds deadline) {
    const auto until = Clock::now() + deadline;
    while (Clock::now() < until) {
      int status = 0;
      if (::waitpid(pids_[r], &status, WNOHANG) == pids_[r]) {
        pids_[r] = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1000;
  }

  bool WaitForLines(size_t n, std::chrono::seconds deadline) {
    const auto until = Clock::now() + deadline;
    while (Clock::now() < until) {
      if (LogLines(0) >= n && LogLines(1) >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  fs::path dir_;
  std::string job_;
  std::vector<pid_t> pids_;
};

TEST_F(RunWorkerMultirankTest, TwoRanksFinishTogether) {
  WriteJob(3);
  Start(2);
  EXPECT_EQ(Wait(0, std::chrono::seconds(60)), 0);
  EXPECT_EQ(Wait(1, std::chrono::seconds(10)), 0);
  EXPECT_EQ(LogLines(0), 3u);
  EXPECT_EQ(LogLines(1), 3u);
}

TEST_F(RunWorkerMultirankTest, SigtermToOneRankDrainsBothAtTheSameStep) {
  WriteJob(500);
  Start(2);
  ASSERT_TRUE(WaitForLines(1, std::chrono::seconds(60)));
  ::kill(pids_[1], SIGTERM);
  EXPECT_EQ(Wait(0, std::chrono::seconds(30)), 75);
  EXPECT_EQ(Wait(1, std::chrono::seconds(10)), 75);
  EXPECT_EQ(LogLines(0), LogLines(1)) << "ranks left at different steps";
  EXPECT_LT(LogLines(0), 500u);
}

TEST_F(RunWorkerMultirankTest, KilledPeerEndsTheSurvivorQuickly) {
  WriteJob(500);
  Start(2);
  ASSERT_TRUE(WaitForLines(1, std::chrono::seconds(60)));
  ::kill(pids_[1], SIGKILL);
  EXPECT_EQ(Wait(1, std::chrono::seconds(10)), -SIGKILL);
  const auto start = Clock::now();
  const int code = Wait(0, std::chrono::seconds(30));
  EXPECT_NE(code, -1000) << "survivor still running 30 s after its peer died";
  EXPECT_EQ(code, 1);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 25.0);
}

}  // namespace
}  // namespace headroom::worker
