// LoRA over ranks: at every ZeRO stage on two Gloo ranks, a LoRA job (KL to the base on,
// two mini-batches per step) ends with the adapters of stage 0 on one rank, up to float
// rounding, and with the frozen base byte-identical to where it started. At stage 3 the
// base is sharded too: each rank holds its shard of the base and no more between steps
// (counted in bytes), one block of it gathered at a time in a step, and the reference
// log-probs (the adapters off) equal a separately loaded base model's. Checkpoints of
// the adapters reshard: 2 ranks at stage 2 or 3 save, 1 rank at stage 0 or 3 resumes.
// LoRA dropout trains at stage 3.
// Each configuration runs as forked children (tests/worker/helpers/multirank.h); rank 0
// writes the adapters and the base as raw fp32 bytes for the parent to compare.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/worker/helpers/fp32_tolerance.h"
#include "tests/worker/helpers/multirank.h"
#include "tests/worker/helpers/sharding_fixture.h"
#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/comm/communicator_factory.h"
#include "worker/grpo/log_probs.h"
#include "worker/model/lora.h"
#include "worker/model/model_source.h"
#include "worker/train/grpo_trainer.h"
#include "worker/train/training_state.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;
using headroom::testing::Describe;
using headroom::testing::Expect;
using headroom::testing::FreePort;
using headroom::testing::RankContext;
using headroom::testing::ReadFloats;
using headroom::testing::RunRanks;
using namespace std::chrono_literals;

constexpr int kSteps = 3;
constexpr double kLearningRate = 1e-2;
// |a - b| <= kAtol + kRtol |b|, as torch::allclose. AdamW moves an element by about the
// learning rate per step whatever its gradient (m / sqrt(v) is about +-1), so runs whose
// gradients differ only in the last bits (the per-rank sum order, OpenBLAS's shape-dependent
// kernels, stage 3's whole last block) stay within a small fraction of one step: ~3e-5 seen
// over 6 AdamW steps, against a tolerance of 1/100 of a step. A wrong gradient (a block
// without its adapters' gradient, a mask not replayed) moves elements by whole steps.
constexpr double kAtol = kLearningRate / 100, kRtol = 1e-4;

spec::TrainingJobSpec Job(int stage, double dropout = 0) {
  spec::TrainingJobSpec spec;
  spec.model.preset = "tiny";
  spec.model.lora.r = 4;
  spec.model.lora.alpha = 8;
  spec.model.lora.target_modules = {"all-linear"};
  spec.model.lora.dropout = dropout;
  spec.task.name = "reverse";
  spec.task.digits = 2;
  spec.task.seed = 3;
  spec.grpo.prompts_per_step = 4;
  spec.grpo.group_size = 4;
  spec.grpo.max_prompt_length = 4;
  spec.grpo.max_response_length = 4;
  spec.grpo.micro_batch_size = 3;
  spec.grpo.updates_per_step = 2;
  spec.grpo.learning_rate = kLearningRate;
  spec.grpo.kl_coef = 0.05;
  spec.sharding.stage = stage;
  return spec;
}

// Where a run starts and what it leaves.
struct Leg {
  int first_step = 0;       // resumes from `checkpoints` when > 0
  int last_step = kSteps;   // exclusive
  bool save = false;        // checkpoints after the last step into `checkpoints`
  std::string checkpoints;  // under the test's directory
  double dropout = 0;       // spec.model.lora.dropout
};

struct Result {
  std::vector<float> base_before, base_after, adapters;
};

// The base's elements per sharding unit of stage 3 (model_shards.h): [0] the outer
// parameters, [1 + l] block l.
std::vector<int64_t> BaseUnits(CausalLM base) {
  std::vector<int64_t> units(static_cast<size_t>(1 + base->layers()), 0);
  for (const auto& [name, p] : base->OrderedParameters())
    units[static_cast<size_t>(1 + base->LayerOfParameter(name))] += p.numel();
  return units;
}

