#include <spdlog/spdlog.h>

#include "worker/sharding/inference_weights.h"

namespace headroom::worker {

bool Bf16InferenceWeightsByDefault(const torch::Device& device) { return device.is_cuda(); }

void ConvertParametersToBf16(CausalLM& model) {
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : model->OrderedParameters()) p.set_data(p.detach().to(torch::kBFloat16));
}

InferenceWeightsScope::InferenceWeightsScope(ModelShards& shards)
    : shards_(shards), active_(shards.options().bf16_inference_weights) {
  if (!active_) return;
  shards_.UseInferenceWeights(true);
  // A CUDA forward autocasts itself (causal_lm.h), so what runs between forwards (the
  // sampling) stays as it was; on the CPU the copies need autocast around the passes.
  if (!shards_.device().is_cuda()) autocast_.emplace(shards_.device(), /*also_on_cpu=*/true);
}

InferenceWeightsScope::~InferenceWeightsScope() {
  if (!active_) return;
  autocast_.reset();
  shards_.UseInferenceWeights(false);
}

}  // namespace headroom::worker
