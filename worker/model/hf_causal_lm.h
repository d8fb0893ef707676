// The policy network: a Hugging Face-style causal LM (Qwen2, Qwen3, Llama 3) in LibTorch,
// as a CausalLM the trainer, rollout, ZeRO shards and checkpoints use (causal_lm.h). It
// serves both a pretrained model (LoadHfCausalLM) and the presets, which are built-in
// Llama-style configurations trained from random weights (core/spec/model_presets.h).
//
// Architecture, as transformers implements it: token embedding; per layer
//   h = x + o_proj(attention(rope(q_proj(n1(x))), rope(k_proj(n1(x))), v_proj(n1(x))))
//   y = h + down_proj(silu(gate_proj(n2(h))) * up_proj(n2(h)))
// with n1, n2 RMSNorm (input_layernorm, post_attention_layernorm); grouped-query
// attention (num_key_value_heads); q/k/v biases (Qwen2, or Llama's attention_bias); a
// per-head RMSNorm on queries and keys before the rotation (Qwen3's q_norm, k_norm);
// rotary embeddings with the config's theta and Llama 3 scaling; final RMSNorm; lm_head,
// or the embedding matrix itself when tie_word_embeddings. With learned_positions (the
// presets) a position table is added to the token embedding, indexed from each row's
// first real token, so a left-padded row still reads positions 0, 1, ... .
//
// Parameter names are the Hugging Face names (model.embed_tokens.weight,
// model.embed_positions.weight,
// model.layers.<l>.self_attn.q_proj.weight, ..., model.norm.weight, lm_head.weight), so
// checkpoints and exports speak them. A tied model has no lm_head parameter.
// Weights are held in fp32 (master weights); on a CUDA device forwards run under bf16
// autocast. Passes without gradient may run on bf16 copies of them (causal_lm.h); the
// embedding lookup then returns fp32, so only the weights are rounded. Positions are the cache length onwards, padding included: rotary attention
// depends only on relative positions, so left padding (causal_lm.h) shifts nothing.
// forward(tokens, first_output) computes the same values as the full forward without what
// only earlier positions' outputs need (the last block's queries, MLP, final norm and
// head there; not under a BlockExecutor, which runs whole blocks). On the CPU in fp32,
// short unpadded sequences with as many key/value heads as query heads take the fused
// attention kernel (fused_attention.h); everything else the batched matmuls. The CPU's
// other fused paths compute the same values to float rounding, with fewer operators:
// RMSNorm, rotary and the SwiGLU gate's backward (fused_rms_norm.h, fused_rotary.h,
// fused_swiglu.h), and q/k/v and gate/up as one matmul over their weights stacked at
// forward time where that pays (the parameters stay the separate Hugging Face ones).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/hf/hf_config.h"
#include "worker/model/causal_lm.h"

namespace headroom::worker {

struct HfRmsNormImpl : torch::nn::Module {
  HfRmsNormImpl(int64_t width, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;
  double eps;
};
TORCH_MODULE(HfRmsNorm);

// A trainable addition to one projection of a block, put there by a model transform
// (LoRA: worker/model/lora.h): the projection's output becomes linear(x) + Delta(x) while
// active(). Its parameters are registered on the projection's module by whoever makes it,
// so the model's names and parameters include them.
class LinearAdapter {
 public:
  virtual ~LinearAdapter() = default;
  virtual bool active() const = 0;
  // [..., out_features] for x [..., in_features], in the current autocast scope.
  virtual torch::Tensor Delta(const torch::Tensor& x) = 0;
};

struct HfDecoderLayerImpl : torch::nn::Module {
  explicit HfDecoderLayerImpl(const hf::HfModelConfig& c);
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  // Adapters of the projections above, in that order (q, k, v, o, gate, up, down); null
  // where a projection has none.
  enum Projection { kQ, kK, kV, kO, kGate, kUp, kDown, kProjections };
  std::array<std::shared_ptr<LinearAdapter>, kProjections> adapters;
  HfRmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  HfRmsNorm q_norm{nullptr}, k_norm{nullptr};  // Qwen3 only
};
TORCH_MODULE(HfDecoderLayer);

class HfCausalLMImpl : public CausalLMImpl {
 public:
  // Random weights of the config's shape, the same for the same seed bit for bit (the
  // global torch RNG is seeded and every parameter drawn in OrderedParameters() order):
  // RMSNorm weights 1, the embeddings N(0, 1), every Linear weight and bias
  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's defaults. Why not transformers'
  // N(0, 0.02): trained from scratch with GRPO, that init leaves attention almost uniform
  // and its gradients products of two tiny matrices, so the tiny preset learned the
  // answer's length but never which prompt digit to copy. max_seq_len caps the positions a
  // forward or a cache may hold (<= max_position_embeddings is not required, but for
  // learned positions, whose table must cover it: std::invalid_argument otherwise).
  HfCausalLMImpl(const hf::HfModelConfig& config, int64_t max_seq_len, uint64_t seed = 1);

