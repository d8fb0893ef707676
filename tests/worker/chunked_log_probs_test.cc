// ChunkedTokenLogProbs must equal log_softmax over the full logits (values and gradients
// for hidden states and head) for any chunk size, with temperature and a logit bias.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "tests/worker/helpers/fp32_tolerance.h"
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

// The largest |difference| to allow from the unchunked computation, from the quantities
// (helpers/fp32_tolerance.h): a log-prob z_t / T - logsumexp(z / T) has the rounding of
// its logits (sums over h products) twice, plus logsumexp's sum over the vocabulary; the
// hidden states' gradient sums over the vocabulary and the head's over the rows, each
// after the log-softmax's own (depth 2).
struct Tolerances {
  double values, grad_hidden, grad_head;
};

Tolerances RoundingOf(const Case& c, const torch::Tensor& expected_grad_hidden, const torch::Tensor& expected_grad_head,
                      double temperature) {
  const double eps =
      c.hidden.scalar_type() == torch::kFloat64 ? std::numeric_limits<double>::epsilon() : testing::kFp32Epsilon;
  const int64_t rows = c.hidden.size(0), h = c.hidden.size(1), vocab = c.head.size(0);
  torch::NoGradGuard no_grad;
  const double logits = (torch::matmul(c.hidden, c.head.t()) / temperature).abs().max().item<double>();
  const auto largest = [](const torch::Tensor& t) { return t.abs().max().item<double>(); };
  return {2 * testing::SummationTolerance(logits, h, 1, eps) + testing::SummationTolerance(1.0, vocab, 1, eps),
          testing::SummationTolerance(largest(expected_grad_hidden), vocab, 2, eps),
          testing::SummationTolerance(largest(expected_grad_head), rows, 2, eps)};
}

void ExpectSameAsUnchunked(torch::ScalarType dtype, bool with_bias, double temperature, int64_t chunk) {
  Case c = MakeCase(dtype, with_bias);
  const auto expected = Unchunked(c, temperature);
  (expected * c.weights).sum().backward();
  const auto expected_grad_hidden = c.hidden.grad().clone();
  const auto expected_grad_head = c.head.grad().clone();
  c.hidden.mutable_grad().reset();
  c.head.mutable_grad().reset();
  const Tolerances tol = RoundingOf(c, expected_grad_hidden, expected_grad_head, temperature);

  const auto got = ChunkedTokenLogProbs(c.hidden, c.head, c.targets, temperature, c.bias, chunk);
  (got * c.weights).sum().backward();
  SCOPED_TRACE("chunk " + std::to_string(chunk) + " temperature " + std::to_string(temperature));
  EXPECT_LE((got - expected).abs().max().item<double>(), tol.values);
  EXPECT_LE((c.hidden.grad() - expected_grad_hidden).abs().max().item<double>(), tol.grad_hidden);
  EXPECT_LE((c.head.grad() - expected_grad_head).abs().max().item<double>(), tol.grad_head);
}

TEST(ChunkedLogProbs, EqualsFullLogSoftmaxForEveryChunkSize) {
  // 1 row, an uneven split (37 = 5 * 7 + 2), and one chunk holding everything.
  for (int64_t chunk : {1, 5, 37, 1000}) {
    ExpectSameAsUnchunked(torch::kFloat64, false, 1.0, chunk);
  }
}

TEST(ChunkedLogProbs, TemperatureAndLogitBiasMatch) {
  for (int64_t chunk : {4, 64}) {
    ExpectSameAsUnchunked(torch::kFloat64, true, 0.7, chunk);
  }
}

TEST(ChunkedLogProbs, Float32WithinRounding) { ExpectSameAsUnchunked(torch::kFloat32, true, 1.3, 6); }

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
