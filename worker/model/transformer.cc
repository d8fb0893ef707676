#include <spdlog/spdlog.h>

#include "worker/model/transformer.h"

#include "worker/model/attention_mask.h"
#include "worker/model/bf16_autocast.h"
#include "worker/model/fused_attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace headroom::worker {
namespace {

// [B, T, 3H] -> q, k, v as [B, heads, T, head_dim].
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> SplitHeads(const torch::Tensor& qkv, int64_t heads) {
  const int64_t b = qkv.size(0), t = qkv.size(1), h3 = qkv.size(2);
  auto parts = qkv.view({b, t, 3, heads, h3 / (3 * heads)}).permute({2, 0, 3, 1, 4});
  return {parts[0], parts[1], parts[2]};
}

// x W^T + b as one addmm over every position. LibTorch 1.13's Linear on a 3-D input runs
// a matmul and then a separate bias add (one more pass over the output); 2.x fuses it.
torch::Tensor Affine(const torch::nn::Linear& layer, const torch::Tensor& x) {
  auto y = torch::addmm(layer->bias, x.reshape({-1, x.size(-1)}), layer->weight.t());
  auto sizes = x.sizes().vec();
  sizes.back() = y.size(1);
  return y.view(sizes);
}

void RejectPadding(const torch::Tensor& padding) {
  if (AnyPadding(padding)) {
    throw std::invalid_argument(
        "transformer: left-padded prompts need a rotary-position model (spec.model.path); the toy transformer's "
        "learned absolute positions would move with the padding");
  }
}

}  // namespace

TransformerBlockImpl::TransformerBlockImpl(const TransformerConfig& c) {
  ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden})));
  qkv = register_module("qkv", torch::nn::Linear(c.hidden, 3 * c.hidden));
  out = register_module("out", torch::nn::Linear(c.hidden, c.hidden));
  ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden})));
  fc1 = register_module("fc1", torch::nn::Linear(c.hidden, c.ffn_hidden));
  fc2 = register_module("fc2", torch::nn::Linear(c.ffn_hidden, c.hidden));
}

TransformerImpl::TransformerImpl(const TransformerConfig& config) : config_(config) {
  config_.Validate();
  tok_emb_ = register_module("tok_emb", torch::nn::Embedding(config_.vocab_size, config_.hidden));
  pos_emb_ = register_module("pos_emb", torch::nn::Embedding(config_.max_seq_len, config_.hidden));
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < config_.layers; ++i) {
    block_list_.emplace_back(config_);
    blocks_->push_back(block_list_.back());
  }
  ln_f_ = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config_.hidden})));
  head_ = register_module("head", torch::nn::Linear(config_.hidden, config_.vocab_size));
  causal_mask_ = register_buffer(
      "causal_mask", torch::full({config_.max_seq_len, config_.max_seq_len},
                                 -std::numeric_limits<float>::infinity())
                         .triu(1));
  InitWeights();
}

void TransformerImpl::InitWeights() {
  // PyTorch's default initialisation, re-drawn here in a fixed order from the seeded RNG
  // (the constructors' own draws used the unseeded global generator):
  //   Linear weight and bias  U(-1/sqrt(fan_in), 1/sqrt(fan_in))  (kaiming_uniform, a=sqrt(5))
  //   Embedding               N(0, 1)
  //   LayerNorm               weight 1, bias 0
  // Why not GPT-2's N(0, 0.02): trained from scratch with GRPO, that init leaves attention
  // almost uniform and its gradients products of two tiny matrices, so the tiny preset
  // learned the answer's length but never which prompt digit to copy (reverse-tiny sat at
  // reward 0.16 for 150 steps). With these scales a plain PyTorch GRPO of the same setup
  // exceeds 0.9 within 100 steps.
  torch::NoGradGuard no_grad;
  torch::manual_seed(config_.seed);
  auto uniform_fan_in = [](torch::Tensor& p, int64_t fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    p.uniform_(-bound, bound);
  };
  for (auto& [name, p] : OrderedParameters()) {
    const bool is_ln = name.find("ln") != std::string::npos;
    const bool is_embedding = name.find("emb") != std::string::npos;
    const bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
    if (is_ln) {
      is_bias ? p.zero_() : p.fill_(1.0);
    } else if (is_embedding) {
      p.normal_(0.0, 1.0);
    } else if (is_bias) {
      // A Linear's bias: the fan-in is its weight's input width, known from the layer.
      const int64_t fan_in = name.find(".fc2.") != std::string::npos ? config_.ffn_hidden : config_.hidden;
      uniform_fan_in(p, fan_in);
    } else {
      uniform_fan_in(p, p.size(1));  // Linear weight [out, in]
    }
  }
}

int64_t TransformerImpl::LayerOfParameter(const std::string& name) const {
  static const std::string kPrefix = "blocks.";
  if (name.rfind(kPrefix, 0) != 0) return -1;
  const size_t dot = name.find('.', kPrefix.size());
  return std::stoll(name.substr(kPrefix.size(), dot - kPrefix.size()));
}

