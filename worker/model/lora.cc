#include <spdlog/spdlog.h>

#include "worker/model/lora.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>

#include "core/hf/hf_export.h"
#include "core/hf/safetensors.h"
#include "core/spec/lora_targets.h"

namespace headroom::worker {

const char kLora[] = "lora";

namespace {

constexpr const char* kStateName = "lora";

// The model's LoRA state: its options and the switch every adapter reads. A submodule of
// the model without parameters, so the model owns it and HasLora finds it.
struct LoraState : torch::nn::Module {
  LoraOptions options;
  std::shared_ptr<LoraAdapter::Switch> on = std::make_shared<LoraAdapter::Switch>();
};

std::shared_ptr<LoraState> StateOf(CausalLMImpl& model) {
  const auto children = model.named_children();
  const std::shared_ptr<torch::nn::Module>* child = children.find(kStateName);
  return child ? std::dynamic_pointer_cast<LoraState>(*child) : nullptr;
}

bool IsAdapterParameter(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

int ProjectionIndex(const std::string& module) {
  static const char* names[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  for (int i = 0; i < HfDecoderLayerImpl::kProjections; ++i) {
    if (module == names[i]) return i;
  }
  return -1;
}

torch::nn::Linear& ProjectionOf(HfDecoderLayerImpl& layer, int index) {
  using P = HfDecoderLayerImpl::Projection;
  switch (index) {
    case P::kQ: return layer.q_proj;
    case P::kK: return layer.k_proj;
    case P::kV: return layer.v_proj;
    case P::kO: return layer.o_proj;
    case P::kGate: return layer.gate_proj;
    case P::kUp: return layer.up_proj;
    default: return layer.down_proj;
  }
}

class LoraTransform : public ModelTransform {
 public:
  void Configure(const spec::TrainingJobSpec& spec) override { options_ = LoraOptionsOf(spec); }
  void Apply(CausalLMImpl& model) override {
    auto* hf = dynamic_cast<HfCausalLMImpl*>(&model);
    if (!hf) throw std::invalid_argument("spec.model.lora: adapters need a Hugging Face-style model");
    ApplyLora(*hf, options_);
  }

 private:
  LoraOptions options_;
};

const bool lora_registered = RegisterModelTransform(kLora, [] { return std::make_unique<LoraTransform>(); });

}  // namespace

double LoraOptions::scale() const { return rs_lora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / r; }

LoraOptions LoraOptionsOf(const spec::LoraSpec& l, uint64_t seed) {
  LoraOptions o;
  o.r = l.r;
  o.alpha = l.alpha > 0 ? l.alpha : l.r;
  o.dropout = l.dropout;
  o.rs_lora = l.rs_lora;
  o.targets = spec::LoraTargets(l, hf::Architecture::kLlama);
  o.seed = seed;
  return o;
}

LoraOptions LoraOptionsOf(const spec::TrainingJobSpec& spec) {
  return LoraOptionsOf(spec.model.lora, spec.model.seed != 0 ? spec.model.seed : spec.task.seed);
}

LoraAdapter::LoraAdapter(torch::nn::Linear& linear, const LoraOptions& options, std::shared_ptr<Switch> on,
                         at::Generator& generator)
    : scale_(options.scale()), dropout_(options.dropout), on_(std::move(on)) {
  const int64_t in = linear->options.in_features(), out = linear->options.out_features();
  const auto device = linear->weight.device();
  torch::NoGradGuard no_grad;
  a_ = linear->register_module("lora_A", torch::nn::Linear(torch::nn::LinearOptions(in, options.r).bias(false)));
  b_ = linear->register_module("lora_B", torch::nn::Linear(torch::nn::LinearOptions(options.r, out).bias(false)));
  // kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in)
  // = 1 / sqrt(in); drawn here from the seeded generator, not the global one.
  const double bound = std::sqrt(2.0 / 6.0) * std::sqrt(3.0 / static_cast<double>(in));
  a_->weight.set_data(torch::empty({options.r, in}, torch::kFloat32).uniform_(-bound, bound, generator).to(device));
  b_->weight.set_data(torch::zeros({out, options.r}, torch::TensorOptions().dtype(torch::kFloat32).device(device)));
  if (!linear->is_training()) {
    a_->eval();
    b_->eval();
  }
}

torch::Tensor LoraAdapter::Delta(const torch::Tensor& x) {
  torch::Tensor in = x;
  if (dropout_ > 0 && a_->is_training()) in = torch::dropout(x, dropout_, /*train=*/true);
  return b_(a_(in)) * scale_;
}

torch::Tensor LoraAdapter::MergedWeight(const torch::Tensor& base_weight) const {
  torch::NoGradGuard no_grad;
  const auto& a = a_->weight;
  const auto& b = b_->weight;
  auto delta = torch::matmul(b.to(torch::kFloat32), a.to(torch::kFloat32)) * scale_;
  return (base_weight.to(torch::kFloat32) + delta.to(base_weight.device())).to(base_weight.scalar_type());
}

void ApplyLora(HfCausalLMImpl& model, const LoraOptions& options) {
  if (StateOf(model)) throw std::logic_error("lora: the model has adapters already");
  if (options.r < 1) throw std::invalid_argument("spec.model.lora.r: must be >= 1, got " + std::to_string(options.r));
  const hf::HfModelConfig& config = model.config();
  std::vector<int> indices;
  for (const std::string& module : options.targets) {
    const int index = ProjectionIndex(module);
    const std::optional<spec::LinearShape> shape = spec::LoraModuleShape(config, module);
    if (index < 0 || !shape) {
      throw std::invalid_argument("spec.model.lora.targetModules: " + config.architecture_name + " has no module \"" +
                                  module + "\"");
    }
    if (options.r > std::min(shape->in, shape->out)) {
      throw std::invalid_argument("spec.model.lora.r: " + std::to_string(options.r) + " is larger than " + module +
                                  " [" + std::to_string(shape->out) + " x " + std::to_string(shape->in) + "] allows");
    }
    indices.push_back(index);
  }
  auto state = model.register_module(kStateName, std::make_shared<LoraState>());
  state->options = options;
  at::Generator generator = at::detail::createCPUGenerator(options.seed);
  // Block by block, each block's projections in the block's order: the draw is the same
  // whatever order the spec listed them in.
  std::sort(indices.begin(), indices.end());
  for (int64_t l = 0; l < model.layers(); ++l) {
    HfDecoderLayerImpl& layer = model.layer(l);
    for (int index : indices) {
      layer.adapters[static_cast<size_t>(index)] =
          std::make_shared<LoraAdapter>(ProjectionOf(layer, index), options, state->on, generator);
    }
  }
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    item.value().set_requires_grad(IsAdapterParameter(item.key()));
  }
}

bool HasLora(CausalLMImpl& model) { return StateOf(model) != nullptr; }

const LoraOptions& LoraOptionsOfModel(CausalLMImpl& model) {
  auto state = StateOf(model);
  if (!state) throw std::logic_error("lora: the model has no adapters");
  return state->options;  // the model owns the state
}

AdaptersOff::AdaptersOff(CausalLMImpl& model) {
  if (auto state = StateOf(model)) {
    switch_ = state->on;
    was_ = switch_->on;
    switch_->on = false;
  }
}

AdaptersOff::~AdaptersOff() {
  if (switch_) switch_->on = was_;
}

LoraAdapter* AdapterOf(HfCausalLMImpl& model, int64_t layer, const std::string& module) {
  const int index = ProjectionIndex(module);
  if (index < 0) return nullptr;
  return dynamic_cast<LoraAdapter*>(model.layer(layer).adapters[static_cast<size_t>(index)].get());
}

void ConvertFrozenParametersToBf16(CausalLMImpl& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters(/*recurse=*/true)) {
    if (!p.requires_grad()) p.set_data(p.detach().to(torch::kBFloat16));
  }
}

void MergeAdaptersIntoBase(HfCausalLMImpl& model) {
  torch::NoGradGuard no_grad;
  for (int64_t l = 0; l < model.layers(); ++l) {
    HfDecoderLayerImpl& layer = model.layer(l);
    for (int index = 0; index < HfDecoderLayerImpl::kProjections; ++index) {
      auto* adapter = dynamic_cast<LoraAdapter*>(layer.adapters[static_cast<size_t>(index)].get());
      if (!adapter) continue;
      torch::Tensor& w = ProjectionOf(layer, index)->weight;
      w.set_data(adapter->MergedWeight(w.detach()));
    }
  }
}

void LoadPeftAdapter(HfCausalLMImpl& model, const std::string& dir, const spec::LoraSpec& lora) {
  const std::string field = "spec.model.lora.from: ";
  if (std::string why = spec::PeftAdapterConfigProblem(dir, lora); !why.empty()) {
    throw std::invalid_argument(field + why);
  }
  const std::string file = dir + "/" + hf::kPeftWeightsFileName;
  std::unique_ptr<hf::SafetensorsFile> weights;
  try {
    weights = std::make_unique<hf::SafetensorsFile>(file);
  } catch (const hf::SafetensorsError& e) {
    throw std::invalid_argument(field + e.what());
  }
  std::map<std::string, torch::Tensor> adapters;
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    if (IsAdapterParameter(item.key())) adapters[item.key()] = item.value();
  }
  torch::NoGradGuard no_grad;
  size_t used = 0;
  for (const auto& [stored, view] : weights->tensors()) {
    const std::string prefix = hf::kPeftTensorPrefix;
    // PEFT names an adapter base_model.model.<module>.lora_A.weight (older versions put the
    // adapter's name, "default", before .weight in memory, never in the file).
    const std::string name = stored.rfind(prefix, 0) == 0 ? stored.substr(prefix.size()) : stored;
    auto it = adapters.find(name);
    if (it == adapters.end()) {
      throw std::invalid_argument(field + file + ": tensor " + stored + " is no adapter of this model (" +
                                  model.config().architecture_name + ", " + std::to_string(model.layers()) +
                                  " layers): was it trained on another base?");
    }
    torch::Tensor& p = it->second;
    if (view.shape != p.sizes().vec()) {
      throw std::invalid_argument(field + file + ": tensor " + stored + " has shape " +
                                  c10::str(c10::IntArrayRef(view.shape)) + ", the model's adapter needs " +
                                  c10::str(p.sizes()));
    }
    torch::Dtype dtype;
    if (view.dtype == "F32") dtype = torch::kFloat32;
    else if (view.dtype == "BF16") dtype = torch::kBFloat16;
    else if (view.dtype == "F16") dtype = torch::kFloat16;
    else throw std::invalid_argument(field + file + ": tensor " + stored + " has dtype " + view.dtype);
    try {
      hf::RequireFinite(view, stored);
    } catch (const hf::SafetensorsError& e) {
      throw std::invalid_argument(field + e.what());
    }
    auto bytes = torch::from_blob(const_cast<std::byte*>(view.data), view.shape, torch::TensorOptions().dtype(dtype));
    p.copy_(bytes);
    ++used;
  }
  if (used != adapters.size()) {
    throw std::invalid_argument(field + file + " holds " + std::to_string(used) + " of the model's " +
                                std::to_string(adapters.size()) + " adapter tensors");
  }
}

}  // namespace headroom::worker
