#include <spdlog/spdlog.h>

#include "worker/model/hf_causal_lm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <initializer_list>
#include <iterator>
#include <vector>

#include "core/hf/safetensors.h"
#include "worker/model/attention_mask.h"
#include "worker/model/bf16_autocast.h"
#include "worker/model/fused_attention.h"
#include "worker/model/fused_rms_norm.h"
#include "worker/model/fused_rotary.h"
#include "worker/model/fused_swiglu.h"
#include "worker/model/sdpa_attention.h"

namespace headroom::worker {
namespace {

// The rotary frequencies transformers computes for the config (default or llama3).
torch::Tensor InverseFrequencies(const hf::HfModelConfig& c) {
  auto inv = 1.0 / torch::pow(c.rope_theta, torch::arange(0, c.head_dim, 2, torch::kInt64).to(torch::kFloat32) /
                                                static_cast<double>(c.head_dim));
  if (c.rope_scaling.type != "llama3") return inv;
  const auto& s = c.rope_scaling;
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelen = old_len / s.low_freq_factor;
  const double high_wavelen = old_len / s.high_freq_factor;
  auto wavelen = 2 * M_PI / inv;
  auto scaled = torch::where(wavelen > low_wavelen, inv / s.factor, inv);
  auto smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  auto smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  auto medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
  return torch::where(medium, smoothed, scaled);
}

// Grouped-query attention without copying the keys and values: key/value head j serves
// query heads [j * groups, (j + 1) * groups) (repeat_interleave's order), so the queries
// q [B, kv_heads * groups, t, d] are folded to [B, kv_heads, groups * t, d], row g * t + i
// of head j being query head j * groups + g at position i, and attend over the cache's own
// [B, kv_heads, S, d]. Repeating the cache instead copied it whole in every layer of every
// token. The mask's query rows [.., t, S] repeat to match (an expand for one query row).
torch::Tensor FoldQueryHeads(const torch::Tensor& q, int64_t kv_heads) {
  const auto s = q.sizes();
  return q.reshape({s[0], kv_heads, s[1] / kv_heads * s[2], s[3]});
}
torch::Tensor FoldMask(const torch::Tensor& mask, int64_t groups) {
  if (!mask.defined() || groups == 1) return mask;
  const int64_t rows = mask.dim() - 2;
  if (mask.size(rows) == 1) {
    auto sizes = mask.sizes().vec();
    sizes[rows] = groups;
    return mask.expand(sizes);
  }
  std::vector<int64_t> repeats(mask.dim(), 1);
  repeats[rows] = groups;
  return mask.repeat(repeats);
}
// The inverse of FoldQueryHeads for the attention output: [B, kv_heads * groups, t, d].
torch::Tensor UnfoldQueryHeads(const torch::Tensor& out, int64_t heads, int64_t t) {
  return out.reshape({out.size(0), heads, t, out.size(3)});
}

// Whether the Linears of input x with out_features in all take StackedLinear: on the CPU,
// where at the presets' sizes each operator's dispatch costs as much as its arithmetic.
// With grad, always: the backward then runs one matmul per input and weight, not one per
// layer plus sums, on contiguous gradients (the small preset's update keeps its share of
// matmul speed); the stacked copy lives until the backward. Without grad (generation) only
// when that copy, made every forward, is small, outright or next to the input it
// multiplies: the small preset's decode tokens, one row per sequence, would copy megabytes
// of weights per token. Never on a GPU, whose decode would copy the weights every token.
bool StackingPays(const torch::Tensor& x, int64_t out_features) {
  constexpr int64_t kSmallWeights = int64_t{1} << 16;  // elements: 256 KiB of fp32
  const int64_t in = x.size(-1), rows = x.numel() / std::max<int64_t>(1, in);
  return x.device().is_cpu() &&
         (torch::GradMode::is_enabled() || in * out_features <= kSmallWeights || rows >= out_features);
}

// x W^T (+ b) of several Linears of the same input as one matmul over their weights (and
// biases) stacked by output: [..., sum of out_features], the layers' outputs side by side.
torch::Tensor StackedLinear(const torch::Tensor& x, std::initializer_list<torch::nn::Linear> layers) {
  std::vector<torch::Tensor> weights, biases;
  for (const auto& l : layers) {
    weights.push_back(l->weight);
    if (l->bias.defined()) biases.push_back(l->bias);
  }
  TORCH_CHECK(biases.empty() || biases.size() == weights.size(), "stacked linear: some layers have a bias, some not");
  return torch::linear(x, torch::cat(weights), biases.empty() ? torch::Tensor() : torch::cat(biases));
}

// What the active adapters among `parts` (each with its projection's output width) add
// to the projections' outputs laid side by side, as StackedLinear lays them; undefined
// when none is active (the projections then run exactly as without adapters).
torch::Tensor AdapterDeltas(const torch::Tensor& x,
                            std::initializer_list<std::pair<const std::shared_ptr<LinearAdapter>*, int64_t>> parts) {
  std::vector<torch::Tensor> deltas;
  torch::Tensor like;
  for (const auto& [adapter, width] : parts) {
    deltas.push_back(*adapter && (*adapter)->active() ? (*adapter)->Delta(x) : torch::Tensor());
    if (deltas.back().defined()) like = deltas.back();
  }
  if (!like.defined()) return {};
  if (deltas.size() == 1) return like;
  size_t i = 0;
  for (const auto& [adapter, width] : parts) {
    if (!deltas[i].defined()) {
      auto sizes = like.sizes().vec();
      sizes.back() = width;
      deltas[i] = torch::zeros(sizes, like.options());
    }
    ++i;
  }
  return torch::cat(deltas, -1);
}

// linear(x) plus its adapter's addition, when it has an active one.
torch::Tensor Project(torch::nn::Linear& linear, const std::shared_ptr<LinearAdapter>& adapter,
                      const torch::Tensor& x) {
  torch::Tensor y = linear(x);
  return adapter && adapter->active() ? y + adapter->Delta(x) : y;
}

torch::Tensor AtLeastFp32(const torch::Tensor& x) {
  return x.scalar_type() == torch::kBFloat16 || x.scalar_type() == torch::kFloat16 ? x.to(torch::kFloat32) : x;
}

torch::Dtype TorchDtype(const std::string& dtype, const std::string& what) {
  if (dtype == "BF16") return torch::kBFloat16;
  if (dtype == "F16") return torch::kFloat16;
  if (dtype == "F32") return torch::kFloat32;
  throw hf::SafetensorsError(what + ": dtype " + dtype + " is not supported (BF16, F16, F32)");
}

}  // namespace

HfRmsNormImpl::HfRmsNormImpl(int64_t width, double eps_) : eps(eps_) {
  weight = register_parameter("weight", torch::ones({width}));
}

torch::Tensor HfRmsNormImpl::forward(const torch::Tensor& x) {
  if (FusedRmsNormApplies(x, weight)) return FusedRmsNorm(x, weight, eps);  // fp32 on the CPU: one pass
  // In fp32 whatever the input, as transformers does, then back to the input's dtype.
  auto h = x.to(torch::kFloat32);
  h = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * h.to(x.scalar_type());
}

HfDecoderLayerImpl::HfDecoderLayerImpl(const hf::HfModelConfig& c) {
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  using torch::nn::Linear;
  using torch::nn::LinearOptions;
  // Module names may not contain dots: "self_attn" and "mlp" are plain containers, which
  // gives the Hugging Face names model.layers.<l>.self_attn.q_proj.weight and so on.
  auto attn = register_module("self_attn", std::make_shared<torch::nn::Module>());
  q_proj = attn->register_module("q_proj", Linear(LinearOptions(c.hidden_size, q).bias(c.attention_bias)));
  k_proj = attn->register_module("k_proj", Linear(LinearOptions(c.hidden_size, kv).bias(c.attention_bias)));
  v_proj = attn->register_module("v_proj", Linear(LinearOptions(c.hidden_size, kv).bias(c.attention_bias)));
  o_proj = attn->register_module("o_proj", Linear(LinearOptions(q, c.hidden_size).bias(false)));
  if (c.qk_norm) {
    q_norm = attn->register_module("q_norm", HfRmsNorm(c.head_dim, c.rms_norm_eps));
    k_norm = attn->register_module("k_norm", HfRmsNorm(c.head_dim, c.rms_norm_eps));
  }
  auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
  gate_proj = mlp->register_module("gate_proj", Linear(LinearOptions(c.hidden_size, c.intermediate_size).bias(false)));
  up_proj = mlp->register_module("up_proj", Linear(LinearOptions(c.hidden_size, c.intermediate_size).bias(false)));
  down_proj = mlp->register_module("down_proj", Linear(LinearOptions(c.intermediate_size, c.hidden_size).bias(false)));
  input_layernorm = register_module("input_layernorm", HfRmsNorm(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", HfRmsNorm(c.hidden_size, c.rms_norm_eps));
}

HfCausalLMImpl::HfCausalLMImpl(const hf::HfModelConfig& config, int64_t max_seq_len, uint64_t seed)
    : config_(config), max_seq_len_(max_seq_len) {
  if (max_seq_len < 1) throw std::invalid_argument("hf model: max_seq_len must be >= 1");
  body_ = register_module("model", std::make_shared<torch::nn::Module>());
  embed_tokens_ = body_->register_module("embed_tokens", torch::nn::Embedding(config_.vocab_size, config_.hidden_size));
  if (config_.learned_positions) {
    if (config_.max_position_embeddings < max_seq_len) {
      throw std::invalid_argument("hf model: " + std::to_string(config_.max_position_embeddings) +
                                  " learned positions cannot hold max_seq_len " + std::to_string(max_seq_len));
    }
    embed_positions_ = body_->register_module(
        "embed_positions", torch::nn::Embedding(config_.max_position_embeddings, config_.hidden_size));
  }
  layers_ = body_->register_module("layers", torch::nn::ModuleList());
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    layer_list_.emplace_back(config_);
    layers_->push_back(layer_list_.back());
  }
  norm_ = body_->register_module("norm", HfRmsNorm(config_.hidden_size, config_.rms_norm_eps));
  if (!config_.tie_word_embeddings) {
    lm_head_ = register_module(
        "lm_head", torch::nn::Linear(torch::nn::LinearOptions(config_.hidden_size, config_.vocab_size).bias(false)));
  }
  inv_freq_ = register_buffer("inv_freq", InverseFrequencies(config_));
  auto positions = torch::arange(max_seq_len_, torch::TensorOptions().dtype(torch::kFloat32));
  auto freqs = torch::outer(positions, inv_freq_);
  auto emb = torch::cat({freqs, freqs}, -1);  // [max_seq_len, head_dim]
  rotary_cos_ = register_buffer("rotary_cos", emb.cos());
  // transformers' rotate_half(x) * sin = cat(-x2, x1) * sin = roll(x, d/2) * (sin with its
  // first half negated): one roll in place of two slices, a negation and a cat (whose
  // backwards cost more still); multiplying by -1 is exact.
  auto sign = torch::ones({config_.head_dim});
  sign.narrow(0, 0, config_.head_dim / 2).fill_(-1);
  rotary_signed_sin_ = register_buffer("rotary_signed_sin", emb.sin() * sign);
  InitializeWeights(seed);
}

void HfCausalLMImpl::InitializeWeights(uint64_t seed) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& [name, p] : OrderedParameters()) {
    const bool is_bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (name.find(".embed_") != std::string::npos) {
      p.normal_(0.0, 1.0);
    } else if (p.dim() == 1 && !is_bias) {
      p.fill_(1.0);  // an RMSNorm's weight
    } else {
      // A Linear's weight [out, in], or a q/k/v bias, whose fan-in is the hidden width.
      const int64_t fan_in = is_bias ? config_.hidden_size : p.size(1);
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      p.uniform_(-bound, bound);
    }
  }
}

