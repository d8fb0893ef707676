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
  if (config_.max_tokens_per_micro_batch < 0) {
    throw std::invalid_argument("spec.grpo.maxTokensPerMicroBatch: must be >= 0");
  }
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
  // Contiguous, near-equal mini-batches: every row is used once per step.
  auto begin_of = [&](int64_t u) { return rows * u / updates; };
  // Under a token budget every mini-batch's micro-batches are planned up front: one read
  // of the lengths (and advantages) for the step, one collective to keep ranks in step.
  std::vector<memory::SequenceLength> lengths;
  std::vector<MicroBatchPlan> plans;
  if (config_.max_tokens_per_micro_batch > 0) {
    lengths = SequenceLengths(batch.response_mask, batch.prompt_padding, batch.prompt_length);
    torch::Tensor moving;  // rows that can move the loss (above); all of them with KL
    if (config_.kl_coef == 0) moving = batch.advantages.ne(0).to(torch::kCPU).contiguous();
    for (int64_t u = 0; u < updates; ++u) {
      std::vector<int64_t> kept;
      for (int64_t r = begin_of(u); r < begin_of(u + 1); ++r) {
        if (!moving.defined() || moving.data_ptr<bool>()[r]) kept.push_back(r);
      }
      if (kept.empty()) {  // one row at least: the mini-batch's shortest
        int64_t shortest = begin_of(u);
        for (int64_t r = begin_of(u); r < begin_of(u + 1); ++r) {
          if (lengths[static_cast<size_t>(r)].total() < lengths[static_cast<size_t>(shortest)].total()) shortest = r;
        }
        kept.push_back(shortest);
      }
      plans.push_back(PlanMicroBatches(lengths, config_.micro_batch_size, config_.max_tokens_per_micro_batch, kept));
    }
    if (shards_.per_layer()) {
      std::vector<MicroBatchPlan*> all;
      for (auto& p : plans) all.push_back(&p);
      KeepRunsInStep(all, shards_.comm());
    }
  }
  PolicyUpdateStats total;
  model_->train();
  std::vector<torch::Tensor> metrics;  // per mini-batch, on the device until the end
  for (int64_t u = 0; u < updates; ++u) {
    const int64_t begin = begin_of(u);
    const int64_t end = begin_of(u + 1);
    shards_.Gather();  // stage 3: the previous mini-batch's step released the parameters
    shards_.ZeroGrad();
    PolicyUpdateStats mini;
    metrics.push_back(AccumulateMiniBatch(batch, begin, end - begin, mini,
                                          plans.empty() ? nullptr : &plans[static_cast<size_t>(u)], &lengths));
    shards_.ReduceGradients();
    mini.grad_norm = shards_.Step(config_.max_grad_norm);
    total.grad_norm += mini.grad_norm / static_cast<double>(updates);
    total.sequences_run += mini.sequences_run;
    total.micro_batches += mini.micro_batches;
    total.padded_tokens += mini.padded_tokens;
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
torch::Tensor SliceRows(const torch::Tensor& t, int64_t start, int64_t m, const torch::Tensor& rows) {
  if (!t.defined()) return t;
  auto part = t.narrow(0, start, m);
  return rows.defined() ? part.index_select(0, rows.device() == t.device() ? rows : rows.to(t.device())) : part;
}

}  // namespace

