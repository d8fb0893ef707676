// The fused sampling kernel (worker/rollout/gumbel_sample_cuda.cu) on a CUDA device: its
// tokens are the scalar reference's (gumbel_hash.h, which tests/worker checks against the
// CPU decode step) and the tensor path's on the device, with and without a logit bias, at
// the position a device tensor holds. Skips without a CUDA device.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include <torch/torch.h>

#include "worker/rollout/gumbel_hash.h"
#include "worker/rollout/gumbel_noise.h"
#include "worker/rollout/gumbel_sample.h"

namespace headroom::worker {
namespace {

TEST(CudaGumbelSample, KernelTokensEqualTheReferenceAndTheTensorPath) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch here";
  const torch::Device cuda(torch::kCUDA, 0);
  const int64_t batch = 16, positions = 5, vocab = 151936;  // Qwen2.5's vocabulary
  std::vector<uint64_t> keys;
  for (int64_t i = 0; i < batch; ++i) keys.push_back(0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(i + 1));
  const GumbelNoise noise(keys, positions, vocab, cuda);
  torch::manual_seed(12);
  auto bias = torch::zeros({vocab});
  bias.index_put_({torch::randperm(vocab).narrow(0, 0, vocab / 3)}, -std::numeric_limits<float>::infinity());
  for (const bool with_bias : {false, true}) {
    for (const double temperature : {1.0, 0.6}) {
      for (int64_t t = 0; t < positions; ++t) {
        const auto logits = (torch::randn({batch, vocab}) * 4).to(torch::kBFloat16);
        const auto on_device = logits.to(cuda);
        const auto position = torch::full({}, t, torch::TensorOptions().dtype(torch::kInt64).device(cuda));
        ASSERT_TRUE(FusedGumbelArgmaxApplies(on_device, temperature));
        const auto got =
            FusedGumbelArgmax(on_device, noise, position, with_bias ? bias.to(cuda) : torch::Tensor(), temperature)
                .cpu();
        auto scores = on_device.to(torch::kFloat32);
        if (with_bias) scores = scores + bias.to(cuda);
        const auto tensor_path = (scores / temperature + noise.At(position)).argmax(-1).cpu();
        const auto bits = reinterpret_cast<const uint16_t*>(logits.contiguous().data_ptr<at::BFloat16>());
        for (int64_t i = 0; i < batch; ++i) {
          const int64_t reference = gumbel::ReferenceGumbelArgmax(
              bits + i * vocab, with_bias ? bias.data_ptr<float>() : nullptr, vocab,
              gumbel::RowHash(keys[static_cast<size_t>(i)], t), static_cast<float>(temperature));
          EXPECT_EQ(got[i].item<int64_t>(), reference) << "row " << i << " t " << t << " T " << temperature;
          EXPECT_EQ(got[i].item<int64_t>(), tensor_path[i].item<int64_t>()) << "row " << i << " t " << t;
        }
      }
    }
  }
}

}  // namespace
}  // namespace headroom::worker
