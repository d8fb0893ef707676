// The policy network a TrainingJob trains, built from its spec: the one place that picks
// where the weights come from, so the trainer, the benchmarks and the commands agree.
#pragma once

#include <cstdint>

#include "core/hf/hf_config.h"
#include "core/spec/training_job.h"
#include "worker/model/causal_lm.h"

namespace headroom::worker {

// spec.model.path set: the Hugging Face model there (hf_causal_lm.h), weights loaded;
// throws hf::HfConfigError / hf::SafetensorsError naming the file and field or tensor.
// Otherwise the preset's (or spec.model's explicit) dimensions as the same model family
// (spec::PresetModelConfig), random weights from spec.model.seed (else task.seed); throws
// std::invalid_argument naming the field when the dimensions are unusable. Either way the
// model holds max(spec.model.maxSeqLen, maxPromptLength + maxResponseLength) positions.
CausalLM MakePolicyModel(const spec::TrainingJobSpec& spec);

// Throws std::invalid_argument ("model: <what>") naming the first dimension of a preset
// configuration the model cannot be built with.
void ValidatePresetConfig(const hf::HfModelConfig& config, int64_t max_seq_len);

}  // namespace headroom::worker
