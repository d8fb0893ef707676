#include <spdlog/spdlog.h>

#include "worker/rollout/rollout_engine.h"

#include <cmath>
#include <stdexcept>

#include "worker/rollout/gumbel_noise.h"

namespace headroom::worker {

RolloutEngine::RolloutEngine(const KvCacheShape& cache_shape, int64_t max_batch, int64_t max_prompt,
                             int64_t max_response, torch::Device device, ResponseFormat format,
                             torch::Dtype cache_dtype)
    : cache_(cache_shape, max_batch, max_prompt + max_response, device, cache_dtype),
      max_prompt_(max_prompt),
      max_response_(max_response),
      device_(device) {
  if (max_response < 1) throw std::invalid_argument("rollout: maxResponseLength must be >= 1");
  set_response_format(std::move(format));
}

void RolloutEngine::set_response_format(ResponseFormat format) {
  if (format.stop_tokens.empty()) throw std::invalid_argument("rollout: a response format needs a stop token");
  stop_tokens_ = std::move(format.stop_tokens);
  pad_token_ = format.pad;
}

void RolloutEngine::set_stop_check_interval(int64_t tokens) {
  if (tokens < 1)
    throw std::invalid_argument("rollout: stop check interval must be >= 1, got " + std::to_string(tokens));
  stop_check_interval_ = tokens;
}

bool RolloutEngine::AnyAlive(const torch::Tensor& alive) const {
  if (decode_comm_ == nullptr) return alive.any().item<bool>();
  // A rank that left the loop alone would skip the block gathers the others still wait in.
  auto flag = alive.any().to(decode_comm_->device(), torch::kInt64).reshape({1});
  decode_comm_->all_reduce(flag, ReduceOp::kMax);
  return flag.cpu().item<int64_t>() > 0;
}

RolloutEngine::DecodeMode RolloutEngine::ResolveDecodeMode(DecodeMode requested, bool cuda_device, bool local_forward,
                                                           bool graphs_compiled) {
  if (requested != DecodeMode::kAuto) return requested;
  return cuda_device && local_forward && graphs_compiled ? DecodeMode::kGraph : DecodeMode::kDynamic;
}

RolloutEngine::DecodeMode RolloutEngine::resolved_decode_mode(const CausalLM& model) const {
  return ResolveDecodeMode(decode_mode_, device_.is_cuda(), !model->has_block_executor(), DecodeGraphsCompiled());
}

const char* RolloutEngine::DecodeModeName(DecodeMode mode) {
  switch (mode) {
    case DecodeMode::kAuto: return "auto";
    case DecodeMode::kDynamic: return "dynamic";
    case DecodeMode::kStatic: return "static";
    case DecodeMode::kGraph: return "graph";
  }
  return "?";
}

std::pair<torch::Tensor, torch::Tensor> RolloutEngine::DecodeDynamic(CausalLM& model, const torch::Tensor& prompts,
                                                                     const std::vector<uint64_t>& sample_keys,
                                                                     double temperature, const torch::Tensor& padding) {
  const int64_t b = prompts.size(0), p = prompts.size(1), r = max_response_;
  torch::Tensor sequences, mask;
  {
    // Inference mode: no autograd bookkeeping at all while sampling; outputs are cloned
    // below so training can use them.
    c10::InferenceMode inference;
    // One decode step's noise at a time: a whole response's ([B, R, vocab]) would be tens of
    // GB for a real vocabulary.
    const GumbelNoise noise(sample_keys, r, model->vocab_size(), device_);
    const DecodeRule rule{temperature, logit_bias_, stop_tokens_, pad_token_};
    auto seq = torch::full({b, p + r}, pad_token_, torch::TensorOptions().dtype(torch::kInt64).device(device_));
    seq.narrow(1, 0, p).copy_(prompts);
    auto alive = torch::ones({b}, torch::TensorOptions().dtype(torch::kBool).device(device_));
    auto msk = torch::zeros({b, r}, torch::TensorOptions().dtype(torch::kFloat32).device(device_));
    cache_.Reset(b, padding);
    torch::Tensor input = prompts.to(device_);
    for (int64_t t = 0; t < r; ++t) {
      const auto logits = model->ForwardCached(input, cache_);  // [B, vocab]
      const auto next = rule.Pick(logits, alive, [&] { return noise.At(t); });
      seq.select(1, p + t).copy_(next);
      msk.select(1, t).copy_(alive);
      rule.Stop(alive, next);
      // A check is a host sync: one per interval buys the early exit. The last token needs
      // none (the loop ends there on every rank).
      const bool check = (t + 1) % stop_check_interval_ == 0 && t + 1 < r;
      if (check && !AnyAlive(alive)) break;
      input = next.unsqueeze(1);
    }
    sequences = seq;
    mask = msk;
  }
  // Clones made outside inference mode are ordinary tensors that autograd may use.
  return {sequences.clone(), mask.clone()};
}

RolloutEngine::StaticDecode& RolloutEngine::StaticDecodeFor(CausalLM& model, int64_t batch, double temperature,
                                                            bool graph) {
  std::vector<const void*> parameters;
  for (const auto& t : model->parameters()) parameters.push_back(t.data_ptr());
  for (const auto& t : model->buffers()) parameters.push_back(t.data_ptr());
  StaticDecode& kept = static_decodes_[batch];
  const bool same = kept.step && kept.graph == graph && kept.parameters == parameters &&
                    kept.step->rule().temperature == temperature && kept.step->rule().stop_tokens == stop_tokens_ &&
                    kept.step->rule().pad_token == pad_token_ &&
                    kept.step->rule().logit_bias.unsafeGetTensorImpl() == logit_bias_.unsafeGetTensorImpl();
  if (same) return kept;
  DecodeRule rule{temperature, logit_bias_, stop_tokens_, pad_token_};
  kept = StaticDecode{};  // a replaced graph is destroyed before the new step allocates
  kept.step =
      std::make_unique<DecodeStep>(batch, max_prompt_, max_response_, model->vocab_size(), std::move(rule), device_);
  DecodeStep* step = kept.step.get();
  KvCache* cache = &cache_;
  CausalLMImpl* impl = model.get();
  kept.replay = MakeDecodeReplay([step, impl, cache] { step->Run(*impl, *cache); }, device_, graph);
  kept.parameters = std::move(parameters);
  kept.graph = graph;
  return kept;
}

std::pair<torch::Tensor, torch::Tensor> RolloutEngine::DecodeStatic(CausalLM& model, const torch::Tensor& prompts,
                                                                    const std::vector<uint64_t>& sample_keys,
                                                                    double temperature, const torch::Tensor& padding,
                                                                    bool graph) {
  const int64_t b = prompts.size(0), r = max_response_;
  StaticDecode& decode = StaticDecodeFor(model, b, temperature, graph);  // outside inference mode: ordinary buffers
  {
    c10::InferenceMode inference;
    const torch::Tensor on_device = prompts.to(device_);
    decode.step->Begin(on_device, padding, sample_keys);
    cache_.Reset(b, padding);
    decode.step->Sample(model->ForwardCached(on_device, cache_));  // the prompt, then token 0
    for (int64_t t = 1; t < r; ++t) {
      // The same checks as the growing-cache decode: after every interval of tokens.
      if (t % stop_check_interval_ == 0 && !AnyAlive(decode.step->alive())) break;
      decode.replay->Run();
    }
    last_decode_graphed_ = decode.replay->graphed();
  }
  return decode.step->Result();
}

Rollout RolloutEngine::Generate(CausalLM model, const torch::Tensor& prompts, const std::vector<uint64_t>& sample_keys,
                                double temperature, const torch::Tensor& prompt_padding) {
  const int64_t b = prompts.size(0), p = prompts.size(1), r = max_response_;
  if (static_cast<int64_t>(sample_keys.size()) != b) {
    throw std::invalid_argument("rollout: " + std::to_string(sample_keys.size()) + " sample keys for " +
                                std::to_string(b) + " prompts");
  }
  if (p > max_prompt_) {
    throw std::invalid_argument("rollout: prompt of " + std::to_string(p) + " tokens exceeds maxPromptLength " +
                                std::to_string(max_prompt_));
  }
  if (prompt_padding.defined() && (prompt_padding.dim() != 1 || prompt_padding.size(0) != b)) {
    throw std::invalid_argument("rollout: prompt padding of shape " + c10::str(prompt_padding.sizes()) + " for " +
                                std::to_string(b) + " prompts");
  }
  const torch::Tensor padding = prompt_padding.defined() ? prompt_padding.to(device_, torch::kInt64) : torch::Tensor();
  const DecodeMode mode = resolved_decode_mode(model);
  last_decode_graphed_ = false;
  auto [sequences, mask] =
      mode == DecodeMode::kDynamic
          ? DecodeDynamic(model, prompts, sample_keys, temperature, padding)
          : DecodeStatic(model, prompts, sample_keys, temperature, padding, mode == DecodeMode::kGraph);
  Rollout out;
  out.sequences = sequences;
  out.response_mask = mask;
  out.prompt_length = p;
  out.prompt_padding = padding;
  out.response_width = r;
  out.generated_tokens = static_cast<int64_t>(mask.sum().item<double>());
  return out;
}

}  // namespace headroom::worker
