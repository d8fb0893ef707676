// The policy network a TrainingJob trains, built from its spec: the one place that picks
// the architecture, so the trainer, the benchmarks and the commands agree.
#pragma once

#include "core/spec/training_job.h"
#include "worker/model/causal_lm.h"

namespace headroom::worker {

// spec.model.path set: the Hugging Face model there (hf_causal_lm.h), weights loaded;
// throws hf::HfConfigError / hf::SafetensorsError naming the file and field or tensor.
// Otherwise the preset's dimensions -> a Transformer (model_config.h), seeded from the
// spec; throws std::invalid_argument naming the field when the dimensions are unusable.
CausalLM MakePolicyModel(const spec::TrainingJobSpec& spec);

}  // namespace headroom::worker
