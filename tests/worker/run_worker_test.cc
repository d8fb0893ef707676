// headroom-worker's life in-process: exit codes for an invalid spec (2), a rank outside
// the world (1), a finished run (0, one log line per step), a real SIGTERM drained at a
// step boundary (75), and the memory guard stopping a leaking run (76, decision JSON in
// the termination message).
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/memory/host_memory.h"
#include "core/protocol/environment.h"
#include "core/protocol/exit_codes.h"
#include "core/protocol/termination_message.h"
#include "tests/worker/helpers/example_text_task.h"
#include "tests/worker/helpers/open_counter.h"
#include "worker/train/run_worker.h"
#include "worker/train/stop_request.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class RunWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("headroom-run-worker-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    ClearStopRequest();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string WriteJob(const std::string& extra_spec, int steps = 2, const std::string& memory = "2Gi") {
    const auto path = dir_ / "job.yaml";
    std::ofstream(path) << "apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: test-job}\n"
                           "spec:\n  workers: 1\n  resources: {cpu: \"2\", memory: "
                        << memory
                        << "}\n"
                           "  model: {preset: tiny}\n  task: {name: reverse, digits: 2, seed: 1}\n"
                           "  grpo: {steps: "
                        << steps
                        << ", promptsPerStep: 4, groupSize: 4, maxPromptLength: 4,"
                           " maxResponseLength: 4, microBatchSize: 16, learningRate: 0.003, klCoef: 0.0}\n"
                        << extra_spec;
    return path.string();
  }
  WorkerOptions Options(const std::string& job) {
    WorkerOptions o;
    o.job_path = job;
    o.log_path = (dir_ / "steps.jsonl").string();
    o.metrics_port = 0;
    o.metrics_bind = "127.0.0.1";
    return o;
  }
  std::vector<nlohmann::json> LogLines() {
    std::vector<nlohmann::json> out;
    std::ifstream in(dir_ / "steps.jsonl");
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }

  fs::path dir_;
};

TEST_F(RunWorkerTest, InvalidSpecExits2) {
  const auto path = dir_ / "bad.yaml";
  std::ofstream(path) << "apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: bad}\n"
                         "spec:\n  grpo: {groupSize: 1}\n";
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunWorker(Options(path.string())), protocol::kExitInvalidSpec);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("spec.grpo.groupSize"), std::string::npos) << err;
}

// The worker leaves spec.model.path's config.json to its model source, which reads it once
// per process and refuses a bad one as the spec check would: exit 2 naming file and field.
TEST_F(RunWorkerTest, ReadsTheModelsConfigJsonOnceAndRefusesABadOne) {
  fs::create_directories(dir_ / "model");
  std::string job = ReadFile(WriteJob(""));
  job.replace(job.find("{preset: tiny}"), std::string("{preset: tiny}").size(),
              "{path: " + (dir_ / "model").string() + "}");
  std::ofstream(dir_ / "job.yaml") << job;
  const fs::path config = dir_ / "model" / "config.json";
  // A good config.json without the model's other files: read once, then the weights are missing.
  fs::copy_file(fs::path(headroom::testing::ExampleTextModel()) / "config.json", config);
  {
    headroom::testing::OpenCounter config_json(config.string());
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(RunWorker(Options((dir_ / "job.yaml").string())), protocol::kExitInvalidSpec);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(config_json.Opens(), 1) << "config.json read more than once: " << err;
  }
  std::ofstream(config, std::ios::trunc) << R"({"architectures": ["Qwen2ForCausalLM"]})";
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunWorker(Options((dir_ / "job.yaml").string())), protocol::kExitInvalidSpec);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("config.json: vocab_size: required"), std::string::npos) << err;
}

TEST_F(RunWorkerTest, RankOutsideTheWorldIsRefusedClearly) {
  auto o = Options(WriteJob(""));
  o.world_size = 2;
  o.rank = 2;
  EXPECT_EQ(RunWorker(o), protocol::kExitFailure);
}

