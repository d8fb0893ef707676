// How many tokens the log-probs pass through the output head at once: what the worker
// chunks by (worker/grpo/log_probs.cc) and what the planner counts as the logits' memory.
//
// A micro-batch's fp32 logits are tokens x vocab x 4 bytes: with a 152k-token vocabulary,
// 8 sequences of 1024 response tokens are 5 GB, and the log-softmax and its gradient
// would triple that. Chunked, only one chunk's logits exist at a time (forward, and again
// when the backward pass recomputes them), so the peak is a constant ~256 MiB per buffer
// whatever the batch. A small vocabulary (the presets' 32 tokens) fits millions of tokens
// in one chunk: the whole micro-batch goes through the head at once, as before.
#pragma once

#include <algorithm>
#include <cstdint>

namespace headroom::memory {

// Logits elements in one chunk (fp32: 256 MiB).
inline constexpr int64_t kLogitsChunkElements = int64_t{1} << 26;

// Tokens per chunk for a vocabulary: 441 for Qwen2's 151936, 523 for Llama 3's 128256.
inline int64_t LogitsChunkTokens(int64_t vocab) {
  return std::max<int64_t>(1, kLogitsChunkElements / std::max<int64_t>(1, vocab));
}

}  // namespace headroom::memory
