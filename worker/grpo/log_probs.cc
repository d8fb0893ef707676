#include <spdlog/spdlog.h>

#include "worker/grpo/log_probs.h"

#include "core/memory/logits_chunk.h"
#include "worker/grpo/chunked_log_probs.h"

namespace headroom::worker {

torch::Tensor ResponseLogProbs(CausalLM model, const torch::Tensor& sequences, int64_t prompt_length,
                               double temperature, const torch::Tensor& logit_bias, const torch::Tensor& prompt_padding,
                               int64_t chunk_tokens) {
  const int64_t batch = sequences.size(0), total = sequences.size(1);
  const int64_t r = total - prompt_length;
  // Hidden states of the positions that predict response tokens only (causal_lm.h); the
  // head turns them into logits a chunk of tokens at a time (core/memory/logits_chunk.h).
  auto hidden = model->Hidden(sequences.narrow(1, 0, total - 1), prompt_length - 1, prompt_padding);
  // Positions after a response's stop hold the pad token, which the logit bias may
  // exclude (-inf): read an allowed token's log-prob there instead so masked positions
  // stay finite (every loss masks them out, and -inf * 0 would be NaN).
  auto targets = sequences.narrow(1, prompt_length, r);
  if (logit_bias.defined()) {
    const auto excluded = logit_bias.index({targets}).isinf();
    targets = torch::where(excluded, logit_bias.argmax().expand_as(targets), targets);
  }
  const OutputHead head = model->output_head();
  auto logp = ChunkedTokenLogProbs(
      hidden.reshape({batch * r, hidden.size(-1)}), head.weight, targets.reshape({batch * r}), temperature, logit_bias,
      chunk_tokens > 0 ? chunk_tokens : memory::LogitsChunkTokens(head.weight.size(0)), head.bias);
  return logp.view({batch, r});
}

torch::Tensor ResponseLogProbsNoGrad(CausalLM model, const torch::Tensor& sequences, int64_t prompt_length,
                                     double temperature, int64_t micro_batch, const torch::Tensor& logit_bias,
                                     const torch::Tensor& prompt_padding) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parts;
  for (int64_t start = 0; start < sequences.size(0); start += micro_batch) {
    const int64_t n = std::min(micro_batch, sequences.size(0) - start);
    const auto padding = prompt_padding.defined() ? prompt_padding.narrow(0, start, n) : torch::Tensor();
    parts.push_back(
        ResponseLogProbs(model, sequences.narrow(0, start, n), prompt_length, temperature, logit_bias, padding));
  }
  return torch::cat(parts, 0);
}

}  // namespace headroom::worker