// At stage 3 after a step on `world` ranks: no parameter is gathered, the rank holds
// exactly its shard of each of the base's frozen groups (ceil(n / world) fp32 elements),
// and at its peak no more than that plus the outer group and one block, whole (two blocks
// gathered at once would exceed it).
void ExpectOnlyTheShardOfTheBase(GrpoTrainer& trainer, int world, int step) {
  const std::string at = "step " + std::to_string(step) + ": ";
  for (const auto& [name, p] : trainer.model()->OrderedParameters()) {
    Expect(p.numel() == 0, at + "stage 3 parameter " + name + " still gathered after the step");
  }
  const std::vector<int64_t> units = BaseUnits(ModelSource(Job(3)).LoadPolicy());
  int64_t shard = 0, whole = 0, largest_block = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    shard += (units[u] + world - 1) / world;
    whole += units[u];
    if (u > 0) largest_block = std::max(largest_block, units[u]);
  }
  const int64_t shard_bytes = 4 * shard, whole_bytes = 4 * whole;
  const ShardedBytes held = trainer.shards().ResidentBytes(), peak = trainer.shards().PeakBytes();
  Expect(held.frozen == shard_bytes, at + "the rank holds " + std::to_string(held.frozen) +
                                         " bytes of the base, its shard is " + std::to_string(shard_bytes) +
                                         " (the whole base " + std::to_string(whole_bytes) + ")");
  const int64_t bound = shard_bytes + 4 * (units[0] + world + largest_block + world);
  Expect(peak.frozen <= bound && peak.frozen > shard_bytes,
         at + "the step's peak held " + std::to_string(peak.frozen) + " bytes of the base, between its shard " +
             std::to_string(shard_bytes) + " and the shard with the outer group and one block whole, " +
             std::to_string(bound));
  Expect(world == 1 || shard_bytes < whole_bytes, "a shard of the base is less than the base");
}

// The reference log-probs (the policy with its adapters off) of the stage-3 sharded model
// equal a separately loaded base model's, within the rounding of two fp32 forwards (the
// last block runs over all positions at stage 3): each log-prob is a logit less a
// logsumexp of logits, so twice the logits' tolerance. The policy's own log-probs are
// farther from them than that: the adapters moved.
void ExpectReferenceIsTheBase(GrpoTrainer& trainer) {
  CausalLM model = trainer.model();
  torch::manual_seed(11);
  const int64_t prompt = 4;
  const torch::Tensor sequences = torch::randint(0, model->vocab_size(), {5, prompt + 4}, torch::kInt64);
  torch::Tensor reference, policy;
  trainer.shards().Gather();  // every rank: the forwards gather blocks, collectively
  {
    AdaptersOff base(*model);
    reference = ResponseLogProbsNoGrad(model, sequences, prompt, 1.0, 3);
  }
  policy = ResponseLogProbsNoGrad(model, sequences, prompt, 1.0, 3);
  trainer.shards().Release();
  CausalLM loaded = ModelSource(Job(3)).LoadPolicy();
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = ResponseLogProbsNoGrad(loaded, sequences, prompt, 1.0, 3);
  const double logits = loaded->forward(sequences).abs().max().item<double>();
  const headroom::testing::ForwardSums sums = headroom::testing::SumsOfForward(loaded, sequences.size(1));
  const double tolerance = 2 * headroom::testing::SummationTolerance(logits, sums.terms, sums.depth);
  const auto same = headroom::testing::WithinTolerance(reference, expected, tolerance);
  Expect(static_cast<bool>(same), std::string("reference log-probs at stage 3 vs the loaded base: ") + same.message());
  const double moved = (policy - expected).abs().max().item<double>();
  std::printf("stage 3 reference log-probs vs the loaded base: max difference %.3g, tolerance %.3g; the policy's "
              "differ by %.3g\n",
              (reference - expected).abs().max().item<double>(), tolerance, moved);
  Expect(moved > 10 * tolerance, "the policy's log-probs moved only " + std::to_string(moved) + " from the base's");
}

