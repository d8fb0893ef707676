// Test support for the bf16 inference weights (worker/sharding/inference_weights.h): the
// passes a GRPO step runs without gradient (logits, old log-probs, a greedy rollout) on a
// tiny tied model, and how far passes over bf16-rounded weights may be from fp32 ones.
#pragma once

#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "tests/worker/helpers/fp32_tolerance.h"
#include "tests/worker/helpers/preset_model.h"
#include "worker/grpo/log_probs.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/rollout/rollout_engine.h"
#include "worker/tasks/tokenizer.h"

namespace headroom::testing {

// bf16 keeps 8 significant bits: rounding to nearest moves a value by at most 2^-8 of it.
inline constexpr double kBf16Rounding = 1.0 / 256;
inline constexpr int64_t kBf16PassesPrompt = 4;

inline ModelDims Bf16PassesDims() {
  ModelDims d;
  d.layers = 2;
  d.hidden = 16;
  d.heads = 2;
  d.ffn_hidden = 24;
  d.max_seq_len = 10;
  d.seed = 3;
  return d;
}

// The tiny shape with its head tied to the embedding (as Qwen2.5-0.5B's): a copy of the
// embedding serves both the lookup and the head.
inline worker::HfCausalLM TiedTiny() {
  hf::HfModelConfig config = PresetConfig(Bf16PassesDims());
  config.tie_word_embeddings = true;
  return worker::HfCausalLM(config, Bf16PassesDims().max_seq_len, Bf16PassesDims().seed);
}

struct Bf16Passes {
  torch::Tensor logits;  // forward(sequences), fp32, on the host
  torch::Tensor logp;    // ResponseLogProbsNoGrad after the first kBf16PassesPrompt tokens
  torch::Tensor greedy;  // temperature-0 responses to those first tokens
};

// The passes of `model` (on `device`, as it stands) over sequences [B, T] (host).
inline Bf16Passes RunBf16Passes(worker::CausalLM model, const torch::Tensor& sequences, torch::Device device) {
  Bf16Passes out;
  model->eval();
  const auto on_device = sequences.to(device);
  const auto prompts = on_device.narrow(1, 0, kBf16PassesPrompt);
  {
    torch::NoGradGuard no_grad;
    out.logits = model->forward(on_device).to(torch::kCPU, torch::kFloat32);
  }
  out.logp = worker::ResponseLogProbsNoGrad(model, on_device, kBf16PassesPrompt, 1.0, 2).cpu();
  worker::RolloutEngine engine(model->kv_cache_shape(), prompts.size(0), prompts.size(1), 5, device,
                               worker::CharTokenizer::Format());
  out.greedy = engine.Generate(model, prompts, std::vector<uint64_t>(prompts.size(0), 0), 0.0).responses().cpu();
  return out;
}

// Passes over bf16-rounded weights (`got`) against the same passes over the fp32 weights
// under the same autocast (`fp32`): each weight moved by at most 2^-8 of itself, carried
// through the model's chained sums (fp32_tolerance.h, with bf16's rounding for epsilon).
// A log-prob is a logit minus a logsumexp, each within the logits' tolerance. Greedy
// first tokens agree wherever fp32's top two logits are further apart than the passes'
// logits can differ.
inline void ExpectWithinBf16Rounding(worker::CausalLM model, const Bf16Passes& got, const Bf16Passes& fp32) {
  const ForwardSums sums = SumsOfForward(model, fp32.logits.size(1));
  const double logit_tolerance =
      SummationTolerance(fp32.logits.abs().max().item<double>(), sums.terms, sums.depth, kBf16Rounding);
  EXPECT_TRUE(WithinTolerance(got.logits, fp32.logits, logit_tolerance));
  EXPECT_TRUE(WithinTolerance(got.logp, fp32.logp, 2 * logit_tolerance));
  const auto last = fp32.logits.select(1, kBf16PassesPrompt - 1);  // predicts the first response token
  const auto top = std::get<0>(last.topk(2, -1));
  const auto clear = (top.select(1, 0) - top.select(1, 1)) > 2 * logit_tolerance;
  const auto same = got.greedy.select(1, 0) == fp32.greedy.select(1, 0);
  EXPECT_TRUE(torch::all(same.logical_or(clear.logical_not())).item<bool>());
}

}  // namespace headroom::testing
