// Rotary position embedding of fp32 CPU heads in one pass forward and one backward.
//
// Why: as tensor ops the rotation x * cos + rotate_half(x) * sin is a product, a roll (two
// slices and a cat) and a multiply-add, and its backward as many again; at the presets'
// sizes the dispatches and the strided cat cost more than the arithmetic.
// HfCausalLMImpl::Rotate takes this path where FusedRotaryApplies() and the ops elsewhere.
//
// Contract: FusedRotary(x [B, t, n, d], cos [t, n, d], signed_sin [t, n, d]) =
// x * cos + roll(x, d / 2, -1) * signed_sin, where signed_sin is sin with the first half of
// each head negated (then roll(x) * signed_sin = rotate_half(x) * sin); d even. Equal to the
// tensor ops to float rounding; differentiable with respect to x (the tables are constants).
#pragma once

#include <torch/torch.h>

namespace headroom::worker {

// Whether FusedRotary takes these: contiguous fp32 CPU tensors of the shapes above.
bool FusedRotaryApplies(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& signed_sin);

// Throws c10::Error when FusedRotaryApplies() does not hold.
torch::Tensor FusedRotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& signed_sin);

}  // namespace headroom::worker
