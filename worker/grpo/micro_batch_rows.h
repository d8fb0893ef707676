// The token budget's micro-batches on tensors (grpo.maxTokensPerMicroBatch; the rule itself
// is core/memory/micro_batches.h): each row's real lengths read from the batch once, and
// a micro-batch's rows cut out of it trimmed to their own longest prompt and response,
// so a batch of short rows runs short whatever the longest row of the step.
//
// Trimming keeps every real token at its place relative to the prompt's end: prompts are
// left-padded (the pad count shrinks by the columns cut) and responses right-padded (the
// columns after the longest response are masked in every row), so a row's log-probs are
// the untrimmed ones to float rounding (causal_lm.h: a row's real positions get the same
// outputs whatever the padding).
//
// Ranks whose forwards are collective (ZeRO stage 3: every forward gathers the blocks)
// must make the same number of them: a plan's `runs` is then the most any rank has, and
// the extra runs repeat this rank's shortest row with nothing of them kept.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "core/memory/micro_batches.h"
#include "worker/comm/communicator.h"

namespace headroom::worker {

// Per row: the prompt's real tokens (prompt_length minus its left padding) and the
// response's (up to its last masked-in position). One read to the host.
std::vector<memory::SequenceLength> SequenceLengths(const torch::Tensor& response_mask,
                                                    const torch::Tensor& prompt_padding, int64_t prompt_length);

struct MicroBatchPlan {
  std::vector<std::vector<int64_t>> groups;  // rows of the batch per micro-batch
  int64_t runs = 0;                          // forwards to make: groups.size(), or more (above)
  int64_t filler = 0;                        // the row the extra runs repeat: the shortest
};

// `rows` (indices into lengths; all of them when empty) split by SplitMicroBatches.
MicroBatchPlan PlanMicroBatches(const std::vector<memory::SequenceLength>& lengths, int64_t max_rows,
                                int64_t max_tokens, const std::vector<int64_t>& rows = {});

// Raises every plan's runs to the most any rank has (one all_reduce for all of them).
void KeepRunsInStep(std::vector<MicroBatchPlan*> plans, Communicator& comm);

// Rows of a batch, trimmed.
struct TrimmedRows {
  torch::Tensor index;           // [m] int64, on the batch's device
  torch::Tensor sequences;       // [m, prompt_length + response_width]
  torch::Tensor prompt_padding;  // [m]; undefined when the batch has none
  int64_t prompt_length = 0;     // the rows' longest prompt
  int64_t response_width = 0;    // the rows' longest response (at least 1)
};
TrimmedRows TrimRows(const torch::Tensor& sequences, const torch::Tensor& prompt_padding, int64_t prompt_length,
                     const std::vector<memory::SequenceLength>& lengths, const std::vector<int64_t>& rows);

}  // namespace headroom::worker
