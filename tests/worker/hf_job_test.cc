// A job on a pretrained Hugging Face model (spec.model.path = the tiny Qwen2 fixture) run
// by the real headroom-worker binary, end to end: the step log, checkpoints named by the
// Hugging Face parameter names, the model handed back in Hugging Face layout at the end
// (CHECKPOINT_DIR/hf-export: the fixture's tensor names, dtypes and shapes, and exactly
// the final checkpoint's weights), a drain (75) and a resume matching an uninterrupted run
// bit for bit, a checkpoint resharded 2 ranks -> 1 and 1 -> 2, and a text task resumed
// on another world size reading the next unseen prompts.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/files/remove_tree.h"
#include "core/hf/safetensors.h"
#include "core/net/free_port.h"
#include "core/spec/training_job.h"
#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/comm/communicator.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/train/grpo_trainer.h"
#include "worker/train/training_state.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

fs::path Fixture() { return fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf/qwen2"; }

std::string ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class HfJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("headroom-hf-job-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    files::RemoveTree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (pid_t p : pids_) {
      if (p > 0) ::kill(p, SIGKILL), ::waitpid(p, nullptr, 0);
    }
    files::RemoveTree(dir_);
  }

  // Stage 3 gathers one block at a time by its Hugging Face layer prefix, the layout that
  // differs most from the presets'.
  std::string WriteJob(int steps, int stage = 3, const fs::path& model = Fixture()) {
    const auto path = dir_ / "job.yaml";
    std::ofstream(path) << "apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: hf-job}\n"
                           "spec:\n  workers: 1\n  resources: {cpu: \"1\", memory: 2Gi}\n"
                           "  model: {path: "
                        << model.string()
                        << "}\n"
                           "  task: {name: reverse, digits: 2, seed: 1}\n"
                           "  grpo: {steps: "
                        << steps
                        << ", promptsPerStep: 4, groupSize: 4, maxPromptLength: 4,"
                           " maxResponseLength: 3, microBatchSize: 8, learningRate: 0.01, klCoef: 0.01}\n"
                           "  sharding: {stage: "
                        << stage
                        << "}\n  checkpoint: {everySteps: 2, keep: 10}\n"
                           "  memoryGuard: {enabled: false}\n";
    return path.string();
  }

  void Start(const std::string& job, const fs::path& ckpt, const std::string& log, int world = 1) {
    pids_.clear();
    const int port = net::FreePort();
    const std::string bin = std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-worker";
    for (int r = 0; r < world; ++r) {
      std::vector<std::string> env_strings = {"RANK=" + std::to_string(r),
                                              "WORLD_SIZE=" + std::to_string(world),
                                              "MASTER_ADDR=127.0.0.1",
                                              "MASTER_PORT=" + std::to_string(port),
                                              "HEADROOM_COLLECTIVE_TIMEOUT_SECONDS=20",
                                              "HEADROOM_RENDEZVOUS_TIMEOUT_SECONDS=20",
                                              "HEADROOM_TERMINATION_LOG=" + (dir_ / ("term-" + log)).string()};
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
  // Runs `world` ranks until rank 0 has logged one step, then SIGTERMs rank 0 (every
  // rank stops at the same boundary); returns the exit codes.
  std::vector<int> RunAndDrain(const std::string& job, const fs::path& ckpt, const std::string& log, int world = 1) {
    Start(job, ckpt, log, world);
    const auto until = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < until && Lines(log).empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(pids_[0], SIGTERM);
    std::vector<int> codes;
    for (int r = 0; r < world; ++r) codes.push_back(Wait(r));
    return codes;
  }

  fs::path dir_;
  std::vector<pid_t> pids_;
};

// The fixture model with every parameter replaced by the checkpoint's fp32 master weights.
HfCausalLM ModelFromCheckpoint(const CheckpointReader& reader) {
  HfCausalLM model = LoadHfCausalLM(Fixture().string(), 64);
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : model->OrderedParameters()) {
    const torch::Tensor saved = reader.ReadFull("model." + name);
    if (saved.sizes() != p.sizes()) throw std::runtime_error(name + ": checkpoint shape differs");
    p.copy_(saved);
  }
  return model;
}