TEST_F(RunWorkerTest, FinishesAndLogsEveryStep) {
  auto o = Options(WriteJob("  memoryGuard: {enabled: true}\n", 3));
  EXPECT_EQ(RunWorker(o), protocol::kExitFinished);
  auto lines = LogLines();
  ASSERT_EQ(lines.size(), 3u);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["step"].get<int>(), static_cast<int>(i) + 1);
    EXPECT_EQ(lines[i]["tokens"].get<int>(), 16 * (4 + 4));  // 16 sequences x (prompt 4 + response 4)
    EXPECT_GT(lines[i]["host_bytes"].get<int64_t>(), 0);
    EXPECT_GE(lines[i]["host_peak_bytes"].get<int64_t>(), lines[i]["host_bytes"].get<int64_t>());
    EXPECT_GT(lines[i]["host_limit_bytes"].get<int64_t>(), 0);
    EXPECT_EQ(lines[i]["world_size"].get<int>(), 1);
    EXPECT_EQ(lines[i]["guard_action"].get<std::string>(), "none");
  }
  EXPECT_EQ(lines[0]["next_step_tokens"].get<int>(), 128);
  EXPECT_EQ(lines[2]["next_step_tokens"].get<int>(), 0);  // no next step
}

TEST_F(RunWorkerTest, SigtermDrainsAtTheStepBoundary) {
  auto o = Options(WriteJob("", 200));
  auto run = std::async(std::launch::async, [&] { return RunWorker(o); });
  // Wait for the first finished step, then signal the process for real.
  for (int i = 0; i < 600 && LogLines().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_FALSE(LogLines().empty());
  ::kill(::getpid(), SIGTERM);
  EXPECT_EQ(run.get(), protocol::kExitDrained);
  EXPECT_LT(LogLines().size(), 200u);
}

TEST_F(RunWorkerTest, GuardStopsALeakBeforeTheLimitWith76) {
  // A soft limit ~400 MiB above what this process holds now, and a 48 MiB/step leak:
  // the guard must stop the run before the limit, with a restart decision.
  const auto now = memory::HostMemoryProbe().Read();
  if (now.source != "proc" && now.limit_bytes > 0 && now.limit_bytes < now.working_set_bytes + (600LL << 20)) {
    GTEST_SKIP() << "this cgroup's limit is too close to test against";
  }
  if (now.source != "proc" && now.limit_bytes > 0) {
    GTEST_SKIP() << "a cgroup limit applies (" << now.limit_bytes << " bytes); the soft-limit drill needs none";
  }
  const int64_t limit_mib = (now.working_set_bytes >> 20) + 400;
  const auto termination = dir_ / "termination.json";
  ::setenv("HEADROOM_TERMINATION_LOG", termination.c_str(), 1);
  auto o = Options(WriteJob("  memoryGuard: {enabled: true, hostThreshold: 0.9, horizonSteps: 2}\n"
                            "  debug: {hostLeakBytesPerStep: 48Mi}\n",
                            30, std::to_string(limit_mib) + "Mi"));
  EXPECT_EQ(RunWorker(o), protocol::kExitGuardStop);
  ::unsetenv("HEADROOM_TERMINATION_LOG");
  auto lines = LogLines();
  ASSERT_FALSE(lines.empty());
  EXPECT_LT(lines.size(), 30u);
  EXPECT_LT(lines.back()["host_peak_bytes"].get<int64_t>(), limit_mib << 20);
  EXPECT_EQ(lines.back()["guard_action"].get<std::string>(), "restart");
  std::ifstream in(termination);
  std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto decision = nlohmann::json::parse(json);
  EXPECT_EQ(decision["action"], "restart");
  EXPECT_EQ(decision["resource"], "host");
}

TEST_F(RunWorkerTest, GpuOutOfMemoryExits77WithTheAllocatorReport) {
  // The test hook raises what the CUDA caching allocator throws, at step 2, on this CPU
  // worker: the same catch, report and exit as on a GPU.
  const auto termination = dir_ / "termination.json";
  ::setenv(protocol::kTerminationLogEnv, termination.c_str(), 1);
  ::setenv(protocol::kSimulateGpuOomAtStepEnv, "2", 1);
  auto o = Options(WriteJob("", 3));
  o.checkpoint_dir = (dir_ / "checkpoints").string();
  ::testing::internal::CaptureStderr();
  const int code = RunWorker(o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, protocol::kExitGpuOom) << err;
  EXPECT_EQ(LogLines().size(), 1u) << "step 1 finished, step 2 ran out";
  const std::optional<protocol::GpuOomReport> report = protocol::GpuOomReport::FromJson(ReadFile(termination));
  ASSERT_TRUE(report) << ReadFile(termination);
  EXPECT_EQ(report->step, 2);
  EXPECT_EQ(report->device, "cpu");
  EXPECT_EQ(report->requested_bytes, 2LL << 30);
  EXPECT_NE(report->message.find("CUDA out of memory"), std::string::npos) << report->message;
  // What a supervisor shows from the output: the error, not LibTorch's stack trace.
  EXPECT_EQ(err.find("frame #"), std::string::npos) << err;
  EXPECT_NE(protocol::CrashReasonLine(err).find("CUDA out of memory"), std::string::npos) << err;

  // Once per checkpoint directory: the restarted worker resumes and finishes.
  EXPECT_EQ(RunWorker(o), protocol::kExitFinished);
  ::unsetenv(protocol::kSimulateGpuOomAtStepEnv);
  ::unsetenv(protocol::kTerminationLogEnv);
  EXPECT_EQ(LogLines().back()["step"].get<int>(), 3);
}

TEST_F(RunWorkerTest, AFailureLeavesItsReasonAsTheTerminationMessage) {
  const auto termination = dir_ / "termination.txt";
  ::setenv(protocol::kTerminationLogEnv, termination.c_str(), 1);
  ::setenv(protocol::kSimulateGpuOomAtStepEnv, "soon", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunWorker(Options(WriteJob(""))), protocol::kExitFailure);
  ::testing::internal::GetCapturedStderr();
  ::unsetenv(protocol::kSimulateGpuOomAtStepEnv);
  ::unsetenv(protocol::kTerminationLogEnv);
  EXPECT_EQ(protocol::StatedReason(ReadFile(termination)),
            std::string(protocol::kSimulateGpuOomAtStepEnv) + ": must be a step >= 1, got \"soon\"")
      << ReadFile(termination);
}

TEST_F(RunWorkerTest, ReplayingItsStepLogGivesTheWorkersDecisionsStepForStep) {
  // The leak drill of the test above: the worker's guard acts before the limit. Its step
  // log, replayed by `headroom replay` with the same job, must decide what the worker
  // decided at every step.
  const auto now = memory::HostMemoryProbe().Read();
  if (now.source != "proc" && now.limit_bytes > 0) {
    GTEST_SKIP() << "a cgroup limit applies (" << now.limit_bytes << " bytes); the soft-limit drill needs none";
  }
  const std::string headroom = std::string(HEADROOM_BINARY_DIR) + "/bin/headroom";
  ASSERT_EQ(::access(headroom.c_str(), X_OK), 0) << headroom << " is built with this test";
  const int64_t limit_mib = (now.working_set_bytes >> 20) + 400;
  const std::string job = WriteJob("  memoryGuard: {enabled: true, hostThreshold: 0.9, horizonSteps: 2}\n"
                                   "  debug: {hostLeakBytesPerStep: 48Mi}\n",
                                   30, std::to_string(limit_mib) + "Mi");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunWorker(Options(job)), protocol::kExitGuardStop);
  ::testing::internal::GetCapturedStderr();
  const std::vector<nlohmann::json> logged = LogLines();
  ASSERT_GE(logged.size(), 3u);

  const std::string command = headroom + " replay " + (dir_ / "steps.jsonl").string() + " --job " + job;
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  ASSERT_EQ(::pclose(pipe), 0) << command << "\n" << out;
  std::vector<nlohmann::json> replayed;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) replayed.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(replayed.size(), logged.size()) << out;
  int acted = 0;
  for (size_t i = 0; i < logged.size(); ++i) {
    EXPECT_EQ(replayed[i]["step"], logged[i]["step"]);
    EXPECT_EQ(replayed[i]["action"], logged[i]["guard_action"]) << "step " << logged[i]["step"] << ": " << replayed[i];
    acted += logged[i]["guard_action"] != "none";
  }
  EXPECT_EQ(acted, 1) << "the worker stops at its first action";
  EXPECT_EQ(logged.back()["guard_action"], "restart");
}

}  // namespace
}  // namespace headroom::worker
