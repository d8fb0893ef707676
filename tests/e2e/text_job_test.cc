// The example real job (configs/addition-text-qwen2.yaml) end to end under `headroom run`:
// a Hugging Face Qwen2 model directory, its own BPE tokenizer, a JSON Lines dataset in
// chatml prompts, the gsm8k reward. Run from the repository root as README.md shows it
// (its paths are relative to that directory), drained with Ctrl-C (SIGINT) partway through
// the first pass over the dataset, then run again:
//   - the drained run exits 130 with a checkpoint of the step it stopped at, whose manifest
//     records the dataset's content hash and the position of the next unseen prompt;
//   - the second run resumes there: its first step reads the next prompts of the same
//     epoch (the step log's epoch and cursor continue where the first run's stopped);
//   - the held-out file is scored on every step a checkpoint is due and the last;
//   - over the whole run the reward rises: the mean of the last fifth of the steps exceeds
//     the first fifth's by a margin;
//   - the skill rises: held-out exact accuracy after the last step exceeds the starting
//     model's (measured before the first step, carried through the drain by the
//     checkpoint) by more than three binomial standard errors of a held-out accuracy;
//   - the resumed run's summary (printed and summary.json) shows that accuracy before ->
//     after with the same held-out questions answered before and after, and names
//     training.svg, which plots every evaluation.
// Skips, saying why, without the binaries or the example model's weights.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/protocol/step_record.h"
#include "core/spec/training_job.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::e2e {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kBin = std::string(HEADROOM_BINARY_DIR) + "/bin";
const std::string kSource = HEADROOM_SOURCE_DIR;
const std::string kJob = "configs/addition-text-qwen2.yaml";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Unrunnable() {
  for (const char* bin : {"headroom", "headroom-worker"}) {
    if (access((kBin + "/" + bin).c_str(), X_OK) != 0) return "no " + kBin + "/" + bin + " (build it)";
  }
  if (!fs::exists(kSource + "/configs/models/qwen2-tiny-addition/model.safetensors")) {
    return "no configs/models/qwen2-tiny-addition/model.safetensors (run configs/models/make_tiny_qwen2.py, then "
           "make_warm_qwen2.py)";
  }
  return "";
}

// `headroom run` of the example job from the repository root, in the background.
class HeadroomRun {
 public:
  HeadroomRun(const std::string& workdir, const std::string& output) {
    const std::string script = "cd '" + kSource + "' && exec '" + kBin + "/headroom' run " + kJob + " --workdir '" +
                               workdir + "' --summary '" + workdir + ".summary.json' > '" + output + "' 2>&1";
    std::vector<std::string> arg_strings = {"/bin/sh", "-c", script};
    std::vector<char*> args;
    for (auto& s : arg_strings) args.push_back(s.data());
    args.push_back(nullptr);
    if (::posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, args.data(), environ) != 0) pid_ = -1;
  }
  ~HeadroomRun() {
    if (pid_ > 0) ::kill(pid_, SIGKILL), ::waitpid(pid_, nullptr, 0);
  }
  bool started() const { return pid_ > 0; }
  void Interrupt() const { ::kill(pid_, SIGINT); }
  // Exit code (128 + signal when killed), or -1 past the deadline.
  int Wait(std::chrono::seconds limit) {
    const auto until = Clock::now() + limit;
    while (Clock::now() < until) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
};

// Rank 0's step records of the run in `workdir` (every generation, in step order).
std::vector<protocol::StepRecord> StepLog(const std::string& workdir) {
  std::vector<fs::path> logs;
  if (fs::exists(workdir)) {
    for (const auto& e : fs::directory_iterator(workdir)) {
      if (e.is_directory() && e.path().filename().string().rfind("gen-", 0) == 0 &&
          fs::exists(e.path() / "rank-0.log")) {
        logs.push_back(e.path() / "rank-0.log");
      }
    }
  }
  std::sort(logs.begin(), logs.end());
  std::vector<protocol::StepRecord> records;
  for (const auto& log : logs) {
    std::istringstream in(ReadAll(log.string()));
    for (std::string line; std::getline(in, line);) {
      if (auto r = protocol::ParseStepLogLine(line)) records.push_back(*r);  // a half-written last line is skipped
    }
  }
  return records;
}

double MeanReward(const std::vector<protocol::StepRecord>& r, size_t from, size_t to) {
  double sum = 0;
  for (size_t i = from; i < to; ++i) sum += r[i].reward_mean;
  return sum / static_cast<double>(to - from);
}

