// Log-probabilities of the response tokens under a model.
//
// sequences [B, P + R] (prompt then response); the logits at position j predict token
// j + 1, so the response's log-probs come from positions P - 1 .. P + R - 2. Prompts of
// different lengths are left-padded to P: prompt_padding [B] int64 counts row b's pad
// tokens (undefined: none; causal_lm.h). Logits are
// divided by the sampling temperature first (as verl does), so the ratio compares the
// distribution the samples were actually drawn from. temperature <= 0 counts as 1.
// `logit_bias` [vocab] (optional) is added to the logits first: 0 for tokens a response
// may use, -inf for the rest — the same restriction the rollout sampled under.
// The logits are never formed for all tokens at once: the model's final hidden states go
// through its output head a chunk of tokens at a time (chunked_log_probs.h; chunk size
// core/memory/logits_chunk.h), and the backward pass recomputes a chunk's logits. Equal
// to log_softmax over forward()'s logits to float rounding.
#pragma once

#include <torch/torch.h>

#include "worker/grpo/micro_batch_rows.h"
#include "worker/model/causal_lm.h"

namespace headroom::worker {

// With autograd (training). Returns [B, R]. chunk_tokens 0: LogitsChunkTokens(vocab).
torch::Tensor ResponseLogProbs(CausalLM model, const torch::Tensor& sequences, int64_t prompt_length,
                               double temperature, const torch::Tensor& logit_bias = {},
                               const torch::Tensor& prompt_padding = {}, int64_t chunk_tokens = 0);

// Without autograd, in chunks of micro_batch rows (old and reference log-probs).
torch::Tensor ResponseLogProbsNoGrad(CausalLM model, const torch::Tensor& sequences, int64_t prompt_length,
                                     double temperature, int64_t micro_batch, const torch::Tensor& logit_bias = {},
                                     const torch::Tensor& prompt_padding = {});

// Without autograd, in the micro-batches of `plan` (micro_batch_rows.h: each trimmed to
// its rows' longest prompt and response; `lengths` are SequenceLengths of the batch).
// Returns [B, R]; a row's positions past its micro-batch's longest response, masked in
// every loss, hold 0. Makes plan.runs forwards (the extra ones' results are dropped).
torch::Tensor ResponseLogProbsNoGrad(CausalLM model, const torch::Tensor& sequences, int64_t prompt_length,
                                     double temperature, const MicroBatchPlan& plan,
                                     const std::vector<memory::SequenceLength>& lengths,
                                     const torch::Tensor& logit_bias = {}, const torch::Tensor& prompt_padding = {});

}  // namespace headroom::worker
