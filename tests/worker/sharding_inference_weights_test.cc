// The bf16 copies for passes without gradient (inference_weights.h), forced on on the CPU:
// the copies are the parameters rounded to bf16, refreshed once after the parameters
// change and only when used; a pass over them equals the fp32 pass under bf16 autocast
// over weights rounded the same way (bit for bit: the matmuls see the same bf16 operands),
// and the unrounded one within bf16 rounding; stage 3 on 2 Gloo ranks gathers the same
// copies as stage 0 holds; with the option off nothing changes.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "tests/worker/helpers/bf16_passes.h"
#include "tests/worker/helpers/multirank.h"
#include "tests/worker/helpers/preset_model.h"
#include "tests/worker/helpers/sharding_fixture.h"
#include "worker/comm/communicator_factory.h"
#include "worker/model/bf16_autocast.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/sharding/inference_weights.h"

namespace headroom::worker {
namespace {

using headroom::testing::Describe;
using headroom::testing::Expect;
using headroom::testing::FreePort;
using headroom::testing::RankContext;
using headroom::testing::RunRanks;
using namespace std::chrono_literals;

using headroom::testing::TiedTiny;

testing::ModelDims Tiny() { return testing::Bf16PassesDims(); }

std::vector<torch::Tensor> Snapshot(CausalLM model) {
  std::vector<torch::Tensor> out;
  for (const auto& [name, p] : model->OrderedParameters()) out.push_back(p.detach().clone());
  return out;
}

// Every parameter of `model` is `want[i]` exactly, in want[i]'s dtype.
bool ParametersAre(CausalLM model, const std::vector<torch::Tensor>& want) {
  const NamedTensors params = model->OrderedParameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const torch::Tensor& p = params[i].second;
    if (p.scalar_type() != want[i].scalar_type() || !torch::equal(p, want[i])) return false;
  }
  return true;
}

std::vector<torch::Tensor> RoundedToBf16(const std::vector<torch::Tensor>& weights) {
  std::vector<torch::Tensor> out;
  for (const auto& w : weights) out.push_back(w.to(torch::kBFloat16));
  return out;
}

void TrainOneStep(CausalLM model, ModelShards& shards, const torch::Tensor& tokens) {
  shards.Gather();
  shards.ZeroGrad();
  model->forward(tokens).pow(2).mean().backward();
  shards.ReduceGradients();
  shards.Step(1.0);
}

ShardingOptions WithCopies(int stage) {
  ShardingOptions o;
  o.stage = stage;
  o.bf16_inference_weights = true;
  return o;
}

TEST(InferenceWeightsTest, OnForCudaOffForTheCpu) {
  EXPECT_TRUE(Bf16InferenceWeightsByDefault(torch::Device(torch::kCUDA, 0)));
  EXPECT_FALSE(Bf16InferenceWeightsByDefault(torch::kCPU));
}

TEST(InferenceWeightsTest, CopiesAreTheRoundedWeightsRefreshedOncePerStep) {
  torch::manual_seed(11);
  const auto tokens = torch::randint(3, 32, {2, 6}, torch::kInt64);
  for (int stage : {0, 2}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    HfCausalLM model = testing::PresetModel(Tiny());
    auto comm = MakeLocalCommunicator();
    ModelShards shards(model, *comm, WithCopies(stage), AdamWConfig{});
    EXPECT_EQ(shards.inference_refreshes(), 0);
    auto master = Snapshot(model);
    {
      InferenceWeightsScope copies(shards);
      EXPECT_EQ(shards.inference_refreshes(), 1);
      EXPECT_TRUE(ParametersAre(model, RoundedToBf16(master)));
    }
    EXPECT_TRUE(ParametersAre(model, master)) << "the scope's end did not restore the fp32 parameters";
    { InferenceWeightsScope unchanged(shards); }
    EXPECT_EQ(shards.inference_refreshes(), 1) << "refreshed although no step changed the parameters";

    TrainOneStep(model, shards, tokens);
    ASSERT_FALSE(ParametersAre(model, master)) << "the step changed nothing: the test cannot tell stale copies";
    master = Snapshot(model);
    {
      InferenceWeightsScope copies(shards);
      EXPECT_EQ(shards.inference_refreshes(), 2);
      EXPECT_TRUE(ParametersAre(model, RoundedToBf16(master))) << "stale copies after an optimizer step";
    }
    // Two steps with no pass between them: one refresh, at the next use.
    TrainOneStep(model, shards, tokens);
    TrainOneStep(model, shards, tokens);
    master = Snapshot(model);
    {
      InferenceWeightsScope copies(shards);
      EXPECT_EQ(shards.inference_refreshes(), 3);
      EXPECT_TRUE(ParametersAre(model, RoundedToBf16(master)));
    }
    EXPECT_EQ(shards.ResidentBytes().inference_weights, shards.parts().front().group->layout().padded_numel() * 2);
  }
}

TEST(InferenceWeightsTest, OffChangesNothing) {
  HfCausalLM model = testing::PresetModel(Tiny());
  auto comm = MakeLocalCommunicator();
  ShardingOptions options;
  options.stage = 0;
  ModelShards shards(model, *comm, options, AdamWConfig{});
  const auto master = Snapshot(model);
  torch::manual_seed(12);
  const auto tokens = torch::randint(3, 32, {2, 6}, torch::kInt64);
  torch::NoGradGuard no_grad;
  const auto before = model->forward(tokens);
  {
    InferenceWeightsScope copies(shards);
    EXPECT_TRUE(ParametersAre(model, master));
    EXPECT_TRUE(torch::equal(model->forward(tokens), before));
  }
  EXPECT_EQ(shards.inference_refreshes(), 0);
  EXPECT_EQ(shards.ResidentBytes().inference_weights, 0);
}

TEST(InferenceWeightsTest, PassesOnCopiesAreTheAutocastPassesOverBf16Weights) {
  torch::manual_seed(13);
  const auto sequences = torch::randint(3, 32, {3, 9}, torch::kInt64);

  HfCausalLM model = TiedTiny();
  auto comm = MakeLocalCommunicator();
  ModelShards shards(model, *comm, WithCopies(0), AdamWConfig{});
  testing::Bf16Passes got;
  {
    InferenceWeightsScope copies(shards);
    got = testing::RunBf16Passes(model, sequences, torch::kCPU);
  }

  // The same model, fp32 weights, under bf16 autocast (the CUDA path's arithmetic).
  HfCausalLM autocast_model = TiedTiny();
  testing::Bf16Passes fp32;
  {
    Bf16Autocast autocast(torch::kCPU, /*also_on_cpu=*/true);
    fp32 = testing::RunBf16Passes(autocast_model, sequences, torch::kCPU);
  }
  // Its weights rounded to bf16 first: what autocast multiplies is then what the copies hold.
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, p] : autocast_model->OrderedParameters()) p.copy_(p.to(torch::kBFloat16));
  }
  testing::Bf16Passes rounded;
  {
    Bf16Autocast autocast(torch::kCPU, /*also_on_cpu=*/true);
    rounded = testing::RunBf16Passes(autocast_model, sequences, torch::kCPU);
  }
  EXPECT_TRUE(torch::equal(got.logits, rounded.logits));
  EXPECT_TRUE(torch::equal(got.logp, rounded.logp));
  EXPECT_TRUE(torch::equal(got.greedy, rounded.greedy));

  testing::ExpectWithinBf16Rounding(model, got, fp32);
}

