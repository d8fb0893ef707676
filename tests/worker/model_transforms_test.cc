// The model-transform seam (worker/model/model_transforms.h): a registered transform that
// wraps a block is seen by every forward (plain, cached, under autograd) and by the
// model's parameters, composes with ZeRO stage 3 (whose gather runs around the wrapper),
// and an unknown transform's name is an error naming the registered ones.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "tests/worker/helpers/preset_model.h"
#include "worker/comm/communicator.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/model/kv_cache.h"
#include "worker/model/model_transforms.h"
#include "worker/sharding/model_shards.h"

namespace headroom::worker {
namespace {

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

// Gates block 1's change to the residual stream: y = x + gate * (block(x) - x), with a
// learnable gate (0 at first: block 1 leaves the stream as it is). Counts the blocks it
// runs around.
struct GatedBlockOne : BlockWrapper {
  GatedBlockOne() { gate = register_parameter("gate", torch::zeros({1})); }
  torch::Tensor Run(int64_t layer, const torch::Tensor& x, const Inner& inner) override {
    ++runs[layer];
    if (layer != 1) return inner(x);
    return x + gate * (inner(x) - x);
  }
  torch::Tensor gate;
  std::map<int64_t, int> runs;
};

std::shared_ptr<GatedBlockOne> last_wrapper;

struct GateBlockOne : ModelTransform {
  void Apply(CausalLMImpl& model) override {
    last_wrapper = std::make_shared<GatedBlockOne>();
    WrapBlocks(model, last_wrapper);
  }
};

const bool registered = RegisterModelTransform("test-gate-block-1", [] { return std::make_unique<GateBlockOne>(); });

// The same model with block 1's output projections zeroed: block 1 then adds exactly 0
// to the stream, what the gate at 0 does.
HfCausalLM WithBlockOneSilenced() {
  HfCausalLM model = testing::PresetModel(ThreeBlocks());
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    if (name.find("layers.1.") != std::string::npos &&
        (name.find("o_proj.weight") != std::string::npos || name.find("down_proj.weight") != std::string::npos)) {
      item.value().zero_();
    }
  }
  return model;
}

torch::Tensor Tokens() {
  torch::manual_seed(11);
  return torch::randint(3, 32, {2, 6}, torch::kInt64);
}

TEST(ModelTransforms, AWrappedBlockIsSeenByEveryForwardAndByTheParameters) {
  ASSERT_TRUE(registered);
  HfCausalLM plain = testing::PresetModel(ThreeBlocks());
  HfCausalLM model = testing::PresetModel(ThreeBlocks());
  ApplyModelTransforms(*model, {"test-gate-block-1"});
  const std::shared_ptr<GatedBlockOne> wrapper = last_wrapper;
  const auto tokens = Tokens();

  const auto silenced = WithBlockOneSilenced()->forward(tokens);
  const auto got = model->forward(tokens);
  EXPECT_TRUE(torch::equal(got, silenced)) << "the gate at 0 leaves block 1 out, bit for bit";
  EXPECT_FALSE(torch::equal(got, plain->forward(tokens))) << "without the wrapper block 1 would count";
  EXPECT_EQ(wrapper->runs, (std::map<int64_t, int>{{0, 1}, {1, 1}, {2, 1}}));

  KvCache cache(model->kv_cache_shape(), 2, 8, torch::kCPU);
  cache.Reset(2);
  {
    c10::InferenceMode inference;
    model->ForwardCached(tokens, cache);
  }
  EXPECT_EQ(wrapper->runs[1], 2) << "a cached forward runs through the wrapper too";

  bool named = false;
  for (const auto& item : model->named_parameters()) named = named || item.key() == "block_wrappers.0.gate";
  EXPECT_TRUE(named) << "the wrapper's parameter is the model's";
  model->forward(tokens).pow(2).mean().backward();
  ASSERT_TRUE(wrapper->gate.grad().defined());
  EXPECT_NE(wrapper->gate.grad().item<float>(), 0.0f) << "autograd reaches the wrapper's parameter";
}

// Under ZeRO stage 3 the shards run the blocks, gathering each around its wrappers; a
// wrapper added under them is refused, and after GatherAll() the model outlives its shards
// whole, its wrappers running again.
TEST(ModelTransforms, ComposeWithStageThreeWhoseGatherRunsAroundTheWrapper) {
  HfCausalLM model = testing::PresetModel(ThreeBlocks());
  ApplyModelTransforms(*model, {"test-gate-block-1"});
  const std::shared_ptr<GatedBlockOne> wrapper = last_wrapper;
  const auto tokens = Tokens();
  torch::Tensor before;
  {
    torch::NoGradGuard no_grad;
    before = model->forward(tokens);
  }
  {
    auto comm = MakeLocalCommunicator();
    ShardingOptions options;
    options.stage = 3;
    ModelShards shards(model, *comm, options, AdamWConfig{});
    ASSERT_TRUE(shards.per_layer());
    torch::NoGradGuard no_grad;
    shards.Gather();
    EXPECT_TRUE(torch::equal(model->forward(tokens), before)) << "stage 3 runs the wrapped blocks";
    EXPECT_EQ(wrapper->runs[1], 2);
    EXPECT_THROW(WrapBlocks(*model, std::make_shared<GatedBlockOne>()), std::logic_error)
        << "blocks are wrapped before sharding";
    shards.GatherAll();  // leaves the model whole when the shards go (model_shards.h)
  }
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(model->forward(tokens), before)) << "the wrappers run again once the shards are gone";
  EXPECT_EQ(wrapper->runs[1], 3);
}

TEST(ModelTransforms, AnUnknownNameIsAnErrorNamingTheRegisteredOnes) {
  HfCausalLM model = testing::PresetModel(ThreeBlocks());
  try {
    ApplyModelTransforms(*model, {"no-such-transform"});
    FAIL() << "an unknown transform was applied";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-transform"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("test-gate-block-1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(RegisterModelTransform("test-gate-block-1", [] { return std::make_unique<GateBlockOne>(); }),
               std::logic_error);
}

}  // namespace
}  // namespace headroom::worker
