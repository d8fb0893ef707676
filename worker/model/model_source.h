// The model a job trains, resolved from spec.model once per process: the one place that
// chooses between a preset (a built-in configuration of the model family, random weights)
// and a Hugging Face directory (spec.model.path, or a spec.model.hub reference's snapshot
// in the Hugging Face cache: the worker fetches it into spec.model.path before, see
// core/hf/hub_fetch.h), and the one reader of that directory's files. Everything that
// needs the model's shape, weights or tokens (the policy, the reference model, the guard's
// plan, a text task's tokenizer and stop tokens) asks a ModelSource instead of the spec.
// See docs/design.md, "Where each concept lives".
//
// Contract:
//   - The constructor reads everything but the weights, once: config.json (the shape the
//     policy, the reference model and the planner use), and when the spec's task is a text
//     task (spec.task.dataset.path set) the model's tokens (ModelTokens: tokenizer.json,
//     tokenizer_config.json, generation_config.json's eos_token_id else config.json's, taken
//     from the config already read). No method reads those files again. A preset reads no
//     file at all.
//   - LoadPolicy() reads the weights (the safetensors, through mmap, into fp32), or draws a
//     preset's from spec.model.seed (else task.seed); every call does so again, so a
//     process calls it once and copies what else it needs in memory (CopyOf).
//   - Either way the model holds max(spec.model.maxSeqLen, maxPromptLength +
//     maxResponseLength) positions.
//   - Errors: an unreadable or unsupported config.json, a hub reference not in the cache:
//     hf::HfConfigError; a missing or misshapen tensor: hf::SafetensorsError; unusable
//     preset dimensions, a text task without a model directory, an unusable tokenizer, no
//     stop token, a tokenizer id outside config.json's vocab_size: std::invalid_argument.
//     Every one names the spec field and the file (and the field or tensor), and is an
//     invalid_argument: the worker exits 2.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/guard/planner.h"
#include "core/hf/hf_config.h"
#include "core/spec/training_job.h"
#include "worker/model/causal_lm.h"
#include "worker/model/model_tokens.h"

namespace headroom::worker {

class ModelSource {
 public:
  // Resolves spec.model as the contract above says.
  explicit ModelSource(const spec::TrainingJobSpec& spec);

  // True for a Hugging Face directory (spec.model.path), false for a preset: the choice,
  // made once here.
  bool pretrained() const { return !dir_.empty(); }
  // The Hugging Face directory; empty for a preset.
  const std::string& dir() const { return dir_; }
  // config.json's, or the preset's (max_position_embeddings: max_seq_len()).
  const hf::HfModelConfig& config() const { return config_; }
  int64_t max_seq_len() const { return max_seq_len_; }
  // The shape the memory guard plans the job with: guard::JobModelShape(spec), computed
  // from what the constructor read.
  const guard::ModelShape& plan_shape() const { return plan_shape_; }
  // The model's tokens (text tasks only). Throws std::logic_error for a spec without a text
  // task: its prompts and answers use the character tokenizer (worker/tasks/tokenizer.h).
  const ModelTokens& tokens() const;

  // The policy with its initial weights, on the CPU in fp32 (see the contract).
  CausalLM LoadPolicy() const;
  // A model of this configuration holding a copy of `model`'s parameters, on the CPU,
  // without reading any file: the reference model, from the policy's initial weights.
  CausalLM CopyOf(CausalLM& model) const;

 private:
  // A model of this configuration with its random initial weights.
  CausalLM Build() const;

  std::string dir_;
  hf::HfModelConfig config_;
  int64_t max_seq_len_ = 0;
  uint64_t seed_ = 1;
  guard::ModelShape plan_shape_;
  std::optional<ModelTokens> tokens_;
};

}  // namespace headroom::worker
