// What the guard forecasts a step's activations with (core/memory/micro_batch_tokens.h):
// the padded tokens of the step's largest micro-batch, from its prompts' lengths alone.
#include "core/memory/micro_batch_tokens.h"

#include <gtest/gtest.h>

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

TEST(MicroBatchTokens, NoPromptsNoTokens) { EXPECT_EQ(LargestMicroBatchTokens({}, 4, kResponse, 8, 0, 1), 0); }

}  // namespace
}  // namespace headroom::memory
