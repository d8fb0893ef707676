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

torch::Tensor ResponseLogProbsNoGrad(CausalLM model, const torch::Tensor& sequences, int64_t prompt_length,
                                     double temperature, const MicroBatchPlan& plan,
                                     const std::vector<memory::SequenceLength>& lengths,
                                     const torch::Tensor& logit_bias, const torch::Tensor& prompt_padding) {
  torch::NoGradGuard no_grad;
  const int64_t width = sequences.size(1) - prompt_length;
  torch::Tensor out;
  for (int64_t k = 0; k < plan.runs; ++k) {
    const bool extra = k >= static_cast<int64_t>(plan.groups.size());
    const TrimmedRows rows = TrimRows(sequences, prompt_padding, prompt_length, lengths,
                                      extra ? std::vector<int64_t>{plan.filler} : plan.groups[static_cast<size_t>(k)]);
    auto logp =
        ResponseLogProbs(model, rows.sequences, rows.prompt_length, temperature, logit_bias, rows.prompt_padding);
    if (extra) continue;
    if (!out.defined()) out = torch::zeros({sequences.size(0), width}, logp.options());
    out.index_copy_(0, rows.index.to(out.device()), torch::constant_pad_nd(logp, {0, width - rows.response_width}));
  }
  if (!out.defined()) out = torch::zeros({sequences.size(0), width}, torch::TensorOptions().device(sequences.device()));
  return out;
}

}  // namespace headroom::worker
