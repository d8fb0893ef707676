#include "core/spec/model_presets.h"

#include <algorithm>

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

ModelSpec ResolvedModelSpec(const TrainingJobSpec& spec) {
  TrainingJob job;
  job.spec = spec;
  ApplyDefaults(job);
  return job.spec.model;
}

hf::HfModelConfig PresetModelConfig(const ModelSpec& model) {
  hf::HfModelConfig c;
  c.architecture = hf::Architecture::kLlama;
  c.architecture_name = "LlamaForCausalLM";
  c.vocab_size = kVocabSize;
  c.hidden_size = model.hidden;
  c.intermediate_size = model.ffn_hidden;
  c.num_hidden_layers = model.layers;
  c.num_attention_heads = c.num_key_value_heads = model.heads;
  c.head_dim = model.hidden / std::max(1, model.heads);
  c.max_position_embeddings = model.max_seq_len;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = false;
  c.attention_bias = false;
  c.qk_norm = false;
  c.learned_positions = true;
  c.dtype = "float32";
  return c;
}

int64_t ParameterCount(const ModelSpec& model) { return PresetModelConfig(model).ParameterCount(); }

}  // namespace headroom::spec
