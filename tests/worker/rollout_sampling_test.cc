// Gumbel noise: the tensor-op hash equals its scalar definition bit for bit, every path
// gives the same noise, and Gumbel-max sampling with it follows softmax(logits / T).
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "worker/rollout/gumbel_noise.h"
#include "worker/tasks/counter_rng.h"

namespace headroom::worker {
namespace {

std::vector<uint64_t> KeysWithExtremes() {
  std::vector<uint64_t> keys{0,
                             1,
                             0xFFFFFFFFULL,
                             0x100000000ULL,
                             0x7FFFFFFFFFFFFFFFULL,
                             0x8000000000000000ULL,
                             0x8000000080000000ULL,
                             std::numeric_limits<uint64_t>::max()};
  for (uint64_t i = 0; i < 8; ++i) keys.push_back(MixKey(7, i));
  return keys;
}

TEST(GumbelNoise, TensorHashEqualsScalarReference) {
  const auto keys = KeysWithExtremes();
  const int64_t positions = 40, vocab = 1000;
  GumbelNoise noise(keys, positions, vocab, torch::kCPU);
  for (int64_t t = 0; t < positions; ++t) {
    const auto bits = noise.Bits(t);
    ASSERT_EQ(bits.sizes(), torch::IntArrayRef({static_cast<int64_t>(keys.size()), vocab}));
    const auto a = bits.accessor<int64_t, 2>();
    for (size_t i = 0; i < keys.size(); ++i) {
      for (int64_t j = 0; j < vocab; ++j) {
        ASSERT_EQ(a[i][j], static_cast<int64_t>(GumbelNoise::ReferenceBits(keys[i], t, j)))
            << "key " << keys[i] << " position " << t << " token " << j;
      }
    }
  }
}

TEST(GumbelNoise, LargeTokenIdsAndPositionsMatchToo) {
  const auto keys = KeysWithExtremes();
  const int64_t positions = 5000, vocab = 152000;  // a real vocabulary, a long response
  GumbelNoise noise(keys, positions, vocab, torch::kCPU);
  for (int64_t t : {int64_t{0}, int64_t{4095}, positions - 1}) {
    const auto a = noise.Bits(t);
    const auto acc = a.accessor<int64_t, 2>();
    for (size_t i = 0; i < keys.size(); ++i) {
      for (int64_t j = vocab - 300; j < vocab; ++j) {
        ASSERT_EQ(acc[i][j], static_cast<int64_t>(GumbelNoise::ReferenceBits(keys[i], t, j)));
      }
    }
  }
  EXPECT_THROW(noise.Bits(positions), std::out_of_range);
}

TEST(GumbelNoise, HostLoopAndTensorOpsGiveTheSameFiniteNoise) {
  const auto keys = KeysWithExtremes();
  GumbelNoise noise(keys, 3, 777, torch::kCPU);
  for (int64_t t = 0; t < 3; ++t) {
    const auto by_ops = noise.At(t, GumbelNoise::Path::kTensorOps);
    const auto by_loop = noise.At(t, GumbelNoise::Path::kHostLoop);
    EXPECT_TRUE(torch::equal(by_ops, by_loop)) << "position " << t;
    EXPECT_TRUE(torch::isfinite(by_ops).all().item<bool>());
  }
  // The extreme uniforms stay inside (0, 1), so the noise is finite at both ends.
  EXPECT_GT(GumbelNoise::ReferenceUniform(0), 0.0f);
  EXPECT_LT(GumbelNoise::ReferenceUniform(0xFFFFFFFFU), 1.0f);
  EXPECT_TRUE(std::isfinite(-std::log(-std::log(GumbelNoise::ReferenceUniform(0xFFFFFFFFU)))));
}

TEST(GumbelNoise, RowDependsOnlyOnItsKey) {
  std::vector<uint64_t> keys{3, 1, 4, 1, 5};
  GumbelNoise all(keys, 2, 50, torch::kCPU), one({4}, 2, 50, torch::kCPU);
  EXPECT_TRUE(torch::equal(all.At(1)[2], one.At(1)[0]));
  EXPECT_TRUE(torch::equal(all.At(1)[1], all.At(1)[3]));   // equal keys, equal noise
  EXPECT_FALSE(torch::equal(all.At(0)[2], all.At(1)[2]));  // positions differ
}

// Gumbel-max over 6 tokens: counts of argmax(logits / T + noise) over N draws with
// distinct (key, position) against N * softmax(logits / T). Under the null hypothesis
// Pearson's statistic is asymptotically chi-square with 5 degrees of freedom (the
// smallest expected count here is ~92, well inside the asymptotic regime). Its survival
// function is Q(x) = erfc(sqrt(x/2)) + sqrt(2x/pi) e^(-x/2) (1 + x/3); Q(50) = 1.4e-9,
// so a correct sampler fails this test with probability ~1e-9 (and, the keys being fixed,
// deterministically passes or fails). Sampling at T = 1 instead of 0.7 would give a
// statistic in the thousands.
TEST(GumbelNoise, SamplesFollowSoftmaxOfLogitsOverTemperature) {
  const std::vector<float> logit_values{1.0f, 0.5f, 0.0f, -0.5f, -1.5f, 2.0f};
  const double temperature = 0.7;
  const int64_t vocab = 6, n_keys = 5000, positions = 4;
  std::vector<uint64_t> keys;
  for (int64_t i = 0; i < n_keys; ++i) keys.push_back(MixKey(2024, static_cast<uint64_t>(i)));
  const auto logits = torch::tensor(logit_values);
  GumbelNoise noise(keys, positions, vocab, torch::kCPU);
  auto counts = torch::zeros({vocab}, torch::kFloat64);
  for (int64_t t = 0; t < positions; ++t) {
    const auto tokens = (logits / temperature + noise.At(t)).argmax(-1);
    counts.index_add_(0, tokens, torch::ones({n_keys}, torch::kFloat64));
  }
  const auto expected = torch::softmax(logits.to(torch::kFloat64) / temperature, 0) * (n_keys * positions);
  const double chi_square = ((counts - expected).pow(2) / expected).sum().item<double>();
  EXPECT_LT(chi_square, 50.0) << "counts " << counts << " expected " << expected;
}

}  // namespace
}  // namespace headroom::worker
