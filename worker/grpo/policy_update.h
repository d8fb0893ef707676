// The optimisation half of a GRPO step: updatesPerStep mini-batches over one rollout
// batch, each accumulated over micro-batches, reduced over the ranks by the sharded
// model state, clipped to a global gradient norm of 1.0, and applied with AdamW on the
// ranges this rank owns.
//
// Per mini-batch (every rank, in the same order; see model_shards.h):
//   Gather (stage 3: the outer parameters) -> ZeroGrad -> forward/backward per
//   micro-batch (stage 3: blocks gathered, recomputed and reduced one at a time) ->
//   ReduceGradients (stage 0/1 all_reduce, 2/3 reduce_scatter) -> Step (global norm over
//   the owned ranges, clip, update, publish; stage 3 ends released).
//
// Contract:
//   - old_logp (and ref_logp when kl_coef > 0) were computed once, without grad, before
//     the first update; they are inputs here, never recomputed. With updates_per_step 1,
//     old_logp may be left undefined: the policy that sampled is the one being updated,
//     so the update's own log-probs, detached, are the old ones (ratio exactly 1, as
//     on-policy GRPO) and a whole extra forward over the batch is saved.
//   - The gradient applied for a mini-batch equals the gradient of AggregateLoss() over
//     the whole mini-batch (all ranks' rows), whatever microBatchSize or the token budget
//     is: micro-batch losses are scaled by global denominators (see policy_loss.h), and
//     gradients are summed across ranks by the group's reduction. Under a token budget a
//     micro-batch's rows are trimmed to their own lengths (micro_batch_rows.h); the loss
//     still spans the full response width (seq-mean-token-sum-norm divides by it).
//   - Rows with advantage exactly 0 (a group whose rewards were all equal) are left out
//     of the forward and backward when kl_coef is 0: their surrogate is 0 whatever the
//     ratio, so the loss, its gradient and the clip fraction are the same without them,
//     and the denominators still count their tokens. At least one row of every
//     micro-batch still runs, so every rank makes the same collectives (stage 3). Late
//     in training most groups are all correct, and the update shrinks with them. Under a
//     token budget the rows left out are dropped before the split, at least one row of
//     the mini-batch runs, and ranks with fewer micro-batches than another repeat their
//     shortest row with its mask cleared (stage 3 over several ranks only).
//   - `shards` was built from `model`.
#pragma once

#include <cstdint>

#include <torch/torch.h>

#include "worker/grpo/micro_batch_rows.h"
#include "worker/grpo/policy_loss.h"
#include "worker/model/causal_lm.h"
#include "worker/sharding/model_shards.h"

namespace headroom::worker {

struct PolicyUpdateConfig {
  double clip_low = 0.2;
  double clip_high = 0.28;
  double kl_coef = 0.0;
  LossAggregation aggregation = LossAggregation::kTokenMean;
  int64_t micro_batch_size = 64;
  // Padded tokens per micro-batch (rows x longest prompt + longest response, rows sorted by
  // length; micro_batch_rows.h); micro_batch_size still caps the rows. 0: rows only.
  int64_t max_tokens_per_micro_batch = 0;
  int64_t updates_per_step = 1;
  double temperature = 1.0;
  double max_grad_norm = 1.0;
  torch::Tensor logit_bias;  // [vocab] response-token restriction (log_probs.h); optional
};

// One rank's rows of a rollout batch, ready for the update.
struct PolicyBatch {
  torch::Tensor sequences;      // [N, P + R]
  torch::Tensor response_mask;  // [N, R]
  torch::Tensor advantages;     // [N]
  torch::Tensor old_logp;       // [N, R]; may be undefined when updates_per_step == 1
  torch::Tensor ref_logp;       // [N, R]; undefined when kl_coef == 0
  int64_t prompt_length = 0;
  torch::Tensor prompt_padding;  // [N] int64: left padding of each row's prompt; undefined when none
};

struct PolicyUpdateStats {
  double loss = 0;            // mean over mini-batches of the aggregated loss
  double kl = 0;              // token-mean k3 KL to the reference (0 without one)
  double clip_fraction = 0;   // token-mean share of clipped ratios
  int64_t sequences_run = 0;  // rows that went through forward and backward, summed over mini-batches
  double grad_norm = 0;       // mean pre-clip global gradient norm
  int64_t micro_batches = 0;  // forwards and backwards made, summed over mini-batches
  int64_t padded_tokens = 0;  // the tokens those ran over, padding included
};

class PolicyUpdater {
 public:
  PolicyUpdater(CausalLM model, ModelShards& shards, PolicyUpdateConfig config);

  // Collective. Nothing inside a micro-batch waits for the device: the metrics stay there
  // until the step's end, and the rows left out (below) are chosen from one read of the
  // mini-batch's advantages.
  PolicyUpdateStats Update(const PolicyBatch& batch);

  const PolicyUpdateConfig& config() const { return config_; }

 private:
  // Sums micro-batch gradients of rows [begin, begin + n) into the sharded gradient.
  // Returns the metric sums, [4] float64 on the device, read back once per step (a read
  // inside a micro-batch would stall the device there): the loss parts, the masked k3 KL,
  // the clipped tokens, and this rank's tokens.
  // `plan` (token budget only; null: micro_batch_size rows at a time) lists the rows of
  // each micro-batch, `lengths` those of the whole batch.
  torch::Tensor AccumulateMiniBatch(const PolicyBatch& batch, int64_t begin, int64_t n, PolicyUpdateStats& sums,
                                    const MicroBatchPlan* plan = nullptr,
                                    const std::vector<memory::SequenceLength>* lengths = nullptr);

  CausalLM model_;
  ModelShards& shards_;
  PolicyUpdateConfig config_;
};

}  // namespace headroom::worker
