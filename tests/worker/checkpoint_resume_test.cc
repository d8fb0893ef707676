// The real headroom-worker binary writes checkpoints and resumes from them: periodic
// saves (and their size and time in the step log), a drain (SIGTERM -> 75) saving the step it stopped at, a resumed run matching an
// uninterrupted one bit for bit, a checkpoint of another run refused with 2, and a
// 1-rank checkpoint resumed by 2 ranks, and a checkpoint resumed with the memory levers
// switched (activation checkpointing, a token budget, a smaller micro-batch).
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/worker/helpers/multirank.h"
#include "worker/checkpoint/checkpoint_reader.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class CheckpointResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("headroom-ckpt-resume-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (pid_t p : pids_) {
      if (p > 0) ::kill(p, SIGKILL), ::waitpid(p, nullptr, 0);
    }
    fs::remove_all(dir_);
  }

  // `levers`: more spec.grpo fields, e.g. ", activationCheckpointing: true" (a
  // microBatchSize there replaces the 16).
  std::string WriteJob(const std::string& name, int steps, const std::string& lr = "0.003",
                       const std::string& levers = "") {
    const auto path = dir_ / (name + ".yaml");
    std::ofstream(path) << "apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: ckpt}\n"
                           "spec:\n  workers: 1\n  resources: {cpu: \"1\", memory: 2Gi}\n"
                           "  model: {preset: tiny}\n  task: {name: reverse, digits: 2, seed: 1}\n"
                           "  grpo: {steps: "
                        << steps
                        << ", promptsPerStep: 4, groupSize: 4, maxPromptLength: 4,"
                           " maxResponseLength: 4"
                        << (levers.find("microBatchSize") == std::string::npos ? ", microBatchSize: 16" : "")
                        << ", learningRate: " << lr << ", klCoef: 0.0" << levers
                        << "}\n"
                           "  sharding: {stage: 0}\n  checkpoint: {everySteps: 2, keep: 10}\n"
                           "  memoryGuard: {enabled: false}\n";
    return path.string();
  }

  // Starts `world` ranks of the worker on `job` with checkpoints in `ckpt`, logs in `log`-<rank>.
  void Start(const std::string& job, const fs::path& ckpt, const std::string& log, int world = 1) {
    pids_.clear();
    const int port = headroom::testing::FreePort();
    const std::string bin = std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-worker";
    for (int r = 0; r < world; ++r) {
      std::vector<std::string> env_strings = {"RANK=" + std::to_string(r),
                                              "WORLD_SIZE=" + std::to_string(world),
                                              "MASTER_ADDR=127.0.0.1",
                                              "MASTER_PORT=" + std::to_string(port),
                                              "HEADROOM_COLLECTIVE_TIMEOUT_SECONDS=20",
                                              "HEADROOM_RENDEZVOUS_TIMEOUT_SECONDS=20"};
      std::vector<std::string> arg_strings = {
          bin, "--job", job, "--checkpoint-dir", ckpt.string(), "--log", LogPath(log, r), "--metrics-port", "-1"};
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
  std::string LogPath(const std::string& log, int rank) const {
    return (dir_ / (log + "-" + std::to_string(rank) + ".jsonl")).string();
  }
  std::vector<nlohmann::json> Lines(const std::string& log, int rank = 0) const {
    std::vector<nlohmann::json> out;
    std::ifstream in(LogPath(log, rank));
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  // Exit code of rank r (-signal when killed), or -1000 past 120 s.
  int Wait(int r) {
    const auto until = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < until) {
      int status = 0;
      if (::waitpid(pids_[r], &status, WNOHANG) == pids_[r]) {
        pids_[r] = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1000;
  }
  // Runs rank 0 until it has logged one step, then SIGTERMs it; returns its exit code.
  int RunAndDrain(const std::string& job, const fs::path& ckpt, const std::string& log) {
    Start(job, ckpt, log);
    const auto until = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < until && Lines(log).empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(pids_[0], SIGTERM);
    return Wait(0);
  }

  fs::path dir_;
  std::vector<pid_t> pids_;
};

TEST_F(CheckpointResumeTest, SavesEveryStepsAndAtTheEnd) {
  Start(WriteJob("job", 5), dir_ / "ckpt", "log");
  ASSERT_EQ(Wait(0), 0);
  for (const char* step : {"step-000002", "step-000004", "step-000005"}) {
    EXPECT_TRUE(fs::exists(dir_ / "ckpt" / step / "manifest.json")) << step;
  }
  auto latest = CheckpointReader::OpenLatest(dir_ / "ckpt");
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step(), 5);
  EXPECT_EQ(latest->manifest().data_cursor["next_step"].get<int>(), 6);
  int params = 0;
  int64_t elements = 0;
  for (const auto& [name, entry] : latest->manifest().tensors) {
    if (name.rfind("model.", 0) != 0) continue;
    ++params;
    int64_t numel = 1;
    for (int64_t d : entry.shape) numel *= d;
    elements += numel;
    const std::string param = name.substr(6);
    EXPECT_TRUE(latest->Has("optim.exp_avg." + param)) << param;
    EXPECT_TRUE(latest->Has("optim.exp_avg_sq." + param)) << param;
  }
  EXPECT_GT(params, 0);
  ASSERT_TRUE(latest->Has("optim.step"));
  EXPECT_EQ(latest->ReadFull("optim.step").item<int64_t>(), 5);  // one AdamW step per GRPO step
  // The step log says which steps saved, how big and how long.
  const auto lines = Lines("log");
  ASSERT_EQ(lines.size(), 5u);
  for (const auto& line : lines) {
    const int step = line["step"].get<int>();
    const bool saved = step == 2 || step == 4 || step == 5;
    EXPECT_EQ(line["checkpoint_bytes"].get<int64_t>() > 0, saved) << line.dump();
    EXPECT_EQ(line["checkpoint_seconds"].get<double>() > 0, saved) << line.dump();
  }
  // A checkpoint holds at least the parameters and both moments in fp32.
  EXPECT_GE(lines[4]["checkpoint_bytes"].get<int64_t>(), 3 * 4 * elements);
}

TEST_F(CheckpointResumeTest, DrainSavesAndAResumeMatchesAnUninterruptedRunBitForBit) {
  const int steps = 12;
  const std::string job = WriteJob("job", steps);
  Start(job, dir_ / "straight", "straight");
  ASSERT_EQ(Wait(0), 0);

  ASSERT_EQ(RunAndDrain(job, dir_ / "split", "split"), 75);
  auto stopped = CheckpointReader::OpenLatest(dir_ / "split");
  ASSERT_TRUE(stopped.has_value());
  const int64_t at = stopped->step();
  ASSERT_EQ(static_cast<int64_t>(Lines("split").size()), at);  // the drained step is the last one logged
  ASSERT_LT(at, steps) << "the run finished before the signal; nothing was resumed";

  Start(job, dir_ / "split", "split");
  ASSERT_EQ(Wait(0), 0);
  const auto straight = Lines("straight"), split = Lines("split");
  ASSERT_EQ(split.size(), static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i) {
    EXPECT_EQ(split[i]["step"], i + 1);
    EXPECT_EQ(split[i]["loss"].get<double>(), straight[i]["loss"].get<double>()) << "step " << i + 1;
    EXPECT_EQ(split[i]["reward_mean"].get<double>(), straight[i]["reward_mean"].get<double>()) << "step " << i + 1;
  }
  auto a = CheckpointReader::OpenLatest(dir_ / "straight");
  auto b = CheckpointReader::OpenLatest(dir_ / "split");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->step(), steps);
  ASSERT_EQ(b->step(), steps);
  ASSERT_EQ(a->manifest().tensors.size(), b->manifest().tensors.size());
  for (const auto& [name, entry] : a->manifest().tensors) {
    ASSERT_TRUE(b->Has(name)) << name;
    EXPECT_TRUE(torch::equal(a->ReadFull(name), b->ReadFull(name))) << name;
  }
}

TEST_F(CheckpointResumeTest, AnotherRunsCheckpointIsRefusedWith2) {
  Start(WriteJob("job", 2), dir_ / "ckpt", "first");
  ASSERT_EQ(Wait(0), 0);
  const std::string err_path = (dir_ / "stderr").string();
  const std::string cmd = std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-worker --job " +
                          WriteJob("other", 4, "0.001") + " --checkpoint-dir " + (dir_ / "ckpt").string() +
                          " --metrics-port -1 --log " + LogPath("second", 0) + " 2> " + err_path;
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::ifstream in(err_path);
  const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find("hash"), std::string::npos) << err;
  EXPECT_TRUE(Lines("second").empty());
}

