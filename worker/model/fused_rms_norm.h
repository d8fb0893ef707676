// RMSNorm of fp32 CPU rows in one pass forward and one pass backward.
//
// Why: as tensor ops an RMSNorm is six operators forward (square, mean, add, rsqrt, two
// products) and about ten backward, each a dispatch and a pass over the rows. At the
// presets' widths (64 to 768) the dispatches cost more than the arithmetic, and a forward
// has two norms per layer plus the final one. HfRmsNormImpl takes this path where
// FusedRmsNormApplies() and the ops elsewhere (CUDA, bf16, strided views).
//
// Contract: FusedRmsNorm(x [..., H], weight [H], eps) = weight * (x * rsqrt(mean(x^2, -1)
// + eps)), equal to the tensor ops to float rounding (only the sum of squares is summed in
// another order); differentiable with respect to x and weight.
#pragma once

#include <torch/torch.h>

namespace headroom::worker {

// Whether FusedRmsNorm takes x and weight: both fp32 CPU tensors, x contiguous with a last
// dimension of weight's size.
bool FusedRmsNormApplies(const torch::Tensor& x, const torch::Tensor& weight);

// Throws c10::Error naming the argument when FusedRmsNormApplies() does not hold.
torch::Tensor FusedRmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

}  // namespace headroom::worker
