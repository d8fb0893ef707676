// A bf16 KV cache (what the rollout keeps where it reads bf16 inference weights, on a GPU):
// attention reads it as it is, with the query heads folded per key/value head instead of
// the cache repeated for grouped-query attention. Here the same path runs on the CPU in bf16
// and is compared with the fp32 cache token by token, within what bf16 rounding allows.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/worker/helpers/fp32_tolerance.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/model/kv_cache.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;

// bf16 keeps 8 significant bits: a value rounds to within 2^-8 of itself (relative).
constexpr double kBf16UnitRoundoff = 0x1p-8;

// How far a bf16-cache forward's logits may be from the fp32 cache's. Attention in the
// cache's dtype rounds six times per layer - the stored keys and values, the queries cast
// to them, the scores, the probabilities and the output - each by at most kBf16UnitRoundoff
// of the magnitudes involved; the rest of each block runs in fp32. The layers chain (a
// block's error feeds the next, then the head): depth = layers + 1, and the fp32 side may
// err the other way (factor 2), as testing::SummationTolerance counts it. Magnitude: the
// largest |logit|, as in the fp32 bounds (tests/worker/helpers/fp32_tolerance.h).
double Bf16CacheTolerance(const CausalLM& model, const torch::Tensor& logits) {
  constexpr int64_t kRoundingsPerLayer = 6;
  return testing::SummationTolerance(logits.abs().max().item<double>(), kRoundingsPerLayer, model->layers() + 1,
                                     kBf16UnitRoundoff);
}

class Bf16KvCache : public ::testing::TestWithParam<bool> {};  // with left padding or without

TEST_P(Bf16KvCache, DecodesWithinTheBf16BoundOfTheFp32Cache) {
  const bool padded = GetParam();
  // Grouped-query attention (4 query heads on 2 key/value heads) and q/k norms.
  CausalLM model = LoadHfCausalLM((fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf/qwen3").string(), 32);
  torch::NoGradGuard no_grad;
  torch::manual_seed(4);
  const int64_t batch = 3, prompt = 6, tokens = 8;
  auto prompts = torch::randint(2, model->vocab_size(), {batch, prompt}, torch::kInt64);
  torch::Tensor padding;
  if (padded) {
    padding = torch::tensor({0, 2, 1}, torch::kInt64);
    prompts[1].narrow(0, 0, 2).fill_(0);
    prompts[2].narrow(0, 0, 1).fill_(0);
  }
  KvCache fp32(model->kv_cache_shape(), batch, prompt + tokens, torch::kCPU);
  KvCache bf16(model->kv_cache_shape(), batch, prompt + tokens, torch::kCPU, torch::kBFloat16);
  EXPECT_EQ(bf16.Keys(0, 0).scalar_type(), torch::kBFloat16);
  EXPECT_EQ(2 * bf16.bytes(), fp32.bytes());
  fp32.Reset(batch, padding);
  bf16.Reset(batch, padding);
  auto want = model->ForwardCached(prompts, fp32);
  auto got = model->ForwardCached(prompts, bf16);
  double largest_difference = 0;
  for (int64_t t = 0; t <= tokens; ++t) {
    ASSERT_EQ(got.scalar_type(), torch::kFloat32) << "the output returns to the activations' dtype";
    const double tolerance = Bf16CacheTolerance(model, want);
    EXPECT_TRUE(testing::WithinTolerance(got, want, tolerance)) << "token " << t;
    largest_difference = std::max(largest_difference, (got - want).abs().max().item<double>());
    if (t == tokens) break;
    const auto next = want.argmax(-1, /*keepdim=*/true);  // both caches see the same tokens
    want = model->ForwardCached(next, fp32);
    got = model->ForwardCached(next, bf16);
  }
  // The bf16 cache was read in bf16: its logits are not the fp32 cache's to fp32 rounding.
  const auto sums = testing::SumsOfForward(model, prompt + tokens);
  EXPECT_GT(largest_difference, testing::SummationTolerance(want.abs().max().item<double>(), sums.terms, sums.depth));
}

INSTANTIATE_TEST_SUITE_P(Padding, Bf16KvCache, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Padded" : "Unpadded"; });

}  // namespace
}  // namespace headroom::worker
