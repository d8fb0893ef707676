// Decoding on a CUDA device through a captured CUDA graph (decode_replay.h) gives exactly
// the tokens the same shape-static step gives run eagerly: a replay launches the kernels
// the capture recorded, on the same buffers. Rollouts after the first reuse the graph (no
// new capture) and see weights updated in place. Skips without a CUDA device.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "worker/model/hf_causal_lm.h"
#include "worker/rollout/rollout_engine.h"
#include "worker/tasks/tokenizer.h"

namespace headroom::worker {
namespace {
namespace fs = std::filesystem;

class CudaDecodeGraphTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch here";
  }
};

Rollout Decode(CausalLM model, RolloutEngine::DecodeMode mode, const torch::Tensor& prompts,
               const torch::Tensor& padding, double temperature, bool* graphed = nullptr) {
  RolloutEngine engine(model->kv_cache_shape(), prompts.size(0), prompts.size(1), 24, torch::kCUDA,
                       CharTokenizer::Format());
  engine.set_decode_mode(mode);
  std::vector<uint64_t> keys;
  for (int64_t i = 0; i < prompts.size(0); ++i) keys.push_back(1000 + static_cast<uint64_t>(i));
  Rollout out = engine.Generate(model, prompts, keys, temperature, padding);
  if (graphed) *graphed = engine.last_decode_graphed();
  return out;
}

TEST_P(CudaDecodeGraphTest, GraphAndEagerDecodingGiveIdenticalTokens) {
  CausalLM model =
      LoadHfCausalLM((fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf" / GetParam()).string(), 40);
  model->to(torch::kCUDA);
  torch::manual_seed(3);
  auto prompts = torch::randint(3, 30, {8, 6}, torch::kInt64).to(torch::kCUDA);
  auto padding = torch::tensor({0, 1, 2, 0, 3, 0, 1, 0}, torch::kInt64).to(torch::kCUDA);
  for (double temperature : {0.0, 1.0}) {
    bool graphed = false;
    const Rollout eager = Decode(model, RolloutEngine::DecodeMode::kStatic, prompts, padding, temperature);
    const Rollout graph = Decode(model, RolloutEngine::DecodeMode::kGraph, prompts, padding, temperature, &graphed);
    EXPECT_TRUE(graphed) << "the decode tokens were not replayed from a CUDA graph (see the log for why)";
    EXPECT_TRUE(torch::equal(graph.sequences, eager.sequences)) << "temperature " << temperature;
    EXPECT_TRUE(torch::equal(graph.response_mask, eager.response_mask)) << "temperature " << temperature;
  }
}

TEST_P(CudaDecodeGraphTest, LaterRolloutsReplayTheGraphWithTheirOwnInputsAndWeights) {
  CausalLM model =
      LoadHfCausalLM((fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf" / GetParam()).string(), 40);
  model->to(torch::kCUDA);
  torch::manual_seed(4);
  auto prompts = torch::randint(3, 30, {8, 6}, torch::kInt64).to(torch::kCUDA);
  RolloutEngine kept(model->kv_cache_shape(), 8, 6, 24, torch::kCUDA, CharTokenizer::Format());
  kept.set_decode_mode(RolloutEngine::DecodeMode::kGraph);
  const std::vector<uint64_t> keys{1, 2, 3, 4, 5, 6, 7, 8};
  (void)kept.Generate(model, prompts, keys, 1.0);
  ASSERT_TRUE(kept.last_decode_graphed());
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.mul_(1.5);  // in place, as the optimizer updates them
  }
  auto other = torch::randint(3, 30, {8, 6}, torch::kInt64).to(torch::kCUDA);
  const std::vector<uint64_t> other_keys{11, 12, 13, 14, 15, 16, 17, 18};
  const Rollout replayed = kept.Generate(model, other, other_keys, 1.0);
  EXPECT_TRUE(kept.last_decode_graphed());
  RolloutEngine fresh(model->kv_cache_shape(), 8, 6, 24, torch::kCUDA, CharTokenizer::Format());
  fresh.set_decode_mode(RolloutEngine::DecodeMode::kStatic);
  const Rollout eager = fresh.Generate(model, other, other_keys, 1.0);
  EXPECT_TRUE(torch::equal(replayed.sequences, eager.sequences));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaDecodeGraphTest, ::testing::Values("qwen2", "qwen3", "llama3"));

}  // namespace
}  // namespace headroom::worker
