#include <spdlog/spdlog.h>

#include "worker/sharding/inference_weights.h"

namespace headroom::worker {

bool Bf16InferenceWeightsByDefault(const torch::Device& device) { return device.is_cuda(); }

InferenceWeightsScope::InferenceWeightsScope(ModelShards& shards)
    : shards_(shards), active_(shards.options().bf16_inference_weights) {
  if (!active_) return;
  shards_.UseInferenceWeights(true);
  autocast_.emplace(shards_.device(), /*also_on_cpu=*/true);
}

InferenceWeightsScope::~InferenceWeightsScope() {
  if (!active_) return;
  autocast_.reset();
  shards_.UseInferenceWeights(false);
}

}  // namespace headroom::worker
