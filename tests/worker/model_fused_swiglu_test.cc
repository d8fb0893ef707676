// The fused CPU SwiGLU gate against silu(gate) * up as tensor ops on the two halves of a
// stacked projection: outputs and the stacked gradient for several widths, and the inputs
// it refuses.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include "tests/worker/helpers/fp32_tolerance.h"
#include "worker/model/fused_swiglu.h"

namespace headroom::worker {
namespace {

struct Shape {
  int64_t rows, f;
};

class FusedSwiGluTest : public ::testing::TestWithParam<Shape> {};

TEST_P(FusedSwiGluTest, OutputAndGradientMatchTheTensorOps) {
  const auto [rows, f] = GetParam();
  torch::manual_seed(13);
  auto stacked = (torch::randn({rows, 2 * f}) * 4).requires_grad_(true);
  auto stacked_ref = stacked.detach().clone().requires_grad_(true);
  const auto g = torch::randn({rows, f});

  const auto got = FusedSwiGlu(stacked);
  const auto parts = stacked_ref.split(f, -1);
  const auto expected = torch::silu(parts[0]) * parts[1];
  ASSERT_EQ(got.sizes(), expected.sizes());
  // A few roundings per value (sigmoid, two products; silu as x * sigmoid(x) or x / (1 +
  // exp(-x))), relative to the largest product: a sum of a handful of terms.
  const auto magnitude = (parts[0].abs() * parts[1].abs()).max().item<double>() + 1;
  EXPECT_TRUE(testing::WithinTolerance(got.detach(), expected.detach(), testing::SummationTolerance(magnitude, 4)));
  (got * g).sum().backward();
  (expected * g).sum().backward();
  const auto grad_magnitude = (g.abs().max() * (stacked_ref.detach().abs().max() + 1).pow(2)).item<double>();
  EXPECT_TRUE(
      testing::WithinTolerance(stacked.grad(), stacked_ref.grad(), testing::SummationTolerance(grad_magnitude, 6)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedSwiGluTest,
                         ::testing::Values(Shape{1, 1}, Shape{3, 5}, Shape{1280, 256}, Shape{17, 2048}));

TEST(FusedSwiGlu, TakesLeadingDimensionsWithAndWithoutGrad) {
  torch::manual_seed(4);
  const auto stacked = torch::randn({2, 3, 16});
  const auto graded = FusedSwiGlu(stacked.clone().requires_grad_(true)).detach();
  EXPECT_EQ(graded.sizes(), (std::vector<int64_t>{2, 3, 8}));
  torch::NoGradGuard no_grad;
  // Without grad the silu is ATen's x / (1 + exp(-x)): the same to a few roundings.
  const auto magnitude = (stacked.abs().max() + 1).pow(2).item<double>();
  EXPECT_TRUE(testing::WithinTolerance(FusedSwiGlu(stacked), graded, testing::SummationTolerance(magnitude, 4)));
}

TEST(FusedSwiGlu, RefusesWhatItDoesNotTake) {
  EXPECT_TRUE(FusedSwiGluApplies(torch::ones({2, 8})));
  EXPECT_FALSE(FusedSwiGluApplies(torch::ones({2, 7})));
  EXPECT_FALSE(FusedSwiGluApplies(torch::ones({2, 8}, torch::kFloat64)));
  EXPECT_FALSE(FusedSwiGluApplies(torch::ones({8, 2}).t()));
  EXPECT_THROW(FusedSwiGlu(torch::ones({2, 7})), c10::Error);
}

}  // namespace
}  // namespace headroom::worker
