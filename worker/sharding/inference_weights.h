// bf16 weights for the passes that need no gradient: the rollout (one forward per
// generated token) and the old log-probs. Under bf16 autocast a forward over fp32 weights
// casts every weight to bf16 on every call; these passes read bf16 copies instead, made
// once per optimizer step (ModelShards::UseInferenceWeights). Stage 3 keeps a bf16 copy of
// each rank's shard and gathers those: half the bytes of an fp32 gather.
//
// What the copies hold: every parameter rounded to bf16 (round to nearest even, as
// autocast's cast). The matmuls read exactly what autocast would have multiplied; the
// embedding tables and norm weights, which autocast leaves in fp32, are rounded too (the
// residual stream stays fp32: hf_causal_lm.h). So a pass over the copies equals the fp32
// pass under autocast to bf16 rounding of those weights.
//
// Contract:
//   - One place decides whether a worker uses them: Bf16InferenceWeightsByDefault (on for
//     CUDA, off for the CPU), read into ShardingOptions::bf16_inference_weights; tests set
//     that option directly.
//   - InferenceWeightsScope is a no-op when the option is off: the passes run exactly as
//     before. When on, for its lifetime the model reads the copies and its forwards
//     autocast to bf16 (on the CPU too, where the scope autocasts: fp32 activations times
//     bf16 weights have no kernel). Run no backward inside one.
//   - Scopes do not nest; stage 3: open the scope before Gather(), which then gathers
//     the copies, and the scope's end releases them.
#pragma once

#include <optional>

#include <torch/torch.h>

#include "core/base/non_copyable.h"
#include "worker/model/bf16_autocast.h"
#include "worker/sharding/model_shards.h"

namespace headroom::worker {

// Whether a worker on `device` keeps bf16 copies for its passes without gradient: on a
// CUDA device yes (the per-call casts are what it saves); on the CPU no (bf16 matmuls are
// slower there than fp32, and casting fp32 activations would cost more than it saves).
bool Bf16InferenceWeightsByDefault(const torch::Device& device);

// The frozen reference model (klCoef > 0), which only ever runs a pass without gradient:
// where a worker keeps bf16 copies (Bf16InferenceWeightsByDefault), its parameters become
// bf16 themselves, converted once in place (buffers such as the rotary tables stay fp32).
// Its passes then read what the policy's copies would hold, at half the memory, with no
// cast per call. A CUDA forward autocasts itself; on the CPU run it under
// Bf16Autocast(device, also_on_cpu).
void ConvertParametersToBf16(CausalLM& model);

class InferenceWeightsScope : NonCopyable {
 public:
  explicit InferenceWeightsScope(ModelShards& shards);
  ~InferenceWeightsScope();

 private:
  ModelShards& shards_;
  bool active_;
  std::optional<Bf16Autocast> autocast_;
};

}  // namespace headroom::worker
