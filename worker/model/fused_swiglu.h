// The SwiGLU gate silu(gate) * up of fp32 CPU rows, read from the stacked gate|up
// projection and differentiated into it directly.
//
// Why: as tensor ops the gate is a split of the stacked projection, a silu and a product,
// and its backward two products, the silu's backward and a cat of the two halves'
// gradients: at the presets' sizes those passes over [rows, 2F] cost a tenth of a step.
// Here the forward is a sigmoid (ATen's vectorised kernel) and one pass; the backward one
// pass writing the stacked gradient. Without grad it is ATen's silu and product. HfCausalLMImpl::Block takes this path where
// FusedSwiGluApplies() and the ops elsewhere.
//
// Contract: FusedSwiGlu(stacked [..., 2F]) = silu(gate) * up with gate, up = the first and
// second halves of the last dimension; equal to the tensor ops to float rounding (silu
// computed as gate * sigmoid(gate)); differentiable with respect to stacked.
#pragma once

#include <torch/torch.h>

namespace headroom::worker {

// Whether FusedSwiGlu takes stacked: a contiguous fp32 CPU tensor with an even last dimension.
bool FusedSwiGluApplies(const torch::Tensor& stacked);

// Throws c10::Error when FusedSwiGluApplies() does not hold.
torch::Tensor FusedSwiGlu(const torch::Tensor& stacked);

}  // namespace headroom::worker
