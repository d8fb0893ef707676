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
}

}  // namespace

ModelShards::ModelShards(CausalLM model, Communicator& comm, ShardingOptions options, AdamWConfig adamw)
    : model_(std::move(model)), comm_(comm), options_(options) {
  // The trainable parameters only: a frozen one (a LoRA base, worker/model/lora.h) has no
  // gradient or optimizer state to shard, and stays as the model holds it, whole on
  // every rank.
  NamedTensors all;
  for (auto& [name, p] : model_->OrderedParameters()) {
    if (p.requires_grad()) all.emplace_back(name, p);
  }
  if (all.empty()) throw std::invalid_argument("model shards: the model has no trainable parameter");
  std::vector<NamedParams> split(1);
  if (per_layer()) {
    split.resize(static_cast<size_t>(1 + model_->layers()));
    for (const auto& [name, p] : all) {
      const int64_t layer = model_->LayerOfParameter(name);
      if (layer >= model_->layers()) throw std::logic_error("model shards: parameter " + name + " past the last block");
      split[static_cast<size_t>(1 + layer)].emplace_back(name, p);
    }
  } else {
    split[0] = all;
  }
  for (const NamedParams& params : split) {
    groups_.push_back(std::make_unique<FlatParameterGroup>(params, comm_, options_));
    optimizers_.push_back(std::make_unique<ShardedAdamW>(*groups_.back(), adamw));
  }
  if (per_layer()) model_->set_block_executor(this);
  ResetPeak();
}

ModelShards::~ModelShards() {
  // The model's own block wrappers (model_transforms.h), if any, run its blocks again.
  if (per_layer()) model_->set_block_executor(TransformedBlockExecutor(*model_));
}

int64_t ModelShards::numel() const {
  int64_t n = 0;
  for (const auto& g : groups_) n += g->layout().numel();
  return n;
}

void ModelShards::Gather() {
  groups_.front()->Gather();
  NotePeak();
}

void ModelShards::GatherAll() {
  for (auto& g : groups_) g->Gather();
  NotePeak();
}

void ModelShards::Release() {
  for (auto& g : groups_) g->Release();
}

void ModelShards::ZeroGrad() {
  groups_.front()->ZeroGrad();
  // Blocks: only the owned gradient; each backward through a block brings its own full
  // buffer (Backward below).
  for (size_t i = 1; i < groups_.size(); ++i) groups_[i]->ZeroOwnedGradient();
  NotePeak();
}

void ModelShards::ReduceGradients() { groups_.front()->ReduceGradients(); }

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
    FlatParameterGroup& group = block_group(layer);
    group.Gather();
    NotePeak();
    torch::Tensor y = RunTransformedBlock(model, layer, x, mask, cache);
    group.Release();
    return y;
  }
  return RecomputedBlock(*this, layer, x, mask);
}

torch::Tensor ModelShards::ForwardNoGrad(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask) {
  FlatParameterGroup& group = block_group(layer);
  group.Gather();
  NotePeak();
  torch::Tensor y = RunTransformedBlock(*model_, layer, x, mask, nullptr);
  group.Release();
  return y;
}

torch::Tensor ModelShards::Backward(int64_t layer, const torch::Tensor& x, const torch::Tensor& mask,
                                    const torch::Tensor& grad_y) {
  FlatParameterGroup& group = block_group(layer);
  group.Gather();
  group.BeginGradient();  // the block's full gradient, attached as its parameters' .grad
  NotePeak();
  torch::Tensor dx;
  {
    torch::AutoGradMode autograd(true);  // the engine runs backward functions without it
    torch::Tensor input = x.detach().requires_grad_(true);
    torch::Tensor y = RunTransformedBlock(*model_, layer, input, mask, nullptr);
    torch::autograd::backward({y}, {grad_y});
    dx = input.grad();
  }
  group.ReduceGradients();  // adds this micro-batch's block gradient to the owned range
  group.Release();
  return dx;
}

}  // namespace headroom::worker
