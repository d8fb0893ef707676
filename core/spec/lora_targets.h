// LoRA's vocabulary (spec.model.lora, PEFT's names) and what it means for a model's
// shape: which projections the adapters wrap, and how many parameters they add. The
// validator, the worker's transform (worker/model/lora.h) and the planner share it.
//
// Defaults, as PEFT's LoraConfig: alpha = r (PEFT: lora_alpha 8 at r 8), dropout 0,
// targetModules q_proj and v_proj (PEFT's default for the Llama and Qwen2 families),
// rsLora off. "all-linear" is every projection of a block, the output head excepted (as
// PEFT's all-linear).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/hf/hf_config.h"
#include "core/spec/training_job.h"

namespace headroom::spec {

inline constexpr const char* kLoraAllLinear = "all-linear";

// The projections of one block an adapter may wrap, in the block's order. Every family
// the worker implements (Qwen2, Qwen3, Llama, the presets) has all seven.
const std::vector<std::string>& LoraModuleNames(hf::Architecture architecture);
// What targetModules may list: the module names of any family, then "all-linear".
std::vector<std::string> LoraTargetNames();

// A projection's [in, out] in a model of config `c`; nullopt for a name that is none.
struct LinearShape {
  int64_t in = 0, out = 0;
};
std::optional<LinearShape> LoraModuleShape(const hf::HfModelConfig& c, const std::string& module);

// The modules `lora` wraps, in block order: all-linear expanded, the default when empty.
std::vector<std::string> LoraTargets(const LoraSpec& lora, hf::Architecture architecture);
// alpha / r, or alpha / sqrt(r) with rsLora; alpha 0 means r.
double LoraScale(const LoraSpec& lora);
// Adapter parameters over every block: r x (in + out) per wrapped projection.
int64_t LoraParameterCount(const hf::HfModelConfig& c, const LoraSpec& lora);

// Whether the PEFT adapter directory `dir` (adapter_config.json) matches `lora`: "" when
// it does, else one line naming the file and the field that differs (peft_type LORA, r,
// target_modules as a set, lora_alpha and use_rslora when `lora` sets them). An
// unreadable directory is a problem too.
std::string PeftAdapterConfigProblem(const std::string& dir, const LoraSpec& lora);
// The LoraSpec the PEFT adapter directory `dir` describes (r, lora_alpha, lora_dropout,
// target_modules, use_rslora; from = dir). Throws std::invalid_argument naming the file and
// the field when it is not a LoRA adapter's config.
LoraSpec LoraSpecOfPeftAdapter(const std::string& dir);

}  // namespace headroom::spec