// The frozen reference model converted once: bf16 parameters equal to the fp32 ones
// rounded, fp32 buffers (rotary tables) untouched, and its passes exactly those of the
// rounded fp32 weights under the same autocast, as the policy's copies are.
TEST(InferenceWeightsTest, ConvertedReferenceIsItsWeightsRoundedToBf16) {
  torch::manual_seed(14);
  const auto sequences = torch::randint(3, 32, {3, 9}, torch::kInt64);
  CausalLM reference = TiedTiny();
  const std::vector<torch::Tensor> fp32_weights = Snapshot(reference);
  std::vector<c10::ScalarType> buffer_types;
  for (const auto& b : reference->buffers()) buffer_types.push_back(b.scalar_type());
  ConvertParametersToBf16(reference);
  EXPECT_TRUE(ParametersAre(reference, RoundedToBf16(fp32_weights)));
  std::vector<c10::ScalarType> after;
  for (const auto& b : reference->buffers()) after.push_back(b.scalar_type());
  EXPECT_EQ(after, buffer_types) << "buffers keep their dtype";
  testing::Bf16Passes got;
  {
    Bf16Autocast autocast(torch::kCPU, /*also_on_cpu=*/true);
    got = testing::RunBf16Passes(reference, sequences, torch::kCPU);
  }
  HfCausalLM rounded_model = TiedTiny();
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, p] : rounded_model->OrderedParameters()) p.copy_(p.to(torch::kBFloat16));
  }
  testing::Bf16Passes rounded;
  {
    Bf16Autocast autocast(torch::kCPU, /*also_on_cpu=*/true);
    rounded = testing::RunBf16Passes(rounded_model, sequences, torch::kCPU);
  }
  EXPECT_TRUE(torch::equal(got.logits, rounded.logits));
  EXPECT_TRUE(torch::equal(got.logp, rounded.logp));
  EXPECT_TRUE(torch::equal(got.greedy, rounded.greedy));
}

