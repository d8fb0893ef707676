#include "worker/model/model_transforms.h"

#include "worker/model/activation_checkpointing.h"
#include "worker/model/lora.h"

#include <map>
#include <mutex>
#include <stdexcept>

namespace headroom::worker {
namespace {

constexpr const char* kWrappersName = "block_wrappers";

// The model's block wrappers, innermost first; the executor of a model that has any.
class BlockWrappers : public torch::nn::Module, public BlockExecutor {
 public:
  void Add(std::shared_ptr<BlockWrapper> wrapper) {
    wrappers_.push_back(register_module(std::to_string(wrappers_.size()), std::move(wrapper)));
  }

  torch::Tensor Run(CausalLMImpl& model, int64_t layer, const torch::Tensor& x, const torch::Tensor& mask,
                    KvCache* cache) {
    return RunFrom(wrappers_.size(), model, layer, x, mask, cache);
  }

  torch::Tensor RunBlock(CausalLMImpl& model, int64_t layer, const torch::Tensor& x, const torch::Tensor& mask,
                         KvCache* cache) override {
    return Run(model, layer, x, mask, cache);
  }

 private:
  // The wrappers below index `outer` (exclusive), then the block.
  torch::Tensor RunFrom(size_t outer, CausalLMImpl& model, int64_t layer, const torch::Tensor& x,
                        const torch::Tensor& mask, KvCache* cache) {
    if (outer == 0) return model.Block(layer, x, mask, cache);
    // By value: a wrapper may keep `inner` past this call (a recompute in backward); the
    // model owns these wrappers, so `this` and `model` live as long as it can be called.
    CausalLMImpl* m = &model;
    return wrappers_[outer - 1]->Run(layer, x, [this, outer, m, layer, mask, cache](const torch::Tensor& inner_x) {
      return RunFrom(outer - 1, *m, layer, inner_x, mask, cache);
    });
  }

  std::vector<std::shared_ptr<BlockWrapper>> wrappers_;
};

std::shared_ptr<BlockWrappers> WrappersOf(CausalLMImpl& model) {
  const auto children = model.named_children();
  const std::shared_ptr<torch::nn::Module>* child = children.find(kWrappersName);
  return child ? std::dynamic_pointer_cast<BlockWrappers>(*child) : nullptr;
}

struct Registry {
  std::mutex mu;
  std::map<std::string, ModelTransformFactory> factories;
};

Registry& TheRegistry() {
  static Registry registry;
  return registry;
}

}  // namespace

static void ApplyTransforms(CausalLMImpl& model, const std::vector<std::string>& names,
                            const spec::TrainingJobSpec* spec);

bool RegisterModelTransform(const std::string& name, ModelTransformFactory factory) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.factories.emplace(name, std::move(factory)).second) {
    throw std::logic_error("model transform '" + name + "' is registered twice");
  }
  return true;
}

std::vector<std::string> RegisteredModelTransforms() {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;
}

void ApplyModelTransforms(CausalLMImpl& model, const std::vector<std::string>& names) {
  ApplyTransforms(model, names, nullptr);
}

void ApplyModelTransforms(CausalLMImpl& model, const std::vector<std::string>& names,
                          const spec::TrainingJobSpec& spec) {
  ApplyTransforms(model, names, &spec);
}

static void ApplyTransforms(CausalLMImpl& model, const std::vector<std::string>& names,
                            const spec::TrainingJobSpec* spec) {
  for (const std::string& name : names) {
    ModelTransformFactory factory;
    {
      Registry& r = TheRegistry();
      std::lock_guard<std::mutex> lock(r.mu);
      auto it = r.factories.find(name);
      if (it != r.factories.end()) factory = it->second;
    }
    if (!factory) {
      std::string known;
      for (const std::string& k : RegisteredModelTransforms()) known += (known.empty() ? "" : ", ") + k;
      throw std::invalid_argument("unknown model transform '" + name +
                                  "' (registered: " + (known.empty() ? "none" : known) + ")");
    }
    std::unique_ptr<ModelTransform> transform = factory();
    if (spec) transform->Configure(*spec);
    transform->Apply(model);
  }
}

std::vector<std::string> ModelTransformsOf(const spec::TrainingJobSpec& spec) {
  std::vector<std::string> names;
  if (spec.model.lora.enabled()) names.push_back(kLora);
  // Stage 3 recomputes every block already, around its gather (recomputed_block.h).
  if (spec.grpo.activation_checkpointing && spec.sharding.stage < 3) names.push_back(kActivationCheckpointing);
  return names;
}

void WrapBlocks(CausalLMImpl& model, std::shared_ptr<BlockWrapper> wrapper) {
  std::shared_ptr<BlockWrappers> wrappers = WrappersOf(model);
  // Another executor (ZeRO stage 3's shards) runs the blocks now and would not know a
  // wrapper added under it: wrapping comes before sharding.
  if (model.block_executor() != nullptr && model.block_executor() != wrappers.get()) {
    throw std::logic_error("model transforms: blocks are wrapped before sharding, not after");
  }
  if (!wrappers) {
    wrappers = model.register_module(kWrappersName, std::make_shared<BlockWrappers>());
    model.set_block_executor(wrappers.get());
  }
  wrappers->Add(std::move(wrapper));
}

torch::Tensor RunTransformedBlock(CausalLMImpl& model, int64_t layer, const torch::Tensor& x, const torch::Tensor& mask,
                                  KvCache* cache) {
  std::shared_ptr<BlockWrappers> wrappers = WrappersOf(model);
  return wrappers ? wrappers->Run(model, layer, x, mask, cache) : model.Block(layer, x, mask, cache);
}

BlockExecutor* TransformedBlockExecutor(CausalLMImpl& model) { return WrappersOf(model).get(); }

}  // namespace headroom::worker
