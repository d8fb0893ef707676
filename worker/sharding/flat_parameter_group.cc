#include <spdlog/spdlog.h>

#include "worker/sharding/flat_parameter_group.h"

#include <algorithm>
#include <stdexcept>

namespace headroom::worker {

namespace {

int64_t Bytes(const torch::Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0; }

// What a collective moves: bf16 as its bytes (a gather copies bytes, and Gloo has no bf16),
// every other dtype as it is.
torch::Tensor OnTheWire(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? t.view(torch::kUInt8) : t;
}

}  // namespace

FlatParameterGroup::FlatParameterGroup(const std::vector<std::pair<std::string, torch::Tensor>>& params,
                                       Communicator& comm, ShardingOptions options, bool trainable)
    : comm_(comm), options_(options), layout_(params, comm.world_size()), trainable_(trainable) {
  if (options_.stage < 0 || options_.stage > 3) {
    throw std::invalid_argument("spec.sharding.stage: must be 0, 1, 2 or 3, got " + std::to_string(options_.stage));
  }
  if (options_.bucket_numel < 1) throw std::invalid_argument("sharding: bucket_numel must be >= 1");
  owned_ = layout_.Shard(comm_.rank());
  const auto& first = params.front().second;
  device_ = first.device();
  dtype_ = first.scalar_type();
  for (const auto& [name, p] : params) {
    if (!p.is_floating_point() || p.scalar_type() != dtype_ || p.device() != device_) {
      throw std::invalid_argument("sharding: parameter " + name + " is " + std::string(c10::toString(p.scalar_type())) +
                                  " on " + p.device().str() + ", expected floating " +
                                  std::string(c10::toString(dtype_)) + " on " + device_.str() + " like " +
                                  params.front().first);
    }
    params_.push_back(p);
  }
  torch::NoGradGuard no_grad;
  const auto opts = torch::TensorOptions().dtype(dtype_).device(device_);
  flat_ = torch::zeros({layout_.padded_numel()}, opts);
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& slot = layout_.slots()[i];
    flat_.narrow(0, slot.offset, slot.numel).copy_(params_[i].reshape({-1}));
  }
  // Every rank starts from rank 0's values, whatever seed each used.
  comm_.broadcast(flat_, 0);
  PointParametersAt(flat_);
  if (!trainable_) {
    // Frozen: no gradient buffer at any stage.
  } else if (options_.stage >= 2) {
    grad_shard_ = torch::zeros({owned_.numel()}, opts);
  } else {
    flat_grad_ = torch::zeros({layout_.padded_numel()}, opts);
    AttachGradients();
  }
  if (options_.stage == 3) {
    auto home = options_.offload_params ? torch::Device(torch::kCPU) : device_;
    param_shard_ = flat_.narrow(0, owned_.begin, owned_.numel()).clone().to(home);
    Release();
  }
}

void FlatParameterGroup::PointParametersAt(const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& slot = layout_.slots()[i];
    torch::Tensor p = params_[i];
    // set_data keeps the Parameter object (module, autograd and callers hold it) and
    // swaps its storage for the view.
    p.set_data(flat.narrow(0, slot.offset, slot.numel).view(slot.shape));
  }
}

void FlatParameterGroup::AttachGradients() {
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& slot = layout_.slots()[i];
    params_[i].mutable_grad() = flat_grad_.narrow(0, slot.offset, slot.numel).view(slot.shape);
  }
}

void FlatParameterGroup::DetachGradients() {
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
}

void FlatParameterGroup::Gather() {
  if (options_.stage != 3 || flat_.defined()) return;
  // Called inside the rollout's InferenceMode too (per-layer gathering): the buffer must
  // be a normal tensor, since the same parameters later take part in autograd.
  c10::InferenceMode normal_tensors(false);
  torch::NoGradGuard no_grad;
  const torch::Tensor& shard = use_inference_ ? inference_ : param_shard_;
  flat_ = torch::zeros({layout_.padded_numel()}, torch::TensorOptions().dtype(shard.scalar_type()).device(device_));
  AllGatherInto(shard, flat_);
  PointParametersAt(flat_);
  if (flat_grad_.defined() && !use_inference_) AttachGradients();  // ZeroGrad() came first
}

void FlatParameterGroup::RequireTrainable(const char* what) const {
  if (!trainable_) throw std::logic_error(std::string("sharding: ") + what + " on a frozen parameter group");
}

void FlatParameterGroup::RefreshInferenceCopy() {
  RequireTrainable("RefreshInferenceCopy");
  c10::InferenceMode normal_tensors(false);  // refreshed inside a rollout's scope too
  torch::NoGradGuard no_grad;
  const torch::Tensor& source = options_.stage == 3 ? param_shard_ : flat_;
  if (!inference_.defined()) inference_ = torch::empty(source.sizes(), source.options().dtype(torch::kBFloat16));
  inference_.copy_(source);  // round to nearest even, as autocast's cast of a weight
  if (use_inference_ && options_.stage < 3) PointParametersAt(inference_);
}

void FlatParameterGroup::UseInferenceCopy(bool on) {
  RequireTrainable("UseInferenceCopy");
  if (on && !inference_.defined()) throw std::logic_error("sharding: inference copy used before its first refresh");
  if (on == use_inference_) return;
  c10::InferenceMode normal_tensors(false);
  if (options_.stage == 3) {
    Release();
    use_inference_ = on;
    return;
  }
  use_inference_ = on;
  PointParametersAt(on ? inference_ : flat_);
}

