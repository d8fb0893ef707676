#include <spdlog/spdlog.h>

#include "worker/rollout/decode_step.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace headroom::worker {

DecodeStep::DecodeStep(int64_t batch, int64_t max_prompt, int64_t max_response, int64_t vocab, DecodeRule rule,
                       torch::Device device)
    : batch_(batch),
      max_prompt_(max_prompt),
      max_response_(max_response),
      rule_(std::move(rule)),
      noise_(std::vector<uint64_t>(static_cast<size_t>(batch), 0), max_response, vocab, device) {
  if (batch < 1 || max_prompt < 1 || max_response < 1) {
    throw std::invalid_argument("decode step: batch, max prompt and max response must be >= 1");
  }
  if (rule_.stop_tokens.empty()) throw std::invalid_argument("decode step: needs a stop token");
  const auto int64_on = torch::TensorOptions().dtype(torch::kInt64).device(device);
  token_ = torch::zeros({batch, 1}, int64_on);
  decode_index_ = torch::zeros({}, int64_on);
  cache_position_ = torch::zeros({}, int64_on);
  column_ = torch::zeros({}, int64_on);
  padding_ = torch::zeros({batch}, int64_on);
  alive_ = torch::ones({batch}, int64_on.dtype(torch::kBool));
  sequences_ = torch::full({batch, max_prompt + max_response}, rule_.pad_token, int64_on);
  mask_ = torch::zeros({batch, max_response}, int64_on.dtype(torch::kFloat32));
}

void DecodeStep::Begin(const torch::Tensor& prompts, const torch::Tensor& padding,
                       const std::vector<uint64_t>& sample_keys) {
  const int64_t p = prompts.size(1);
  if (prompts.dim() != 2 || prompts.size(0) != batch_ || p < 1 || p > max_prompt_) {
    throw std::invalid_argument("decode step: prompts of shape " + c10::str(prompts.sizes()) + " for " +
                                std::to_string(batch_) + " rows of at most " + std::to_string(max_prompt_) + " tokens");
  }
  prompt_length_ = p;
  noise_.Rekey(sample_keys);
  if (padding.defined()) {
    padding_.copy_(padding);
  } else {
    padding_.zero_();
  }
  decode_index_.fill_(0);
  cache_position_.fill_(p - 1);
  column_.fill_(p);
  alive_.fill_(true);
  sequences_.fill_(rule_.pad_token);
  sequences_.narrow(1, 0, p).copy_(prompts);
  mask_.zero_();
}

void DecodeStep::Sample(const torch::Tensor& logits) {
  const auto next = rule_.Pick(logits, alive_, [&] { return noise_.At(decode_index_); });
  sequences_.index_copy_(1, column_.view({1}), next.unsqueeze(1));
  mask_.index_copy_(1, decode_index_.view({1}), alive_.to(torch::kFloat32).unsqueeze(1));
  rule_.Stop(alive_, next);
  token_.copy_(next.unsqueeze(1));
  decode_index_.add_(1);
  cache_position_.add_(1);
  column_.add_(1);
}

void DecodeStep::Run(CausalLMImpl& model, KvCache& cache) {
  cache.SetStaticPosition(cache_position_, padding_);
  torch::Tensor logits;
  try {
    logits = model.ForwardCached(token_, cache);
  } catch (...) {
    cache.ClearStaticPosition();
    throw;
  }
  cache.ClearStaticPosition();
  Sample(logits);
}

std::pair<torch::Tensor, torch::Tensor> DecodeStep::Result() const {
  return {sequences_.narrow(1, 0, prompt_length_ + max_response_).clone(), mask_.clone()};
}

}  // namespace headroom::worker
