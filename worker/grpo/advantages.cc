#include <spdlog/spdlog.h>

#include "worker/grpo/advantages.h"

#include <stdexcept>
#include <string>

namespace headroom::worker {

torch::Tensor GroupAdvantages(const torch::Tensor& rewards, int64_t group_size, double eps) {
  const int64_t n = rewards.numel();
  if (group_size < 2 || n % group_size != 0) {
    throw std::invalid_argument("advantages: group size " + std::to_string(group_size) + " must be >= 2 and divide " +
                                std::to_string(n) + " rewards");
  }
  auto grouped = rewards.to(torch::kFloat32).view({n / group_size, group_size});
  auto mean = grouped.mean(1, /*keepdim=*/true);
  auto std = grouped.std(1, /*unbiased=*/true, /*keepdim=*/true);
  // A group whose rewards are all equal teaches nothing: exactly 0, not the rounding
  // residue of r - mean over std + eps (the update skips such rows, policy_update.h).
  auto equal = std::get<0>(grouped.max(1, true)) == std::get<0>(grouped.min(1, true));
  return torch::where(equal, torch::zeros_like(grouped), (grouped - mean) / (std + eps)).view({n});
}

}  // namespace headroom::worker
