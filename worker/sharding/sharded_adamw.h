// AdamW over the flat range a rank is responsible for, with global gradient-norm clipping.
//
// Numerically the same as torch::optim::AdamW (LibTorch 1.13 and 2.x, amsgrad off) on
// every element, preceded by torch::nn::utils::clip_grad_norm_(max_norm):
//   norm  = sqrt(sum over ALL ranks' reduced gradient elements of g^2)   (fp64 sum)
//   g    *= max_norm / (norm + 1e-6)                 when that factor is < 1
//   step += 1
//   p    *= 1 - lr * weight_decay                     (decoupled weight decay)
//   m     = beta1 m + (1 - beta1) g
//   v     = beta2 v + (1 - beta2) g^2
//   p    -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// The update is element-wise, so running it on a range gives the same bits as running it
// per tensor; only the norm (a sum) depends on how the work is split, within rounding.
//
// Which range: stage 0 steps the whole buffer on every rank (replicated optimizer);
// stages 1-3 step only the owned range and PublishOwnedParameters() shares the result.
// Padding elements have zero gradient and zero value, so they stay zero.
//
// offloadOptimizer: the moments live in host memory and the step runs there (the
// gradient range is copied to host, the parameters back); with CPU parameters this is
// the same memory, i.e. a no-op.
#pragma once

#include <cstdint>

#include <torch/torch.h>

#include "worker/sharding/flat_parameter_group.h"

namespace headroom::worker {

struct AdamWConfig {
  double lr = 3.0e-4;  // spec.grpo.learningRate
  double beta1 = 0.9;  // torch defaults
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // what the worker always used with torch::optim::AdamW
};

class ShardedAdamW {
 public:
  ShardedAdamW(FlatParameterGroup& group, AdamWConfig config);

  // Collective. After group.ReduceGradients(): clip to max_grad_norm (<= 0: no clipping),
  // update, publish the parameters. Returns the pre-clip global gradient norm.
  double Step(double max_grad_norm);

  // The global L2 norm of the reduced gradient (collective; no side effects).
  double GlobalGradNorm();
  // This rank's share of the squared norm (no collective): the sum of g^2 over the owned
  // range in fp64. The owned ranges partition the buffer, so the all_reduce (SUM) of it
  // over the ranks is the squared global norm, at every stage.
  double LocalSquaredGradNorm();
  // Collective (it publishes). Multiplies the gradient by `grad_scale` (when != 1: the
  // clip coefficient, for a norm taken over several groups), then updates and publishes.
  void ApplyScaled(double grad_scale);

  const AdamWConfig& config() const { return config_; }
  void set_lr(double lr) { config_.lr = lr; }
  FlatRange range() const { return range_; }  // the elements this rank steps
  int64_t step() const { return step_; }
  torch::Tensor exp_avg() const { return exp_avg_; }  // over range(), padded
  torch::Tensor exp_avg_sq() const { return exp_avg_sq_; }
  int64_t resident_bytes() const;

  // For checkpoint loading: replace the state (tensors over range(); step count).
  void SetState(int64_t step, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq);

 private:
  FlatParameterGroup& group_;
  AdamWConfig config_;
  FlatRange range_;
  torch::Device state_device_{torch::kCPU};
  int64_t step_ = 0;
  torch::Tensor exp_avg_;
  torch::Tensor exp_avg_sq_;
};

}  // namespace headroom::worker
