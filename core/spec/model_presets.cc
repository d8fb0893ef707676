#include "core/spec/model_presets.h"

namespace headroom::spec {
namespace {

constexpr ModelPreset kPresets[] = {
    {"tiny", 2, 64, 4, 256},
    {"small", 6, 512, 8, 2048},
    {"base", 18, 768, 12, 3072},
};

}  // namespace

std::optional<ModelPreset> FindModelPreset(const std::string& name) {
  for (const ModelPreset& p : kPresets) {
    if (name == p.name) return p;
  }
  return std::nullopt;
}

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const ModelPreset& p : kPresets) names.emplace_back(p.name);
  return names;
}

int64_t ParameterCount(const ModelSpec& model) {
  const int64_t h = model.hidden;
  const int64_t f = model.ffn_hidden;
  const int64_t v = kVocabSize;
  const int64_t per_block = 2 * (2 * h)              // two LayerNorms
                            + (h * 3 * h + 3 * h)    // fused qkv
                            + (h * h + h)            // attention output
                            + (h * f + f)            // MLP up
                            + (f * h + h);           // MLP down
  return v * h                       // token embedding
         + int64_t{model.max_seq_len} * h  // positions
         + model.layers * per_block  // blocks
         + 2 * h                     // final LayerNorm
         + (h * v + v);              // output head
}

}  // namespace headroom::spec
