// The presets' policy network: a decoder-only, pre-norm GPT-2-like transformer trained
// from scratch (architecture in model_config.h). A CausalLM (causal_lm.h has the contract
// every model keeps); in addition:
//   - Construction is deterministic for config.seed: same seed, same weights, bit for bit
//     (the global torch RNG is seeded and every tensor initialised in a fixed order).
//   - forward(tokens, first_output) computes the same values as the full forward without
//     what only earlier positions' outputs need (the last block's queries, MLP, final
//     norm and head there; not under a BlockExecutor, which runs whole blocks).
//   - Block l's parameters are exactly those named "blocks.<l>.*".
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "worker/model/causal_lm.h"
#include "worker/model/kv_cache.h"
#include "worker/model/model_config.h"

namespace headroom::worker {

struct TransformerBlockImpl : torch::nn::Module {
  explicit TransformerBlockImpl(const TransformerConfig& c);
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, out{nullptr}, fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(TransformerBlock);

class TransformerImpl : public CausalLMImpl {
 public:
  explicit TransformerImpl(const TransformerConfig& config);

  // Learned absolute positions: non-zero padding throws std::invalid_argument (the toy
  // tasks' prompts all have one length, so they never pad).
  torch::Tensor forward(const torch::Tensor& tokens, int64_t first_output = 0,
                        const torch::Tensor& padding = {}) override;
  torch::Tensor Hidden(const torch::Tensor& tokens, int64_t first_output = 0,
                       const torch::Tensor& padding = {}) override;
  OutputHead output_head() override { return {head_->weight, head_->bias}; }
  torch::Tensor ForwardCached(const torch::Tensor& tokens, KvCache& cache) override;

  NamedTensors OrderedParameters() const override;
  int64_t LayerOfParameter(const std::string& name) const override;
  int64_t layers() const override { return config_.layers; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_seq_len() const override { return config_.max_seq_len; }
  KvCacheShape kv_cache_shape() const override { return KvCacheShapeOf(config_); }
  std::string Describe() const override { return "transformer " + config_.ToString(); }
  const TransformerConfig& config() const { return config_; }

  // Block `layer` on x [B, t, H]: attention (causal `mask` [t, start + t], undefined for
  // a single cached position) and MLP, each with its residual. With a cache, appends the
  // block's keys/values at cache->length() and attends over everything cached.
  // first_output > 0 (uncached only): the block's output at positions first_output..
  // only, [B, t - first_output, H]; keys and values still come from every position.
  torch::Tensor Block(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask, KvCache* cache,
                      int64_t first_output = 0) override;

 private:
  // Runs the blocks on x [B, T, H]; with a cache, keys/values are appended and read back.
  torch::Tensor Blocks(torch::Tensor x, KvCache* cache, int64_t first_output);
  // Embeddings, blocks and the final norm, in the current autocast scope.
  torch::Tensor FinalHidden(const torch::Tensor& tokens, int64_t first_output, const torch::Tensor& padding);
  void InitWeights();

  TransformerConfig config_;
  torch::nn::Embedding tok_emb_{nullptr}, pos_emb_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::LayerNorm ln_f_{nullptr};
  torch::nn::Linear head_{nullptr};
  torch::Tensor causal_mask_;  // [max_seq, max_seq], 0 on and below the diagonal, -inf above
  std::vector<TransformerBlock> block_list_;
};
TORCH_MODULE(Transformer);

}  // namespace headroom::worker
