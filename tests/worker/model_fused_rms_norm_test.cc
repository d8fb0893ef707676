// The fused CPU RMSNorm against the tensor ops it replaces: outputs and both gradients for
// widths that are and are not a multiple of the kernels' 8-wide lanes, many rows (several
// threads' shares) and few, the module taking it, and the inputs it refuses.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include "tests/worker/helpers/fp32_tolerance.h"
#include "worker/model/fused_rms_norm.h"
#include "worker/model/hf_causal_lm.h"

namespace headroom::worker {
namespace {

constexpr double kEps = 1e-6;

// HfRmsNormImpl's formula as tensor ops.
torch::Tensor Reference(const torch::Tensor& x, const torch::Tensor& weight) {
  return weight * (x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + kEps));
}

// The fused path sums the squares in another order (a sum of `width` terms, relative to
// the magnitude of the values it scales), and each gradient adds a sum over the row (dx)
// or over the rows (dw) of terms up to `magnitude`: two chained sums.
double Tolerance(const torch::Tensor& magnitude, int64_t terms) {
  return testing::SummationTolerance(magnitude.abs().max().item<double>(), terms, 2);
}

struct Shape {
  int64_t rows, width;
};

class FusedRmsNormTest : public ::testing::TestWithParam<Shape> {};

TEST_P(FusedRmsNormTest, OutputAndGradientsMatchTheTensorOps) {
  const auto [rows, width] = GetParam();
  torch::manual_seed(7);
  auto x = (torch::randn({rows, width}) * 3).requires_grad_(true);
  auto w = (torch::rand({width}) + 0.5).requires_grad_(true);
  auto x_ref = x.detach().clone().requires_grad_(true);
  auto w_ref = w.detach().clone().requires_grad_(true);
  const auto g = torch::randn({rows, width});

  const auto got = FusedRmsNorm(x, w, kEps);
  const auto expected = Reference(x_ref, w_ref);
  EXPECT_TRUE(testing::WithinTolerance(got.detach(), expected.detach(), Tolerance(expected, width)));
  (got * g).sum().backward();
  (expected * g).sum().backward();
  // dx sums g * w * x over the row, scaled by rsqrt(mean(x^2))^3 x: terms up to
  // |g w| * max |x| / rms^3 * |x| <= |g w| / rms * width; dw sums g * x / rms over the rows.
  const auto inv_rms = torch::rsqrt(x_ref.detach().pow(2).mean(-1, true) + kEps);
  const auto dx_terms = (g * w_ref.detach()).abs().max() * inv_rms.max() * width;
  const auto dw_terms = g * x_ref.detach() * inv_rms;
  EXPECT_TRUE(testing::WithinTolerance(x.grad(), x_ref.grad(), Tolerance(dx_terms, width)));
  EXPECT_TRUE(testing::WithinTolerance(w.grad(), w_ref.grad(), Tolerance(dw_terms, rows)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedRmsNormTest,
                         ::testing::Values(Shape{1, 8}, Shape{3, 5}, Shape{17, 64}, Shape{1280, 64}, Shape{40, 768},
                                           Shape{2000, 37}));

TEST(FusedRmsNorm, WithoutGradTheOutputIsTheSame) {
  torch::manual_seed(3);
  const auto x = torch::randn({2, 5, 64});
  const auto w = torch::rand({64});
  torch::Tensor graded;
  {
    auto xg = x.clone().requires_grad_(true);
    graded = FusedRmsNorm(xg, w, kEps).detach();
  }
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(FusedRmsNorm(x, w, kEps), graded));
}

TEST(FusedRmsNorm, TheModuleTakesItForFp32CpuRowsAndTheOpsOtherwise) {
  torch::manual_seed(5);
  HfRmsNorm norm(64, kEps);
  {
    torch::NoGradGuard no_grad;
    norm->weight.uniform_(0.5, 1.5);
  }
  const auto x = torch::randn({4, 3, 64});
  const auto expected = Reference(x, norm->weight).detach();
  EXPECT_TRUE(testing::WithinTolerance(norm(x).detach(), expected, Tolerance(expected, 64)));
  // A strided view (a head slice of a packed projection) takes the tensor ops.
  const auto wide = torch::randn({4, 3, 128});
  const auto view = wide.narrow(-1, 32, 64);
  ASSERT_FALSE(FusedRmsNormApplies(view, norm->weight));
  const auto expected_view = Reference(view, norm->weight).detach();
  EXPECT_TRUE(testing::WithinTolerance(norm(view).detach(), expected_view, Tolerance(expected_view, 64)));
}

TEST(FusedRmsNorm, RefusesWhatItDoesNotTake) {
  const auto w = torch::ones({8});
  EXPECT_FALSE(FusedRmsNormApplies(torch::ones({2, 8}, torch::kFloat64), w));
  EXPECT_FALSE(FusedRmsNormApplies(torch::ones({2, 7}), w));
  EXPECT_FALSE(FusedRmsNormApplies(torch::ones({8, 2}).t(), w));
  EXPECT_THROW(FusedRmsNorm(torch::ones({2, 7}), w, kEps), c10::Error);
}

}  // namespace
}  // namespace headroom::worker
