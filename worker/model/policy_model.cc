#include <spdlog/spdlog.h>

#include "worker/model/policy_model.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/spec/model_presets.h"
#include "worker/model/hf_causal_lm.h"

namespace headroom::worker {

void ValidatePresetConfig(const hf::HfModelConfig& c, int64_t max_seq_len) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("model: " + what);
  };
  need(c.vocab_size >= 4, "vocab_size must be >= 4, got " + std::to_string(c.vocab_size));
  need(c.num_hidden_layers >= 1, "layers must be >= 1, got " + std::to_string(c.num_hidden_layers));
  need(c.hidden_size >= 1, "hidden must be >= 1, got " + std::to_string(c.hidden_size));
  need(c.num_attention_heads >= 1 && c.hidden_size % c.num_attention_heads == 0,
       "heads must divide hidden, got heads " + std::to_string(c.num_attention_heads) + " hidden " +
           std::to_string(c.hidden_size));
  // Rotary embeddings rotate pairs of a head's dimensions.
  need(c.head_dim % 2 == 0, "hidden / heads must be even (rotary positions), got " + std::to_string(c.head_dim));
  need(c.intermediate_size >= 1, "ffn_hidden must be >= 1, got " + std::to_string(c.intermediate_size));
  need(max_seq_len >= 2, "max_seq_len must be >= 2, got " + std::to_string(max_seq_len));
}

CausalLM MakePolicyModel(const spec::TrainingJobSpec& spec) {
  const spec::ModelSpec model = spec::ResolvedModelSpec(spec);
  const int64_t sequence = int64_t{spec.grpo.max_prompt_length} + spec.grpo.max_response_length;
  const int64_t max_seq_len = std::max<int64_t>(model.max_seq_len, sequence);
  if (!spec.model.path.empty()) return LoadHfCausalLM(spec.model.path, max_seq_len);
  hf::HfModelConfig config = spec::PresetModelConfig(model);
  config.max_position_embeddings = max_seq_len;  // the learned positions cover every position
  ValidatePresetConfig(config, max_seq_len);
  return HfCausalLM(config, max_seq_len, model.seed);
}

}  // namespace headroom::worker
