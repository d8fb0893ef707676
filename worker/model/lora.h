// LoRA as a model transform (model_transforms.h; docs/design.md, "LoRA"): low-rank
// adapters on a frozen base, as PEFT's LoraLayer computes them. For each wrapped
// projection W [out, in] of every block:
//   y = W x (+ b) + scale * B (A (dropout(x))),  A [r, in], B [out, r]
// A Kaiming-uniform with a = sqrt(5) (PEFT's init: U(-1/sqrt(in), 1/sqrt(in))), B zeros,
// so a fresh adapter changes nothing; scale = alpha / r, or alpha / sqrt(r) with rsLora.
// A and B are registered on the projection's module as lora_A and lora_B, so the model's
// names are PEFT's less its "base_model.model." prefix:
// model.layers.N.self_attn.q_proj.lora_A.weight [r, in], ...lora_B.weight [out, r].
//
// Contract:
//   - Apply freezes every parameter that is not an adapter's (requires_grad false): the
//     sharding (model_shards.h) gives it no gradient, no optimizer state and no place in a
//     checkpoint's shards; stages 0-2 leave it whole in the model, stage 3 shards it in
//     frozen groups gathered per block with the block's adapters.
//   - The adapters of one model switch on and off together (AdaptersOff): off, the model
//     computes exactly the base (the adapters' operators do not run at all), which is how
//     the KL term's reference model is the base with no second copy.
//   - Dropout draws only in training mode (Module::train()), from the default generator
//     of the input's device. A block recomputed in backward must draw the same mask: ZeRO
//     stage 3's recompute replays the generator state (recomputed_block.h), so dropout
//     works there; activation checkpointing's does not, so the spec refuses dropout with
//     activation checkpointing at stages 0-2.
//   - The adapters are made on the device of the projection they wrap, in fp32, drawn
//     from a generator seeded by spec.model.seed: every rank draws the same.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/spec/training_job.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/model/model_transforms.h"

namespace headroom::worker {

// The transform's registered name.
extern const char kLora[];

struct LoraOptions {
  int64_t r = 8;
  double alpha = 8;
  double dropout = 0;
  bool rs_lora = false;
  std::vector<std::string> targets = {"q_proj", "v_proj"};  // module names, block order
  uint64_t seed = 1;
  double scale() const;
};

// spec.model.lora with its defaults resolved (core/spec/lora_targets.h).
LoraOptions LoraOptionsOf(const spec::TrainingJobSpec& spec);
LoraOptions LoraOptionsOf(const spec::LoraSpec& lora, uint64_t seed);

// One projection's adapter.
class LoraAdapter : public LinearAdapter {
 public:
  struct Switch {
    bool on = true;
  };
  // Registers lora_A and lora_B on `linear`; A drawn from `generator` (CPU).
  LoraAdapter(torch::nn::Linear& linear, const LoraOptions& options, std::shared_ptr<Switch> on,
              at::Generator& generator);
  bool active() const override { return on_->on; }
  torch::Tensor Delta(const torch::Tensor& x) override;

  const torch::nn::Linear& a() const { return a_; }
  const torch::nn::Linear& b() const { return b_; }
  double scale() const { return scale_; }
  // W + scale * B A in W's dtype, computed in fp32: the merged projection weight.
  torch::Tensor MergedWeight(const torch::Tensor& base_weight) const;

 private:
  torch::nn::Linear a_{nullptr}, b_{nullptr};
  double scale_ = 1;
  double dropout_ = 0;
  std::shared_ptr<Switch> on_;
};

// Adds the adapters to `model` and freezes the rest. std::invalid_argument when a target
// is not a projection of the model's blocks or r exceeds one's smaller side, naming
// spec.model.lora; std::logic_error when the model has adapters already.
void ApplyLora(HfCausalLMImpl& model, const LoraOptions& options);

// Whether `model` has adapters (ApplyLora ran on it).
bool HasLora(CausalLMImpl& model);
// The options it was applied with; std::logic_error without adapters.
const LoraOptions& LoraOptionsOfModel(CausalLMImpl& model);

// Turns the adapters of `model` off for its lifetime (nothing when it has none): the
// model is the base. Scopes may nest.
class AdaptersOff {
 public:
  explicit AdaptersOff(CausalLMImpl& model);
  ~AdaptersOff();
  AdaptersOff(const AdaptersOff&) = delete;
  AdaptersOff& operator=(const AdaptersOff&) = delete;

 private:
  std::shared_ptr<LoraAdapter::Switch> switch_;
  bool was_ = false;
};

// The adapter of block `layer`'s `module` ("q_proj", ...), or nullptr.
LoraAdapter* AdapterOf(HfCausalLMImpl& model, int64_t layer, const std::string& module);

// The parameters that do not train (the frozen base) converted to bf16 in place: what a
// GPU keeps of the base (half the bytes; its forwards autocast to bf16 anyway).
void ConvertFrozenParametersToBf16(CausalLMImpl& model);

// Folds every adapter into its projection's weight (W += scale * B A, in the weight's
// dtype) and removes nothing: with the adapters then off (AdaptersOff), the model computes
// the merged model. For export and for checks.
void MergeAdaptersIntoBase(HfCausalLMImpl& model);

// The adapters of the PEFT adapter directory `dir` (adapter_config.json,
// adapter_model.safetensors: base_model.model.<name> as hf_export.h writes them) copied
// into `model`'s, which ApplyLora made with options that match its config.
// std::invalid_argument naming spec.model.lora.from and the file (and the tensor) when the
// config disagrees, a tensor is missing or misshapen, or the file holds a tensor the model
// has no adapter for (an adapter of another base).
void LoadPeftAdapter(HfCausalLMImpl& model, const std::string& dir, const spec::LoraSpec& lora);

}  // namespace headroom::worker
