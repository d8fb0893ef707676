// The one place a built model's modules are wrapped or replaced, in the style of
// torchtitan's model converters (docs/design.md, "Model transforms"): activation
// checkpointing and adapters plug in here, so the trainer, sharding, checkpointing and
// export see the transformed model through CausalLM alone.
//
// Contract:
//   - A transform is registered once under a name (RegisterModelTransform, typically from
//     a static initialiser in its own file); ApplyModelTransforms(model, names) applies the
//     named ones in the order given. The trainer applies them after the weights are loaded
//     and the reference copy is made, before sharding. An unknown name throws
//     std::invalid_argument naming it and the registered ones.
//   - A transform may replace or register modules of the model (they are then the model's
//     own: parameters(), named_parameters(), to(device)) and may wrap the running of the
//     blocks with a BlockWrapper (WrapBlocks). Wrappers run around CausalLMImpl::Block in
//     every forward (plain, cached, under autograd or not), the last added outermost, and
//     under ZeRO stage 3 inside its gather of the block's parameters (RunTransformedBlock).
//   - The wrappers are a submodule of the model ("block_wrappers"), so the model owns them
//     and a wrapper's own parameters (registered on it) are the model's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/spec/training_job.h"
#include "worker/model/causal_lm.h"

namespace headroom::worker {

// Runs around one block. `inner` runs the wrappers inside this one and then the block; it
// may be copied and called again later (activation checkpointing recomputes the block in
// backward) for as long as the model lives.
class BlockWrapper : public torch::nn::Module {
 public:
  using Inner = std::function<torch::Tensor(const torch::Tensor& x)>;
  virtual torch::Tensor Run(int64_t layer, const torch::Tensor& x, const Inner& inner) = 0;
};

class ModelTransform {
 public:
  virtual ~ModelTransform() = default;
  // Reads the transform's own spec fields (LoRA: spec.model.lora), before Apply when the
  // caller has a spec; by default none.
  virtual void Configure(const spec::TrainingJobSpec& /*spec*/) {}
  virtual void Apply(CausalLMImpl& model) = 0;
};

using ModelTransformFactory = std::function<std::unique_ptr<ModelTransform>()>;

// Registers `factory` under `name`; returns true (for a static initialiser). Throws
// std::logic_error when the name is taken.
bool RegisterModelTransform(const std::string& name, ModelTransformFactory factory);
std::vector<std::string> RegisteredModelTransforms();

// Applies the named transforms to `model`, in order (each configured from `spec` first,
// when given).
void ApplyModelTransforms(CausalLMImpl& model, const std::vector<std::string>& names);
void ApplyModelTransforms(CausalLMImpl& model, const std::vector<std::string>& names,
                          const spec::TrainingJobSpec& spec);

// The transforms a job's spec asks for, in the order they apply: the one place a spec
// field turns into a transform.
std::vector<std::string> ModelTransformsOf(const spec::TrainingJobSpec& spec);

// Adds `wrapper` (outermost so far) around every block of `model`'s forwards.
void WrapBlocks(CausalLMImpl& model, std::shared_ptr<BlockWrapper> wrapper);

// Block `layer` of `model` with its wrappers: what a block executor that runs blocks
// itself (ZeRO stage 3, worker/sharding/model_shards.h) calls instead of Block().
torch::Tensor RunTransformedBlock(CausalLMImpl& model, int64_t layer, const torch::Tensor& x, const torch::Tensor& mask,
                                  KvCache* cache);

// The executor the model's wrappers install (nullptr when it has none): what a block
// executor that replaced it puts back when it goes.
BlockExecutor* TransformedBlockExecutor(CausalLMImpl& model);

}  // namespace headroom::worker
