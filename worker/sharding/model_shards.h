// A model's trainable state sharded over the ranks, ZeRO-style: parameters and
// gradients in flat parameter groups (flat_parameter_group.h), AdamW moments in one
// ShardedAdamW per group, all stepped together after one clip by the global norm.
//
// Groups. Stages 0-2: every parameter in one group (the fewest, largest collectives).
// Stage 3: the outer parameters (embeddings, final norm, head) in one group and each
// transformer block in its own, and this object becomes the model's BlockExecutor, so a
// block's parameters are gathered just before it runs (with its model_transforms.h wrappers)
// and released right after, in every forward: the rollout (per token), log-probs, update.
// Under autograd a block runs as a RecomputedBlock (recomputed_block.h): its backward
// re-gathers the block, recomputes it, back-propagates, reduce_scatters the block's
// gradient into the owned range (adding over micro-batches) and releases both again.
// So at most one block's full parameters and gradient exist at a time, beside the
// outer group, which stays gathered through a mini-batch (the head is used last in
// forward and first in backward). That is what the planner's stage 3 assumes ("one full
// layer gathered at a time"). The price: collectives per block per forward (and per
// generated token) instead of per step, and each block's forward runs twice.
//
// Frozen parameters (a LoRA base, worker/model/lora.h; docs/design.md, "LoRA"). Stages
// 0-2 leave them out of the groups, whole in the model on every rank: they have no
// gradient or optimizer state to shard. Stage 3 exists so that no rank holds the whole
// model, so there the frozen parameters are sharded too, in frozen groups of their own
// (flat_parameter_group.h), one beside each block's trainable group and one beside the
// outer group: each rank holds 1/N of the base, and a block's frozen group is gathered and
// released with its trainable one, in forward and in backward's recompute. A frozen group
// is never zeroed, reduced, stepped, copied to bf16 or checkpointed (parts() lists only
// trainable groups, so a checkpoint holds the adapters alone at every stage). The adapters
// themselves are sharded as stage 3 shards any trainable parameter, in their block's group:
// replicating them would be as simple but would make stage 3 a special case of the
// checkpoint layout and the optimizer, and the code path is the one full fine-tuning runs.
// A unit (the outer parameters, a block) may have no trainable parameter (a LoRA job's
// embeddings and head) or no frozen one; ResidentBytes().frozen counts the frozen groups
// (0 at stages 0-2, where the model holds the base outside the groups).
//
// Contract:
//   - Collective: the constructor, Gather, GatherAll, ReduceGradients, Step and every
//     forward/backward through the model (stage 3) run on every rank in the same order
//     (the same number of micro-batches of the same model on every rank).
//   - Per mini-batch: Gather -> ZeroGrad -> forward/backward per micro-batch ->
//     ReduceGradients -> Step. Stage 3 ends the step with nothing gathered.
//   - `model` outlives this object; the destructor puts back its own wrappers' executor.
//     Under stage 3 the model keeps what the last call left: after GatherAll() it is whole
//     (the parameters keep the gathered storage); after a forward or Release() its block
//     parameters are empty. The destructor runs no collective, so it cannot gather itself.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/base/non_copyable.h"
#include "worker/comm/communicator.h"
#include "worker/model/causal_lm.h"
#include "worker/sharding/flat_parameter_group.h"
#include "worker/sharding/recomputed_block.h"
#include "worker/sharding/sharded_adamw.h"
#include "worker/sharding/sharded_state_checkpoint.h"

namespace headroom::worker {

class ModelShards : public BlockExecutor, private BlockRecomputer, NonCopyable {
 public:
  // Every rank starts from rank 0's parameters (the groups broadcast them).
  ModelShards(CausalLM model, Communicator& comm, ShardingOptions options, AdamWConfig adamw);
  ~ModelShards() override;

  const ShardingOptions& options() const { return options_; }
  Communicator& comm() { return comm_; }
  // Whether blocks are gathered one at a time (stage 3).
  bool per_layer() const { return options_.stage == 3; }
  int64_t numel() const;  // every trainable parameter, unpadded

  // What a forward needs up front: stage 3 gathers the outer group (blocks gather as
  // they run); other stages hold everything already.
  void Gather();
  // Every parameter materialised (stage 3: a full copy), e.g. to compare or export.
  void GatherAll();
  // Drops every gathered copy (stage 3).
  void Release();

  void ZeroGrad();
  // Sums over the ranks what the groups have not reduced yet (stage 3: the outer group,
  // if it has trainable parameters; blocks reduce in their backward).
  void ReduceGradients();
  // Clips every group's gradient by the global norm over all of them, steps AdamW,
  // publishes the parameters. Returns the pre-clip norm.
  double Step(double max_grad_norm);
  int64_t optimizer_step() const { return optimizers_.front()->step(); }

  // For checkpoints (sharded_state_checkpoint.h). Write access: the bf16 copies count as
  // stale afterwards (a checkpoint load changes the parameters).
  std::vector<ShardedStatePart> parts();

  // The bf16 copies of the parameters (options().bf16_inference_weights; see
  // inference_weights.h, whose scope calls these). UseInferenceWeights(true) first
  // refreshes every group's copy when the parameters changed since the last refresh (a
  // Step(), a parts() call; initially stale), so the copies are refreshed at most once
  // per optimizer step and only when used; then the model reads them (stage 3: gathers
  // them). false: back to the fp32 parameters. Not collective. std::logic_error when the
  // option is off.
  void UseInferenceWeights(bool on);
  int64_t inference_refreshes() const { return inference_refreshes_; }
  torch::Device device() const { return groups_.front()->device(); }

  // Group buffers this rank holds now, and the most held at once since ResetPeak()
  // (tensor storage of parameters and gradients; .optimizer is the moments' bytes).
  ShardedBytes ResidentBytes() const;
  ShardedBytes PeakBytes() const { return peak_; }
  void ResetPeak();

  // BlockExecutor (stage 3).
  torch::Tensor RunBlock(CausalLMImpl& model, int64_t layer, const torch::Tensor& x, const torch::Tensor& mask,
                         KvCache* cache) override;

 private:
  // BlockRecomputer.
  torch::Tensor ForwardNoGrad(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask) override;
  torch::Tensor Backward(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask,
                         const torch::Tensor& grad_y) override;

  // Stage 3: what is gathered together, the outer parameters or one block's; either
  // pointer may be null.
  struct Unit {
    FlatParameterGroup* trainable = nullptr;
    FlatParameterGroup* frozen = nullptr;
  };
  const Unit& block_unit(int64_t layer) const { return units_.at(static_cast<size_t>(1 + layer)); }
  void GatherUnit(const Unit& unit);
  void ReleaseUnit(const Unit& unit);
  void NotePeak();

  CausalLM model_;
  Communicator& comm_;
  ShardingOptions options_;
  // Trainable groups: every trainable parameter (stages 0-2), or at stage 3 the outer
  // ones then each block's, leaving out units without any.
  std::vector<std::unique_ptr<FlatParameterGroup>> groups_;
  std::vector<std::unique_ptr<ShardedAdamW>> optimizers_;    // one per group
  std::vector<std::unique_ptr<FlatParameterGroup>> frozen_;  // stage 3 only
  std::vector<Unit> units_;                                  // stage 3: [0] outer, [1 + l] block l
  ShardedBytes peak_;
  int64_t parameters_version_ = 0;  // bumped whenever the parameters may have changed
  int64_t inference_version_ = -1;  // parameters_version_ at the last refresh of the copies
  int64_t inference_refreshes_ = 0;
};

}  // namespace headroom::worker