TEST_F(HfJobTest, AFinishedJobHandsBackItsFinalCheckpointInHuggingFaceLayout) {
  const int steps = 3;
  Start(WriteJob(steps), dir_ / "ckpt", "log");
  ASSERT_EQ(Wait(0), 0) << ReadText(dir_ / "term-log");

  // The step log: one line per step with docs/design.md's keys.
  const auto lines = Lines("log");
  ASSERT_EQ(lines.size(), static_cast<size_t>(steps));
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["step"].get<int>(), static_cast<int>(i) + 1);
    for (const char* key :
         {"reward_mean", "loss", "kl", "host_bytes", "host_peak_bytes", "host_limit_bytes", "gpu_allocated_bytes",
          "gpu_reserved_bytes", "gpu_peak_bytes", "gpu_total_bytes", "tokens", "step_seconds", "tokens_per_second"}) {
      EXPECT_TRUE(lines[i].contains(key)) << key << " missing in " << lines[i].dump();
    }
    EXPECT_EQ(lines[i]["tokens"].get<int>(), 16 * (4 + 3));
    EXPECT_TRUE(std::isfinite(lines[i]["loss"].get<double>()));
  }

  // Checkpoint tensors are "model." + the Hugging Face names, each with its AdamW moments.
  auto reader = CheckpointReader::OpenLatest(dir_ / "ckpt");
  ASSERT_TRUE(reader.has_value());
  ASSERT_EQ(reader->step(), steps);
  const hf::SafetensorsModel source(Fixture().string());
  std::set<std::string> saved, expected;
  for (const auto& [name, entry] : reader->manifest().tensors) {
    if (name.rfind("model.", 0) == 0) saved.insert(name.substr(6));
  }
  for (const auto& [name, view] : source.tensors()) {
    expected.insert(name);
    EXPECT_TRUE(reader->Has("optim.exp_avg." + name)) << name;
  }
  EXPECT_EQ(saved, expected);

  // The export: beside the steps, complete (no partial left), same header as the source.
  const fs::path exported = dir_ / "ckpt" / "hf-export";
  ASSERT_TRUE(fs::exists(exported / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir_ / "ckpt" / "hf-export.partial"));
  EXPECT_EQ(ReadText(exported / "config.json"), ReadText(Fixture() / "config.json"));
  const hf::SafetensorsModel out(exported.string());
  ASSERT_EQ(out.tensors().size(), source.tensors().size());
  size_t changed = 0;
  for (const auto& [name, view] : source.tensors()) {
    ASSERT_TRUE(out.Has(name)) << name;
    const hf::TensorView& got = out.Get(name);
    EXPECT_EQ(got.dtype, view.dtype) << name;
    EXPECT_EQ(got.shape, view.shape) << name;
    ASSERT_EQ(got.bytes, view.bytes) << name;
    changed += std::memcmp(got.data, view.data, view.bytes) != 0;
  }
  EXPECT_GT(changed, source.tensors().size() / 2) << "the export holds the fine-tuned weights, not the source's";

  // Loaded back, it computes exactly what the final checkpoint does.
  HfCausalLM from_export = LoadHfCausalLM(exported.string(), 64);
  HfCausalLM from_checkpoint = ModelFromCheckpoint(*reader);
  torch::NoGradGuard no_grad;
  const auto ids = torch::tensor({3, 17, 42, 5, 88, 1, 60, 9}, torch::kInt64).unsqueeze(0);
  const auto a = from_export->forward(ids), b = from_checkpoint->forward(ids);
  EXPECT_TRUE(torch::equal(a, b)) << "largest logit difference " << (a - b).abs().max().item<double>();
  const auto original = LoadHfCausalLM(Fixture().string(), 64)->forward(ids);
  EXPECT_FALSE(torch::equal(a, original));
}

