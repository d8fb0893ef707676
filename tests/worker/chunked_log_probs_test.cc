// ChunkedTokenLogProbs must equal log_softmax over the full logits (values and gradients
// for hidden states and head) for any chunk size, with temperature and a logit bias.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/grpo/chunked_log_probs.h"

namespace headroom::worker {
namespace {

struct Case {
  torch::Tensor hidden, head, targets, bias, weights;
};

Case MakeCase(torch::ScalarType dtype, bool with_bias) {
  torch::manual_seed(3);
  const int64_t rows = 37, h = 8, vocab = 50;
  Case c;
  c.hidden = torch::randn({rows, h}, torch::dtype(dtype)).requires_grad_(true);
  c.head = torch::randn({vocab, h}, torch::dtype(dtype)).requires_grad_(true);
  c.targets = torch::randint(0, vocab - 10, {rows}, torch::kLong);
  if (with_bias) {  // the last 10 tokens excluded, as a response-token restriction does
    c.bias = torch::zeros({vocab}, torch::dtype(dtype));
    c.bias.narrow(0, vocab - 10, 10).fill_(-std::numeric_limits<double>::infinity());
  }
  c.weights = torch::randn({rows}, torch::dtype(dtype));  // a loss's per-token weights
  return c;
}

torch::Tensor Unchunked(const Case& c, double temperature) {
  auto logits = torch::matmul(c.hidden, c.head.t());
  if (c.bias.defined()) logits = logits + c.bias;
  logits = logits / temperature;
  return torch::log_softmax(logits, -1).gather(1, c.targets.unsqueeze(1)).squeeze(1);
}

void ExpectSameAsUnchunked(torch::ScalarType dtype, bool with_bias, double temperature, int64_t chunk, double tol) {
  Case c = MakeCase(dtype, with_bias);
  const auto expected = Unchunked(c, temperature);
  (expected * c.weights).sum().backward();
  const auto expected_grad_hidden = c.hidden.grad().clone();
  const auto expected_grad_head = c.head.grad().clone();
  c.hidden.mutable_grad().reset();
  c.head.mutable_grad().reset();

  const auto got = ChunkedTokenLogProbs(c.hidden, c.head, c.targets, temperature, c.bias, chunk);
  (got * c.weights).sum().backward();
  SCOPED_TRACE("chunk " + std::to_string(chunk) + " temperature " + std::to_string(temperature));
  EXPECT_TRUE(torch::allclose(got, expected, 0, tol)) << (got - expected).abs().max();
  EXPECT_TRUE(torch::allclose(c.hidden.grad(), expected_grad_hidden, 0, tol))
      << (c.hidden.grad() - expected_grad_hidden).abs().max();
  EXPECT_TRUE(torch::allclose(c.head.grad(), expected_grad_head, 0, tol))
      << (c.head.grad() - expected_grad_head).abs().max();
}

TEST(ChunkedLogProbs, EqualsFullLogSoftmaxForEveryChunkSize) {
  // 1 row, an uneven split (37 = 5 * 7 + 2), and one chunk holding everything.
  for (int64_t chunk : {1, 5, 37, 1000}) {
    ExpectSameAsUnchunked(torch::kFloat64, false, 1.0, chunk, 1e-12);
  }
}

TEST(ChunkedLogProbs, TemperatureAndLogitBiasMatch) {
  for (int64_t chunk : {4, 64}) {
    ExpectSameAsUnchunked(torch::kFloat64, true, 0.7, chunk, 1e-12);
  }
}

TEST(ChunkedLogProbs, Float32WithinRounding) {
  ExpectSameAsUnchunked(torch::kFloat32, true, 1.3, 6, 1e-5);
}

TEST(ChunkedLogProbs, Bf16HiddenGivesFp32LogProbs) {
  Case c = MakeCase(torch::kFloat32, false);
  const auto hidden = c.hidden.detach().to(torch::kBFloat16);
  const auto got = ChunkedTokenLogProbs(hidden, c.head.detach(), c.targets, 1.0, {}, 8);
  EXPECT_EQ(got.scalar_type(), torch::kFloat32);
  // The same logits as the full computation: a bf16 product (what autocast multiplies),
  // then fp32 log-softmax.
  const auto head = c.head.detach().to(torch::kBFloat16);
  const auto logits = torch::matmul(hidden, head.t()).to(torch::kFloat32);
  const auto expected = torch::log_softmax(logits, -1).gather(1, c.targets.unsqueeze(1)).squeeze(1);
  EXPECT_TRUE(torch::allclose(got, expected, 0, 1e-3)) << (got - expected).abs().max();
}

TEST(ChunkedLogProbs, RejectsMismatchedShapes) {
  Case c = MakeCase(torch::kFloat32, false);
  EXPECT_THROW(ChunkedTokenLogProbs(c.hidden, c.head.t(), c.targets), c10::Error);
  EXPECT_THROW(ChunkedTokenLogProbs(c.hidden, c.head, c.targets.narrow(0, 0, 3)), c10::Error);
  EXPECT_THROW(ChunkedTokenLogProbs(c.hidden, c.head, c.targets, 1.0, {}, 0), c10::Error);
}

}  // namespace
}  // namespace headroom::worker
