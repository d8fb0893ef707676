#include <spdlog/spdlog.h>

#include "worker/grpo/policy_update.h"

#include <stdexcept>
#include <vector>

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
  std::vector<torch::Tensor> metrics;  // per mini-batch, on the device until the end
  for (int64_t u = 0; u < updates; ++u) {
    // Contiguous, near-equal mini-batches: every row is used once per step.
    const int64_t begin = rows * u / updates;
    const int64_t end = rows * (u + 1) / updates;
    shards_.Gather();  // stage 3: the previous mini-batch's step released the parameters
    shards_.ZeroGrad();
    PolicyUpdateStats mini;
    metrics.push_back(AccumulateMiniBatch(batch, begin, end - begin, mini));
    shards_.ReduceGradients();
    mini.grad_norm = shards_.Step(config_.max_grad_norm);
    total.grad_norm += mini.grad_norm / static_cast<double>(updates);
    total.sequences_run += mini.sequences_run;
  }
  // One read for the whole step; the same host arithmetic, in the same order, as a read
  // per micro-batch would do.
  const auto host = torch::stack(metrics).to(torch::kCPU);
  const auto m = host.accessor<double, 2>();
  for (int64_t u = 0; u < updates; ++u) {
    const double loss_sum = m[u][0], kl_sum = m[u][1], clipped_sum = m[u][2], tokens = m[u][3];
    // Metrics are this rank's view; the loss is the rank's share of the global loss.
    total.loss += loss_sum / static_cast<double>(updates);
    total.kl += (tokens > 0 ? kl_sum / tokens : 0.0) / static_cast<double>(updates);
    total.clip_fraction += (tokens > 0 ? clipped_sum / tokens : 0.0) / static_cast<double>(updates);
  }
  return total;
}

namespace {

// Rows [start, start + m) of `t`, or those of `rows` among them.
torch::Tensor Rows(const torch::Tensor& t, int64_t start, int64_t m, const torch::Tensor& rows) {
  if (!t.defined()) return t;
  auto part = t.narrow(0, start, m);
  return rows.defined() ? part.index_select(0, rows.device() == t.device() ? rows : rows.to(t.device())) : part;
}

}  // namespace

torch::Tensor PolicyUpdater::AccumulateMiniBatch(const PolicyBatch& batch, int64_t begin, int64_t n,
                                                 PolicyUpdateStats& sums) {
  auto mask = batch.response_mask.narrow(0, begin, n);
  // Global denominators: every rank's share of this mini-batch, summed.
  MiniBatchTotals local = CountTotals(mask);
  auto totals_tensor = torch::tensor({local.tokens, local.sequences}, torch::kFloat64);
  shards_.comm().all_reduce(totals_tensor);
  const MiniBatchTotals totals{totals_tensor[0].item<double>(), totals_tensor[1].item<double>()};

  // Which rows can move the loss (policy_update.h), read once for the mini-batch, so no
  // micro-batch waits for a nonzero().
  torch::Tensor moving;  // [n] bool on the host
  if (config_.kl_coef == 0) moving = batch.advantages.narrow(0, begin, n).ne(0).to(torch::kCPU);
  const auto device = batch.advantages.device();
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(mask.device());
  auto loss_sum = torch::zeros({}, f64), kl_sum = torch::zeros({}, f64), clipped_sum = torch::zeros({}, f64);
  for (int64_t start = begin; start < begin + n; start += config_.micro_batch_size) {
    const int64_t m = std::min(config_.micro_batch_size, begin + n - start);
    torch::Tensor rows;  // undefined: all m
    if (moving.defined()) {
      const auto flags = moving.narrow(0, start - begin, m).contiguous();
      const bool* f = flags.data_ptr<bool>();
      std::vector<int64_t> kept;
      for (int64_t i = 0; i < m; ++i) {
        if (f[i]) kept.push_back(i);
      }
      if (kept.empty()) kept.push_back(0);  // one at least
      if (static_cast<int64_t>(kept.size()) < m) {
        rows = torch::tensor(kept, torch::kInt64);
        // Pinned, so the copy to the device is queued without the host waiting for it.
        if (device.is_cuda()) rows = rows.pin_memory().to(device, /*non_blocking=*/true);
      }
    }
    auto seq = Rows(batch.sequences, start, m, rows);
    auto mmask = Rows(batch.response_mask, start, m, rows);
    auto adv = Rows(batch.advantages, start, m, rows);
    auto old = Rows(batch.old_logp, start, m, rows);
    auto padding = Rows(batch.prompt_padding, start, m, rows);
    sums.sequences_run += seq.size(0);
    auto logp = ResponseLogProbs(model_, seq, batch.prompt_length, config_.temperature, config_.logit_bias, padding);
    auto old_logp = old.defined() ? old : logp.detach();
    auto terms = ClippedSurrogate(logp, old_logp, adv, config_.clip_low, config_.clip_high);
    auto loss_mat = terms.loss;
    if (config_.kl_coef > 0) {
      auto kl = KlK3(logp, batch.ref_logp.narrow(0, start, m));
      loss_mat = loss_mat + config_.kl_coef * kl;
      kl_sum.add_((kl.detach() * mmask).sum().to(f64));
    }
    auto part = AggregateLossPart(loss_mat, mmask, config_.aggregation, totals);
    part.backward();
    loss_sum.add_(part.detach().to(f64));
    clipped_sum.add_((terms.clipped * mmask).sum().detach().to(f64));
  }
  return torch::stack({loss_sum, kl_sum, clipped_sum, torch::full({}, local.tokens, f64)});
}

}  // namespace headroom::worker
