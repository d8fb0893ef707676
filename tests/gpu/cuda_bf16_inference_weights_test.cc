// On a CUDA device the rollout and old log-probs read bf16 copies of the weights by
// default (worker/sharding/inference_weights.h): the model reads bf16 parameters inside
// the scope and fp32 ones after it, and its passes equal the fp32 passes under bf16
// autocast to bf16 rounding of the weights (and those over weights rounded beforehand).
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/worker/helpers/bf16_passes.h"
#include "worker/comm/communicator_factory.h"
#include "worker/sharding/inference_weights.h"

namespace headroom::worker {
namespace {

bool AllParameters(CausalLM model, torch::ScalarType dtype) {
  for (const auto& [name, p] : model->OrderedParameters()) {
    if (p.scalar_type() != dtype || !p.is_cuda()) return false;
  }
  return true;
}

TEST(CudaBf16InferenceWeightsTest, PassesOnTheCopiesMatchTheAutocastPasses) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch here";
  const torch::Device cuda(torch::kCUDA, 0);
  torch::manual_seed(21);
  const auto sequences = torch::randint(3, 32, {3, 9}, torch::kInt64);

  HfCausalLM model = testing::TiedTiny();
  model->to(cuda);
  auto comm = MakeLocalCommunicator();
  ShardingOptions options;
  options.stage = 0;
  options.bf16_inference_weights = Bf16InferenceWeightsByDefault(cuda);
  ASSERT_TRUE(options.bf16_inference_weights);
  ModelShards shards(model, *comm, options, AdamWConfig{});
  testing::Bf16Passes got;
  {
    InferenceWeightsScope copies(shards);
    EXPECT_TRUE(AllParameters(model, torch::kBFloat16));
    got = testing::RunBf16Passes(model, sequences, cuda);
  }
  EXPECT_TRUE(AllParameters(model, torch::kFloat32));
  const testing::Bf16Passes fp32 = testing::RunBf16Passes(model, sequences, cuda);
  testing::ExpectWithinBf16Rounding(model, got, fp32);

  HfCausalLM rounded_model = testing::TiedTiny();
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, p] : rounded_model->OrderedParameters()) p.copy_(p.to(torch::kBFloat16));
  }
  rounded_model->to(cuda);
  const testing::Bf16Passes rounded = testing::RunBf16Passes(rounded_model, sequences, cuda);
  // Not bit for bit: cuBLAS may pick another kernel for a view into the flat copy than
  // for a fresh cast (it weighs pointer alignment), and a bf16 output rounded the other
  // way carries on like a rounded weight.
  testing::ExpectWithinBf16Rounding(model, got, rounded);
}

}  // namespace
}  // namespace headroom::worker
