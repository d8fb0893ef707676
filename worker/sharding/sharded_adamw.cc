#include <spdlog/spdlog.h>

#include "worker/sharding/sharded_adamw.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace headroom::worker {

ShardedAdamW::ShardedAdamW(FlatParameterGroup& group, AdamWConfig config) : group_(group), config_(config) {
  if (!(config_.lr >= 0) || !(config_.eps >= 0) || !(config_.weight_decay >= 0) ||
      !(config_.beta1 >= 0 && config_.beta1 < 1) || !(config_.beta2 >= 0 && config_.beta2 < 1)) {
    throw std::invalid_argument("sharded AdamW: lr, eps, weight_decay must be >= 0 and betas in [0, 1)");
  }
  range_ = group_.stage() == 0 ? FlatRange{0, group_.layout().padded_numel()} : group_.owned();
  state_device_ = group_.options().offload_optimizer ? torch::Device(torch::kCPU) : group_.device();
  const auto opts = torch::TensorOptions().dtype(group_.dtype()).device(state_device_);
  exp_avg_ = torch::zeros({range_.numel()}, opts);
  exp_avg_sq_ = torch::zeros({range_.numel()}, opts);
}

double ShardedAdamW::LocalSquaredGradNorm() {
  // In fp64 for accuracy, a chunk at a time: converting the whole range at once would
  // hold two fp64 copies of it (the cast and its square), 4x the gradient's own bytes,
  // at the step's peak.
  torch::NoGradGuard no_grad;
  auto grad = group_.Gradient(group_.owned());
  const int64_t chunk = group_.options().bucket_numel;
  auto sq = torch::zeros({1}, grad.options().dtype(torch::kFloat64));
  for (int64_t off = 0; off < grad.numel(); off += chunk) {
    sq += grad.narrow(0, off, std::min(chunk, grad.numel() - off)).to(torch::kFloat64).pow(2).sum();
  }
  return sq.item<double>();
}

double ShardedAdamW::GlobalGradNorm() {
  // Each rank sums the squares of its owned range once (at stage 0/1 every rank has the
  // whole reduced gradient, but owned ranges still partition it), then one all_reduce.
  auto sq = torch::full({1}, LocalSquaredGradNorm(),
                        torch::TensorOptions().dtype(torch::kFloat64).device(group_.comm().device()));
  group_.comm().all_reduce(sq);
  return std::sqrt(sq.cpu().item<double>());
}

double ShardedAdamW::Step(double max_grad_norm) {
  const double norm = GlobalGradNorm();
  // torch::nn::utils::clip_grad_norm_: scale by max/(norm + 1e-6) when that is < 1.
  const double coef = max_grad_norm / (norm + 1e-6);
  ApplyScaled(max_grad_norm > 0 && coef < 1.0 ? coef : 1.0);
  return norm;
}

void ShardedAdamW::ApplyScaled(double grad_scale) {
  torch::NoGradGuard no_grad;
  auto grad = group_.Gradient(range_);
  if (grad_scale != 1.0) grad.mul_(grad_scale);
  auto params = group_.Parameters(range_);

  ++step_;
  const double lr = config_.lr;
  const double bias_correction1 = 1 - std::pow(config_.beta1, static_cast<double>(step_));
  const double bias_correction2 = 1 - std::pow(config_.beta2, static_cast<double>(step_));
  // In chunks: the update is element-wise, so this gives the same bits as one pass, and
  // the temporaries (the denominator; the host copies when offloaded) stay one chunk in
  // size instead of adding up to two more optimizer-sized buffers at the step's peak.
  const int64_t n = range_.numel();
  const int64_t chunk = group_.options().bucket_numel;
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t len = std::min(chunk, n - off);
    auto g = grad.narrow(0, off, len).to(state_device_);
    auto target = params.narrow(0, off, len);
    auto p = target.to(state_device_);  // the same tensor unless offloaded
    auto m = exp_avg_.narrow(0, off, len);
    auto v = exp_avg_sq_.narrow(0, off, len);
    if (config_.weight_decay != 0) p.mul_(1 - lr * config_.weight_decay);
    m.mul_(config_.beta1).add_(g, 1 - config_.beta1);
    v.mul_(config_.beta2).addcmul_(g, g, 1 - config_.beta2);
    auto denom = v.sqrt().div_(std::sqrt(bias_correction2)).add_(config_.eps);
    p.addcdiv_(m, denom, -lr / bias_correction1);
    if (!p.is_same(target)) target.copy_(p);
  }

  group_.PublishOwnedParameters();
}

int64_t ShardedAdamW::resident_bytes() const {
  return (exp_avg_.numel() + exp_avg_sq_.numel()) * static_cast<int64_t>(exp_avg_.element_size());
}

void ShardedAdamW::SetState(int64_t step, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq) {
  if (step < 0) throw std::invalid_argument("sharded AdamW: negative step " + std::to_string(step));
  if (exp_avg.numel() != range_.numel() || exp_avg_sq.numel() != range_.numel()) {
    throw std::invalid_argument("sharded AdamW: state of " + std::to_string(exp_avg.numel()) + "/" +
                                std::to_string(exp_avg_sq.numel()) + " elements for a range of " +
                                std::to_string(range_.numel()));
  }
  torch::NoGradGuard no_grad;
  step_ = step;
  exp_avg_.copy_(exp_avg.reshape({-1}));
  exp_avg_sq_.copy_(exp_avg_sq.reshape({-1}));
}

}  // namespace headroom::worker