TEST_F(CheckpointResumeTest, TwoRanksResumeAOneRankCheckpoint) {
  const std::string job = WriteJob("job", 4);
  ASSERT_EQ(RunAndDrain(job, dir_ / "ckpt", "one"), 75);
  auto stopped = CheckpointReader::OpenLatest(dir_ / "ckpt");
  ASSERT_TRUE(stopped.has_value());
  ASSERT_LT(stopped->step(), 4);
  Start(job, dir_ / "ckpt", "two", 2);
  EXPECT_EQ(Wait(0), 0);
  EXPECT_EQ(Wait(1), 0);
  const auto lines = Lines("two", 0);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front()["step"].get<int64_t>(), stopped->step() + 1);
  EXPECT_EQ(lines.back()["step"].get<int>(), 4);
  auto latest = CheckpointReader::OpenLatest(dir_ / "ckpt");
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step(), 4);
  EXPECT_EQ(latest->manifest().world_size, 2);
}

// The guard switches levers at a restart (activation checkpointing, a token budget, a
// smaller micro-batch): the run's checkpoint must resume under them, and the reverse, as
// the same run. A checkpoint written with one lever set is resumed with the other: the
// resumed run starts at the saved step, its first step samples what an uninterrupted run
// sampled (the same parameters and sampling state; the rollout is not split by the
// levers, so its rewards are equal bit for bit), its loss is that run's up to fp32
// rounding of a differently grouped sum, and AdamW's step count continues from the saved
// one. The reference is an uninterrupted run with the lever set the checkpoint was
// written with.
TEST_F(CheckpointResumeTest, ACheckpointResumesWithTheMemoryLeversSwitched) {
  const int steps = 6;
  // microBatchSize 16 rows of 4 + 4 tokens is 128 padded tokens; the budget of 32 cuts
  // the update into 4 micro-batches, microBatchSize 5 into 4 of at most 5 rows.
  const std::string off = "";
  const std::string on = ", activationCheckpointing: true, maxTokensPerMicroBatch: 32";
  const std::string rows = ", activationCheckpointing: true, microBatchSize: 5";
  // Uninterrupted runs with each lever set a checkpoint is written with: up to the saved
  // step a drained run is that run bit for bit.
  std::map<std::string, std::vector<nlohmann::json>> straight;
  for (const auto& [name, levers] : {std::pair{"straight-off", off}, std::pair{"straight-on", on}}) {
    Start(WriteJob(name, steps, "0.003", levers), dir_ / name, name);
    ASSERT_EQ(Wait(0), 0) << name;
    straight[levers] = Lines(name);
    ASSERT_EQ(straight[levers].size(), static_cast<size_t>(steps)) << name;
  }
  struct Switch {
    std::string name, before, after;
  };
  for (const Switch& sw : {Switch{"off-on", off, on}, Switch{"on-off", on, off}, Switch{"off-rows", off, rows}}) {
    SCOPED_TRACE(sw.name);
    const fs::path ckpt = dir_ / sw.name;
    const std::string log = sw.name;
    ASSERT_EQ(RunAndDrain(WriteJob(sw.name + "-before", steps, "0.003", sw.before), ckpt, log), 75);
    auto stopped = CheckpointReader::OpenLatest(ckpt);
    ASSERT_TRUE(stopped.has_value());
    const int64_t at = stopped->step();
    ASSERT_LT(at, steps) << "the run finished before the signal; nothing was resumed";
    ASSERT_EQ(stopped->ReadFull("optim.step").item<int64_t>(), at);

    Start(WriteJob(sw.name + "-after", steps, "0.003", sw.after), ckpt, log);
    ASSERT_EQ(Wait(0), 0) << "a lever change was refused as another run";
    const auto lines = Lines(log);
    ASSERT_EQ(lines.size(), static_cast<size_t>(steps));
    const nlohmann::json& first = lines[static_cast<size_t>(at)];
    const nlohmann::json& same = straight[sw.before][static_cast<size_t>(at)];
    EXPECT_EQ(first["step"].get<int64_t>(), at + 1);
    EXPECT_EQ(first["reward_mean"].get<double>(), same["reward_mean"].get<double>());
    // The loss is a mean over at most 16 x 4 response tokens of terms of order |loss|
    // or the advantages (at most sqrt(groupSize - 1) = 1.7 in size): regrouping the sum
    // moves it by a few fp32 roundings per term.
    const double loss = first["loss"].get<double>(), expected = same["loss"].get<double>();
    EXPECT_NEAR(loss, expected, 64 * 4 * std::numeric_limits<float>::epsilon() * (1.0 + std::abs(expected)));
    auto latest = CheckpointReader::OpenLatest(ckpt);
    ASSERT_TRUE(latest.has_value());
    EXPECT_EQ(latest->step(), steps);
    EXPECT_EQ(latest->ReadFull("optim.step").item<int64_t>(), steps);  // continued, not restarted
  }
}

}  // namespace
}  // namespace headroom::worker