torch::Tensor PolicyUpdater::AccumulateMiniBatch(const PolicyBatch& batch, int64_t begin, int64_t n,
                                                 PolicyUpdateStats& sums, const MicroBatchPlan* plan,
                                                 const std::vector<memory::SequenceLength>* lengths) {
  auto mask = batch.response_mask.narrow(0, begin, n);
  // Global denominators: every rank's share of this mini-batch, summed.
  MiniBatchTotals local = CountTotals(mask);
  auto totals_tensor = torch::tensor({local.tokens, local.sequences}, torch::kFloat64);
  shards_.comm().all_reduce(totals_tensor);
  const MiniBatchTotals totals{totals_tensor[0].item<double>(), totals_tensor[1].item<double>()};

  const auto device = batch.advantages.device();
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(mask.device());
  auto loss_sum = torch::zeros({}, f64), kl_sum = torch::zeros({}, f64), clipped_sum = torch::zeros({}, f64);
  const int64_t width = batch.response_mask.size(1);

  // One micro-batch's forward and backward: its rows' tokens (maybe trimmed), the full
  // width of their mask, advantages, old and reference log-probs.
  struct Rows {
    torch::Tensor seq, padding, mask, adv, old, ref;
    int64_t prompt_length = 0;
  };
  auto run = [&](const Rows& r) {
    sums.sequences_run += r.seq.size(0);
    sums.micro_batches += 1;
    sums.padded_tokens += r.seq.size(0) * r.seq.size(1);
    auto logp = ResponseLogProbs(model_, r.seq, r.prompt_length, config_.temperature, config_.logit_bias, r.padding);
    // Trimmed rows: the columns past their longest response are masked; 0 there keeps the
    // loss matrix the full width the aggregation divides by.
    if (logp.size(1) < width) logp = torch::constant_pad_nd(logp, {0, width - logp.size(1)});
    auto old_logp = r.old.defined() ? r.old : logp.detach();
    auto terms = ClippedSurrogate(logp, old_logp, r.adv, config_.clip_low, config_.clip_high);
    auto loss_mat = terms.loss;
    if (config_.kl_coef > 0) {
      // Masked positions compare logp with itself: their values are never used, and a
      // reference log-prob from a differently trimmed pass (0 there) could overflow exp.
      auto kl = KlK3(logp, torch::where(r.mask > 0, r.ref, logp.detach()));
      loss_mat = loss_mat + config_.kl_coef * kl;
      kl_sum.add_((kl.detach() * r.mask).sum().to(f64));
    }
    auto part = AggregateLossPart(loss_mat, r.mask, config_.aggregation, totals);
    part.backward();
    loss_sum.add_(part.detach().to(f64));
    clipped_sum.add_((terms.clipped * r.mask).sum().detach().to(f64));
  };

  if (plan != nullptr) {
    auto pick = [](const torch::Tensor& t, const torch::Tensor& index) {
      return t.defined() ? t.index_select(0, index.device() == t.device() ? index : index.to(t.device())) : t;
    };
    for (int64_t k = 0; k < plan->runs; ++k) {
      const bool extra = k >= static_cast<int64_t>(plan->groups.size());
      const TrimmedRows t = TrimRows(batch.sequences, batch.prompt_padding, batch.prompt_length, *lengths,
                                     extra ? std::vector<int64_t>{plan->filler} : plan->groups[static_cast<size_t>(k)]);
      Rows r;
      r.seq = t.sequences;
      r.padding = t.prompt_padding;
      r.prompt_length = t.prompt_length;
      r.mask = pick(batch.response_mask, t.index);
      // A run that only keeps the ranks in step adds nothing: no token of it counts.
      if (extra) r.mask = torch::zeros_like(r.mask);
      r.adv = pick(batch.advantages, t.index);
      r.old = pick(batch.old_logp, t.index);
      r.ref = pick(batch.ref_logp, t.index);
      run(r);
    }
    return torch::stack({loss_sum, kl_sum, clipped_sum, torch::full({}, local.tokens, f64)});
  }

  // Which rows can move the loss (policy_update.h), read once for the mini-batch, so no
  // micro-batch waits for a nonzero().
  torch::Tensor moving;  // [n] bool on the host
  if (config_.kl_coef == 0) moving = batch.advantages.narrow(0, begin, n).ne(0).to(torch::kCPU);
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
    Rows r;
    r.seq = SliceRows(batch.sequences, start, m, rows);
    r.mask = SliceRows(batch.response_mask, start, m, rows);
    r.adv = SliceRows(batch.advantages, start, m, rows);
    r.old = SliceRows(batch.old_logp, start, m, rows);
    r.ref = SliceRows(batch.ref_logp, start, m, rows);
    r.padding = SliceRows(batch.prompt_padding, start, m, rows);
    r.prompt_length = batch.prompt_length;
    run(r);
  }
  return torch::stack({loss_sum, kl_sum, clipped_sum, torch::full({}, local.tokens, f64)});
}

}  // namespace headroom::worker
