// The policy network: a decoder-only, pre-norm transformer (architecture in model_config.h).
//
// Contract:
//   - Construction is deterministic for config.seed: same seed, same weights, bit for bit
//     (the global torch RNG is seeded and every tensor initialised in a fixed order).
//   - forward(tokens [B, T], first_output = 0) -> logits [B, T - first_output, vocab] of
//     positions first_output..T-1, causal: position t sees 0..t only. The same values as
//     the full forward's, computed without what only earlier positions' outputs need
//     (the last block's queries, MLP, final norm and head there; not under a
//     BlockExecutor, which runs whole blocks).
//   - ForwardCached(tokens [B, t], cache) appends t positions at cache.length() and
//     returns the logits of the last new position [B, vocab]; equal (to float rounding)
//     to forward() on the whole prefix.
//   - OrderedParameters() lists (name, tensor) in one fixed order — the order a flat
//     buffer, a shard map and a checkpoint use.
//   - On a CUDA device the forward passes run under bf16 autocast; on CPU in fp32.
//   - Block l's parameters are exactly those named "blocks.<l>.*"; everything else
//     (embeddings, final norm, head) is used outside the blocks. A BlockExecutor, when
//     set, runs every block (ZeRO stage 3 gathers a block's parameters around it); the
//     result must equal Block() on the same input.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "worker/model/kv_cache.h"
#include "worker/model/model_config.h"

namespace headroom::worker {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

class TransformerImpl;

// Runs one block of a Transformer in the forward pass (see TransformerImpl::Block).
class BlockExecutor {
 public:
  virtual ~BlockExecutor() = default;
  virtual torch::Tensor RunBlock(TransformerImpl& model, int64_t layer, const torch::Tensor& x,
                                 const torch::Tensor& mask, KvCache* cache) = 0;
};

struct TransformerBlockImpl : torch::nn::Module {
  explicit TransformerBlockImpl(const TransformerConfig& c);
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, out{nullptr}, fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(TransformerBlock);

class TransformerImpl : public torch::nn::Module {
 public:
  explicit TransformerImpl(const TransformerConfig& config);

  torch::Tensor forward(const torch::Tensor& tokens, int64_t first_output = 0);
  torch::Tensor ForwardCached(const torch::Tensor& tokens, KvCache& cache);

  NamedTensors OrderedParameters() const;
  const TransformerConfig& config() const { return config_; }

  // Block `layer` on x [B, t, H]: attention (causal `mask` [t, start + t], undefined for
  // a single cached position) and MLP, each with its residual. With a cache, appends the
  // block's keys/values at cache->length() and attends over everything cached.
  // first_output > 0 (uncached only): the block's output at positions first_output..
  // only, [B, t - first_output, H]; keys and values still come from every position.
  torch::Tensor Block(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask, KvCache* cache,
                      int64_t first_output = 0);
  // nullptr (the default) runs Block() directly. Not owned; clear it before it dies.
  void set_block_executor(BlockExecutor* executor) { executor_ = executor; }

 private:
  // Runs the blocks on x [B, T, H]; with a cache, keys/values are appended and read back.
  torch::Tensor Blocks(torch::Tensor x, KvCache* cache, int64_t first_output);
  void InitWeights();

  TransformerConfig config_;
  torch::nn::Embedding tok_emb_{nullptr}, pos_emb_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::LayerNorm ln_f_{nullptr};
  torch::nn::Linear head_{nullptr};
  torch::Tensor causal_mask_;  // [max_seq, max_seq], 0 on and below the diagonal, -inf above
  std::vector<TransformerBlock> block_list_;
  BlockExecutor* executor_ = nullptr;
};
TORCH_MODULE(Transformer);

}  // namespace headroom::worker
