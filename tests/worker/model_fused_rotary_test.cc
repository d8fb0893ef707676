// The fused CPU rotary embedding against transformers' formula x * cos + rotate_half(x) *
// sin as tensor ops: outputs and gradients for several head widths and head counts, and
// the inputs it refuses.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include "tests/worker/helpers/fp32_tolerance.h"
#include "worker/model/fused_rotary.h"

namespace headroom::worker {
namespace {

torch::Tensor RotateHalf(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({x.narrow(-1, half, half).neg(), x.narrow(-1, 0, half)}, -1);
}

// sin with the first half of each head negated, as FusedRotary takes it.
torch::Tensor Signed(const torch::Tensor& sin) {
  const int64_t half = sin.size(-1) / 2;
  return torch::cat({sin.narrow(-1, 0, half).neg(), sin.narrow(-1, half, half)}, -1);
}

struct Shape {
  int64_t batch, t, heads, dim;
};

class FusedRotaryTest : public ::testing::TestWithParam<Shape> {};

TEST_P(FusedRotaryTest, OutputAndGradientMatchTransformersFormula) {
  const auto [batch, t, heads, dim] = GetParam();
  torch::manual_seed(11);
  auto x = torch::randn({batch, t, heads, dim}).requires_grad_(true);
  auto x_ref = x.detach().clone().requires_grad_(true);
  const auto angles = torch::rand({t, heads, dim}) * 6;
  const auto cos = angles.cos(), sin = angles.sin();
  const auto g = torch::randn({batch, t, heads, dim});

  const auto got = FusedRotary(x, cos, Signed(sin));
  const auto expected = x_ref * cos + RotateHalf(x_ref) * sin;
  // Each value is a sum of two products (one rounding apart, fused multiply-adds or not).
  const double tolerance = testing::SummationTolerance(x_ref.detach().abs().max().item<double>(), 2);
  EXPECT_TRUE(testing::WithinTolerance(got.detach(), expected.detach(), tolerance));
  (got * g).sum().backward();
  (expected * g).sum().backward();
  EXPECT_TRUE(
      testing::WithinTolerance(x.grad(), x_ref.grad(), testing::SummationTolerance(g.abs().max().item<double>(), 2)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedRotaryTest,
                         ::testing::Values(Shape{1, 1, 1, 2}, Shape{3, 5, 4, 16}, Shape{128, 10, 12, 16},
                                           Shape{2, 7, 3, 6}, Shape{4, 3, 2, 128}));

TEST(FusedRotary, WithoutGradTheOutputIsTheSame) {
  torch::manual_seed(2);
  const auto x = torch::randn({2, 3, 4, 8});
  const auto cos = torch::rand({3, 4, 8}), sin = torch::rand({3, 4, 8});
  const auto graded = FusedRotary(x.clone().requires_grad_(true), cos, sin).detach();
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(FusedRotary(x, cos, sin), graded));
}

TEST(FusedRotary, RefusesWhatItDoesNotTake) {
  const auto table = torch::ones({3, 4, 8});
  EXPECT_TRUE(FusedRotaryApplies(torch::ones({2, 3, 4, 8}), table, table));
  EXPECT_FALSE(FusedRotaryApplies(torch::ones({2, 3, 4, 8}, torch::kFloat64), table, table));
  EXPECT_FALSE(FusedRotaryApplies(torch::ones({2, 3, 4, 16}).narrow(-1, 0, 8), table, table));
  EXPECT_FALSE(FusedRotaryApplies(torch::ones({2, 3, 5, 8}), table, table));
  EXPECT_FALSE(FusedRotaryApplies(torch::ones({2, 3, 4, 7}), torch::ones({3, 4, 7}), torch::ones({3, 4, 7})));
  EXPECT_THROW(FusedRotary(torch::ones({2, 3, 5, 8}), table, table), c10::Error);
}

}  // namespace
}  // namespace headroom::worker
