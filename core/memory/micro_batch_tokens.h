// The size of the largest micro-batch one rank's update runs in a step, known before the
// step runs: what the step's activation peak follows, so what the memory guard forecasts
// a step with (the step record's micro_batch_tokens and next_step_tokens). A batch whose
// one long prompt makes its micro-batches long shows here the step before it runs; under
// a token budget the same batch shows the budget's micro-batches.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace headroom::memory {

// Activation elements one padded token of a row `length` tokens long costs (the planner's
// ActivationElementsPerToken: attention's part grows with the length).
using TokenCost = std::function<double(int64_t length)>;

// prompt_lengths: this rank's prompts of the step in order, each repeated group_size times
// (rows prompt-major, as the trainer lays them out); every response counted at
// response_length, the most it can be. The rows are cut into `mini_batches` contiguous,
// near-equal mini-batches (grpo.updatesPerStep), each split by SplitMicroBatches
// (micro_batches.h) with max_rows and max_tokens. Without a budget (max_tokens <= 0) every
// row is padded to the rank's longest prompt, as the step left-pads them; under one each
// micro-batch is trimmed to its own longest. 0 for no prompts.
//
// Without `cost`: the largest micro-batch's padded tokens, rows x (longest prompt +
// response_length). With it: those tokens each counted at cost(its length) /
// cost(full_length), full-length-token equivalents, so a micro-batch of long rows weighs
// what its activations weigh against one of short rows (the same as the padded tokens when
// the rows are full_length long).
int64_t LargestMicroBatchTokens(const std::vector<int64_t>& prompt_lengths, int64_t group_size, int64_t response_length,
                                int64_t max_rows, int64_t max_tokens, int64_t mini_batches,
                                const TokenCost& cost = nullptr, int64_t full_length = 0);

}  // namespace headroom::memory
