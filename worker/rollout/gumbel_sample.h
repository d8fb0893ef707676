// Sampling a decode token in one CUDA kernel (gumbel_sample_cuda.cu): the Gumbel-max rule
// of decode_step.h over bf16 logits, with the noise of gumbel_noise.h made in registers.
//
// Why: by tensor ops the noise costs about twenty int64 passes over [batch, vocab] per
// token (2.9 GB of traffic and 37 kernels at batch 64 and a 152k vocabulary); the kernel
// reads the logits once. Only CUDA builds have it; the CPU path (GumbelNoise::At and an
// argmax) stays as it is, and the kernel's rule is tested against it through the scalar
// reference both share (gumbel_hash.h).
#pragma once

#include <torch/torch.h>

#include "worker/rollout/gumbel_noise.h"

namespace headroom::worker {

// Whether FusedGumbelArgmax serves these logits: a CUDA build, [B, vocab] bf16 logits on
// a CUDA device, temperature > 0.
bool FusedGumbelArgmaxApplies(const torch::Tensor& logits, double temperature);

// [B] int64 on the logits' device: argmax_j((float(logits[b, j]) + bias[j]) / temperature +
// noise(b, *position, j)), as ((logits.float() + bias) / T + noise.At(position)).argmax(-1)
// picks it (to the last ulp of the two logs, gumbel_noise.h). position: 0-dim int64 on the
// device, read by the kernel (a CUDA graph may replay the call). bias: [vocab] or undefined.
// Throws std::invalid_argument where FusedGumbelArgmaxApplies is false or shapes disagree.
torch::Tensor FusedGumbelArgmax(const torch::Tensor& logits, const GumbelNoise& noise, const torch::Tensor& position,
                                const torch::Tensor& bias, double temperature);

}  // namespace headroom::worker
