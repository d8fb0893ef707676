#include <spdlog/spdlog.h>

#include "worker/grpo/policy_update.h"

#include <stdexcept>

#include "worker/grpo/log_probs.h"

namespace headroom::worker {

PolicyUpdater::PolicyUpdater(CausalLM model, ModelShards& shards, PolicyUpdateConfig config)
    : model_(std::move(model)), shards_(shards), config_(config) {
  if (config_.micro_batch_size < 1) throw std::invalid_argument("spec.grpo.microBatchSize: must be >= 1");
  if (config_.updates_per_step < 1) throw std::invalid_argument("spec.grpo.updatesPerStep: must be >= 1");
}

PolicyUpdateStats PolicyUpdater::Update(const PolicyBatch& batch) {
  const int64_t rows = batch.sequences.size(0);
  const int64_t updates = config_.updates_per_step;
  if (rows < updates) {
    throw std::invalid_argument("policy update: " + std::to_string(rows) + " sequences cannot form " +
                                std::to_string(updates) + " mini-batches");
  }
  if (!batch.old_logp.defined() && updates > 1) {
    throw std::invalid_argument("policy update: " + std::to_string(updates) +
                                " mini-batches per rollout need the old log-probs computed before the first");
  }
  if (config_.kl_coef > 0 && !batch.ref_logp.defined()) {
    throw std::invalid_argument("policy update: klCoef > 0 needs reference log-probs");
  }
  PolicyUpdateStats total;
  model_->train();
  for (int64_t u = 0; u < updates; ++u) {
    // Contiguous, near-equal mini-batches: every row is used once per step.
    const int64_t begin = rows * u / updates;
    const int64_t end = rows * (u + 1) / updates;
    shards_.Gather();  // stage 3: the previous mini-batch's step released the parameters
    shards_.ZeroGrad();
    PolicyUpdateStats mini;
    AccumulateMiniBatch(batch, begin, end - begin, mini);
    shards_.ReduceGradients();
    mini.grad_norm = shards_.Step(config_.max_grad_norm);
    total.loss += mini.loss / static_cast<double>(updates);
    total.kl += mini.kl / static_cast<double>(updates);
    total.clip_fraction += mini.clip_fraction / static_cast<double>(updates);
    total.grad_norm += mini.grad_norm / static_cast<double>(updates);
    total.sequences_run += mini.sequences_run;
  }
  return total;
}

void PolicyUpdater::AccumulateMiniBatch(const PolicyBatch& batch, int64_t begin, int64_t n, PolicyUpdateStats& sums) {
  auto mask = batch.response_mask.narrow(0, begin, n);
  // Global denominators: every rank's share of this mini-batch, summed.
  MiniBatchTotals local = CountTotals(mask);
  auto totals_tensor = torch::tensor({local.tokens, local.sequences}, torch::kFloat64);
  shards_.comm().all_reduce(totals_tensor);
  const MiniBatchTotals totals{totals_tensor[0].item<double>(), totals_tensor[1].item<double>()};

  double loss_sum = 0, kl_sum = 0, clipped_sum = 0;
  for (int64_t start = begin; start < begin + n; start += config_.micro_batch_size) {
    const int64_t m = std::min(config_.micro_batch_size, begin + n - start);
    auto seq = batch.sequences.narrow(0, start, m);
    auto mmask = batch.response_mask.narrow(0, start, m);
    auto adv = batch.advantages.narrow(0, start, m);
    auto old = batch.old_logp.defined() ? batch.old_logp.narrow(0, start, m) : torch::Tensor();
    auto padding = batch.prompt_padding.defined() ? batch.prompt_padding.narrow(0, start, m) : torch::Tensor();
    if (config_.kl_coef == 0) {
      // Only rows that can move the loss (policy_update.h); one at least.
      auto rows = adv.ne(0).nonzero().squeeze(1);
      if (rows.size(0) == 0) rows = torch::zeros({1}, rows.options());
      if (rows.size(0) < m) {
        seq = seq.index_select(0, rows);
        mmask = mmask.index_select(0, rows);
        adv = adv.index_select(0, rows);
        if (old.defined()) old = old.index_select(0, rows);
        if (padding.defined()) padding = padding.index_select(0, rows.to(padding.device()));
      }
    }
    sums.sequences_run += seq.size(0);
    auto logp =
        ResponseLogProbs(model_, seq, batch.prompt_length, config_.temperature, config_.logit_bias, padding);
    auto old_logp = old.defined() ? old : logp.detach();
    auto terms = ClippedSurrogate(logp, old_logp, adv, config_.clip_low, config_.clip_high);
    auto loss_mat = terms.loss;
    if (config_.kl_coef > 0) {
      auto kl = KlK3(logp, batch.ref_logp.narrow(0, start, m));
      loss_mat = loss_mat + config_.kl_coef * kl;
      kl_sum += (kl.detach() * mmask).sum().item<double>();
    }
    auto part = AggregateLossPart(loss_mat, mmask, config_.aggregation, totals);
    part.backward();
    loss_sum += part.item<double>();
    clipped_sum += (terms.clipped * mmask).sum().item<double>();
  }
  // Metrics are this rank's view; the loss is the rank's share of the global loss.
  sums.loss = loss_sum;
  sums.kl = local.tokens > 0 ? kl_sum / local.tokens : 0.0;
  sums.clip_fraction = local.tokens > 0 ? clipped_sum / local.tokens : 0.0;
}

}  // namespace headroom::worker