// A source whose safetensors hold tensors the model does not train (an older export's
// rotary `inv_freq`, an untied `lm_head.weight` although config.json ties the head) trains,
// and its job's export has exactly the source's tensors: `inv_freq` as it was, the head
// the trained embedding, and loaded back it computes what the final checkpoint does. The
// spec names the model by a relative path; the manifest records it absolute.
TEST_F(HfJobTest, AModelWithUntrainedExtraTensorsTrainsAndExports) {
  const fs::path model = dir_ / "model";
  fs::create_directories(model);
  fs::copy_file(Fixture() / "config.json", model / "config.json");
  const hf::SafetensorsModel fixture(Fixture().string());
  std::vector<hf::TensorToWrite> tensors;
  for (const auto& [name, view] : fixture.tensors())
    tensors.push_back({name, view.dtype, view.shape, view.data, view.bytes});
  const std::vector<float> inv_freq = {1.0f, 0.1f, 0.01f, 0.001f};
  tensors.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {4}, inv_freq.data(), 16});
  const hf::TensorView& embed = fixture.Get("model.embed_tokens.weight");
  const std::vector<float> stale_head(embed.bytes / 4, 0.5f);
  tensors.push_back({"lm_head.weight", embed.dtype, embed.shape, stale_head.data(), embed.bytes});
  hf::WriteSafetensors((model / "model.safetensors").string(), tensors);

  Start(WriteJob(2, 3, fs::relative(model, fs::current_path())), dir_ / "ckpt", "log");
  ASSERT_EQ(Wait(0), 0) << ReadText(dir_ / "term-log");
  auto reader = CheckpointReader::OpenLatest(dir_ / "ckpt");
  ASSERT_TRUE(reader.has_value());
  EXPECT_EQ(fs::path(reader->manifest().extra["model_path"].get<std::string>()),
            fs::absolute(model).lexically_normal());

  const fs::path exported = dir_ / "ckpt" / "hf-export";
  const hf::SafetensorsModel out(exported.string());
  EXPECT_EQ(out.tensors().size(), tensors.size());
  const hf::TensorView& freq = out.Get("model.layers.0.self_attn.rotary_emb.inv_freq");
  EXPECT_EQ(std::memcmp(freq.data, inv_freq.data(), 16), 0);
  const hf::TensorView& head = out.Get("lm_head.weight");
  ASSERT_EQ(head.bytes, embed.bytes);
  EXPECT_EQ(std::memcmp(head.data, out.Get("model.embed_tokens.weight").data, head.bytes), 0);
  HfCausalLM from_export = LoadHfCausalLM(exported.string(), 64);
  HfCausalLM from_checkpoint = ModelFromCheckpoint(*reader);
  torch::NoGradGuard no_grad;
  const auto ids = torch::tensor({3, 17, 42, 5, 88, 1, 60, 9}, torch::kInt64).unsqueeze(0);
  EXPECT_TRUE(torch::equal(from_export->forward(ids), from_checkpoint->forward(ids)));
}

TEST_F(HfJobTest, DrainAndResumeMatchAnUninterruptedRunBitForBit) {
  const int steps = 30;
  const std::string job = WriteJob(steps);
  Start(job, dir_ / "straight", "straight");
  ASSERT_EQ(Wait(0), 0) << ReadText(dir_ / "term-straight");

  ASSERT_EQ(RunAndDrain(job, dir_ / "split", "split"), std::vector<int>{75});
  auto stopped = CheckpointReader::OpenLatest(dir_ / "split");
  ASSERT_TRUE(stopped.has_value());
  const int64_t at = stopped->step();
  ASSERT_EQ(static_cast<int64_t>(Lines("split").size()), at);
  ASSERT_LT(at, steps) << "the run finished before the signal; nothing was resumed";
  EXPECT_FALSE(fs::exists(dir_ / "split" / "hf-export")) << "a drained job is not finished: no export yet";

  Start(job, dir_ / "split", "split");
  ASSERT_EQ(Wait(0), 0) << ReadText(dir_ / "term-split");
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
  ASSERT_EQ(a->manifest().tensors.size(), b->manifest().tensors.size());
  for (const auto& [name, entry] : a->manifest().tensors) {
    ASSERT_TRUE(b->Has(name)) << name;
    EXPECT_TRUE(torch::equal(a->ReadFull(name), b->ReadFull(name))) << name;
  }
  EXPECT_EQ(ReadText(dir_ / "straight" / "hf-export" / "model.safetensors"),
            ReadText(dir_ / "split" / "hf-export" / "model.safetensors"));
}