NamedTensors TransformerImpl::OrderedParameters() const {
  NamedTensors out;
  for (const auto& item : named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

torch::Tensor TransformerImpl::Block(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask, KvCache* cache,
                                     int64_t first_output) {
  auto& b = *block_list_.at(static_cast<size_t>(layer));
  const int64_t t = x.size(1);
  const int64_t start = cache ? cache->length() : 0;
  TORCH_CHECK(first_output == 0 || (!cache && first_output < t), "block ", layer, ": first output position ",
              first_output, " needs an uncached forward over more than that many positions");
  const int64_t out_t = t - first_output;
  // Keys and values of every position; queries (and all that follows) of the outputs only.
  auto qkv = Affine(b.qkv, b.ln1(x));
  torch::Tensor y;  // [B, out_t, H]
  if (FusedAttentionApplies(qkv, start + t)) {
    // Short sequences on the CPU (fused_attention.h); causal by position, as `mask` is.
    if (cache) {
      auto [q, k, v] = SplitHeads(qkv, config_.heads);
      cache->Append(layer, k, v);
      y = FusedCachedAttention(q, cache->Keys(layer, start + t), cache->Values(layer, start + t), start);
    } else {
      y = FusedSelfAttention(qkv, config_.heads, first_output);
    }
  } else {
    auto [q, k, v] = SplitHeads(qkv, config_.heads);
    if (cache) {
      cache->Append(layer, k, v);
      k = cache->Keys(layer, start + t);
      v = cache->Values(layer, start + t);
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(config_.head_dim()));
    auto att = torch::matmul(q.narrow(2, first_output, out_t), k.transpose(-2, -1)).mul_(scale);
    if (mask.defined()) att = att + mask.narrow(-2, first_output, out_t);
    y = torch::matmul(torch::softmax(att, -1), v);                      // [B, heads, out_t, D]
    y = y.transpose(1, 2).reshape({x.size(0), out_t, config_.hidden});  // [B, out_t, H]
  }
  auto h = x.narrow(1, first_output, out_t) + Affine(b.out, y);
  return h + Affine(b.fc2, torch::gelu(Affine(b.fc1, b.ln2(h))));
}

torch::Tensor TransformerImpl::Blocks(torch::Tensor x, KvCache* cache, int64_t first_output) {
  const int64_t t = x.size(1);
  const int64_t start = cache ? cache->length() : 0;
  const int64_t last = static_cast<int64_t>(block_list_.size()) - 1;
  // A single new position attends to everything cached: no mask needed.
  torch::Tensor mask;
  if (t > 1) mask = causal_mask_.narrow(0, start, t).narrow(1, 0, start + t);
  for (int64_t l = 0; l <= last; ++l) {
    if (executor_) {
      x = executor_->RunBlock(*this, l, x, mask, cache);
      // The executor (stage 3) recomputes whole blocks; outputs are cut after the last.
      if (l == last && first_output > 0) x = x.narrow(1, first_output, t - first_output);
    } else {
      // Only the last block's outputs are read at first_output..: earlier blocks feed
      // every later position's keys and values.
      x = Block(l, x, mask, cache, l == last ? first_output : 0);
    }
  }
  if (cache) cache->Advance(t);
  return x;
}

torch::Tensor TransformerImpl::FinalHidden(const torch::Tensor& tokens, int64_t first_output,
                                           const torch::Tensor& padding) {
  RejectPadding(padding);
  const int64_t t = tokens.size(1);
  TORCH_CHECK(t <= config_.max_seq_len, "sequence of ", t, " tokens exceeds max_seq_len ", config_.max_seq_len);
  TORCH_CHECK(first_output >= 0 && first_output < t, "first output position ", first_output, " outside the ", t,
              " positions");
  auto positions = torch::arange(t, tokens.options());
  auto x = tok_emb_(tokens) + pos_emb_(positions);
  return ln_f_(Blocks(x, nullptr, first_output));
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& tokens, int64_t first_output,
                                       const torch::Tensor& padding) {
  Bf16Autocast autocast(tokens.device());
  return Affine(head_, FinalHidden(tokens, first_output, padding));
}

torch::Tensor TransformerImpl::Hidden(const torch::Tensor& tokens, int64_t first_output,
                                      const torch::Tensor& padding) {
  Bf16Autocast autocast(tokens.device());
  return InAutocastDtype(FinalHidden(tokens, first_output, padding));
}

torch::Tensor TransformerImpl::ForwardCached(const torch::Tensor& tokens, KvCache& cache) {
  Bf16Autocast autocast(tokens.device());
  const int64_t t = tokens.size(1);
  TORCH_CHECK(tokens.size(0) == cache.batch(), "batch ", tokens.size(0), " != cache batch ", cache.batch());
  if (cache.length() == 0) RejectPadding(cache.padding());  // once per generation: it reads the host
  auto positions = torch::arange(cache.length(), cache.length() + t, tokens.options());
  auto x = Blocks(tok_emb_(tokens) + pos_emb_(positions), &cache, 0);
  return Affine(head_, ln_f_(x.select(1, t - 1)));
}

}  // namespace headroom::worker
