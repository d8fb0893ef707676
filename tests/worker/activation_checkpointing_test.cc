// Activation checkpointing (worker/model/activation_checkpointing.h): under autograd every
// block runs twice (forward, then again in backward) and the gradients equal those of the
// plain model; without autograd a block runs once and the output is the plain model's, bit
// for bit; the block still gets its gradients when nothing before it is trained; it works
// under the sharding's flat gradient buffers; and the spec chooses it at stages 0-2 only.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cfloat>
#include <map>
#include <memory>
#include <string>

#include "core/spec/training_job.h"
#include "tests/worker/helpers/preset_model.h"
#include "worker/comm/communicator.h"
#include "worker/model/activation_checkpointing.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/model/model_transforms.h"
#include "worker/sharding/model_shards.h"

namespace headroom::worker {
namespace {

testing::ModelDims Dims() {
  testing::ModelDims d;
  d.layers = 3;
  d.hidden = 16;
  d.heads = 2;
  d.ffn_hidden = 24;
  d.max_seq_len = 8;
  d.seed = 7;
  return d;
}

// Counts the runs of each block, innermost (added first), so it sees the recompute too.
struct CountRuns : BlockWrapper {
  torch::Tensor Run(int64_t layer, const torch::Tensor& x, const Inner& inner) override {
    ++runs[layer];
    return inner(x);
  }
  std::map<int64_t, int> runs;
};

struct Checkpointed {
  HfCausalLM model;
  std::shared_ptr<CountRuns> counter;
};

Checkpointed CheckpointedModel() {
  Checkpointed c{testing::PresetModel(Dims()), std::make_shared<CountRuns>()};
  WrapBlocks(*c.model, c.counter);
  ApplyModelTransforms(*c.model, {kActivationCheckpointing});
  return c;
}

torch::Tensor Tokens() {
  torch::manual_seed(3);
  return torch::randint(3, 32, {2, 7}, torch::kInt64);
}

// A loss that reaches every logit with its own weight: the log-prob of fixed targets.
torch::Tensor Loss(HfCausalLM& model, const torch::Tensor& tokens) {
  torch::manual_seed(4);
  const torch::Tensor logits = model->forward(tokens);
  const torch::Tensor targets = torch::randint(0, logits.size(-1), {logits.size(0), logits.size(1), 1});
  const torch::Tensor weights = torch::rand({logits.size(0), logits.size(1)});
  return -(torch::log_softmax(logits, -1).gather(-1, targets).squeeze(-1) * weights).sum();
}

// Every parameter's gradient in `got` equals `want`'s. A recompute repeats the same fp32
// operations on the same input, so each block parameter's gradient is bit-identical; the
// parameters used outside the blocks (embedding, head) may sum their parts in another
// order, which moves an element by a few ulps of the tensor's largest.
void ExpectSameGradients(HfCausalLM& got, HfCausalLM& want) {
  const auto want_params = want->named_parameters();
  int compared = 0;
  for (const auto& item : got->named_parameters()) {
    const torch::Tensor* w = want_params.find(item.key());
    if (w == nullptr) continue;  // the wrappers' own (none here have parameters)
    ASSERT_TRUE(item.value().grad().defined()) << item.key() << " got no gradient";
    ASSERT_TRUE(w->grad().defined()) << item.key();
    const torch::Tensor g = item.value().grad(), r = w->grad();
    const double largest = r.abs().max().item<double>();
    ASSERT_GT(largest, 0.0) << item.key() << ": a zero gradient proves nothing";
    const double tol = 4 * FLT_EPSILON * largest;
    EXPECT_LE((g - r).abs().max().item<double>(), tol) << item.key();
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(want_params.size()));
}

TEST(ActivationCheckpointing, SameGradientsAsKeepingActivationsEachBlockRunTwice) {
  HfCausalLM plain = testing::PresetModel(Dims());
  Checkpointed ckpt = CheckpointedModel();
  const torch::Tensor tokens = Tokens();
  const torch::Tensor want = Loss(plain, tokens);
  const torch::Tensor got = Loss(ckpt.model, tokens);
  EXPECT_TRUE(torch::equal(got, want)) << "the forward is the plain one";
  EXPECT_EQ(ckpt.counter->runs, (std::map<int64_t, int>{{0, 1}, {1, 1}, {2, 1}}));
  want.backward();
  got.backward();
  EXPECT_EQ(ckpt.counter->runs, (std::map<int64_t, int>{{0, 2}, {1, 2}, {2, 2}})) << "backward runs every block again";
  ExpectSameGradients(ckpt.model, plain);
}

TEST(ActivationCheckpointing, WithoutAutogradEachBlockRunsOnce) {
  HfCausalLM plain = testing::PresetModel(Dims());
  Checkpointed ckpt = CheckpointedModel();
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(ckpt.model->forward(Tokens()), plain->forward(Tokens())));
  EXPECT_EQ(ckpt.counter->runs, (std::map<int64_t, int>{{0, 1}, {1, 1}, {2, 1}}));
}

// With the embedding frozen nothing before block 0 needs a gradient; the blocks' own
// parameters still get theirs (adapters train with a frozen base this way).
TEST(ActivationCheckpointing, BlocksGetGradientsWhenNothingBeforeThemIsTrained) {
  HfCausalLM plain = testing::PresetModel(Dims());
  Checkpointed ckpt = CheckpointedModel();
  for (HfCausalLM* m : {&plain, &ckpt.model}) {
    for (auto& item : (*m)->named_parameters()) {
      if (item.key().find("embed") != std::string::npos) item.value().requires_grad_(false);
    }
  }
  const torch::Tensor tokens = Tokens();
  Loss(plain, tokens).backward();
  Loss(ckpt.model, tokens).backward();
  for (auto& item : ckpt.model->named_parameters()) {
    if (item.key().find("layers.") == std::string::npos) continue;
    ASSERT_TRUE(item.value().grad().defined()) << item.key() << " lost its gradient";
  }
  // Compare only what is trained.
  for (auto& item : plain->named_parameters()) {
    if (!item.value().requires_grad()) continue;
    const torch::Tensor g = ckpt.model->named_parameters()[item.key()].grad();
    EXPECT_LE((g - item.value().grad()).abs().max().item<double>(),
              4 * FLT_EPSILON * item.value().grad().abs().max().item<double>())
        << item.key();
  }
}

// The sharding points each parameter's .grad into a flat buffer; the recompute's backward
// must add into those views as the plain backward does.
TEST(ActivationCheckpointing, GradientsLandInTheShardsFlatBuffers) {
  for (const int stage : {0, 2}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    HfCausalLM plain = testing::PresetModel(Dims());
    Checkpointed ckpt = CheckpointedModel();
    auto comm_a = MakeLocalCommunicator();
    auto comm_b = MakeLocalCommunicator();
    ShardingOptions options;
    options.stage = stage;
    ModelShards plain_shards(plain, *comm_a, options, AdamWConfig{});
    ModelShards ckpt_shards(ckpt.model, *comm_b, options, AdamWConfig{});
    const torch::Tensor tokens = Tokens();
    for (ModelShards* s : {&plain_shards, &ckpt_shards}) {
      s->Gather();
      s->ZeroGrad();
    }
    Loss(plain, tokens).backward();
    Loss(ckpt.model, tokens).backward();
    ExpectSameGradients(ckpt.model, plain);
  }
}

TEST(ActivationCheckpointing, TheSpecChoosesItBelowStageThree) {
  spec::TrainingJobSpec s;
  EXPECT_TRUE(ModelTransformsOf(s).empty()) << "off by default";
  s.grpo.activation_checkpointing = true;
  s.sharding.stage = 2;
  EXPECT_EQ(ModelTransformsOf(s), std::vector<std::string>{kActivationCheckpointing});
  s.sharding.stage = 3;
  EXPECT_TRUE(ModelTransformsOf(s).empty()) << "stage 3 recomputes every block already";
}

}  // namespace
}  // namespace headroom::worker
