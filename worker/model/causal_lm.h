// What GRPO needs from a policy network, whatever its architecture: the trainer, the
// rollout engine, the log-prob computation and the ZeRO shards see only this.
//
// Contract (every implementation):
//   - forward(tokens [B, T], first_output = 0, padding = {}) -> logits [B, T - first_output,
//     vocab] of positions first_output..T-1, causal: position t sees 0..t only.
//   - padding [B] int64 (undefined: none) counts the pad tokens row b starts with (prompts
//     left-padded to the batch's longest, attention_mask.h): no position attends to them,
//     and outputs at those positions are finite but meaningless. A row's real positions
//     get the same outputs as the row alone (to rounding): positions are rotary, and
//     learned ones count from the row's first real token.
//   - Hidden(tokens, first_output, padding) -> the final-normed hidden states [B, T - first_output,
//     H] forward() feeds its output head, in the dtype the head multiplies in (bf16 on a
//     CUDA device, where forwards autocast; fp32 on CPU), and output_head() that head:
//     forward() = Hidden() . weight^T + bias to rounding. Log-probs go through them in
//     chunks of tokens so a micro-batch's [tokens x vocab] logits never exist at once.
//   - ForwardCached(tokens [B, t], cache) appends t positions at cache.length() and
//     returns the logits of the last new position [B, vocab]; equal (to float rounding)
//     to forward() on the whole prefix. The cache has kv_cache_shape(); its rows' padding
//     is the cache's (KvCache::Reset). In the cache's static decode (kv_cache.h) it takes
//     one position, at the cache's static position, with the static padding, and runs
//     by tensor ops alone, the same shapes and addresses at every position (what a CUDA
//     graph captures; worker/rollout/decode_step.h); equal to the above to rounding.
//   - OrderedParameters() lists (name, tensor) in one fixed order: the order a flat
//     buffer, a shard map and a checkpoint use. Names are the checkpoint's names.
//   - LayerOfParameter(name) is the block a parameter belongs to, or -1 for parameters
//     used outside the blocks (embeddings, final norm, head); a block's parameters are
//     used by Block(l) and nothing else.
//   - Block(l, x [B, t, H], mask, cache, first_output) runs block l alone: `mask` is the
//     causal mask [t, start + t] (undefined for one cached position) or, with padding,
//     [B, 1, t, start + t] (padded keys masked too); start = the cache's length or 0. A BlockExecutor, when set, runs every block of a forward (ZeRO stage 3
//     gathers a block's parameters around it); the result must equal Block().
//   - On a CUDA device the forward passes run under bf16 autocast; on CPU in fp32. The
//     parameters may be bf16 copies for a pass without gradient
//     (worker/sharding/inference_weights.h): the residual stream then stays fp32.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "worker/model/kv_cache.h"

namespace headroom::worker {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

class CausalLMImpl;

// Runs one block of a model in the forward pass (see CausalLMImpl::Block).
class BlockExecutor {
 public:
  virtual ~BlockExecutor() = default;
  virtual torch::Tensor RunBlock(CausalLMImpl& model, int64_t layer, const torch::Tensor& x, const torch::Tensor& mask,
                                 KvCache* cache) = 0;
};

// The output projection: logits = hidden . weight^T + bias. The tensors are the model's
// parameters themselves (gradients reach them); tied models return the embedding matrix.
struct OutputHead {
  torch::Tensor weight;  // [vocab, H]
  torch::Tensor bias;    // [vocab], or undefined when the head has none
};

class CausalLMImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& tokens, int64_t first_output = 0,
                                const torch::Tensor& padding = {}) = 0;
  virtual torch::Tensor Hidden(const torch::Tensor& tokens, int64_t first_output = 0,
                               const torch::Tensor& padding = {}) = 0;
  virtual OutputHead output_head() = 0;
  virtual torch::Tensor ForwardCached(const torch::Tensor& tokens, KvCache& cache) = 0;
  virtual torch::Tensor Block(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask, KvCache* cache,
                              int64_t first_output = 0) = 0;

  virtual NamedTensors OrderedParameters() const = 0;
  virtual int64_t LayerOfParameter(const std::string& name) const = 0;

  virtual int64_t layers() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_seq_len() const = 0;
  virtual KvCacheShape kv_cache_shape() const = 0;
  // One line for logs: architecture and dimensions.
  virtual std::string Describe() const = 0;

  // nullptr (the default) runs Block() directly. Not owned; clear it before it dies.
  void set_block_executor(BlockExecutor* executor) { executor_ = executor; }
  bool has_block_executor() const { return executor_ != nullptr; }
  BlockExecutor* block_executor() const { return executor_; }

 protected:
  BlockExecutor* executor_ = nullptr;
};

// A shared handle to any CausalLMImpl; every concrete model's handle (HfCausalLM, ...)
// converts to it, so code written against CausalLM takes any of them.
class CausalLM : public torch::nn::ModuleHolder<CausalLMImpl> {
 public:
  using torch::nn::ModuleHolder<CausalLMImpl>::ModuleHolder;
  template <typename Impl, typename = std::enable_if_t<std::is_base_of_v<CausalLMImpl, Impl>>>
  /* implicit */ CausalLM(const torch::nn::ModuleHolder<Impl>& model)
      : ModuleHolder(std::shared_ptr<CausalLMImpl>(model.ptr())) {}
};

}  // namespace headroom::worker
