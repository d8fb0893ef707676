// The fused CUDA sampling kernel's rule, checked here through the scalar reference it is
// compiled from (worker/rollout/gumbel_hash.h): the reference hashes as GumbelNoise does,
// and its Gumbel-max choice over bf16 logits is the token the CPU decode step samples, bit
// for bit, with and without a logit bias, at several temperatures. tests/gpu runs the
// kernel itself against the same reference.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "worker/rollout/decode_step.h"
#include "worker/rollout/gumbel_hash.h"
#include "worker/rollout/gumbel_noise.h"
#include "worker/rollout/gumbel_sample.h"
#include "worker/tasks/counter_rng.h"

namespace headroom::worker {
namespace {

std::vector<uint64_t> Keys(int64_t n) {
  std::vector<uint64_t> keys{0, std::numeric_limits<uint64_t>::max(), 0x8000000080000000ULL};
  for (int64_t i = static_cast<int64_t>(keys.size()); i < n; ++i) keys.push_back(MixKey(11, static_cast<uint64_t>(i)));
  keys.resize(static_cast<size_t>(n));
  return keys;
}

TEST(GumbelHash, Mix32IsCounterRngs) {
  for (uint32_t x : {0U, 1U, 0x7FFFFFFFU, 0x80000000U, 0xFFFFFFFFU}) EXPECT_EQ(gumbel::Mix32(x), Mix32(x));
  for (uint32_t i = 0; i < 100000; ++i) ASSERT_EQ(gumbel::Mix32(i * 2654435761U), Mix32(i * 2654435761U));
}

// The bits of every (row, position, token) equal the tensor paths' exactly; the noise is
// -log(-log(u)) of the same u, through this library's logf rather than LibTorch's
// vectorised log: equal to the last ulp of the two logs (gumbel_noise.h).
TEST(GumbelHash, NoiseEqualsGumbelNoise) {
  const auto keys = Keys(6);
  const int64_t positions = 7, vocab = 3001;
  const GumbelNoise noise(keys, positions, vocab, torch::kCPU);
  const auto rows = noise.row_hashes().accessor<int64_t, 2>();
  int64_t exact = 0, total = 0;
  for (int64_t t = 0; t < positions; ++t) {
    const auto bits_tensor = noise.Bits(t);
    const auto bits = bits_tensor.accessor<int64_t, 2>();
    const auto values = noise.At(t, GumbelNoise::Path::kHostLoop).contiguous();
    const auto v = values.accessor<float, 2>();
    for (size_t i = 0; i < keys.size(); ++i) {
      const int64_t r = static_cast<int64_t>(i);
      const uint32_t row = gumbel::RowHash(keys[i], t);
      ASSERT_EQ(static_cast<int64_t>(row), rows[r][t]);
      for (int64_t j = 0; j < vocab; ++j) {
        const uint32_t b = gumbel::Bits(row, gumbel::TokenHash(j));
        ASSERT_EQ(static_cast<int64_t>(b), bits[r][j]) << "row " << i << " t " << t << " j " << j;
        ASSERT_EQ(gumbel::Uniform(b), GumbelNoise::ReferenceUniform(b));
        const float reference = gumbel::Noise(gumbel::Uniform(b));
        // Each log within an ulp (2^-23 relative) in either library: the inner one's error
        // passes to the outer as an absolute 2 x 2^-23, the outer adds 2 x 2^-23 of |noise|.
        ASSERT_LE(std::abs(reference - v[r][j]), 0x1p-22 * (1 + std::abs(reference)))
            << "row " << i << " t " << t << " j " << j << ": " << reference << " vs " << v[r][j];
        exact += reference == v[r][j];
        ++total;
      }
    }
  }
  EXPECT_GT(exact, total * 9 / 10) << "the two logs should agree nearly everywhere";
}

// Logits drawn once from a seeded generator, rounded to bf16; the decode step samples
// every position, the reference picks from the same bf16 bits.
void ExpectDecodeStepEqualsReference(double temperature, bool with_bias) {
  const int64_t batch = 9, positions = 12, vocab = 2053;
  const auto keys = Keys(batch);
  torch::manual_seed(20261128);
  // Spread as real logits are (a few units), bf16 so the kernel's input type is exact.
  const auto logits = (torch::randn({positions, batch, vocab}) * 3).to(torch::kBFloat16).contiguous();
  torch::Tensor bias;
  if (with_bias) {
    bias = torch::zeros({vocab});
    bias.index_put_({torch::randperm(vocab).narrow(0, 0, vocab / 2)}, -std::numeric_limits<float>::infinity());
  }
  constexpr int64_t kStop = 0;
  if (!bias.defined()) bias = torch::zeros({vocab});
  bias[kStop] = -std::numeric_limits<float>::infinity();  // no row stops: every position samples
  DecodeRule rule{temperature, bias, {kStop}, /*pad_token=*/kStop};
  DecodeStep step(batch, 1, positions, vocab, rule, torch::kCPU);
  step.Begin(torch::ones({batch, 1}, torch::kInt64), {}, keys);
  for (int64_t t = 0; t < positions; ++t) step.Sample(logits[t]);
  const auto [sequences, mask] = step.Result();
  ASSERT_EQ(mask.sum().item<double>(), static_cast<double>(batch * positions));
  const auto sampled = sequences.narrow(1, 1, positions).contiguous();
  const auto s = sampled.accessor<int64_t, 2>();
  const float* b = bias.data_ptr<float>();
  int64_t distinct_from_argmax = 0;
  for (int64_t t = 0; t < positions; ++t) {
    const auto row_logits = logits[t].contiguous();
    const auto* bits = reinterpret_cast<const uint16_t*>(row_logits.data_ptr<at::BFloat16>());
    for (int64_t i = 0; i < batch; ++i) {
      const int64_t reference =
          gumbel::ReferenceGumbelArgmax(bits + i * vocab, b, vocab, gumbel::RowHash(keys[static_cast<size_t>(i)], t),
                                        static_cast<float>(temperature));
      ASSERT_EQ(reference, s[i][t]) << "row " << i << " position " << t;
      if (reference != (row_logits[i].to(torch::kFloat32) + bias).argmax().item<int64_t>()) ++distinct_from_argmax;
    }
  }
  // The noise did choose: most samples are not the plain argmax (a vacuous rule would pass).
  EXPECT_GT(distinct_from_argmax, batch * positions / 2);
}

TEST(GumbelSampleReference, EqualsTheDecodeStepsSamples) { ExpectDecodeStepEqualsReference(1.0, false); }
TEST(GumbelSampleReference, EqualsTheDecodeStepsSamplesWithABias) { ExpectDecodeStepEqualsReference(1.0, true); }
TEST(GumbelSampleReference, EqualsTheDecodeStepsSamplesAtOtherTemperatures) {
  ExpectDecodeStepEqualsReference(0.7, true);
  ExpectDecodeStepEqualsReference(1.3, false);
}

TEST(GumbelSampleReference, NanWinsAsArgmaxDoes) {
  const int64_t vocab = 4;
  std::vector<uint16_t> logits(vocab, 0x3F80);  // bf16 1.0
  logits[2] = 0x7FC0;                           // bf16 NaN
  EXPECT_EQ(gumbel::ReferenceGumbelArgmax(logits.data(), nullptr, vocab, 5, 1.0f), 2);
  const auto as_tensor = torch::tensor(std::vector<float>{1, 1, std::numeric_limits<float>::quiet_NaN(), 1});
  EXPECT_EQ(as_tensor.argmax().item<int64_t>(), 2);
}

TEST(GumbelSample, FusedKernelOnlyServesCudaBf16) {
  const auto logits = torch::zeros({2, 8}, torch::kBFloat16);
  EXPECT_FALSE(FusedGumbelArgmaxApplies(logits, 1.0));
  const GumbelNoise noise({1, 2}, 3, 8, torch::kCPU);
  EXPECT_THROW(FusedGumbelArgmax(logits, noise, torch::zeros({}, torch::kInt64), {}, 1.0), std::invalid_argument);
}

}  // namespace
}  // namespace headroom::worker