TEST(TextJobE2E, ExampleJobDrainedMidEpochResumesWithTheNextPromptsAndItsRewardRises) {
  if (const std::string why = Unrunnable(); !why.empty()) GTEST_SKIP() << why;
  const spec::ParseResult parsed = spec::ParseTrainingJobFile(kSource + "/" + kJob);
  ASSERT_TRUE(parsed.ok());
  const spec::TrainingJobSpec& spec = parsed.job->spec;
  const int64_t steps = spec.grpo.steps;
  const int64_t per_step = spec.grpo.prompts_per_step;
  headroom::testing::TempDir ws("headroom-e2e-text");
  const std::string workdir = ws.path() + "/run";
  const auto started = Clock::now();

  // 1. Run until about a third of the steps are logged, then Ctrl-C: a drain.
  const int64_t drain_after = steps / 3;
  std::vector<protocol::StepRecord> first;
  {
    HeadroomRun run(workdir, ws.path() + "/first.txt");
    ASSERT_TRUE(run.started());
    const auto until = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < until && static_cast<int64_t>(StepLog(workdir).size()) < drain_after) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    run.Interrupt();
    ASSERT_EQ(run.Wait(std::chrono::seconds(60)), 130) << ReadAll(ws.path() + "/first.txt");
    first = StepLog(workdir);  // the second run clears the generation directories
  }
  ASSERT_GE(static_cast<int64_t>(first.size()), drain_after) << ReadAll(ws.path() + "/first.txt");
  // The starting model was scored before the first step, on the first record.
  const int64_t held_out = 200;  // configs/data/addition-text/heldout.jsonl
  EXPECT_EQ(first.front().heldout_problems_before, held_out);
  EXPECT_GE(first.front().heldout_accuracy_before, 0.0);
  EXPECT_EQ(first.front().heldout_answers_before.size(), static_cast<size_t>(protocol::kHeldOutAnswers));
  for (size_t i = 1; i < first.size(); ++i) EXPECT_EQ(first[i].heldout_accuracy_before, -1) << "step " << first[i].step;
  EXPECT_NE(ReadAll(ws.path() + "/first.txt").find("held-out accuracy"), std::string::npos);
  const protocol::StepRecord& stop = first.back();
  ASSERT_LT(stop.step, steps) << "the run finished before the drain; nothing was resumed";
  const int64_t size = 2000 - stop.prompts_filtered;  // configs/data/addition-text/train.jsonl
  ASSERT_LT(stop.step * per_step, size) << "the drain should fall inside the first pass over the dataset";
  for (const auto& r : first) {
    EXPECT_EQ(r.epoch, r.step * per_step / size) << "step " << r.step;
    EXPECT_EQ(r.cursor, r.step * per_step % size) << "step " << r.step;
  }

  // The drain's checkpoint says which dataset the run read and where the next prompt lies.
  const std::string latest = ReadAll(workdir + "/checkpoints/latest");
  const std::string step_dir = workdir + "/checkpoints/" + latest.substr(0, latest.find_first_of("\r\n"));
  const nlohmann::json manifest = nlohmann::json::parse(ReadAll(step_dir + "/manifest.json"));
  ASSERT_EQ(manifest["step"], stop.step) << step_dir;
  const nlohmann::json& dataset = manifest["extra"]["dataset"];
  EXPECT_EQ(dataset["path"], spec.task.dataset.path) << manifest["extra"].dump();
  EXPECT_EQ(dataset["content_hash"].get<std::string>().size(), 16u) << manifest["extra"].dump();
  EXPECT_EQ(dataset["epoch"], stop.epoch);
  EXPECT_EQ(dataset["cursor"], stop.cursor);

  // 2. Run again: it resumes from the drain's checkpoint and finishes.
  {
    HeadroomRun run(workdir, ws.path() + "/second.txt");
    ASSERT_TRUE(run.started());
    ASSERT_EQ(run.Wait(std::chrono::seconds(240)), 0) << ReadAll(ws.path() + "/second.txt");
  }
  const std::string second_output = ReadAll(ws.path() + "/second.txt");
  EXPECT_NE(second_output.find("resuming from the checkpoint at step " + std::to_string(stop.step)), std::string::npos)
      << second_output;
  const std::vector<protocol::StepRecord> second = StepLog(workdir);
  ASSERT_FALSE(second.empty()) << second_output;
  EXPECT_EQ(second.front().step, stop.step + 1);
  // The first resumed step read the prompts right after the drained run's last ones.
  EXPECT_EQ(second.front().epoch * size + second.front().cursor, stop.epoch * size + stop.cursor + per_step);
  EXPECT_EQ(second.back().step, steps);
  EXPECT_EQ(second.back().epoch, steps * per_step / size);
  EXPECT_EQ(second.back().cursor, steps * per_step % size);

  // The fine-tuned model came back in Hugging Face layout, named in the run's summary.
  const nlohmann::json summary = nlohmann::json::parse(ReadAll(workdir + ".summary.json"));
  ASSERT_TRUE(summary.contains("export")) << summary.dump();
  const std::string exported = summary["export"].get<std::string>();
  EXPECT_TRUE(fs::exists(exported + "/model.safetensors")) << exported;
  EXPECT_EQ(ReadAll(exported + "/config.json"), ReadAll(kSource + "/" + spec.model.path + "/config.json"));

  // The held-out file was answered whenever a checkpoint was due, and at the end.
  for (const auto& r : second) {
    const bool due = r.step % spec.checkpoint.every_steps == 0 || r.step == steps;
    EXPECT_EQ(r.heldout_problems, due ? held_out : 0) << "step " << r.step;
    if (due) EXPECT_GE(r.heldout_reward, 0.0) << "step " << r.step;
    if (due) EXPECT_GE(r.heldout_accuracy, 0.0) << "step " << r.step;
  }
  // The resumed run knew the starting model's score from its checkpoint.
  EXPECT_EQ(second.front().heldout_accuracy_before, first.front().heldout_accuracy_before);

  // The skill rose. Three standard errors of an accuracy over n problems, at its widest
  // (p = 1/2): sqrt(0.25 / n) each; a real rise clears it, noise of the held-out sample
  // does not.
  const double before = first.front().heldout_accuracy_before;
  const double after = second.back().heldout_accuracy;
  const double margin = 3 * std::sqrt(0.25 / static_cast<double>(held_out));
  std::printf("held-out accuracy: %.1f%% -> %.1f%% (%lld problems; margin %.1f points)\n", 100 * before, 100 * after,
              static_cast<long long>(held_out), 100 * margin);
  EXPECT_GT(after, before + margin) << "held-out accuracy did not rise";

  // The summary shows it, before -> after, with answers to the same questions on both sides.
  ASSERT_TRUE(summary.contains("heldout")) << summary.dump();
  const nlohmann::json& h = summary["heldout"];
  EXPECT_EQ(h["problems"], held_out);
  EXPECT_EQ(h["accuracy_before"], before);
  EXPECT_EQ(h["accuracy_after"], after);
  EXPECT_EQ(h["step_after"], steps);
  ASSERT_EQ(h["answers"].size(), static_cast<size_t>(protocol::kHeldOutAnswers)) << h.dump();
  for (const auto& a : h["answers"]) {
    EXPECT_TRUE(a["before"].is_string() && a["after"].is_string()) << a.dump();
    EXPECT_TRUE(a["before_correct"].is_boolean() && a["after_correct"].is_boolean()) << a.dump();
  }
  char line[96];
  std::snprintf(line, sizeof line, "held-out accuracy %.0f%% -> %.0f%% (%lld problems)\n", 100 * before, 100 * after,
                static_cast<long long>(held_out));
  EXPECT_NE(second_output.find(line), std::string::npos) << second_output;
  EXPECT_NE(second_output.find("held-out answers, before -> after training:"), std::string::npos) << second_output;
  EXPECT_NE(second_output.find("training chart " + workdir + "/training.svg"), std::string::npos) << second_output;
  const std::string svg = ReadAll(workdir + "/training.svg");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u) << "training.svg beside memory.svg";
  size_t points = 0;
  for (size_t p = svg.find("held-out accuracy "); p != std::string::npos; p = svg.find("held-out accuracy ", p + 1)) {
    ++points;
  }
  // A point per evaluation this run logged: the starting model's, then each checkpoint's.
  const auto evaluated =
      std::count_if(second.begin(), second.end(), [](const auto& r) { return r.heldout_accuracy >= 0; });
  EXPECT_EQ(points, static_cast<size_t>(evaluated) + 1) << svg;

  // 3. The reward held over the whole run.
  std::vector<protocol::StepRecord> all = first;
  all.insert(all.end(), second.begin(), second.end());
  ASSERT_EQ(static_cast<int64_t>(all.size()), steps);
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i].step, static_cast<int64_t>(i) + 1);
  const size_t fifth = all.size() / 5;
  const double early = MeanReward(all, 0, fifth);
  const double late = MeanReward(all, all.size() - fifth, all.size());
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  std::printf("reward: first fifth %.3f, last fifth %.3f; drained at step %lld; %.1f s\n", early, late,
              static_cast<long long>(stop.step), seconds);
  // The example starts from a warmed-up model, so its training reward starts high (about
  // 0.7) and is a weak signal; the held-out exact accuracy checked above is the one that
  // must rise. The reward must at least not collapse.
  EXPECT_GT(late, early - 0.1) << "the reward fell";
}

}  // namespace
}  // namespace headroom::e2e
