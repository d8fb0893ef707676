// Per-token log-probabilities of given ids straight from the last hidden states, without
// materialising the [tokens x vocab] logits of the whole batch.
//
// With a 150k-token vocabulary, fp32 logits of one micro-batch (say 64 x 512 tokens) are
// 20 GB, and log_softmax keeps another copy for its backward pass. Here the rows go through
// the output head `chunk_rows` at a time: the forward pass keeps only each row's logsumexp,
// and the backward pass recomputes a chunk's logits to form its gradient. Peak extra memory
// is two [chunk_rows x vocab] fp32 buffers whatever the number of tokens.
//
//   log p(target_i) = z_i[target_i] - logsumexp(z_i),
//   z_i = (hidden_i . head^T + head_bias + logit_bias) / T
//
// hidden [N, H] (any float dtype; the head is multiplied in that dtype, logits are formed
// in fp32), head [V, H] (the output projection's weight, tied or not), targets [N] int64,
// logit_bias [V] (optional, 0 or -inf, not differentiated), temperature > 0 (<= 0 counts
// as 1, as ResponseLogProbs), head_bias [V] (optional: the projection's own bias).
// Gradients flow to hidden, head and head_bias. Returns [N] fp32. Call it outside an
// autocast scope: forward and backward then multiply in the same dtype.
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace headroom::worker {

torch::Tensor ChunkedTokenLogProbs(const torch::Tensor& hidden, const torch::Tensor& head, const torch::Tensor& targets,
                                   double temperature = 1.0, const torch::Tensor& logit_bias = {},
                                   int64_t chunk_rows = 1024, const torch::Tensor& head_bias = {});

}  // namespace headroom::worker
