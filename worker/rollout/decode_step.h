// One decode token of a rollout as a shape-static step: every tensor it reads or writes
// is a buffer allocated once, updated in place, so the step has the same shapes and
// addresses at every token and in every rollout of the same batch size. That is what a
// CUDA graph captures once and replays (decode_replay.h); elsewhere the step runs eagerly.
//
// Buffers (on the model's device): the token just sampled [B, 1], the decode index t and
// the cache position of that token (0-dim int64 each), the rows' prompt padding [B], which
// rows are still generating [B], the sequences [B, max_prompt + R] and the response mask
// [B, R]. A rollout is:
//   Begin(prompts, padding, keys)        fills them in place for the new prompts;
//   Sample(logits of the prompt forward) picks response token 0;
//   Run(model, cache) x (R - 1 at most)  one forward of the last token at its cache
//                                        position (KvCache's static decode), then Sample;
//   Result()                             copies out what was generated.
// Sample is the rollout engine's rule (rollout_engine.h): Gumbel-max with the noise of
// (key, t, token) (gumbel_noise.h), or argmax at temperature 0, after the logit bias; rows
// that have stopped get the pad token and mask 0; a stop token is kept and masked in.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "worker/model/causal_lm.h"
#include "worker/model/kv_cache.h"
#include "worker/rollout/gumbel_noise.h"

namespace headroom::worker {

// What a step does besides the model: fixed for the step's lifetime (a captured graph
// holds them as constants). The one sampling rule: both the dynamic decode loop
// (rollout_engine.cc) and the static step below pick tokens and stop rows through it.
struct DecodeRule {
  double temperature = 1.0;  // 0: greedy
  torch::Tensor logit_bias;  // [vocab] on the device, or undefined
  std::vector<int64_t> stop_tokens;
  int64_t pad_token = 0;

  // The token each row takes from logits [B, vocab]: after the logit bias, Gumbel-max over
  // logits / temperature + noise() (noise: [B, vocab] float32, asked for only when
  // temperature > 0), or argmax at temperature 0; rows no longer `alive` ([B] bool) get
  // the pad token. Tensor ops only.
  template <typename Noise>
  torch::Tensor Pick(const torch::Tensor& logits, const torch::Tensor& alive, Noise&& noise) const {
    auto scores = logits.to(torch::kFloat32);
    if (logit_bias.defined()) scores = scores + logit_bias;
    auto next = temperature > 0 ? (scores / temperature + noise()).argmax(-1)  // Gumbel-max = a softmax sample
                                : scores.argmax(-1);
    return torch::where(alive, next, torch::full_like(next, pad_token));
  }
  // Rows whose token `next` is a stop token stop generating: `alive` is updated in place
  // (the stop token itself is kept and masked in by the caller before this).
  void Stop(torch::Tensor& alive, const torch::Tensor& next) const {
    for (int64_t stop : stop_tokens) alive.logical_and_(next != stop);
  }
};

class DecodeStep {
 public:
  // Buffers for `batch` rows of prompts up to max_prompt tokens and max_response tokens.
  DecodeStep(int64_t batch, int64_t max_prompt, int64_t max_response, int64_t vocab, DecodeRule rule,
             torch::Device device);

  // A new rollout: prompts [B, P] int64 (P <= max_prompt), left-padded by padding [B] int64
  // (undefined: none), one sample key per row. Throws std::invalid_argument on other shapes.
  void Begin(const torch::Tensor& prompts, const torch::Tensor& padding, const std::vector<uint64_t>& sample_keys);
  // Picks the token at decode index t from logits [B, vocab] of the last forward, writes it,
  // and advances t and the cache position. Tensor ops only.
  void Sample(const torch::Tensor& logits);
  // Forwards the last token at its cache position (static decode; the cache has been
  // Reset for this batch and holds the prompt) and samples the next. Tensor ops only.
  void Run(CausalLMImpl& model, KvCache& cache);

  // [B] bool: rows still generating (a stop check reads it back).
  const torch::Tensor& alive() const { return alive_; }
  // Copies (ordinary tensors, usable by autograd): sequences [B, P + R], mask [B, R].
  std::pair<torch::Tensor, torch::Tensor> Result() const;

  int64_t batch() const { return batch_; }
  const DecodeRule& rule() const { return rule_; }

 private:
  int64_t batch_;
  int64_t max_prompt_;
  int64_t max_response_;
  DecodeRule rule_;
  int64_t prompt_length_ = 0;  // P of the current rollout (host copy, for Result)
  GumbelNoise noise_;
  torch::Tensor token_;           // [B, 1] int64: the last token sampled
  torch::Tensor decode_index_;    // 0-dim int64: t of the next token to sample
  torch::Tensor cache_position_;  // 0-dim int64: where token_ goes in the cache (P + t - 1)
  torch::Tensor column_;          // 0-dim int64: where the next token goes in sequences_ (P + t)
  torch::Tensor padding_;         // [B] int64
  torch::Tensor alive_;           // [B] bool
  torch::Tensor sequences_;       // [B, max_prompt + R] int64
  torch::Tensor mask_;            // [B, R] float32
};

}  // namespace headroom::worker
