// ApplyDefaults: what an unset field means. Every default that is a plain value lives in
// the struct initialisers of training_job.h; this file fills what depends on other fields.
#include "core/spec/model_presets.h"
#include "core/spec/quantity.h"
#include "core/spec/training_job.h"

namespace headroom::spec {

void ApplyDefaults(TrainingJob& job) {
  TrainingJobSpec& s = job.spec;

  // Model dims left at 0 come from the preset (explicit values override it); the MLP is
  // 4x the width unless given (every preset follows that rule too); positions cover the
  // longest sequence a step can produce; weights are seeded from the task seed.
  ModelSpec& m = s.model;
  if (std::optional<ModelPreset> preset = FindModelPreset(m.preset)) {
    if (m.layers == 0) m.layers = preset->layers;
    if (m.hidden == 0) m.hidden = preset->hidden;
    if (m.heads == 0) m.heads = preset->heads;
  }
  if (m.ffn_hidden == 0 && m.hidden > 0 && m.hidden <= (1 << 28)) m.ffn_hidden = 4 * m.hidden;
  if (m.max_seq_len == 0) {
    const int64_t needed = int64_t{s.grpo.max_prompt_length} + s.grpo.max_response_length;
    if (needed > 0 && needed <= (1 << 30)) m.max_seq_len = static_cast<int>(needed);
  }
  if (m.seed == 0) m.seed = s.task.seed;

  // The quantity text is the source of truth; the parsed numbers follow it.
  if (std::optional<int64_t> millis = ParseQuantityMillis(s.resources.cpu)) {
    s.resources.cpu_millis = *millis;
  }
  if (std::optional<int64_t> bytes = ParseQuantityBytes(s.resources.memory)) {
    s.resources.memory_bytes = *bytes;
  }
}

}  // namespace headroom::spec
