// A model's parameters and gradients as flat buffers, sharded over the ranks ZeRO-style.
//
// Layout: see flat_layout.h (padded to a multiple of the world size; rank r owns one
// equal contiguous range). The model's parameter tensors stay the same objects (the
// module and autograd keep using them); set_data() re-points each at a view of the flat
// buffer, and each .grad at a view of the flat gradient buffer, so backward accumulates
// straight into the flat gradient and no copy in or out is ever needed.
//
// What each rank holds between steps (what ResidentBytes() counts):
//   stage 0: full parameters, full gradients           (optimizer: full, see ShardedAdamW)
//   stage 1: full parameters, full gradients           (optimizer: owned range)
//   stage 2: full parameters, owned gradient range     (optimizer: owned range)
//   stage 3: owned parameter range, owned gradient range (optimizer: owned range)
// Stage 2/3 allocate the full gradient buffer for a backward (ZeroGrad/BeginGradient)
// and free it in ReduceGradients(), which reduce_scatters it and adds the result to the
// owned range; several backward/reduce rounds accumulate until the next ZeroGrad.
// Stage 3 allocates the full parameter buffer in Gather() and frees it in Release().
// One group gathers all its parameters at once: to gather one layer at a time, give each
// layer its own group (model_shards.h does, one per transformer block).
//
// Contract:
//   - Collective: the constructor, Gather (stage 3), ReduceGradients and
//     PublishOwnedParameters are called by every rank in the same order.
//   - The constructor broadcasts rank 0's values, so every rank starts identical.
//   - Parameters must all be floating point of one dtype and on one device (the
//     communicator's device: CPU for Gloo, CUDA for NCCL).
//   - Stage 3: parameters are empty tensors unless gathered; using the model without
//     Gather() first is a caller bug (shapes will not match).
//   - A frozen group (trainable false: the frozen base of a LoRA job at stage 3,
//     model_shards.h) holds parameters only, sharded and gathered as above, and never a
//     gradient or a bf16 copy: its parameters are already in the dtype the passes read.
//     The gradient and inference-copy calls throw std::logic_error on it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/base/non_copyable.h"
#include "worker/comm/communicator.h"
#include "worker/sharding/flat_layout.h"
#include "worker/sharding/sharding_options.h"

namespace headroom::worker {

// Bytes of the buffers a rank holds, by component (tensor storage, not process RSS).
struct ShardedBytes {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer = 0;
  int64_t inference_weights = 0;  // the bf16 copies (FlatParameterGroup::RefreshInferenceCopy)
  int64_t frozen = 0;             // frozen groups' parameters (not in .parameters)
  int64_t total() const { return parameters + gradients + optimizer + inference_weights + frozen; }
};

class FlatParameterGroup : NonCopyable {
 public:
  FlatParameterGroup(const std::vector<std::pair<std::string, torch::Tensor>>& params, Communicator& comm,
                     ShardingOptions options, bool trainable = true);

  const FlatLayout& layout() const { return layout_; }
  const ShardingOptions& options() const { return options_; }
  int stage() const { return options_.stage; }
  bool trainable() const { return trainable_; }
  Communicator& comm() { return comm_; }
  FlatRange owned() const { return owned_; }
  torch::Device device() const { return device_; }
  torch::ScalarType dtype() const { return dtype_; }
  // The parameter tensors, in layout order (the model's own objects).
  const std::vector<torch::Tensor>& parameters() const { return params_; }

  // Stage 3: allocate the full buffer, all_gather every shard into it, re-point the
  // parameters at it. Other stages (or already gathered): nothing.
  void Gather();
  // Stage 3: drop the full buffer and empty the parameters (an unreduced gradient goes
  // with it: call ReduceGradients() first). Other stages: nothing.
  void Release();
  bool gathered() const { return flat_.defined(); }

  // Zero the gradients before a mini-batch and get ready for its backward:
  // ZeroOwnedGradient() then BeginGradient().
  void ZeroGrad();
  // Zero what the optimizer will read: the full buffer at stage 0/1, the owned range at
  // stage 2/3 (no full buffer is allocated).
  void ZeroOwnedGradient();
  // Stage 2/3: allocate the full gradient buffer (zeros) for one backward and attach it
  // as the parameters' .grad (stage 3: now if gathered, else at Gather()). Stage 0/1:
  // nothing (their full buffer is permanent and accumulates until ZeroGrad).
  void BeginGradient();
  // Sum the gradients over the ranks: stage 0/1 all_reduce the full buffer in buckets
  // (once per ZeroGrad); stage 2/3 reduce_scatter it in buckets, add that to the owned
  // range, and free the full buffer (once per BeginGradient).
  void ReduceGradients();

  // The reduced gradient of `range` after ReduceGradients(): any range of the full
  // buffer at stage 0/1, only owned() at stage 2/3.
  torch::Tensor Gradient(FlatRange range);
  // The parameters of `range`, writable: any range when the full buffer is present,
  // only owned() at stage 3 (the shard, on host when offloaded).
  torch::Tensor Parameters(FlatRange range);
  // After the optimizer updated owned(): stage 1/2 all_gather every rank's range into
  // the full buffer; stage 3 releases a gathered (now stale) buffer; stage 0 nothing.
  void PublishOwnedParameters();

  // bf16 copies of the parameters for the passes without gradient (rollout, old
  // log-probs; see inference_weights.h). Neither call is collective.
  // RefreshInferenceCopy() rounds the current parameters into the copy: stage 0-2 the full
  // buffer on the device (2 bytes per element), stage 3 the owned range, at the shard's
  // home (host when offloaded).
  void RefreshInferenceCopy();
  // true: the parameters read the copy (stage 0-2 now; stage 3 from the next Gather(),
  // which gathers the bf16 shards: half the bytes of fp32). false: back to the fp32
  // parameters. Either way stage 3 first releases what is gathered (the other kind).
  // While on, no gradient is attached: run no backward. std::logic_error when the copy
  // was never refreshed.
  void UseInferenceCopy(bool on);
  bool using_inference_copy() const { return use_inference_; }
  // The copy: the full padded buffer (stage 0-2) or the owned range (stage 3); undefined
  // before the first refresh.
  const torch::Tensor& inference_copy() const { return inference_; }

  ShardedBytes ResidentBytes() const;  // .optimizer is left 0 (the optimizer adds it)

 private:
  torch::Tensor FullView(const torch::Tensor& flat, FlatRange range) const;
  void AttachGradients();
  void DetachGradients();
  void PointParametersAt(const torch::Tensor& flat);
  // all_gather `shard` (owned().numel() elements, any device) into `flat` in buckets,
  // each through a staging buffer, so `shard` may be `flat`'s own owned range.
  void AllGatherInto(const torch::Tensor& shard, torch::Tensor& flat);

  Communicator& comm_;
  ShardingOptions options_;
  FlatLayout layout_;
  FlatRange owned_;
  void RequireTrainable(const char* what) const;

  bool trainable_ = true;
  torch::Device device_{torch::kCPU};
  torch::ScalarType dtype_ = torch::kFloat32;
  std::vector<torch::Tensor> params_;
  torch::Tensor flat_;         // full padded parameters (stage 3: only while gathered)
  torch::Tensor param_shard_;  // stage 3: the owned range, the parameters' home
  torch::Tensor flat_grad_;    // full padded gradients (stage 2/3: only during backward)
  torch::Tensor grad_shard_;   // stage 2/3: the reduced owned range
  torch::Tensor inference_;    // bf16 copy: full padded (stage 0-2) or owned range (stage 3)
  bool use_inference_ = false;
};

}  // namespace headroom::worker
