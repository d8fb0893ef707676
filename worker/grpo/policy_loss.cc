#include <spdlog/spdlog.h>

#include "worker/grpo/policy_loss.h"

#include <stdexcept>

namespace headroom::worker {

LossAggregation ParseLossAggregation(const std::string& name) {
  if (name == "token-mean") return LossAggregation::kTokenMean;
  if (name == "seq-mean-token-mean") return LossAggregation::kSeqMeanTokenMean;
  if (name == "seq-mean-token-sum-norm") return LossAggregation::kSeqMeanTokenSumNorm;
  throw std::invalid_argument("spec.grpo.lossAggregation: unknown \"" + name +
                              "\" (token-mean, seq-mean-token-mean, seq-mean-token-sum-norm)");
}

SurrogateTerms ClippedSurrogate(const torch::Tensor& logp, const torch::Tensor& old_logp,
                                const torch::Tensor& advantages, double clip_low, double clip_high) {
  auto adv = advantages.dim() == 1 ? advantages.unsqueeze(1) : advantages;
  auto ratio = torch::exp(torch::clamp(logp - old_logp, -20.0, 20.0));
  auto unclipped = -adv * ratio;
  auto clipped = -adv * torch::clamp(ratio, 1.0 - clip_low, 1.0 + clip_high);
  SurrogateTerms t;
  t.loss = torch::maximum(unclipped, clipped);
  t.clipped = (clipped > unclipped).to(torch::kFloat32).detach();
  t.ratio = ratio;
  return t;
}

torch::Tensor KlK3(const torch::Tensor& logp, const torch::Tensor& ref_logp) {
  auto kl = ref_logp - logp;
  return torch::clamp(torch::exp(kl) - kl - 1.0, -10.0, 10.0);
}

torch::Tensor AggregateLoss(const torch::Tensor& loss_mat, const torch::Tensor& mask, LossAggregation mode) {
  switch (mode) {
    case LossAggregation::kTokenMean: return (loss_mat * mask).sum() / mask.sum();
    case LossAggregation::kSeqMeanTokenMean: return ((loss_mat * mask).sum(-1) / mask.sum(-1)).mean();
    case LossAggregation::kSeqMeanTokenSumNorm: return (loss_mat * mask).sum() / static_cast<double>(mask.size(-1));
  }
  throw std::logic_error("unreachable loss aggregation");
}

MiniBatchTotals CountTotals(const torch::Tensor& mask) {
  MiniBatchTotals t;
  t.tokens = mask.sum().item<double>();
  t.sequences = (mask.sum(-1) > 0).sum().item<double>();
  return t;
}

torch::Tensor AggregateLossPart(const torch::Tensor& loss_mat, const torch::Tensor& mask, LossAggregation mode,
                                const MiniBatchTotals& totals) {
  switch (mode) {
    case LossAggregation::kTokenMean: return (loss_mat * mask).sum() / std::max(totals.tokens, 1.0);
    case LossAggregation::kSeqMeanTokenMean:
      // clamp: an empty row contributes 0 instead of 0/0.
      return ((loss_mat * mask).sum(-1) / mask.sum(-1).clamp_min(1.0)).sum() / std::max(totals.sequences, 1.0);
    case LossAggregation::kSeqMeanTokenSumNorm: return (loss_mat * mask).sum() / static_cast<double>(mask.size(-1));
  }
  throw std::logic_error("unreachable loss aggregation");
}

double MaskedMean(const torch::Tensor& values, const torch::Tensor& mask) {
  const double n = mask.sum().item<double>();
  return n > 0 ? (values * mask).sum().item<double>() / n : 0.0;
}

}  // namespace headroom::worker