  torch::Tensor forward(const torch::Tensor& tokens, int64_t first_output = 0,
                        const torch::Tensor& padding = {}) override;
  torch::Tensor Hidden(const torch::Tensor& tokens, int64_t first_output = 0,
                       const torch::Tensor& padding = {}) override;
  OutputHead output_head() override { return {lm_head_ ? lm_head_->weight : embed_tokens_->weight, {}}; }
  torch::Tensor ForwardCached(const torch::Tensor& tokens, KvCache& cache) override;
  torch::Tensor Block(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask, KvCache* cache,
                      int64_t first_output = 0) override;
  NamedTensors OrderedParameters() const override;
  int64_t LayerOfParameter(const std::string& name) const override;
  int64_t layers() const override { return config_.num_hidden_layers; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_seq_len() const override { return max_seq_len_; }
  KvCacheShape kv_cache_shape() const override {
    return {config_.num_hidden_layers, config_.num_key_value_heads, config_.head_dim, max_seq_len_};
  }
  std::string Describe() const override;
  const hf::HfModelConfig& config() const { return config_; }
  HfDecoderLayerImpl& layer(int64_t l) { return *layer_list_.at(static_cast<size_t>(l)); }

 private:
  torch::Tensor Blocks(torch::Tensor x, KvCache* cache, int64_t first_output, const torch::Tensor& padding);
  // The token embedding of tokens [B, t] at positions start.. (plus learned positions,
  // shifted back by each row's padding [B] when defined).
  torch::Tensor Embed(const torch::Tensor& tokens, int64_t start, const torch::Tensor& padding);
  // The same for one token per row at *position (KvCache's static decode), by tensor ops.
  torch::Tensor EmbedAt(const torch::Tensor& tokens, const torch::Tensor& position, const torch::Tensor& padding);
  // Embeddings, blocks and the final norm, in the current autocast scope.
  torch::Tensor FinalHidden(const torch::Tensor& tokens, int64_t first_output, const torch::Tensor& padding);
  // The output projection of final-normed hidden states.
  torch::Tensor Head(const torch::Tensor& normed);
  void InitializeWeights(uint64_t seed);
  // qkv [B, t, heads + 2 kv_heads, head_dim] (queries, keys, values) with the queries and
  // keys rotated for positions start..start+t, start = the cache's length (0 without one),
  // or for the cache's static position; the values unchanged.
  torch::Tensor Rotate(const torch::Tensor& qkv, const KvCache* cache);
  // Rotate()'s cos and signed sin tables [t, heads + 2 kv_heads, head_dim] in like's dtype:
  // kept for the last few (start, t) asked for (a rollout's and an update's forwards ask
  // for the same ones every step); for a static position, the rows of every position's
  // tables, which are kept per dtype and device.
  std::pair<torch::Tensor, torch::Tensor> RotaryTables(const KvCache* cache, const torch::Tensor& like);
  // The packed tables of positions start..start+t in `dtype`, on the tables' device.
  std::pair<torch::Tensor, torch::Tensor> PackedRotaryTables(int64_t start, int64_t t, torch::ScalarType dtype) const;
  // Attention of qkv [B, t, heads + 2 kv_heads, d] (rotated; keys and values appended to
  // the cache first), for the queries from first_output on: [B, t - first_output, heads * d].
  torch::Tensor Attention(int64_t layer, const torch::Tensor& qkv, const torch::Tensor& mask, KvCache* cache,
                          int64_t first_output);

  hf::HfModelConfig config_;
  int64_t max_seq_len_;
  std::shared_ptr<torch::nn::Module> body_;  // the "model." prefix: embeddings, layers, final norm
  torch::nn::Embedding embed_tokens_{nullptr};
  torch::nn::Embedding embed_positions_{nullptr};  // null unless learned_positions
  torch::nn::ModuleList layers_{nullptr};
  std::vector<HfDecoderLayer> layer_list_;
  HfRmsNorm norm_{nullptr};
  torch::nn::Linear lm_head_{nullptr};  // null when tied
  torch::Tensor inv_freq_;              // [head_dim / 2], fp32, rope scaling applied
  torch::Tensor rotary_cos_;            // [max_seq_len, head_dim], fp32, per position
  torch::Tensor rotary_signed_sin_;     // the same sin, its first half negated (Rotate)
  struct RotaryKey {
    int64_t start, t;
    torch::ScalarType dtype;
    torch::Device device;
    bool operator==(const RotaryKey&) const = default;
  };
  static constexpr size_t kRotaryTablesKept = 16;
  std::vector<std::pair<RotaryKey, std::pair<torch::Tensor, torch::Tensor>>> rotary_tables_;
  struct StaticRotaryKey {
    torch::ScalarType dtype;
    torch::Device device;
    bool operator==(const StaticRotaryKey&) const = default;
  };
  std::vector<std::pair<StaticRotaryKey, std::pair<torch::Tensor, torch::Tensor>>> static_rotary_tables_;
};
TORCH_MODULE(HfCausalLM);

// Loads <dir> (config.json + safetensors): every parameter must be present with its
// shape, stored as BF16, F16 or F32 (converted to fp32). Throws hf::HfConfigError or
// hf::SafetensorsError naming the file and the field or tensor.
HfCausalLM LoadHfCausalLM(const std::string& dir, int64_t max_seq_len);
// The weights of <dir>'s safetensors into `model`, whose configuration is that directory's
// config.json (read by the caller); the same checks and errors as LoadHfCausalLM.
void LoadHfWeights(HfCausalLMImpl& model, const std::string& dir);

// Writes the model's parameters as <dir>/model.safetensors in `dtype` (BF16, F16, F32).
void SaveHfSafetensors(HfCausalLMImpl& model, const std::string& path, const std::string& dtype);

}  // namespace headroom::worker
