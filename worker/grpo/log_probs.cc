#include <spdlog/spdlog.h>

#include "worker/grpo/log_probs.h"


namespace headroom::worker {

torch::Tensor ResponseLogProbs(CausalLM model, const torch::Tensor& sequences, int64_t prompt_length,
                               double temperature, const torch::Tensor& logit_bias) {
  const int64_t total = sequences.size(1);
  const int64_t r = total - prompt_length;
  // Logits of the positions that predict response tokens only (causal_lm.h).
  auto logits = model->forward(sequences.narrow(1, 0, total - 1), prompt_length - 1).to(torch::kFloat32);
  if (logit_bias.defined()) logits = logits + logit_bias;
  if (temperature > 0 && temperature != 1.0) logits = logits / temperature;
  // Positions after a response's stop hold the pad token, which the logit bias may
  // exclude (-inf): read an allowed token's log-prob there instead so masked positions
  // stay finite (every loss masks them out, and -inf * 0 would be NaN).
  auto targets = sequences.narrow(1, prompt_length, r);
  if (logit_bias.defined()) {
    const auto excluded = logit_bias.index({targets}).isinf();
    targets = torch::where(excluded, logit_bias.argmax().expand_as(targets), targets);
  }
  targets = targets.unsqueeze(-1);
  return torch::log_softmax(logits, -1).gather(-1, targets).squeeze(-1);
}

torch::Tensor ResponseLogProbsNoGrad(CausalLM model, const torch::Tensor& sequences, int64_t prompt_length,
                                     double temperature, int64_t micro_batch,
                                     const torch::Tensor& logit_bias) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parts;
  for (int64_t start = 0; start < sequences.size(0); start += micro_batch) {
    const int64_t n = std::min(micro_batch, sequences.size(0) - start);
    parts.push_back(ResponseLogProbs(model, sequences.narrow(0, start, n), prompt_length, temperature, logit_bias));
  }
  return torch::cat(parts, 0);
}

}  // namespace headroom::worker
