#include <spdlog/spdlog.h>

#include "worker/model/attention_mask.h"

#include <limits>

namespace headroom::worker {

torch::Tensor PaddedCausalMask(const torch::Tensor& padding, int64_t start, int64_t t, const torch::Device& device) {
  const auto positions = torch::TensorOptions().dtype(torch::kInt64).device(device);
  const auto query = torch::arange(start, start + t, positions).view({1, 1, t, 1});
  const auto key = torch::arange(0, start + t, positions).view({1, 1, 1, start + t});
  const auto pad = padding.to(device, torch::kInt64).view({-1, 1, 1, 1});
  const auto blocked = (key > query).logical_or((key < pad).logical_and(key != query));  // [B, 1, t, S]
  return torch::zeros(blocked.sizes(), positions.dtype(torch::kFloat32))
      .masked_fill_(blocked, -std::numeric_limits<float>::infinity());
}

torch::Tensor StaticDecodeMask(const torch::Tensor& padding, const torch::Tensor& position, int64_t max_seq) {
  const auto key = torch::arange(max_seq, position.options()).view({1, 1, 1, max_seq});
  const auto pad = padding.view({-1, 1, 1, 1});
  const auto blocked = (key > position).logical_or(key < pad);  // [B, 1, 1, S]
  return torch::zeros(blocked.sizes(), position.options().dtype(torch::kFloat32))
      .masked_fill_(blocked, -std::numeric_limits<float>::infinity());
}

}  // namespace headroom::worker
