// What the guard forecasts a step's activations with (core/memory/micro_batch_tokens.h):
// the padded tokens of the step's largest micro-batch, from its prompts' lengths alone.
#include "core/memory/micro_batch_tokens.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace headroom::memory {
namespace {

constexpr int64_t kResponse = 8;

// Four prompts, one of them long, each sampled twice: eight rows.
const std::vector<int64_t> kWithLong = {10, 12, 300, 11};
const std::vector<int64_t> kShort = {10, 12, 9, 11};

TEST(MicroBatchTokens, WithoutABudgetOneLongPromptPadsEveryRow) {
  // microBatchSize 4: two micro-batches of 4 rows, every row at the longest prompt.
  EXPECT_EQ(LargestMicroBatchTokens(kWithLong, 2, kResponse, 4, 0, 1), 4 * (300 + kResponse));
  EXPECT_EQ(LargestMicroBatchTokens(kShort, 2, kResponse, 4, 0, 1), 4 * (12 + kResponse));
  // More rows per micro-batch than the step has: all of them.
  EXPECT_EQ(LargestMicroBatchTokens(kWithLong, 2, kResponse, 128, 0, 1), 8 * (300 + kResponse));
  // Two mini-batches of 4 rows each: at most 4 rows in a micro-batch.
  EXPECT_EQ(LargestMicroBatchTokens(kWithLong, 2, kResponse, 128, 0, 2), 4 * (300 + kResponse));
}

TEST(MicroBatchTokens, UnderABudgetTheLongRowsGoTogetherAndTheShortOnesApart) {
  const int64_t long_row = 300 + kResponse;
  // A budget of two long rows: the long prompt's two samples share one micro-batch, the
  // short rows fill others, each trimmed to its own longest.
  EXPECT_EQ(LargestMicroBatchTokens(kWithLong, 2, kResponse, 128, 2 * long_row, 1), 2 * long_row);
  // The same budget over short prompts only: as many rows as fit, at their own length.
  const int64_t short_rows = LargestMicroBatchTokens(kShort, 2, kResponse, 128, 2 * long_row, 1);
  EXPECT_EQ(short_rows, 8 * (12 + kResponse)) << "all eight short rows fit the budget";
  // A budget under one long row: that row goes alone.
  EXPECT_EQ(LargestMicroBatchTokens(kWithLong, 2, kResponse, 128, long_row - 1, 1), long_row);
  // Both limits hold: microBatchSize 1 under a large budget.
  EXPECT_EQ(LargestMicroBatchTokens(kWithLong, 2, kResponse, 1, 100 * long_row, 1), long_row);
}

// Weighted by the planner's per-token cost at each micro-batch's length: a micro-batch of
// long rows weighs what its attention makes it weigh, and full-length rows their tokens.
TEST(MicroBatchTokens, ACostPerTokenWeighsLongRowsByTheirLength) {
  const int64_t h = 64, heads = 4, full = 300 + kResponse;
  const TokenCost cost = [&](int64_t length) { return 17.0 * h + 2.5 * heads * static_cast<double>(length); };
  // The long prompt pads every row to full length: the same as the padded tokens.
  EXPECT_EQ(LargestMicroBatchTokens(kWithLong, 2, kResponse, 4, 0, 1, cost, full), 4 * full);
  // Short rows count at their length's cost against a full-length row's.
  const int64_t short_length = 12 + kResponse;
  const double weight = cost(short_length) / cost(full);
  EXPECT_EQ(LargestMicroBatchTokens(kShort, 2, kResponse, 4, 0, 1, cost, full),
            std::llround(4.0 * static_cast<double>(short_length) * weight));
  EXPECT_LT(weight, 1.0);
  // The ratio between the two steps is their activations' ratio, not their tokens', to the
  // rounding of the smaller to a whole number (half a unit of it).
  const double tokens_ratio = static_cast<double>(full) / static_cast<double>(short_length);
  const double small = static_cast<double>(LargestMicroBatchTokens(kShort, 2, kResponse, 4, 0, 1, cost, full));
  EXPECT_NEAR(static_cast<double>(LargestMicroBatchTokens(kWithLong, 2, kResponse, 4, 0, 1, cost, full)) / small,
              tokens_ratio / weight, (tokens_ratio / weight) * 0.5 / small);
}

TEST(MicroBatchTokens, NoPromptsNoTokens) { EXPECT_EQ(LargestMicroBatchTokens({}, 4, kResponse, 8, 0, 1), 0); }

}  // namespace
}  // namespace headroom::memory