// An export that cannot be written fails the worker (exit 1, the reason in its
// termination message) and leaves the final checkpoint as it was; the next start resumes
// at the last step, trains nothing and writes the export.
TEST_F(HfJobTest, AFailedExportKeepsTheCheckpointAndARestartWritesIt) {
  const int steps = 2;
  const std::string job = WriteJob(steps);
  fs::create_directories(dir_ / "ckpt" / "hf-export");
  std::ofstream(dir_ / "ckpt" / "hf-export" / "notes.txt") << "not a model\n";  // refused: not written by an export
  Start(job, dir_ / "ckpt", "log");
  ASSERT_EQ(Wait(0), 1);
  const std::string why = ReadText(dir_ / "term-log");
  EXPECT_NE(why.find("hf-export"), std::string::npos) << why;
  EXPECT_NE(why.find("headroom export"), std::string::npos) << why;
  EXPECT_TRUE(fs::exists(dir_ / "ckpt" / "hf-export" / "notes.txt"));
  EXPECT_FALSE(fs::exists(dir_ / "ckpt" / "hf-export.partial"));
  auto kept = CheckpointReader::OpenLatest(dir_ / "ckpt");
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->step(), steps);

  files::RemoveTree(dir_ / "ckpt" / "hf-export");
  Start(job, dir_ / "ckpt", "log");
  ASSERT_EQ(Wait(0), 0) << ReadText(dir_ / "term-log");
  EXPECT_EQ(Lines("log").size(), static_cast<size_t>(steps)) << "the restart trained no further step";
  const hf::SafetensorsModel out((dir_ / "ckpt" / "hf-export").string());
  EXPECT_EQ(out.tensors().size(), hf::SafetensorsModel(Fixture().string()).tensors().size());
}

// World size is not part of the run: a checkpoint of 2 ranks resumes on 1 and one of 1 on
// 2, each continuing at the step after the checkpoint, and the finished job exports.
TEST_F(HfJobTest, ACheckpointReshardsFromTwoRanksToOneAndFromOneToTwo) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const int steps = 30;
  const std::string job = WriteJob(steps);
  struct Case {
    int before, after;
  };
  for (const Case c : {Case{2, 1}, Case{1, 2}}) {
    SCOPED_TRACE(std::to_string(c.before) + " -> " + std::to_string(c.after) + " ranks");
    const fs::path ckpt = dir_ / ("ckpt-" + std::to_string(c.before) + "-" + std::to_string(c.after));
    const std::string first = "first-" + std::to_string(c.before), second = "second-" + std::to_string(c.after);
    ASSERT_EQ(RunAndDrain(job, ckpt, first, c.before), std::vector<int>(c.before, 75));
    auto stopped = CheckpointReader::OpenLatest(ckpt);
    ASSERT_TRUE(stopped.has_value());
    ASSERT_LT(stopped->step(), steps);
    EXPECT_EQ(stopped->manifest().world_size, c.before);
    if (c.after == 1) {
      // One rank loads exactly what two saved: every parameter, moment and the step count.
      const auto parsed = spec::ParseTrainingJobFile(job);
      ASSERT_TRUE(parsed.ok());
      auto comm = MakeLocalCommunicator();
      GrpoTrainer trainer(parsed.job->spec, *comm, torch::kCPU);
      RestoreTrainingState(*stopped, trainer);
      size_t compared = 0;
      for (const TensorSlice& slice : TrainingStateSlices(trainer)) {
        ASSERT_TRUE(stopped->Has(slice.name)) << slice.name;
        const torch::Tensor saved = stopped->ReadFull(slice.name).reshape({-1});
        ASSERT_EQ(slice.offset, 0) << slice.name;
        ASSERT_EQ(slice.data.numel(), saved.numel()) << slice.name;
        EXPECT_TRUE(torch::equal(slice.data.reshape({-1}).to(saved.scalar_type()), saved)) << slice.name;
        ++compared;
      }
      EXPECT_EQ(compared, stopped->manifest().tensors.size());
    }
    Start(job, ckpt, second, c.after);
    for (int r = 0; r < c.after; ++r)
      ASSERT_EQ(Wait(r), 0) << "rank " << r << ": " << ReadText(dir_ / ("term-" + second));
    const auto lines = Lines(second, 0);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines.front()["step"].get<int64_t>(), stopped->step() + 1);
    EXPECT_EQ(lines.front()["world_size"].get<int>(), c.after);
    EXPECT_EQ(lines.back()["step"].get<int>(), steps);
    auto latest = CheckpointReader::OpenLatest(ckpt);
    ASSERT_TRUE(latest.has_value());
    EXPECT_EQ(latest->step(), steps);
    EXPECT_EQ(latest->manifest().world_size, c.after);
    EXPECT_EQ(latest->manifest().tensors.size(), stopped->manifest().tensors.size());
    EXPECT_TRUE(fs::exists(ckpt / "hf-export" / "model.safetensors"));
  }
}

