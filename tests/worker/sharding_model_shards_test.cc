// Stage 3 gathers one block at a time (model_shards.h): on 1 and 2 Gloo ranks, a forward
// under autograd and its backward (two micro-batches) through a 3-block preset-architecture model give
// every owned gradient range the gradient plain autograd computes on the whole batch;
// between uses no block holds parameters; a no-grad forward (and a KV-cached one, as the
// rollout runs it) equals the plain model's; and no more than one block is ever gathered
// at once beside the outer parameters. The rollout on 2 ranks, where one rank's rows all
// stop at their first token and the other's never do, ends on both: the ranks decode
// together until every row everywhere has stopped.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <map>

#include "tests/worker/helpers/multirank.h"
#include "tests/worker/helpers/sharding_fixture.h"
#include "worker/comm/communicator_factory.h"
#include "worker/model/kv_cache.h"
#include "tests/worker/helpers/preset_model.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/rollout/rollout_engine.h"
#include "worker/sharding/model_shards.h"
#include "worker/tasks/tokenizer.h"

namespace headroom::worker {
namespace {

using headroom::testing::Describe;
using headroom::testing::Expect;
using headroom::testing::FreePort;
using headroom::testing::RankContext;
using headroom::testing::RunRanks;
using namespace std::chrono_literals;

testing::ModelDims ThreeBlocks() {
  testing::ModelDims c;
  c.layers = 3;
  c.hidden = 16;
  c.heads = 2;
  c.ffn_hidden = 24;
  c.max_seq_len = 8;
  c.seed = 5;
  return c;
}

// Rank r's two micro-batches of tokens (the same on every rank that asks for rank r).
std::vector<torch::Tensor> Tokens(int rank) {
  torch::manual_seed(100 + rank);
  return {torch::randint(3, 32, {3, 7}, torch::kInt64), torch::randint(3, 32, {2, 7}, torch::kInt64)};
}

torch::Tensor Loss(HfCausalLM& model, const torch::Tensor& tokens) { return model->forward(tokens).pow(2).mean(); }

bool BlocksReleased(HfCausalLM& model) {
  for (const auto& [name, p] : model->OrderedParameters()) {
    if (model->LayerOfParameter(name) >= 0 && p.numel() != 0) return false;
  }
  return true;
}

void RunWorld(int world) {
  const int port = FreePort();
  auto results = RunRanks(
      world,
      [&](const RankContext& ctx) {
    torch::set_num_threads(1);
    auto comm =
        world == 1 ? MakeLocalCommunicator() : MakeCommunicator("gloo", ctx.rank, world, "127.0.0.1", port, 30s);
    // The reference: plain autograd over every rank's micro-batches.
    HfCausalLM reference = testing::PresetModel(ThreeBlocks());
    for (int r = 0; r < world; ++r) {
      for (const auto& t : Tokens(r)) Loss(reference, t).backward();
    }
    std::map<std::string, torch::Tensor> want;
    for (const auto& [name, p] : reference->OrderedParameters()) want[name] = p.grad().reshape({-1});

    HfCausalLM model = testing::PresetModel(ThreeBlocks());
    ShardingOptions options;
    options.stage = 3;
    ModelShards shards(model, *comm, options, AdamWConfig{});
    Expect(shards.per_layer() && BlocksReleased(model), "stage 3 starts with the blocks released");
    const ShardedBytes between = shards.ResidentBytes();

    // No-grad and cached forwards match the plain model and leave the blocks released.
    {
      torch::NoGradGuard no_grad;
      const auto tokens = Tokens(ctx.rank)[0];
      shards.Gather();
      Expect(torch::allclose(model->forward(tokens), reference->forward(tokens), 1e-5, 1e-6), "no-grad forward");
      KvCache cache(model->kv_cache_shape(), 3, 8, torch::kCPU), ref_cache(model->kv_cache_shape(), 3, 8, torch::kCPU);
      cache.Reset(3);
      ref_cache.Reset(3);
      c10::InferenceMode inference;  // as the rollout runs
      auto got = model->ForwardCached(tokens.narrow(1, 0, 5), cache);
      auto expected = reference->ForwardCached(tokens.narrow(1, 0, 5), ref_cache);
      Expect(torch::allclose(got, expected, 1e-5, 1e-6), "cached forward");
      got = model->ForwardCached(tokens.narrow(1, 5, 1), cache);
      expected = reference->ForwardCached(tokens.narrow(1, 5, 1), ref_cache);
      Expect(torch::allclose(got, expected, 1e-5, 1e-6), "cached forward, one new position");
      Expect(BlocksReleased(model), "a no-grad forward left a block gathered");
      shards.Release();
    }

    shards.ResetPeak();
    shards.Gather();
    shards.ZeroGrad();
    for (const auto& t : Tokens(ctx.rank)) {
      Loss(model, t).backward();
      Expect(BlocksReleased(model), "a block stayed gathered after its backward");
    }
    shards.ReduceGradients();

    // Every group's owned gradient is the reference's over the same elements.
    for (const ShardedStatePart& part : shards.parts()) {
      FlatParameterGroup& group = *part.group;
      const FlatRange owned = group.owned();
      auto full = torch::zeros({group.layout().padded_numel()});
      for (const auto& slot : group.layout().slots()) full.narrow(0, slot.offset, slot.numel).copy_(want.at(slot.name));
      auto expect_owned = full.narrow(0, owned.begin, owned.numel());
      auto got = group.Gradient(owned);
      const double diff = (got - expect_owned).abs().max().item<double>();
      Expect(torch::allclose(got, expect_owned, 1e-4, 1e-6),
             "gradient of group " + group.layout().slots().front().name + " differs by " + std::to_string(diff));
    }

    // At most the outer group and one block in full beside the shards.
    int64_t largest_block = 0;
    for (size_t i = 1; i < shards.parts().size(); ++i) {
      largest_block = std::max(largest_block, shards.parts()[i].group->layout().padded_numel() * 4);
    }
    const int64_t outer = shards.parts().front().group->layout().padded_numel() * 4;
    const ShardedBytes peak = shards.PeakBytes();
    Expect(peak.parameters == between.parameters + outer + largest_block,
           "peak parameter bytes " + std::to_string(peak.parameters) + ", expected shards " +
               std::to_string(between.parameters) + " + outer " + std::to_string(outer) + " + one block " +
               std::to_string(largest_block));
    shards.Step(1.0);
    Expect(shards.ResidentBytes().total() == between.total(), "the step ended with a gathered copy left");
      },
      60s);
  for (const auto& r : results) EXPECT_TRUE(r.exited && r.exit_code == 0) << Describe(results);
}

TEST(ModelShardsTest, OneBlockAtATimeOnOneRank) { RunWorld(1); }

TEST(ModelShardsTest, OneBlockAtATimeOnTwoRanks) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  RunWorld(2);
}

// Every forward is a collective at stage 3, so a rank whose rows have all stopped keeps
// decoding (padding) until every rank's have; alone it would leave the others waiting in
// the next block's gather.
TEST(ModelShardsTest, RanksDecodeTogetherUntilEveryRowHasStopped) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const int port = FreePort();
  const int64_t rows = 3, prompt = 4, response = 4;
  auto results = RunRanks(
      2,
      [&](const RankContext& ctx) {
    torch::set_num_threads(1);
    auto comm = MakeCommunicator("gloo", ctx.rank, 2, "127.0.0.1", port, 20s);
    HfCausalLM model = testing::PresetModel(ThreeBlocks());
    ShardingOptions options;
    options.stage = 3;
    ModelShards shards(model, *comm, options, AdamWConfig{});
    RolloutEngine engine(model->kv_cache_shape(), rows, prompt, response, torch::kCPU, CharTokenizer::Format());
    engine.set_decode_communicator(comm.get());
    ResponseFormat format;
    format.pad = CharTokenizer::kPad;
    if (ctx.rank == 0) {
      for (int64_t id = 0; id < CharTokenizer::kVocabSize; ++id) format.stop_tokens.push_back(id);  // any token stops
    } else {
      format.stop_tokens = {CharTokenizer::kEos};
      auto bias = torch::zeros({CharTokenizer::kVocabSize});
      bias[CharTokenizer::kEos] = -std::numeric_limits<float>::infinity();  // never sampled: never stops
      engine.set_logit_bias(bias);
    }
    engine.set_response_format(format);
    torch::manual_seed(7);
    const auto prompts = torch::randint(3, 32, {rows, prompt}, torch::kInt64);
    shards.Gather();
    const Rollout r = engine.Generate(model, prompts, {1, 2, 3}, 1.0);
    shards.Release();
    const int64_t want = ctx.rank == 0 ? rows : rows * response;
    Expect(r.generated_tokens == want, "rank " + std::to_string(ctx.rank) + " generated " +
                                           std::to_string(r.generated_tokens) + " tokens, expected " +
                                           std::to_string(want));
    if (ctx.rank == 0) {
      Expect(torch::all(r.responses().narrow(1, 1, response - 1) == CharTokenizer::kPad).item<bool>(),
             "rank 0: positions after the stop are not padding");
    }
    Expect(BlocksReleased(model), "a block stayed gathered after the rollout");
      },
      60s);
  for (const auto& r : results) EXPECT_TRUE(r.exited && r.exit_code == 0) << Describe(results);
}

}  // namespace
}  // namespace headroom::worker
