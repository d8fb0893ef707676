// The additive attention mask of a forward over left-padded sequences.
//
// A batch of prompts of different lengths is left-padded to its longest: row b's first
// padding[b] positions hold pad tokens. Scores get -inf where a query may not look: at
// later positions (causal) and at row b's padded keys. A query at a padded position
// attends to itself alone, so its softmax stays finite (no NaN); its outputs are never
// read.
//
// Positions are not shifted: a rotary model's attention scores depend only on the distance
// between query and key, so a row's real tokens score the same with or without padding in
// front (to float rounding).
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace headroom::worker {

// [B, 1, t, start + t] float32 on `device`, 0 or -inf, for queries at positions
// start..start + t - 1 over keys 0..start + t - 1; padding [B] int64 (any device).
torch::Tensor PaddedCausalMask(const torch::Tensor& padding, int64_t start, int64_t t, const torch::Device& device);

// [B, 1, 1, max_seq] float32 on position's device, 0 or -inf, for one query at *position
// (a 0-dim int64 tensor, KvCache's static decode) over keys 0..max_seq - 1: keys after the
// query and row b's padded keys are blocked. Made by tensor ops alone (no host read), so a
// CUDA graph can replay it.
torch::Tensor StaticDecodeMask(const torch::Tensor& padding, const torch::Tensor& position, int64_t max_seq);

}  // namespace headroom::worker
