#include "worker/model/model_config.h"

#include <algorithm>
#include <stdexcept>

namespace headroom::worker {

void TransformerConfig::Validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("model: " + what);
  };
  need(vocab_size >= 4, "vocab_size must be >= 4, got " + std::to_string(vocab_size));
  need(layers >= 1, "layers must be >= 1, got " + std::to_string(layers));
  need(hidden >= 1, "hidden must be >= 1, got " + std::to_string(hidden));
  need(heads >= 1 && hidden % heads == 0,
       "heads must divide hidden, got heads " + std::to_string(heads) + " hidden " + std::to_string(hidden));
  need(ffn_hidden >= 1, "ffn_hidden must be >= 1, got " + std::to_string(ffn_hidden));
  need(max_seq_len >= 2, "max_seq_len must be >= 2, got " + std::to_string(max_seq_len));
}

int64_t TransformerConfig::ParameterCount() const {
  const int64_t h = hidden, f = ffn_hidden;
  const int64_t per_block = 2 * (2 * h)                 // two LayerNorms
                            + (h * 3 * h + 3 * h)       // qkv
                            + (h * h + h)               // attention output
                            + (h * f + f) + (f * h + h);  // MLP
  return vocab_size * h           // token embedding
         + max_seq_len * h        // positions
         + layers * per_block
         + 2 * h                  // final LayerNorm
         + (h * vocab_size + vocab_size);  // output head
}

std::string TransformerConfig::ToString() const {
  return std::to_string(layers) + "x" + std::to_string(hidden) + "x" + std::to_string(heads) + " ffn " +
         std::to_string(ffn_hidden) + " seq " + std::to_string(max_seq_len) + " vocab " +
         std::to_string(vocab_size);
}

TransformerConfig ConfigFromSpec(const spec::TrainingJobSpec& spec) {
  TransformerConfig c;
  const auto& m = spec.model;
  // Preset fallbacks mirror core/spec's presets for a spec that skipped ApplyDefaults.
  struct Dims { int layers, hidden, heads, ffn; };
  Dims preset{2, 64, 4, 256};
  if (m.preset == "small") preset = {6, 512, 8, 2048};
  if (m.preset == "base") preset = {18, 768, 12, 3072};
  c.layers = m.layers > 0 ? m.layers : preset.layers;
  c.hidden = m.hidden > 0 ? m.hidden : preset.hidden;
  c.heads = m.heads > 0 ? m.heads : preset.heads;
  c.ffn_hidden = m.ffn_hidden > 0 ? m.ffn_hidden : (m.hidden > 0 ? 4 * m.hidden : preset.ffn);
  const int64_t needed = spec.grpo.max_prompt_length + spec.grpo.max_response_length;
  c.max_seq_len = std::max<int64_t>(m.max_seq_len, needed);
  c.seed = m.seed != 0 ? m.seed : spec.task.seed;
  c.Validate();
  return c;
}

}  // namespace headroom::worker
