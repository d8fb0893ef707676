#include "core/memory/micro_batch_tokens.h"

#include <algorithm>
#include <cmath>

#include "core/memory/micro_batches.h"

namespace headroom::memory {

int64_t LargestMicroBatchTokens(const std::vector<int64_t>& prompt_lengths, int64_t group_size, int64_t response_length,
                                int64_t max_rows, int64_t max_tokens, int64_t mini_batches, const TokenCost& cost,
                                int64_t full_length) {
  const int64_t longest = prompt_lengths.empty() ? 0 : *std::max_element(prompt_lengths.begin(), prompt_lengths.end());
  std::vector<SequenceLength> rows;
  for (int64_t p : prompt_lengths) {
    for (int64_t g = 0; g < std::max<int64_t>(1, group_size); ++g) {
      rows.push_back({max_tokens > 0 ? p : longest, response_length});
    }
  }
  const double full = cost && full_length > 0 ? cost(full_length) : 0.0;
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t updates = std::clamp<int64_t>(mini_batches, 1, std::max<int64_t>(1, n));
  int64_t largest = 0;
  for (int64_t u = 0; u < updates; ++u) {
    // The same near-equal contiguous cut as the update's (policy_update.cc).
    const int64_t begin = n * u / updates, end = n * (u + 1) / updates;
    const std::vector<SequenceLength> part(rows.begin() + begin, rows.begin() + end);
    for (const std::vector<int64_t>& group : SplitMicroBatches(part, max_rows, max_tokens)) {
      const int64_t tokens = PaddedTokens(part, group);
      int64_t size = tokens;
      if (full > 0 && !group.empty()) {
        const int64_t length = tokens / static_cast<int64_t>(group.size());
        size = static_cast<int64_t>(std::llround(static_cast<double>(tokens) * cost(length) / full));
      }
      largest = std::max(largest, size);
    }
  }
  return largest;
}

}  // namespace headroom::memory
