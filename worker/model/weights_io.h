// Model weights as a plain LibTorch archive (torch::serialize): name -> tensor, in
// OrderedParameters() names. This is the format of model.initCheckpoint until the
// reshardable checkpoint (worker/checkpoint/) takes over: a file path, or a directory
// holding `model.pt`.
#pragma once

#include <string>

#include "worker/model/causal_lm.h"

namespace headroom::worker {

void SaveWeights(const CausalLM& model, const std::string& path);
// Copies every named tensor into the model. Throws std::runtime_error naming the file
// and the tensor when one is missing or has another shape.
void LoadWeights(CausalLM model, const std::string& path_or_dir);

}  // namespace headroom::worker
