// Model presets: the built-in configurations of the Hugging Face-style model family the
// worker implements (worker/model/hf_causal_lm.h), and the exact parameter count of one.
//
// A preset (or spec.model's explicit dimensions) is a Llama-style decoder trained from
// scratch in fp32 (PresetModelConfig):
//   - token embedding      [kVocabSize, hidden]
//   - position embedding   [maxSeqLen, hidden], learned absolute positions counted from
//     each row's first real token, on top of the rotary positions below: from scratch
//     the tiny preset learns which prompt digit to copy within the learning test's 80
//     steps with it, and barely starts to without (rotary positions alone)
//   - `layers` pre-norm blocks, each:
//       RMSNorm(hidden)                                                hidden
//       causal self-attention, rotary positions, no biases: q, k, v, o
//         Linear(hidden, hidden) each (heads == key/value heads)      4*hidden^2
//       RMSNorm(hidden)                                                hidden
//       SwiGLU MLP: gate, up Linear(hidden, ffnHidden), down back       3*hidden*ffn
//   - final RMSNorm(hidden)                                            hidden
//   - output head Linear(hidden, kVocabSize) without bias, NOT tied to the token
//     embedding (untied keeps the shard layout of the two matrices independent)
// Rotary positions and learned positions counted per row make a left-padded prompt score
// like the same prompt alone, so presets take padded batches like any Hugging Face model.
//
// Presets (ffnHidden is 4*hidden in each):
//   tiny  =  2 layers,  64 hidden,  4 heads,  256 ffn   (~0.14M parameters; learns on 2 CPU cores)
//   small =  6 layers, 512 hidden,  8 heads, 2048 ffn   (~25M)
//   base  = 18 layers, 768 hidden, 12 heads, 3072 ffn   (~170M)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/hf/hf_config.h"
#include "core/spec/training_job.h"

namespace headroom::spec {

// The character tokenizer's vocabulary (the generated tasks' tokens): the preset model's
// input and output width.
inline constexpr int kVocabSize = 32;

struct ModelPreset {
  const char* name;
  int layers;
  int hidden;
  int heads;
  int ffn_hidden;
};

// The preset called `name`, or nullopt ("" and unknown names have none).
std::optional<ModelPreset> FindModelPreset(const std::string& name);
// "tiny", "small", "base", in size order.
std::vector<std::string> ModelPresetNames();

// spec.model with every dimension resolved as ApplyDefaults resolves it (preset, 4x MLP,
// maxSeqLen covering prompt + response, seed from the task), for specs built in code.
ModelSpec ResolvedModelSpec(const TrainingJobSpec& spec);

// The architecture above as a Hugging Face config for `model`'s dimensions, which must be
// resolved (ResolvedModelSpec); max_position_embeddings is model.max_seq_len.
hf::HfModelConfig PresetModelConfig(const ModelSpec& model);

// Exact parameter count of PresetModelConfig(model).
int64_t ParameterCount(const ModelSpec& model);

}  // namespace headroom::spec
