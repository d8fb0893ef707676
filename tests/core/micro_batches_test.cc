// The micro-batch split (core/memory/micro_batches.h): the fixed split by rows, and the
// token budget's length-sorted split with both of its limits.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/memory/micro_batches.h"

namespace headroom::memory {
namespace {

using Groups = std::vector<std::vector<int64_t>>;

// Every index exactly once.
void ExpectPartition(const Groups& groups, size_t n) {
  std::vector<int> seen(n, 0);
  for (const auto& g : groups) {
    EXPECT_FALSE(g.empty());
    EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
    for (int64_t r : g) ++seen.at(static_cast<size_t>(r));
  }
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "row " << i;
}

int64_t TotalPadded(const std::vector<SequenceLength>& lengths, const Groups& groups) {
  int64_t sum = 0;
  for (const auto& g : groups) sum += PaddedTokens(lengths, g);
  return sum;
}

TEST(MicroBatches, WithoutABudgetRowsAreCutInOrder) {
  const std::vector<SequenceLength> lengths(7, {3, 4});
  EXPECT_EQ(SplitMicroBatches(lengths, 3, 0), (Groups{{0, 1, 2}, {3, 4, 5}, {6}}));
  EXPECT_EQ(SplitMicroBatches(lengths, 64, 0), (Groups{{0, 1, 2, 3, 4, 5, 6}}));
  EXPECT_EQ(SplitMicroBatches(lengths, 0, 0).size(), 7u);  // max_rows < 1 counts as 1
  EXPECT_TRUE(SplitMicroBatches({}, 4, 100).empty());
}

TEST(MicroBatches, PaddedTokensAreRowsTimesLongestPromptPlusLongestResponse) {
  // Left-padded prompts and right-padded responses line up at the prompt's end: the
  // longest prompt and the longest response may come from different rows.
  const std::vector<SequenceLength> lengths = {{10, 1}, {2, 8}, {5, 5}};
  EXPECT_EQ(PaddedTokens(lengths, {0, 1}), 2 * (10 + 8));
  EXPECT_EQ(PaddedTokens(lengths, {2}), 10);
  EXPECT_EQ(PaddedTokens(lengths, {}), 0);
}

TEST(MicroBatches, LongRowsShareAMicroBatchAndShortOnesAnother) {
  // Alternating long (20 tokens) and short (4 tokens) rows, budget 40: sorted, the two
  // long rows fill one micro-batch exactly and the short ones another, 48 padded tokens
  // (all of them real); the fixed split of two rows pads every short row to 20: 80.
  const std::vector<SequenceLength> lengths = {{10, 10}, {2, 2}, {10, 10}, {2, 2}};
  const Groups budget = SplitMicroBatches(lengths, 64, 40);
  EXPECT_EQ(budget, (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(TotalPadded(lengths, budget), 48);
  EXPECT_EQ(TotalPadded(lengths, SplitMicroBatches(lengths, 2, 0)), 80);
}

TEST(MicroBatches, ARowLongerThanTheBudgetGoesAlone) {
  const std::vector<SequenceLength> lengths = {{3, 3}, {40, 20}, {3, 3}, {3, 3}};
  const Groups groups = SplitMicroBatches(lengths, 64, 20);
  EXPECT_EQ(groups, (Groups{{1}, {0, 2, 3}}));
  EXPECT_EQ(PaddedTokens(lengths, groups[0]), 60);  // over the budget, alone
  EXPECT_EQ(PaddedTokens(lengths, groups[1]), 18);
}

TEST(MicroBatches, BothLimitsHold) {
  const std::vector<SequenceLength> lengths(10, {2, 3});
  // The budget alone would take 8 rows of 5 tokens; microBatchSize 3 caps them.
  Groups groups = SplitMicroBatches(lengths, 3, 40);
  EXPECT_EQ(groups.size(), 4u);
  for (const auto& g : groups) EXPECT_LE(g.size(), 3u);
  // microBatchSize alone would take all 10; the budget of 40 tokens caps them at 8.
  groups = SplitMicroBatches(lengths, 64, 40);
  EXPECT_EQ(groups, (Groups{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9}}));
}

// Random lengths, about one prompt in 50 25 times the others: a partition, every
// micro-batch within both limits unless it is one row over the budget.
TEST(MicroBatches, RandomLengthsKeepEveryLimit) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> prompt(1, 40), response(1, 30), coin(0, 49);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<SequenceLength> lengths(1 + trial % 37);
    for (auto& l : lengths) l = {prompt(rng) * (coin(rng) == 0 ? 25 : 1), response(rng)};
    const int64_t max_rows = 1 + trial % 9;
    const int64_t budget = 70 + 13 * (trial % 23);
    const Groups groups = SplitMicroBatches(lengths, max_rows, budget);
    ExpectPartition(groups, lengths.size());
    for (const auto& g : groups) {
      EXPECT_LE(static_cast<int64_t>(g.size()), max_rows);
      if (g.size() > 1) {
        EXPECT_LE(PaddedTokens(lengths, g), budget);
      }
    }
  }
}

}  // namespace
}  // namespace headroom::memory