std::string HfCausalLMImpl::Describe() const {
  return config_.architecture_name + " " + std::to_string(config_.num_hidden_layers) + " layers x " +
         std::to_string(config_.hidden_size) + ", heads " + std::to_string(config_.num_attention_heads) + "/" +
         std::to_string(config_.num_key_value_heads) + " kv, vocab " + std::to_string(config_.vocab_size) +
         (config_.learned_positions ? ", learned positions" : "");
}

NamedTensors HfCausalLMImpl::OrderedParameters() const {
  NamedTensors out;
  for (const auto& item : named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

int64_t HfCausalLMImpl::LayerOfParameter(const std::string& name) const {
  static const std::string kPrefix = "model.layers.";
  if (name.rfind(kPrefix, 0) != 0) return -1;
  const size_t dot = name.find('.', kPrefix.size());
  return std::stoll(name.substr(kPrefix.size(), dot - kPrefix.size()));
}

std::pair<torch::Tensor, torch::Tensor> HfCausalLMImpl::PackedRotaryTables(int64_t start, int64_t t,
                                                                           torch::ScalarType dtype) const {
  const int64_t rotated = config_.num_attention_heads + config_.num_key_value_heads;
  const int64_t kept = config_.num_key_value_heads, d = config_.head_dim;
  // [t, heads + 2 kv_heads, head_dim]: each position's table for the query and key heads;
  // 1 and 0 for the value heads, which pass unchanged (x * 1 + roll(x) * 0 = x exactly).
  const auto o = rotary_cos_.options().dtype(dtype);
  auto packed = [&](const torch::Tensor& table, double value_heads) {
    return torch::cat({table.narrow(0, start, t).unsqueeze(1).to(o).expand({t, rotated, d}),
                       torch::full({t, kept, d}, value_heads, o)},
                      1);
  };
  return {packed(rotary_cos_, 1.0), packed(rotary_signed_sin_, 0.0)};
}

std::pair<torch::Tensor, torch::Tensor> HfCausalLMImpl::RotaryTables(const KvCache* cache, const torch::Tensor& like) {
  // Kept as ordinary tensors even when first asked for in inference mode (the rollout), so
  // that a training forward at the same positions may save them for its backward.
  if (cache && cache->is_static()) {
    // The position is on the device: every position's tables, made once per dtype and
    // device and never dropped (a captured decode graph reads them), and the step's rows
    // picked there.
    const StaticRotaryKey key{like.scalar_type(), like.device()};
    auto found = std::find_if(static_rotary_tables_.begin(), static_rotary_tables_.end(),
                              [&](const auto& entry) { return entry.first == key; });
    if (found == static_rotary_tables_.end()) {
      c10::InferenceMode ordinary(false);
      static_rotary_tables_.emplace_back(key, PackedRotaryTables(0, max_seq_len_, like.scalar_type()));
      found = std::prev(static_rotary_tables_.end());
    }
    const auto at = cache->static_position().view({1});
    return {found->second.first.index_select(0, at), found->second.second.index_select(0, at)};
  }
  const int64_t start = cache ? cache->length() : 0, t = like.size(1);
  const RotaryKey key{start, t, like.scalar_type(), like.device()};
  for (const auto& [k, tables] : rotary_tables_) {
    if (k == key) return tables;
  }
  c10::InferenceMode ordinary(false);
  if (rotary_tables_.size() >= kRotaryTablesKept) rotary_tables_.erase(rotary_tables_.begin());
  rotary_tables_.emplace_back(key, PackedRotaryTables(start, t, like.scalar_type()));
  return rotary_tables_.back().second;
}

torch::Tensor HfCausalLMImpl::Rotate(const torch::Tensor& qkv, const KvCache* cache) {
  const auto [cos, signed_sin] = RotaryTables(cache, qkv);
  if (FusedRotaryApplies(qkv, cos, signed_sin)) return FusedRotary(qkv, cos, signed_sin);  // fp32 CPU: one pass
  return torch::addcmul(qkv * cos, qkv.roll(config_.head_dim / 2, -1), signed_sin);
}

torch::Tensor HfCausalLMImpl::Attention(int64_t layer, const torch::Tensor& qkv, const torch::Tensor& mask,
                                        KvCache* cache, int64_t first_output) {
  const int64_t batch = qkv.size(0), t = qkv.size(1), start = cache ? cache->length() : 0;
  const int64_t heads = config_.num_attention_heads, kv_heads = config_.num_key_value_heads, d = config_.head_dim;
  const auto q = qkv.narrow(2, 0, heads), k = qkv.narrow(2, heads, kv_heads),
             v = qkv.narrow(2, heads + kv_heads, kv_heads);
  const int64_t out_t = t - first_output;
  // The fused kernel is causal by position: it serves the plain causal mask only.
  const bool causal_only = !mask.defined() || mask.dim() == 2;
  // The fused kernel reads the cache in the queries' dtype (fp32 on the CPU).
  const bool cache_matches = !cache || cache->Keys(layer, 0).scalar_type() == q.scalar_type();
  if (heads == kv_heads && causal_only && cache_matches && FusedAttentionApplies(q, start + t)) {
    if (!cache) return FusedSelfAttention(qkv.view({batch, t, 3 * heads * d}), heads, first_output);
    cache->Append(layer, k.transpose(1, 2), v.transpose(1, 2));
    return FusedCachedAttention(q.transpose(1, 2), cache->Keys(layer, start + t), cache->Values(layer, start + t),
                                start);
  }
  auto qh = q.transpose(1, 2), kh = k.transpose(1, 2), vh = v.transpose(1, 2);  // [B, heads, t, d]
  if (cache) {
    cache->Append(layer, kh, vh);
    kh = cache->Keys(layer, start + t);
    vh = cache->Values(layer, start + t);
  }
  const int64_t groups = heads / kv_heads;  // grouped-query attention: query heads per key/value head
  // Queries in the keys' dtype: a bf16 cache is read as it is, never copied up (on a GPU,
  // autocast would cast the queries the same way); the output returns to the queries' dtype.
  const auto out_dtype = qh.scalar_type();
  auto qo = FoldQueryHeads(qh.narrow(2, first_output, out_t).to(kh.scalar_type()), kv_heads);
  const torch::Tensor out_mask = FoldMask(mask.defined() ? mask.narrow(-2, first_output, out_t) : mask, groups);
  torch::Tensor out;  // [B, kv_heads, groups * out_t, d]
  if (SdpaAttentionApplies(qo)) {
    out = SdpaAttention(qo, kh, vh, out_mask);
  } else {
    auto scores = torch::matmul(qo, kh.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    if (out_mask.defined()) scores = scores + out_mask.to(scores.scalar_type());
    auto probs = torch::softmax(scores.to(torch::kFloat32), -1).to(vh.scalar_type());
    out = torch::matmul(probs, vh);
  }
  return UnfoldQueryHeads(out, heads, out_t).transpose(1, 2).reshape({batch, out_t, heads * d}).to(out_dtype);
}

torch::Tensor HfCausalLMImpl::Block(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask, KvCache* cache,
                                    int64_t first_output) {
  auto& b = *layer_list_.at(static_cast<size_t>(layer));
  const int64_t batch = x.size(0), t = x.size(1);
  TORCH_CHECK(first_output == 0 || (!cache && first_output < t), "block ", layer, ": first output position ",
              first_output, " needs an uncached forward over more than that many positions");
  const int64_t heads = config_.num_attention_heads, kv_heads = config_.num_key_value_heads, d = config_.head_dim;

  auto n1 = b.input_layernorm(x);
  torch::Tensor qkv;  // [B, t, heads + 2 kv_heads, d]: queries, keys, values
  using P = HfDecoderLayerImpl::Projection;
  const auto& ad = b.adapters;
  if (StackingPays(n1, (heads + 2 * kv_heads) * d)) {
    qkv = StackedLinear(n1, {b.q_proj, b.k_proj, b.v_proj});
    if (auto delta =
            AdapterDeltas(n1, {{&ad[P::kQ], heads * d}, {&ad[P::kK], kv_heads * d}, {&ad[P::kV], kv_heads * d}});
        delta.defined()) {
      qkv = qkv + delta;
    }
    qkv = qkv.view({batch, t, heads + 2 * kv_heads, d});
  } else {
    qkv = torch::cat({Project(b.q_proj, ad[P::kQ], n1).view({batch, t, heads, d}),
                      Project(b.k_proj, ad[P::kK], n1).view({batch, t, kv_heads, d}),
                      Project(b.v_proj, ad[P::kV], n1).view({batch, t, kv_heads, d})},
                     2);
  }
  if (config_.qk_norm) {
    qkv = torch::cat({b.q_norm(qkv.narrow(2, 0, heads)), b.k_norm(qkv.narrow(2, heads, kv_heads)),
                      qkv.narrow(2, heads + kv_heads, kv_heads)},
                     2);
  }
  auto attn = Attention(layer, Rotate(qkv, cache), mask, cache, first_output);
  auto h = x.narrow(1, first_output, t - first_output) + Project(b.o_proj, ad[P::kO], attn);
  auto n2 = b.post_attention_layernorm(h);
  torch::Tensor gated;  // silu(gate_proj(n2)) * up_proj(n2)
  const int64_t ffn = config_.intermediate_size;
  if (!StackingPays(n2, 2 * ffn)) {
    gated = torch::silu(Project(b.gate_proj, ad[P::kGate], n2)) * Project(b.up_proj, ad[P::kUp], n2);
  } else {
    auto gate_up = StackedLinear(n2, {b.gate_proj, b.up_proj});
    if (auto delta = AdapterDeltas(n2, {{&ad[P::kGate], ffn}, {&ad[P::kUp], ffn}}); delta.defined()) {
      gate_up = gate_up + delta;
    }
    if (FusedSwiGluApplies(gate_up)) {
      gated = FusedSwiGlu(gate_up);  // fp32: one pass each way, no split
    } else {
      auto parts = gate_up.split(ffn, -1);
      gated = torch::silu(parts[0]) * parts[1];
    }
  }
  return h + Project(b.down_proj, ad[P::kDown], gated);
}

torch::Tensor HfCausalLMImpl::Blocks(torch::Tensor x, KvCache* cache, int64_t first_output,
                                     const torch::Tensor& padding) {
  const int64_t t = x.size(1);
  const int64_t start = cache ? cache->length() : 0;
  const int64_t last = config_.num_hidden_layers - 1;
  const bool static_decode = cache && cache->is_static();
  // Causal over [start, start + t); one cached position sees everything, but padded keys.
  // All-zero padding on the CPU takes the unpadded path, bit for bit (and the fused
  // attention kernel); on a GPU reading it back would stall the stream.
  const bool padded = !static_decode && padding.defined() && (!x.device().is_cpu() || padding.ne(0).any().item<bool>());
  torch::Tensor mask;
  if (static_decode) {
    TORCH_CHECK(t == 1, "a static decode forward takes one position, got ", t);
    mask = StaticDecodeMask(cache->static_padding(), cache->static_position(), cache->max_seq());
  } else if (padded) {
    TORCH_CHECK(padding.dim() == 1 && padding.size(0) == x.size(0), "padding ", padding.sizes(), " for a batch of ",
                x.size(0));
    mask = PaddedCausalMask(padding, start, t, x.device());
  } else if (t > 1) {
    mask = torch::full({t, start + t}, -std::numeric_limits<float>::infinity(),
                       torch::TensorOptions().dtype(torch::kFloat32).device(x.device()))
               .triu(start + 1);
  }
  for (int64_t l = 0; l <= last; ++l) {
    if (executor_) {
      x = executor_->RunBlock(*this, l, x, mask, cache);
      if (l == last && first_output > 0) x = x.narrow(1, first_output, t - first_output);
    } else {
      x = Block(l, x, mask, cache, l == last ? first_output : 0);
    }
  }
  if (cache) cache->Advance(t);
  return x;
}

torch::Tensor HfCausalLMImpl::Head(const torch::Tensor& normed) {
  return lm_head_ ? lm_head_(normed) : torch::matmul(normed, embed_tokens_->weight.t());
}

torch::Tensor HfCausalLMImpl::Embed(const torch::Tensor& tokens, int64_t start, const torch::Tensor& padding) {
  // The residual stream stays at least fp32 when the tables are bf16 copies
  // (inference_weights.h): only the table entries are rounded, as for every other weight.
  auto x = AtLeastFp32(embed_tokens_(tokens));
  if (!embed_positions_) return x;
  auto positions = torch::arange(start, start + tokens.size(1), tokens.options());  // [t]
  if (padding.defined()) positions = (positions.unsqueeze(0) - padding.to(tokens.device()).unsqueeze(1)).clamp_min(0);
  return x + embed_positions_(positions);
}

torch::Tensor HfCausalLMImpl::EmbedAt(const torch::Tensor& tokens, const torch::Tensor& position,
                                      const torch::Tensor& padding) {
  auto x = AtLeastFp32(embed_tokens_(tokens));  // as Embed: the residual stream stays fp32
  if (!embed_positions_) return x;
  return x + embed_positions_((position.view({1, 1}) - padding.view({-1, 1})).clamp_min(0));  // [B, 1]
}

torch::Tensor HfCausalLMImpl::FinalHidden(const torch::Tensor& tokens, int64_t first_output,
                                          const torch::Tensor& padding) {
  const int64_t t = tokens.size(1);
  TORCH_CHECK(t <= max_seq_len_, "sequence of ", t, " tokens exceeds max_seq_len ", max_seq_len_);
  TORCH_CHECK(first_output >= 0 && first_output < t, "first output position ", first_output, " outside the ", t,
              " positions");
  return norm_(Blocks(Embed(tokens, 0, padding), nullptr, first_output, padding));
}

torch::Tensor HfCausalLMImpl::forward(const torch::Tensor& tokens, int64_t first_output, const torch::Tensor& padding) {
  Bf16Autocast autocast(tokens.device());
  return Head(FinalHidden(tokens, first_output, padding));
}

torch::Tensor HfCausalLMImpl::Hidden(const torch::Tensor& tokens, int64_t first_output, const torch::Tensor& padding) {
  Bf16Autocast autocast(tokens.device());
  return InAutocastDtype(FinalHidden(tokens, first_output, padding));
}

torch::Tensor HfCausalLMImpl::ForwardCached(const torch::Tensor& tokens, KvCache& cache) {
  Bf16Autocast autocast(tokens.device());
  const int64_t t = tokens.size(1);
  TORCH_CHECK(tokens.size(0) == cache.batch(), "batch ", tokens.size(0), " != cache batch ", cache.batch());
  auto embedded = cache.is_static() ? EmbedAt(tokens, cache.static_position(), cache.static_padding())
                                    : Embed(tokens, cache.length(), cache.padding());
  auto x = Blocks(embedded, &cache, 0, cache.padding());
  return Head(norm_(x.select(1, t - 1)));
}

HfCausalLM LoadHfCausalLM(const std::string& dir, int64_t max_seq_len) {
  HfCausalLM model(hf::LoadHfConfig(dir), max_seq_len);  // the random init is overwritten below
  LoadHfWeights(*model, dir);
  return model;
}

void LoadHfWeights(HfCausalLMImpl& model, const std::string& dir) {
  const hf::HfModelConfig& config = model.config();
  const hf::SafetensorsModel weights(dir);
  torch::NoGradGuard no_grad;
  size_t used = 0;
  for (auto& [name, param] : model.OrderedParameters()) {
    const hf::TensorView& view = weights.Get(name);
    const std::string what = view.file + ": tensor " + name;
    if (view.shape != param.sizes().vec()) {
      throw hf::SafetensorsError(what + " has shape " + c10::str(c10::IntArrayRef(view.shape)) + ", " +
                                 config.architecture_name + " with this config.json needs " + c10::str(param.sizes()));
    }
    const torch::Dtype dtype = TorchDtype(view.dtype, what);
    hf::RequireFinite(view, name);
    // A view of the mapped bytes; the copy converts to fp32 and is the only copy made.
    auto stored = torch::from_blob(const_cast<std::byte*>(view.data), view.shape, torch::TensorOptions().dtype(dtype));
    param.copy_(stored);
    ++used;
  }
  const size_t extra = weights.tensors().size() - used;
  if (extra > 0 && !(extra == 1 && config.tie_word_embeddings && weights.Has("lm_head.weight"))) {
    spdlog::warn("{}: {} tensor(s) in the safetensors are not parameters of {} and were ignored", dir, extra,
                 config.architecture_name);
  }
}

void SaveHfSafetensors(HfCausalLMImpl& model, const std::string& path, const std::string& dtype) {
  const torch::Dtype target = TorchDtype(dtype, path);
  std::vector<torch::Tensor> keep;
  std::vector<hf::TensorToWrite> out;
  for (const auto& [name, p] : model.OrderedParameters()) {
    keep.push_back(p.detach().to(torch::kCPU, target).contiguous());
    const auto& t = keep.back();
    out.push_back({name, dtype, t.sizes().vec(), t.data_ptr(), static_cast<size_t>(t.numel() * t.element_size())});
  }
  hf::WriteSafetensors(path, out);
}

}  // namespace headroom::worker