// Stage 3 on 2 ranks gathers each rank's bf16 shard: the gathered copies are stage 0's,
// bit for bit, the blocks are released after every pass, and each rank holds its shard's
// copy (2 bytes per owned element) and no more between passes.
TEST(InferenceWeightsTest, StageThreeGathersTheCopiesStageZeroHolds) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const int port = FreePort();
  auto results = RunRanks(
      2,
      [&](const RankContext& ctx) {
    torch::set_num_threads(1);
    auto comm = MakeCommunicator("gloo", ctx.rank, 2, "127.0.0.1", port, 30s);
    HfCausalLM whole = TiedTiny(), sharded = TiedTiny();
    ModelShards stage0(whole, *comm, WithCopies(0), AdamWConfig{});
    ModelShards stage3(sharded, *comm, WithCopies(3), AdamWConfig{});
    torch::manual_seed(14);
    const auto tokens = torch::randint(3, 32, {2, 6}, torch::kInt64);
    std::vector<torch::Tensor> copies;
    torch::Tensor want;
    {
      InferenceWeightsScope on(stage0);
      copies = Snapshot(whole);
      torch::NoGradGuard no_grad;
      want = whole->forward(tokens);
    }
    int64_t owned = 0;
    for (const ShardedStatePart& part : stage3.parts()) owned += part.group->owned().numel();
    {
      InferenceWeightsScope on(stage3);
      stage3.Gather();
      torch::NoGradGuard no_grad;
      Expect(torch::equal(sharded->forward(tokens), want), "stage 3's pass over the copies differs from stage 0's");
      stage3.GatherAll();
      Expect(ParametersAre(sharded, copies), "stage 3 gathered other copies than stage 0 holds");
    }
    Expect(stage3.ResidentBytes().inference_weights == 2 * owned, "stage 3 holds more than its shard's copy");
    for (const auto& [name, p] : sharded->OrderedParameters()) {
      Expect(p.numel() == 0, "the scope's end left " + name + " gathered");
    }
    // After a step, the copies gathered are the new parameters rounded.
    TrainOneStep(sharded, stage3, tokens);
    stage3.GatherAll();
    const auto master = Snapshot(sharded);
    stage3.Release();
    {
      InferenceWeightsScope on(stage3);
      stage3.GatherAll();
      Expect(ParametersAre(sharded, RoundedToBf16(master)), "stage 3's copies are stale after a step");
    }
    Expect(stage3.inference_refreshes() == 2,
           "stage 3 refreshed " + std::to_string(stage3.inference_refreshes()) + " times for one step");
      },
      60s);
  for (const auto& r : results) EXPECT_TRUE(r.exited && r.exit_code == 0) << Describe(results);
}

}  // namespace
}  // namespace headroom::worker
