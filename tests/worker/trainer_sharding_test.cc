// Data-parallel GRPO is the same GRPO: the trainer at ZeRO stage 0, 1, 2 and 3 on 1 and
// 2 Gloo ranks ends a few steps (two mini-batches each, micro-batched, KL to a reference
// model on) with the parameters of stage 0 on 1 rank, up to float rounding.
//
// Why that can hold: every sample is keyed by its global index (grpo_trainer.h), so the
// rollouts do not depend on which rank ran them; the loss denominators are global
// (policy_update.h); the gradient is summed over ranks and clipped by the global norm;
// AdamW is element-wise. What may differ is the order of float sums (the per-rank
// gradient sum, the norm), hence a tolerance, set far below how far the parameters move.
//
// Each configuration runs as forked children (tests/worker/helpers/multirank.h); rank 0
// writes the final parameters as raw fp32 bytes, and the parent compares them without
// LibTorch (it must not start a thread pool before it forks again).
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/worker/helpers/multirank.h"
#include "tests/worker/helpers/sharding_fixture.h"
#include "worker/comm/communicator_factory.h"
#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/grpo/micro_batch_rows.h"
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
// |a - b| <= kAtol + kRtol * |b| elementwise, as torch::allclose. Rounding differs more
// than the per-rank sum order: OpenBLAS picks kernels and blockings by matrix shape, so a
// row's forward depends (in its last bits) on how many rows share its micro-batch, and
// the last block computes only response positions at stage 0-2 but whole blocks at
// stage 3. AdamW turns those bits into up to ~3e-5 over the test's 6 steps (netlib's
// shape-independent loops gave ~5e-6). 1e-4 is still 1/30 of one AdamW step (lr 3e-3),
// and the parameters move ~180x it.
constexpr double kAtol = 1e-4;
constexpr double kRtol = 1e-4;

spec::TrainingJobSpec Job(int stage, bool offload, int max_tokens_per_micro_batch = 0) {
  spec::TrainingJobSpec spec;
  spec.model.preset = "tiny";
  spec.task = {"reverse", 2, 3};
  spec.grpo.prompts_per_step = 4;  // 2 per rank at world 2
  spec.grpo.group_size = 4;
  spec.grpo.max_prompt_length = 4;
  spec.grpo.max_response_length = 4;
  spec.grpo.micro_batch_size = 3;  // uneven micro-batches on both world sizes
  spec.grpo.updates_per_step = 2;
  spec.grpo.learning_rate = 3e-3;
  spec.grpo.kl_coef = 0.05;
  spec.grpo.max_tokens_per_micro_batch = max_tokens_per_micro_batch;
  spec.sharding.stage = stage;
  spec.sharding.offload_params = offload;
  spec.sharding.offload_optimizer = offload;
  return spec;
}

// All parameters flattened in layout order.
torch::Tensor Comparable(CausalLM model) {
  std::vector<torch::Tensor> parts;
  for (const auto& [name, p] : model->OrderedParameters()) parts.push_back(p.detach().reshape({-1}).clone());
  return torch::cat(parts);
}

// Where a run starts and what it leaves.
struct Leg {
  int first_step = 0;      // resumes from the test's checkpoint directory when > 0
  int last_step = kSteps;  // exclusive
  bool save = false;       // checkpoint after the last step into that directory
};

class TrainerShardingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("headroom-trainer-sharding-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `world` ranks at `stage` over `leg`; returns rank 0's parameters before (init or
  // as resumed) and after, flattened in model order.
  std::pair<std::vector<float>, std::vector<float>> Train(int world, int stage, bool offload = false, Leg leg = {},
                                                          int max_tokens_per_micro_batch = 0) {
    const std::string name = std::to_string(world) + "-" + std::to_string(stage) + (offload ? "-offload" : "") + "-" +
                             std::to_string(leg.first_step) + "-" + std::to_string(leg.last_step) + "-" +
                             std::to_string(max_tokens_per_micro_batch);
    const fs::path before = dir_ / (name + ".init"), after = dir_ / (name + ".final");
    const fs::path checkpoints = dir_ / "checkpoints";
    const int port = FreePort();
    auto results = RunRanks(
        world,
        [&](const RankContext& ctx) {
      torch::set_num_threads(1);
      auto comm =
          world == 1 ? MakeLocalCommunicator() : MakeCommunicator("gloo", ctx.rank, world, "127.0.0.1", port, 30s);
      GrpoTrainer trainer(Job(stage, offload, max_tokens_per_micro_batch), *comm, torch::kCPU);
      auto& shards = trainer.shards();
      // All ranks gather (collective at stage 3); rank 0 writes.
      auto dump = [&](const fs::path& path) {
        shards.GatherAll();
        if (ctx.rank == 0) headroom::testing::WriteBytes(path.string(), Comparable(trainer.model()));
        shards.Release();
      };
      if (leg.first_step > 0) {
        auto reader = CheckpointReader::OpenLatest(checkpoints);
        Expect(reader && reader->step() == leg.first_step, "no checkpoint of step " + std::to_string(leg.first_step));
        RestoreTrainingState(*reader, trainer);
      }
      dump(before);
      for (int step = leg.first_step; step < leg.last_step; ++step) {
        const StepResult r = trainer.RunStep(step);
        Expect(std::isfinite(r.loss) && r.grad_norm > 0, "step " + std::to_string(step) + ": loss " +
                                                             std::to_string(r.loss) + ", grad norm " +
                                                             std::to_string(r.grad_norm));
        if (stage == 3) {
          for (const auto& [n, p] : trainer.model()->OrderedParameters()) {
            Expect(p.numel() == 0, "stage 3 parameter " + n + " still gathered after the step");
          }
        }
      }
      Expect(shards.optimizer_step() == leg.last_step * 2, "two optimizer steps per GRPO step");
      if (leg.save) {
        CheckpointMetadata meta;
        meta.step = leg.last_step;
        CheckpointWriter(checkpoints, *comm).Save(meta, TrainingStateSlices(trainer), CpuRngState());
      }
      dump(after);
        },
        120s);
    for (const auto& r : results) EXPECT_TRUE(r.exited && r.exit_code == 0) << name << "\n" << Describe(results);
    return {ReadFloats(before.string()), ReadFloats(after.string())};
  }

  fs::path dir_;
};

// The largest violation of |a - b| <= atol + rtol |b|, as a multiple of the allowance
// (<= 1 passes), the largest |a - b|, and where the worst violation is.
struct Comparison {
  double worst = 0, max_abs = 0;
  size_t at = 0;
};
Comparison Compare(const std::vector<float>& a, const std::vector<float>& b) {
  Comparison c;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]);
    c.max_abs = std::max(c.max_abs, d);
    const double v = d / (kAtol + kRtol * std::abs(static_cast<double>(b[i])));
    if (v > c.worst) c.worst = v, c.at = i;
  }
  return c;
}

// "model.layers.0.self_attn.q_proj.weight[123]": which parameter a flat index of Comparable() falls in.
std::string NameOf(size_t index) {
  CausalLM model = ModelSource(Job(0, false)).LoadPolicy();
  for (const auto& [name, p] : model->OrderedParameters()) {
    if (index < static_cast<size_t>(p.numel())) return name + "[" + std::to_string(index) + "]";
    index -= static_cast<size_t>(p.numel());
  }
  return "past the end";
}

TEST_F(TrainerShardingTest, EveryStageOnOneAndTwoRanksMatchesStageZeroOnOneRank) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const auto [init, reference] = Train(1, 0);
  if (HasFailure()) return;
  ASSERT_FALSE(reference.empty());
  ASSERT_EQ(init.size(), reference.size());
  // The comparison means something only if training moved the parameters well past it.
  const Comparison moved = Compare(init, reference);
  std::printf("stage 0, 1 rank: parameters moved up to %.3g from init (%.0fx the tolerance)\n", moved.max_abs,
              moved.worst);
  ASSERT_GT(moved.worst, 100.0) << "the parameters barely moved; the comparison would prove nothing";

  struct Case {
    int world, stage;
    bool offload;
  };
  for (const Case c : {Case{1, 1, false}, Case{1, 2, false}, Case{1, 3, false}, Case{2, 0, false}, Case{2, 1, false},
                       Case{2, 2, false}, Case{2, 3, false}, Case{2, 3, true}}) {
    SCOPED_TRACE("world " + std::to_string(c.world) + " stage " + std::to_string(c.stage) +
                 (c.offload ? " offload" : ""));
    const auto [start, got] = Train(c.world, c.stage, c.offload);
    if (HasFailure()) return;
    ASSERT_EQ(start, init) << "every configuration starts from the same weights";
    ASSERT_EQ(got.size(), reference.size());
    const Comparison cmp = Compare(got, reference);
    std::printf("stage %d, %d rank%s%s: max |param - reference| = %.3g (%.2f of the tolerance, worst at %s)\n", c.stage,
                c.world, c.world == 1 ? "" : "s", c.offload ? ", offload" : "", cmp.max_abs, cmp.worst,
                NameOf(cmp.at).c_str());
    EXPECT_LE(cmp.worst, 1.0) << "max |param - reference| = " << cmp.max_abs << ", worst at " << NameOf(cmp.at);
  }
}

