// GRPO's group-relative advantage, as verl computes it (compute_grpo_outcome_advantage):
//   A_i = (r_i - mean(group)) / (std(group) + eps),  std with Bessel's correction (n - 1).
// A group whose rewards are all equal gets advantage exactly 0 for every member.
#pragma once

#include <torch/torch.h>

namespace headroom::worker {

// rewards [N] with N = groups * group_size, each group contiguous. Returns [N] float.
// Throws std::invalid_argument when group_size < 2 or does not divide N.
torch::Tensor GroupAdvantages(const torch::Tensor& rewards, int64_t group_size, double eps = 1e-6);

}  // namespace headroom::worker
