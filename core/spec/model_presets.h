// Model presets and the exact parameter count of the worker's transformer.
//
// The architecture (worker/model implements exactly this; both sides count the same):
//   - token embedding      [kVocabSize, hidden]                      (no bias)
//   - position embedding   [maxSeqLen, hidden], learned absolute positions
//   - `layers` pre-norm blocks, each:
//       LayerNorm(hidden) with weight and bias                        2*hidden
//       causal self-attention: fused qkv Linear(hidden, 3*hidden) with bias,
//         output Linear(hidden, hidden) with bias                     4*hidden^2 + 4*hidden
//       LayerNorm(hidden) with weight and bias                        2*hidden
//       MLP: Linear(hidden, ffnHidden) with bias, GELU,
//         Linear(ffnHidden, hidden) with bias                         2*hidden*ffn + ffn + hidden
//   - final LayerNorm(hidden) with weight and bias                    2*hidden
//   - output head Linear(hidden, kVocabSize) with bias, NOT tied to the token embedding
//     (untied keeps the shard layout of the two matrices independent)
//
// Presets (ffnHidden is 4*hidden in each):
//   tiny  =  2 layers,  64 hidden,  4 heads,  256 ffn   (~0.1M parameters; learns on 2 CPU cores)
//   small =  6 layers, 512 hidden,  8 heads, 2048 ffn   (~19M)
//   base  = 18 layers, 768 hidden, 12 heads, 3072 ffn   (~128M)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/spec/training_job.h"

namespace headroom::spec {

// The character tokenizer's vocabulary: the model's input and output width.
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

// Exact parameter count of the architecture above for `model`'s dimensions, which must be
// resolved (ApplyDefaults fills them from the preset; maxSeqLen included).
int64_t ParameterCount(const ModelSpec& model);

}  // namespace headroom::spec
