// `headroom run` under real stop signals, as a terminal, `timeout` or a service manager
// sends them: two SIGINTs within a millisecond, SIGINT then SIGTERM, and SIGTERM alone.
// The stop always stands (the job ends Suspended, exit 130, never restarted), and a
// SIGTERM is named as one, not as a Ctrl-C. The workers are the fake worker.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/local/local_test_support.h"

namespace headroom::local {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string HeadroomPath() { return std::string(HEADROOM_BINARY_DIR) + "/bin/headroom"; }

struct Ended {
  int exit_code = -1;
  std::string output;
  nlohmann::json summary;
};

// Runs a 400-step job, sends `signals` (back to back, as fast as kill(2) goes) once its
// first checkpoint exists, and waits for the end.
Ended RunAndSignal(const testing::TempDir& dir, const std::vector<int>& signals) {
  const std::string job = dir.path() + "/job.yaml";
  std::ofstream(job) << spec::ToYaml(testing::MakeJob({.steps = 400, .checkpoint_every = 2}));
  const std::string workdir = dir.path() + "/run";
  const std::string out = dir.path() + "/out.txt";
  const std::string summary = dir.path() + "/summary.json";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("HEADROOM_WORKER_BIN", testing::FakeWorkerPath().c_str(), 1);
    ::setenv("HEADROOM_ALLOW_STALE_BUILD", "1", 1);
    ::setenv("FAKE_STEP_SECONDS", "0.02", 1);
    std::FILE* f = std::freopen(out.c_str(), "w", stdout);
    if (f == nullptr || ::dup2(STDOUT_FILENO, STDERR_FILENO) < 0) ::_exit(126);
    ::execl(HeadroomPath().c_str(), "headroom", "run", job.c_str(), "--workdir", workdir.c_str(), "--summary",
            summary.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 3000 && !fs::exists(workdir + "/checkpoints/latest"); ++i) std::this_thread::sleep_for(10ms);
  for (const int s : signals) ::kill(pid, s);
  Ended ended;
  int status = 0;
  for (int i = 0; i < 6000; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      ended.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  if (ended.exit_code < 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ended.output = testing::ReadAll(out);
  ended.summary = nlohmann::json::parse(testing::ReadAll(summary), nullptr, false);
  return ended;
}

void ExpectStoppedForGood(const Ended& e, const testing::TempDir& dir) {
  EXPECT_EQ(e.exit_code, 130) << e.output;
  ASSERT_TRUE(e.summary.is_object()) << e.output;
  EXPECT_EQ(e.summary.value("restarts", -1), 0) << e.output;
  EXPECT_LT(e.summary.value("steps", 400), 400) << e.output;
  EXPECT_FALSE(fs::exists(dir.path() + "/run/gen-0002")) << "a generation was launched after the stop\n" << e.output;
  EXPECT_NE(e.output.find("Suspended"), std::string::npos) << e.output;
}

class LocalRunSignals : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_FAKE_WORKER();
    ASSERT_EQ(::access(HeadroomPath().c_str(), X_OK), 0) << "build the headroom target: missing " << HeadroomPath();
  }
};

// The kernel keeps at most one pending SIGINT: a second one sent before the first is
// delivered merges into it, so this run sees one or two interrupts. Either way the stop
// must stand; which of drain or kill happened is the next test's business.
TEST_F(LocalRunSignals, TwoSigintsWithinAMillisecondKeepTheStop) {
  testing::TempDir dir;
  ExpectStoppedForGood(RunAndSignal(dir, {SIGINT, SIGINT}), dir);
}

// Two different signals are both delivered, whether or not a poll falls between them:
// the count reaches two for certain, so the workers are killed and the stop still stands.
TEST_F(LocalRunSignals, SigintThenSigtermKillTheWorkersAndKeepTheStop) {
  testing::TempDir dir;
  const Ended e = RunAndSignal(dir, {SIGINT, SIGTERM});
  ExpectStoppedForGood(e, dir);
  EXPECT_NE(e.output.find("killing the workers"), std::string::npos) << e.output;
}

TEST_F(LocalRunSignals, SigtermIsNamedAsSigtermNotCtrlC) {
  testing::TempDir dir;
  const Ended e = RunAndSignal(dir, {SIGTERM});
  ExpectStoppedForGood(e, dir);
  EXPECT_NE(e.output.find("stopped by SIGTERM"), std::string::npos) << e.output;
  EXPECT_EQ(e.output.find("Ctrl-C"), std::string::npos) << e.output;
}

}  // namespace
}  // namespace headroom::local
