// Attention through LibTorch's fused scaled-dot-product kernels on a CUDA device.
//
// Why: the matmul path (scores, mask, fp32 softmax, weighted values) materialises and,
// under autograd, keeps several [batch, heads, queries, keys] tensors per layer; for the
// update of a 0.5B model at micro-batch 8 x 261 tokens that is most of a GiB across its 24
// layers, and one kernel launch per op. at::scaled_dot_product_attention (LibTorch >= 2.0)
// computes the same function in one kernel (memory-efficient or flash, as LibTorch picks)
// that keeps only its output and a log-sum-exp per row. Elsewhere (the CPU, where the
// fused CPU kernel or the matmul path serve, and LibTorch 1.13) SdpaAttentionApplies is
// false.
//
// Contract: SdpaAttention(q [B, H, tq, D], k, v [B, H, tk, D], mask) equals
// softmax(q k^T / sqrt(D) + mask) v to the rounding of q's dtype, with `mask` an additive
// mask broadcastable to [B, H, tq, tk] (0 or -inf; undefined: none). Rows the mask leaves
// without keys are the caller's to avoid (the matmul path gives NaN there too).
#pragma once

#include <string>

#include <torch/torch.h>

namespace headroom::worker {

// Whether SdpaAttention serves tensors like `q`: CUDA tensors with LibTorch >= 2.0.
bool SdpaAttentionApplies(const torch::Tensor& q);

torch::Tensor SdpaAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& mask);

// Which of LibTorch's kernels SdpaAttention would run for these inputs ("flash",
// "efficient", "cudnn", "math", ...), as LibTorch chooses it; "unknown" where this LibTorch
// does not say, "none" where SdpaAttentionApplies is false. For reports (hf_grpo_bench).
std::string SdpaBackendName(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& mask);

}  // namespace headroom::worker
