// Causal multi-head attention fused into one pass per (sequence, head), for short
// sequences on the CPU.
//
// Why: LibTorch's CPU bmm runs one BLAS call per batch entry once a matrix has 400 or
// more elements, so the attention of 128 sequences x 4 heads of 10 tokens is 512 tiny
// sgemm calls per matmul, four matmuls per layer forward and backward. That loop was
// half of a tiny-preset policy update. Here each (sequence, head) computes its scores,
// softmax and weighted values in registers-sized loops, and the backward writes the
// gradient of the packed q|k|v projection directly (no per-head views to scatter back).
// Long sequences, CUDA tensors and non-fp32 dtypes keep the matmul path in
// HfCausalLMImpl::Block; FusedAttentionApplies() says which path a call takes.
//
// Contract (both functions equal the matmul path to float rounding):
//   - FusedSelfAttention(qkv [B, T, 3H], heads, first_query): causal self-attention of T
//     positions (position i attends to 0..i), for the queries at positions
//     first_query..T-1 only (0: all). qkv packs per position q, k, v, each `heads` heads
//     of H / heads values (HfCausalLMImpl::Block packs its rotated q, k, v so). Returns [B, T - first_query,
//     H], the heads concatenated. Differentiable with respect to qkv.
//   - FusedCachedAttention(q [B, heads, t, D], keys, values [B, heads, start + t, D],
//     start): query i sits at position start + i and attends to keys 0..start + i (the
//     KV cache's layout; any strides with a contiguous last dimension). Returns
//     [B, t, heads * D]. Not differentiable: generation runs without grad.
//   - Inputs are fp32 CPU tensors, scaled by 1/sqrt(D).
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace headroom::worker {

// The most keys per query the fused path takes; beyond it the batched matmuls are
// large enough for BLAS to win (bench: fused_attention_bench).
inline constexpr int64_t kFusedAttentionMaxKeys = 64;

// Whether attention over `keys` positions of tensors like `like` takes the fused path.
bool FusedAttentionApplies(const torch::Tensor& like, int64_t keys);

torch::Tensor FusedSelfAttention(const torch::Tensor& qkv, int64_t heads, int64_t first_query = 0);

torch::Tensor FusedCachedAttention(const torch::Tensor& q, const torch::Tensor& keys, const torch::Tensor& values,
                                   int64_t start);

}  // namespace headroom::worker
