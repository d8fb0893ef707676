// How a batch of sequences is cut into micro-batches: by rows (microBatchSize), or by
// padded tokens under a budget (grpo.maxTokensPerMicroBatch; docs/design.md, "Token-budget
// micro-batches"). What the worker splits by (worker/grpo/) and what the planner counts.
//
// A micro-batch runs its rows trimmed to its own longest prompt (prompts are left-padded)
// and its own longest response (responses are right-padded), so its padded tokens are
//   rows x (longest prompt + longest response).
// Under a budget the rows are taken longest first (so similar lengths share a micro-batch
// and little of it is padding) and a micro-batch is closed when one more row would take it
// over the budget or over max_rows: both limits hold. A row longer than the budget on its
// own goes alone. No torch here: the rule is testable without a model.
#pragma once

#include <cstdint>
#include <vector>

namespace headroom::memory {

// One sequence's real tokens.
struct SequenceLength {
  int64_t prompt = 0;
  int64_t response = 0;
  int64_t total() const { return prompt + response; }
};

// rows.size() x (longest prompt + longest response) among `rows` (indices into lengths).
int64_t PaddedTokens(const std::vector<SequenceLength>& lengths, const std::vector<int64_t>& rows);

// Groups of indices into `lengths`, each index exactly once, each group's indices
// ascending. max_tokens <= 0: consecutive groups of max_rows in order (the fixed split).
// max_tokens > 0: length-sorted groups with at most max_rows rows and at most max_tokens
// padded tokens (a single longer row alone). max_rows < 1 counts as 1.
std::vector<std::vector<int64_t>> SplitMicroBatches(const std::vector<SequenceLength>& lengths, int64_t max_rows,
                                                    int64_t max_tokens);

}  // namespace headroom::memory