// A token budget of 12 (prompts of 4 tokens, responses of 1 to 4: one to two rows a
// micro-batch, as many as the rank's response lengths allow) on 2 ranks at stages 0 and 3
// ends where the fixed split on 1 rank at stage 0 does. At stage 3 every forward is
// collective: ranks whose rows split into fewer micro-batches run extra ones (a row with
// no token counted), or the ranks would wait on each other until the timeout.
TEST_F(TrainerShardingTest, TokenBudgetOnTwoRanksMatchesTheFixedSplitOnOne) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const auto [init, reference] = Train(1, 0);
  if (HasFailure()) return;
  for (const int stage : {0, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    const auto [start, got] = Train(2, stage, false, {}, 12);
    if (HasFailure()) return;
    ASSERT_EQ(start, init);
    ASSERT_EQ(got.size(), reference.size());
    const Comparison cmp = Compare(got, reference);
    std::printf("budget 12, stage %d, 2 ranks: max |param - reference| = %.3g (%.2f of the tolerance)\n", stage,
                cmp.max_abs, cmp.worst);
    EXPECT_LE(cmp.worst, 1.0) << "max |param - reference| = " << cmp.max_abs << ", worst at " << NameOf(cmp.at);
  }
}

// Ranks with different numbers of micro-batches agree on the most (one all_reduce for
// every mini-batch's plan); one rank alone keeps its own.
TEST_F(TrainerShardingTest, RanksKeepTheirMicroBatchRunsInStep) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const int port = FreePort();
  auto results = RunRanks(
      2,
      [&](const RankContext& ctx) {
    auto comm = MakeCommunicator("gloo", ctx.rank, 2, "127.0.0.1", port, 30s);
    MicroBatchPlan a, b;
    a.groups.resize(static_cast<size_t>(2 + ctx.rank));      // 2 on rank 0, 3 on rank 1
    b.groups.resize(static_cast<size_t>(4 - 3 * ctx.rank));  // 4 on rank 0, 1 on rank 1
    a.runs = static_cast<int64_t>(a.groups.size());
    b.runs = static_cast<int64_t>(b.groups.size());
    KeepRunsInStep({&a, &b}, *comm);
    Expect(a.runs == 3 && b.runs == 4, "rank " + std::to_string(ctx.rank) + ": runs " + std::to_string(a.runs) + ", " +
                                           std::to_string(b.runs) + ", want 3, 4");
    auto local = MakeLocalCommunicator();
    MicroBatchPlan alone;
    alone.runs = 2;
    KeepRunsInStep({&alone}, *local);
    Expect(alone.runs == 2, "one rank keeps its runs");
      },
      60s);
  for (const auto& r : results) EXPECT_TRUE(r.exited && r.exit_code == 0) << Describe(results);
}

// Stage 3's per-block parameter groups and stage 0's single group name every tensor the
// same way (sharded_state_checkpoint.h): a checkpoint saved at stage 3 by 2 ranks after
// 2 steps resumes at stage 0 on 1 rank with those exact parameters and AdamW state, and
// its third step lands where an uninterrupted stage-0 run's does.
TEST_F(TrainerShardingTest, AStage3CheckpointOnTwoRanksResumesAtStage0OnOneRank) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const auto [init, reference] = Train(1, 0);
  if (HasFailure()) return;
  const auto [start, saved] = Train(2, 3, false, {0, kSteps - 1, true});
  if (HasFailure()) return;
  const auto [resumed, got] = Train(1, 0, false, {kSteps - 1, kSteps, false});
  if (HasFailure()) return;
  ASSERT_EQ(resumed, saved) << "the resume must load exactly what was saved";
  const Comparison cmp = Compare(got, reference);
  std::printf("stage 3 on 2 ranks, resumed at stage 0 on 1: max |param - reference| = %.3g (%.2f of the tolerance, "
              "worst at %s)\n",
              cmp.max_abs, cmp.worst, NameOf(cmp.at).c_str());
  EXPECT_LE(cmp.worst, 1.0) << "max |param - reference| = " << cmp.max_abs << ", worst at " << NameOf(cmp.at);
}

}  // namespace
}  // namespace headroom::worker
