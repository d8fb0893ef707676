// The rollout as the trainer runs it on a GPU: bf16 inference copies of the weights, a bf16
// KV cache, the decode replayed from a CUDA graph; then an optimizer step, which rewrites
// the copies, and another rollout. Each must be graphed and give the tokens the same
// shape-static step gives run eagerly (decode_replay.h). Skips without a CUDA device.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <vector>

#include <torch/torch.h>

#include "tests/worker/helpers/bf16_passes.h"
#include "worker/comm/communicator_factory.h"
#include "worker/grpo/log_probs.h"
#include "worker/rollout/rollout_engine.h"
#include "worker/sharding/inference_weights.h"
#include "worker/tasks/tokenizer.h"

namespace headroom::worker {
namespace {

TEST(CudaRolloutBf16Graph, GraphedAcrossAnOptimizerStepWithTheEagerStepsTokens) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch here";
  if (!DecodeGraphsCompiled()) GTEST_SKIP() << "CUDA graphs are compiled out of this build (HEADROOM_CUDA_GRAPHS=OFF)";
  const torch::Device cuda(torch::kCUDA, 0);
  HfCausalLM model = testing::TiedTiny();
  model->to(cuda);
  auto comm = MakeLocalCommunicator();
  ShardingOptions options;
  options.bf16_inference_weights = Bf16InferenceWeightsByDefault(cuda);
  ASSERT_TRUE(options.bf16_inference_weights);
  AdamWConfig adamw;
  adamw.lr = 1e-2;  // a step that changes the samples
  ModelShards shards(model, *comm, options, adamw);
  const int64_t batch = 8, prompt = 5, response = 12;
  RolloutEngine graphed(model->kv_cache_shape(), batch, prompt, response, cuda, CharTokenizer::Format(),
                        torch::kBFloat16);
  ASSERT_EQ(graphed.resolved_decode_mode(model), RolloutEngine::DecodeMode::kGraph);
  torch::manual_seed(6);
  const auto prompts = torch::randint(3, 30, {batch, prompt}, torch::kInt64).to(cuda);
  std::vector<uint64_t> keys;
  for (int64_t i = 0; i < batch; ++i) keys.push_back(500 + static_cast<uint64_t>(i));

  std::vector<torch::Tensor> samples;
  for (int step = 0; step < 2; ++step) {
    Rollout got, want;
    {
      InferenceWeightsScope copies(shards);
      got = graphed.Generate(model, prompts, keys, 1.0);
      EXPECT_TRUE(graphed.last_decode_graphed()) << "step " << step << ": not replayed from a CUDA graph (see the log)";
      RolloutEngine eager(model->kv_cache_shape(), batch, prompt, response, cuda, CharTokenizer::Format(),
                          torch::kBFloat16);
      eager.set_decode_mode(RolloutEngine::DecodeMode::kStatic);
      want = eager.Generate(model, prompts, keys, 1.0);
    }
    EXPECT_EQ(graphed.cache().Keys(0, 0).scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::equal(got.sequences, want.sequences)) << "step " << step;
    EXPECT_TRUE(torch::equal(got.response_mask, want.response_mask)) << "step " << step;
    samples.push_back(got.sequences);
    // One optimizer step on a loss over the sampled tokens: the copies are rewritten.
    shards.ZeroGrad();
    ResponseLogProbs(model, got.sequences, prompt, 1.0).sum().backward();
    shards.ReduceGradients();
    (void)shards.Step(1.0);
  }
  EXPECT_FALSE(torch::equal(samples[0], samples[1])) << "the step did not change what the graph samples";
}

}  // namespace
}  // namespace headroom::worker