// A text task (the example job's model, tokenizer and dataset) drained on one world size
// and resumed on another continues with the next unseen prompt: the step that reads global
// prompts [s P, (s + 1) P) leaves the dataset at position (s + 1) P whoever reads it.
TEST_F(HfJobTest, ATextJobResumedOnAnotherWorldSizeReadsTheNextUnseenPrompts) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const fs::path example = fs::path(HEADROOM_SOURCE_DIR) / "configs";
  const int steps = 6, per_step = 4, size = 2000;  // configs/data/addition-text/train.jsonl
  const auto job = dir_ / "text-job.yaml";
  std::ofstream(job)
      << "apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: hf-text-job}\n"
         "spec:\n  workers: 1\n  resources: {cpu: \"1\", memory: 2Gi}\n"
         "  model: {path: "
      << (example / "models/qwen2-tiny-addition").string()
      << "}\n"
         "  task:\n    seed: 1\n    dataset: {path: "
      << (example / "data/addition-text/train.jsonl").string()
      << "}\n    prompt: {format: chatml}\n    reward: {name: gsm8k, formatWeight: 0.5}\n"
         "  grpo: {steps: "
      << steps << ", promptsPerStep: " << per_step
      << ", groupSize: 2,"
         " maxPromptLength: 64, maxResponseLength: 4, microBatchSize: 8, learningRate: 0.002, klCoef: 0.0}\n"
         "  sharding: {stage: 3}\n  checkpoint: {everySteps: 100, keep: 2}\n"
         "  memoryGuard: {enabled: false}\n";
  auto position = [&](const nlohmann::json& record) {
    return record["epoch"].get<int64_t>() * size + record["cursor"].get<int64_t>();
  };
  struct Case {
    int before, after;
  };
  for (const Case c : {Case{2, 1}, Case{1, 2}}) {
    SCOPED_TRACE(std::to_string(c.before) + " -> " + std::to_string(c.after) + " ranks");
    const fs::path ckpt = dir_ / ("text-ckpt-" + std::to_string(c.before) + "-" + std::to_string(c.after));
    const std::string first = "text-first-" + std::to_string(c.before),
                      second = "text-second-" + std::to_string(c.after);
    ASSERT_EQ(RunAndDrain(job.string(), ckpt, first, c.before), std::vector<int>(c.before, 75));
    auto stopped = CheckpointReader::OpenLatest(ckpt);
    ASSERT_TRUE(stopped.has_value());
    ASSERT_LT(stopped->step(), steps);
    const nlohmann::json& dataset = stopped->manifest().extra["dataset"];
    EXPECT_EQ(dataset["epoch"].get<int64_t>() * size + dataset["cursor"].get<int64_t>(), stopped->step() * per_step)
        << dataset.dump();
    Start(job.string(), ckpt, second, c.after);
    for (int r = 0; r < c.after; ++r)
      ASSERT_EQ(Wait(r), 0) << "rank " << r << ": " << ReadText(dir_ / ("term-" + second));
    const auto resumed = Lines(second, 0);
    ASSERT_FALSE(resumed.empty());
    EXPECT_EQ(resumed.front()["step"].get<int64_t>(), stopped->step() + 1);
    EXPECT_EQ(resumed.front()["world_size"].get<int>(), c.after);
    for (const auto& log : {Lines(first, 0), resumed}) {
      for (const auto& record : log) {
        EXPECT_EQ(position(record), record["step"].get<int64_t>() * per_step) << record.dump();
      }
    }
    EXPECT_EQ(resumed.back()["step"].get<int>(), steps);
  }
}

}  // namespace
}  // namespace headroom::worker