void FlatParameterGroup::Release() {
  if (options_.stage != 3 || !flat_.defined()) return;
  c10::InferenceMode normal_tensors(false);  // as in Gather()
  torch::NoGradGuard no_grad;
  DetachGradients();
  auto empty = torch::empty({0}, torch::TensorOptions().dtype(dtype_).device(device_));
  for (auto& p : params_) p.set_data(empty);
  flat_ = torch::Tensor();
  flat_grad_ = torch::Tensor();
}

void FlatParameterGroup::ZeroGrad() {
  ZeroOwnedGradient();
  BeginGradient();
}

void FlatParameterGroup::ZeroOwnedGradient() {
  RequireTrainable("ZeroOwnedGradient");
  torch::NoGradGuard no_grad;
  (options_.stage >= 2 ? grad_shard_ : flat_grad_).zero_();
}

void FlatParameterGroup::BeginGradient() {
  RequireTrainable("BeginGradient");
  if (options_.stage < 2) return;
  torch::NoGradGuard no_grad;
  if (!flat_grad_.defined()) {
    flat_grad_ = torch::zeros({layout_.padded_numel()}, torch::TensorOptions().dtype(dtype_).device(device_));
  } else {
    flat_grad_.zero_();
  }
  // Stage 3 before Gather(): parameters are empty, so the views attach at Gather time
  // only if the shapes match; attach whenever the parameters are materialised.
  if (options_.stage < 3 || flat_.defined()) AttachGradients();
}

void FlatParameterGroup::ReduceGradients() {
  RequireTrainable("ReduceGradients");
  torch::NoGradGuard no_grad;
  if (!flat_grad_.defined()) throw std::logic_error("sharding: ReduceGradients without ZeroGrad/backward");
  const int64_t bucket = options_.bucket_numel;
  if (options_.stage <= 1) {
    for (int64_t off = 0; off < layout_.padded_numel(); off += bucket) {
      auto part = flat_grad_.narrow(0, off, std::min(bucket, layout_.padded_numel() - off));
      comm_.all_reduce(part);
    }
    return;
  }
  // Reduce-scatter bucket k: every rank's chunk [k*B, (k+1)*B) of its range, stacked.
  const int world = layout_.world();
  const int64_t shard = layout_.shard_numel();
  auto by_rank = flat_grad_.view({world, shard});
  for (int64_t off = 0; off < shard; off += bucket) {
    const int64_t len = std::min(bucket, shard - off);
    auto input = by_rank.narrow(1, off, len).contiguous();
    auto reduced = torch::empty({len}, grad_shard_.options());
    comm_.reduce_scatter(input.view({-1}), reduced);
    grad_shard_.narrow(0, off, len).add_(reduced);
  }
  DetachGradients();
  flat_grad_ = torch::Tensor();  // the full gradient is not kept between steps
}

torch::Tensor FlatParameterGroup::FullView(const torch::Tensor& flat, FlatRange range) const {
  if (range.begin < 0 || range.end > layout_.padded_numel() || range.end < range.begin) {
    throw std::out_of_range("sharding: range [" + std::to_string(range.begin) + ", " + std::to_string(range.end) +
                            ") outside the flat buffer of " + std::to_string(layout_.padded_numel()));
  }
  return flat.narrow(0, range.begin, range.numel());
}

torch::Tensor FlatParameterGroup::Gradient(FlatRange range) {
  RequireTrainable("Gradient");
  if (options_.stage >= 2) {
    if (range.begin != owned_.begin || range.end != owned_.end) {
      throw std::logic_error("sharding: stage " + std::to_string(options_.stage) + " keeps only the owned gradient");
    }
    return grad_shard_;
  }
  return FullView(flat_grad_, range);
}

torch::Tensor FlatParameterGroup::Parameters(FlatRange range) {
  if (options_.stage == 3) {
    if (range.begin != owned_.begin || range.end != owned_.end) {
      throw std::logic_error("sharding: stage 3 keeps only the owned parameters");
    }
    return param_shard_;
  }
  return FullView(flat_, range);
}

void FlatParameterGroup::AllGatherInto(const torch::Tensor& shard, torch::Tensor& flat) {
  const int world = layout_.world();
  const int64_t n = layout_.shard_numel();
  auto by_rank = flat.view({world, n});
  for (int64_t off = 0; off < n; off += options_.bucket_numel) {
    const int64_t len = std::min(options_.bucket_numel, n - off);
    auto input = shard.narrow(0, off, len).to(device_).contiguous();
    auto staged = torch::empty({world * len}, flat.options());
    torch::Tensor staged_wire = OnTheWire(staged);
    comm_.all_gather(OnTheWire(input), staged_wire);
    by_rank.narrow(1, off, len).copy_(staged.view({world, len}));
  }
}

void FlatParameterGroup::PublishOwnedParameters() {
  torch::NoGradGuard no_grad;
  if (options_.stage == 0) return;
  if (options_.stage == 3) {
    Release();
    return;
  }
  // The owned range is both input and part of the output, yet no copy of it is needed:
  // AllGatherInto gathers each bucket into a staging buffer before writing it back, and
  // the bucket written back to the owned range holds the values it already had. (A
  // clone of the owned range here was a transient parameter-shard-sized buffer at the
  // step's peak: the whole model at world size 1.)
  AllGatherInto(flat_.narrow(0, owned_.begin, owned_.numel()), flat_);
}

ShardedBytes FlatParameterGroup::ResidentBytes() const {
  ShardedBytes b;
  (trainable_ ? b.parameters : b.frozen) = Bytes(flat_) + Bytes(param_shard_);
  b.gradients = Bytes(flat_grad_) + Bytes(grad_shard_);
  b.inference_weights = Bytes(inference_);
  return b;
}

}  // namespace headroom::worker
