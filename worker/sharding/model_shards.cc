#include <spdlog/spdlog.h>

#include "worker/sharding/model_shards.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "worker/model/model_transforms.h"

namespace headroom::worker {
namespace {

using NamedParams = std::vector<std::pair<std::string, torch::Tensor>>;

void Add(ShardedBytes& into, const ShardedBytes& b) {
  into.parameters += b.parameters;
  into.gradients += b.gradients;
  into.optimizer += b.optimizer;
  into.inference_weights += b.inference_weights;
  into.frozen += b.frozen;
}

}  // namespace

ModelShards::ModelShards(CausalLM model, Communicator& comm, ShardingOptions options, AdamWConfig adamw)
    : model_(std::move(model)), comm_(comm), options_(options) {
  // Trainable parameters go to groups with an optimizer. A frozen one (a LoRA base,
  // worker/model/lora.h) has no gradient or optimizer state: stages 0-2 leave it as the
  // model holds it, whole on every rank; stage 3 shards it too, in frozen groups gathered
  // with their block and never stepped (see the header).
  NamedParams trainable, frozen;
  for (auto& [name, p] : model_->OrderedParameters()) (p.requires_grad() ? trainable : frozen).emplace_back(name, p);
  if (trainable.empty()) throw std::invalid_argument("model shards: the model has no trainable parameter");
  if (!per_layer()) {
    groups_.push_back(std::make_unique<FlatParameterGroup>(trainable, comm_, options_));
    optimizers_.push_back(std::make_unique<ShardedAdamW>(*groups_.back(), adamw));
    ResetPeak();
    return;
  }
  // [0]: outside the blocks; [1 + l]: block l.
  const size_t units = static_cast<size_t>(1 + model_->layers());
  std::vector<NamedParams> split_trainable(units), split_frozen(units);
  for (auto* split : {&split_trainable, &split_frozen}) {
    for (const auto& [name, p] : split == &split_trainable ? trainable : frozen) {
      const int64_t layer = model_->LayerOfParameter(name);
      if (layer >= model_->layers()) throw std::logic_error("model shards: parameter " + name + " past the last block");
      (*split)[static_cast<size_t>(1 + layer)].emplace_back(name, p);
    }
  }
  units_.resize(units);
  for (size_t u = 0; u < units; ++u) {
    if (!split_trainable[u].empty()) {
      groups_.push_back(std::make_unique<FlatParameterGroup>(split_trainable[u], comm_, options_));
      optimizers_.push_back(std::make_unique<ShardedAdamW>(*groups_.back(), adamw));
      units_[u].trainable = groups_.back().get();
    }
    if (!split_frozen[u].empty()) {
      frozen_.push_back(std::make_unique<FlatParameterGroup>(split_frozen[u], comm_, options_, /*trainable=*/false));
      units_[u].frozen = frozen_.back().get();
    }
  }
  model_->set_block_executor(this);
  ResetPeak();
}

ModelShards::~ModelShards() {
  // The model's own block wrappers (model_transforms.h), if any, run its blocks again.
  if (per_layer()) model_->set_block_executor(TransformedBlockExecutor(*model_));
}

void ModelShards::GatherUnit(const Unit& unit) {
  if (unit.trainable) unit.trainable->Gather();
  if (unit.frozen) unit.frozen->Gather();
  NotePeak();
}

void ModelShards::ReleaseUnit(const Unit& unit) {
  if (unit.trainable) unit.trainable->Release();
  if (unit.frozen) unit.frozen->Release();
}

int64_t ModelShards::numel() const {
  int64_t n = 0;
  for (const auto& g : groups_) n += g->layout().numel();
  return n;
}

void ModelShards::Gather() {
  if (per_layer()) GatherUnit(units_.front());
}

void ModelShards::GatherAll() {
  for (auto& g : groups_) g->Gather();
  for (auto& g : frozen_) g->Gather();
  NotePeak();
}

void ModelShards::Release() {
  for (auto& g : groups_) g->Release();
  for (auto& g : frozen_) g->Release();
}

void ModelShards::ZeroGrad() {
  if (!per_layer()) {
    groups_.front()->ZeroGrad();
  } else {
    // The outer group's full gradient lives through the mini-batch; blocks zero only the
    // owned gradient, and each backward through a block brings its own full buffer
    // (Backward below).
    for (size_t u = 0; u < units_.size(); ++u) {
      if (FlatParameterGroup* g = units_[u].trainable) u == 0 ? g->ZeroGrad() : g->ZeroOwnedGradient();
    }
  }
  NotePeak();
}

void ModelShards::ReduceGradients() {
  if (!per_layer()) {
    groups_.front()->ReduceGradients();
  } else if (FlatParameterGroup* outer = units_.front().trainable) {
    outer->ReduceGradients();
  }
}

double ModelShards::Step(double max_grad_norm) {
  // The clip of torch::nn::utils::clip_grad_norm_ over all parameters: one norm over
  // every group (one all_reduce of the summed squares), one coefficient for all.
  double local = 0;
  for (auto& o : optimizers_) local += o->LocalSquaredGradNorm();
  auto sq = torch::full({1}, local, torch::TensorOptions().dtype(torch::kFloat64).device(comm_.device()));
  comm_.all_reduce(sq);
  const double norm = std::sqrt(sq.cpu().item<double>());
  const double coef = max_grad_norm / (norm + 1e-6);
  const double scale = max_grad_norm > 0 && coef < 1.0 ? coef : 1.0;
  for (auto& o : optimizers_) o->ApplyScaled(scale);
  ++parameters_version_;
  return norm;
}

void ModelShards::UseInferenceWeights(bool on) {
  if (!options_.bf16_inference_weights) throw std::logic_error("model shards: bf16 inference weights are off");
  if (on && inference_version_ != parameters_version_) {
    for (auto& g : groups_) g->RefreshInferenceCopy();
    inference_version_ = parameters_version_;
    ++inference_refreshes_;
  }
  for (auto& g : groups_) g->UseInferenceCopy(on);
  NotePeak();
}

std::vector<ShardedStatePart> ModelShards::parts() {
  ++parameters_version_;
  std::vector<ShardedStatePart> out;
  for (size_t i = 0; i < groups_.size(); ++i) out.push_back({groups_[i].get(), optimizers_[i].get()});
  return out;
}

ShardedBytes ModelShards::ResidentBytes() const {
  ShardedBytes total;
  for (size_t i = 0; i < groups_.size(); ++i) {
    ShardedBytes b = groups_[i]->ResidentBytes();
    b.optimizer = optimizers_[i]->resident_bytes();
    Add(total, b);
  }
  for (const auto& g : frozen_) Add(total, g->ResidentBytes());
  return total;
}

void ModelShards::ResetPeak() { peak_ = ResidentBytes(); }

void ModelShards::NotePeak() {
  const ShardedBytes now = ResidentBytes();
  if (now.total() > peak_.total()) peak_ = now;
}

torch::Tensor ModelShards::RunBlock(CausalLMImpl& model, int64_t layer, const torch::Tensor& x,
                                    const torch::Tensor& mask, KvCache* cache) {
  if (cache) {
    // Generation appends to the cache: a side effect a recompute must not repeat, and it
    // runs without autograd anyway.
    if (torch::GradMode::is_enabled()) throw std::logic_error("model shards: a cached forward under autograd");
    const Unit& unit = block_unit(layer);
    GatherUnit(unit);
    torch::Tensor y = RunTransformedBlock(model, layer, x, mask, cache);
    ReleaseUnit(unit);
    return y;
  }
  return RecomputedBlock(*this, layer, x, mask);
}

torch::Tensor ModelShards::ForwardNoGrad(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask) {
  const Unit& unit = block_unit(layer);
  GatherUnit(unit);
  torch::Tensor y = RunTransformedBlock(*model_, layer, x, mask, nullptr);
  ReleaseUnit(unit);
  return y;
}

torch::Tensor ModelShards::Backward(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask,
                                    const torch::Tensor& grad_y) {
  const Unit& unit = block_unit(layer);
  GatherUnit(unit);
  // The block's full gradient, attached as its trainable parameters' .grad; a frozen
  // group gets none (autograd computes no gradient for it).
  if (unit.trainable) unit.trainable->BeginGradient();
  NotePeak();
  torch::Tensor dx;
  {
    torch::AutoGradMode autograd(true);  // the engine runs backward functions without it
    torch::Tensor input = x.detach().requires_grad_(true);
    torch::Tensor y = RunTransformedBlock(*model_, layer, input, mask, nullptr);
    torch::autograd::backward({y}, {grad_y});
    dx = input.grad();
  }
  if (unit.trainable) unit.trainable->ReduceGradients();  // adds this micro-batch's block gradient to the owned range
  ReleaseUnit(unit);
  return dx;
}

}  // namespace headroom::worker