// Runs `world` ranks at `stage` over `leg`; rank 0 writes the base before and after and the
// adapters after, flattened in model order.
Result Train(const fs::path& dir, int world, int stage, const Leg& leg = {}, bool check_reference = false) {
  const std::string name = std::to_string(world) + "-" + std::to_string(stage) + "-" + std::to_string(leg.first_step) +
                           "-" + std::to_string(leg.last_step) + (leg.dropout > 0 ? "-dropout" : "");
  const fs::path checkpoints = dir / (leg.checkpoints.empty() ? "checkpoints" : leg.checkpoints);
  const fs::path before = dir / (name + ".base0"), after = dir / (name + ".base"), adapters = dir / (name + ".lora");
  const int port = FreePort();
  auto results = RunRanks(
      world,
      [&](const RankContext& ctx) {
    torch::set_num_threads(1);
    auto comm =
        world == 1 ? MakeLocalCommunicator() : MakeCommunicator("gloo", ctx.rank, world, "127.0.0.1", port, 30s);
    GrpoTrainer trainer(Job(stage, leg.dropout), *comm, torch::kCPU);
    // All ranks gather (collective at stage 3); rank 0 writes.
    auto dump = [&](const fs::path& path, bool adapter) {
      trainer.shards().GatherAll();
      if (ctx.rank == 0) {
        std::vector<torch::Tensor> parts;
        for (const auto& [n, p] : trainer.model()->OrderedParameters()) {
          if ((n.find(".lora_") != std::string::npos) == adapter) parts.push_back(p.detach().reshape({-1}).clone());
        }
        headroom::testing::WriteBytes(path.string(), torch::cat(parts));
      }
      trainer.shards().Release();
    };
    if (leg.first_step > 0) {
      auto reader = CheckpointReader::OpenLatest(checkpoints);
      Expect(reader && reader->step() == leg.first_step, "no checkpoint of step " + std::to_string(leg.first_step));
      RestoreTrainingState(*reader, trainer);
    }
    dump(before, false);
    for (int step = leg.first_step; step < leg.last_step; ++step) {
      trainer.shards().ResetPeak();
      const StepResult r = trainer.RunStep(step);
      Expect(std::isfinite(r.loss) && r.grad_norm > 0,
             "step " + std::to_string(step) + ": grad norm " + std::to_string(r.grad_norm));
      if (stage == 3) ExpectOnlyTheShardOfTheBase(trainer, world, step);
    }
    if (leg.save) {
      CheckpointMetadata meta;
      meta.step = leg.last_step;
      CheckpointWriter(checkpoints, *comm).Save(meta, TrainingStateSlices(trainer), CpuRngState());
    }
    dump(after, false);
    dump(adapters, true);
    if (check_reference) ExpectReferenceIsTheBase(trainer);
      },
      180s);
  for (const auto& r : results) EXPECT_TRUE(r.exited && r.exit_code == 0) << name << "\n" << Describe(results);
  return {ReadFloats(before.string()), ReadFloats(after.string()), ReadFloats(adapters.string())};
}

// The largest violation of |a - b| <= kAtol + kRtol |b|, as a multiple of the allowance.
double Worst(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]);
    worst = std::max(worst, d / (kAtol + kRtol * std::abs(static_cast<double>(b[i]))));
  }
  return worst;
}

class LoraShardingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("headroom-lora-sharding-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(LoraShardingTest, EveryStageOnTwoRanksMatchesOneRankAndLeavesTheBase) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const Result reference = Train(dir_, 1, 0);
  if (HasFailure()) return;
  ASSERT_FALSE(reference.adapters.empty());
  // The comparison means something only if training moved the adapters well past it.
  const Result fresh = Train(dir_, 1, 0, {0, 0});
  if (HasFailure()) return;
  ASSERT_EQ(fresh.adapters.size(), reference.adapters.size());
  const double moved = Worst(fresh.adapters, reference.adapters);
  std::printf("stage 0, 1 rank: the adapters moved %.0fx the tolerance\n", moved);
  ASSERT_GT(moved, 10.0) << "the adapters barely moved; the comparison would prove nothing";
  for (int stage : {0, 1, 2, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    const Result r = Train(dir_, 2, stage, {}, /*check_reference=*/stage == 3);
    if (HasFailure()) return;
    ASSERT_EQ(r.adapters.size(), reference.adapters.size());
    ASSERT_EQ(r.base_after.size(), r.base_before.size());
    EXPECT_EQ(std::memcmp(r.base_after.data(), r.base_before.data(), r.base_before.size() * sizeof(float)), 0)
        << "the base changed";
    EXPECT_EQ(r.base_before, reference.base_before) << "every run starts from the same base";
    const double worst = Worst(r.adapters, reference.adapters);
    std::printf("stage %d, 2 ranks: adapters within %.3f of the tolerance of stage 0 on 1 rank\n", stage, worst);
    EXPECT_LE(worst, 1.0) << "stage " << stage << " on 2 ranks vs stage 0 on 1 rank";
  }
}

// LoRA dropout at stage 3 on two ranks trains (each block's recompute replays its mask;
// lora_test.cc checks the gradient): the adapters move from where the run without dropout
// ends, and the base stays byte-identical.
TEST_F(LoraShardingTest, DropoutTrainsAtStageThreeOnTwoRanks) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const Result plain = Train(dir_, 2, 3);
  if (HasFailure()) return;
  Leg leg;
  leg.dropout = 0.1;
  const Result dropped = Train(dir_, 2, 3, leg);
  if (HasFailure()) return;
  ASSERT_EQ(dropped.adapters.size(), plain.adapters.size());
  EXPECT_EQ(dropped.base_after, dropped.base_before) << "the base changed";
  EXPECT_GT(Worst(dropped.adapters, plain.adapters), 1.0) << "dropout changed nothing: were masks drawn at all?";
}

// A reshard: two ranks at stage 2 or 3 save after two steps (the checkpoint holds the
// adapters and their moments only), one rank at stage 0 or 3 resumes for the third, and
// ends where one rank that never stopped does, on the same base.
TEST_F(LoraShardingTest, ACheckpointOfAdaptersReshardsFromTwoRanksToOne) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const Result reference = Train(dir_, 1, 0);
  if (HasFailure()) return;
  struct Case {
    int saved_stage, resumed_stage;
  };
  for (const Case c : {Case{2, 0}, Case{3, 3}}) {
    SCOPED_TRACE("stage " + std::to_string(c.saved_stage) + " on 2 ranks, resumed at stage " +
                 std::to_string(c.resumed_stage) + " on 1");
    const std::string checkpoints = "checkpoints-" + std::to_string(c.saved_stage);
    const Result saved = Train(dir_, 2, c.saved_stage, {0, kSteps - 1, true, checkpoints});
    if (HasFailure()) return;
    const Result resumed = Train(dir_, 1, c.resumed_stage, {kSteps - 1, kSteps, false, checkpoints});
    if (HasFailure()) return;
    ASSERT_EQ(resumed.adapters.size(), reference.adapters.size());
    EXPECT_EQ(resumed.base_after, reference.base_before);
    EXPECT_GT(Worst(saved.adapters, reference.adapters), 1.0) << "two steps are not three: the resume must step";
    const double worst = Worst(resumed.adapters, reference.adapters);
    std::printf("stage %d on 2 ranks, resumed at stage %d on 1: adapters within %.3f of the tolerance\n", c.saved_stage,
                c.resumed_stage, worst);
    EXPECT_LE(worst, 1.0);
  }
}

}  // namespace
}  // namespace headroom::worker
