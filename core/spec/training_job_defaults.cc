// ApplyDefaults: what an unset field means. Every default that is a plain value lives in
// the struct initialisers of training_job.h (the field table reads them from there); this
// file fills what depends on other fields, and the numbers parsed from quantities.
#include "core/spec/model_presets.h"
#include "core/spec/quantity.h"
#include "core/spec/training_job.h"
#include "core/spec/training_job_fields.h"

namespace headroom::spec {
namespace {

// The quantity text is the source of truth; the parsed numbers beside it follow it.
void ParseQuantities(const std::vector<FieldDef>& fields, void* object) {
  for (const FieldDef& f : fields) {
    if (f.kind == FieldKind::kObject) ParseQuantities(f.fields, f.member(object));
    if (f.kind != FieldKind::kQuantity) continue;
    const std::string& text = *static_cast<const std::string*>(f.member(object));
    std::optional<int64_t> parsed =
        f.unit == QuantityUnit::kMillis ? ParseQuantityMillis(text) : ParseQuantityBytes(text);
    if (parsed) *static_cast<int64_t*>(f.parsed(object)) = *parsed;
  }
}

}  // namespace

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
  // LoRA takes PEFT's defaults (core/spec/lora_targets.h): alpha = r, q_proj and v_proj.
  if (m.lora.enabled()) {
    if (m.lora.alpha == 0) m.lora.alpha = m.lora.r;
    if (m.lora.target_modules.empty()) m.lora.target_modules = {"q_proj", "v_proj"};
  }

  ParseQuantities(SpecFields(), &s);
}

}  // namespace headroom::spec
