// Parameters and gradients laid out in one contiguous buffer each.
//
// Why: ZeRO shards a flat buffer by offset, and gradient reduction is one collective per
// bucket rather than one per tensor. After construction every parameter (and its .grad)
// is a view into the flat buffers, in OrderedParameters() order, so the model, the
// optimizer and a communicator all see the same memory.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "worker/model/transformer.h"

namespace headroom::worker {

struct ParameterSlot {
  std::string name;
  torch::Tensor param;  // a view of flat()[offset, offset + numel)
  int64_t offset = 0;
  int64_t numel = 0;
};

class FlatParameters {
 public:
  // Copies the parameters into one buffer and re-points each parameter at its slice;
  // gradients become slices of a zeroed flat gradient buffer.
  explicit FlatParameters(const NamedTensors& params);

  torch::Tensor flat() const { return flat_; }
  torch::Tensor flat_grad() const { return flat_grad_; }
  const std::vector<ParameterSlot>& slots() const { return slots_; }
  int64_t numel() const { return flat_.numel(); }
  std::vector<torch::Tensor> parameters() const;
  void ZeroGrad() { flat_grad_.zero_(); }

 private:
  torch::Tensor flat_;
  torch::Tensor flat_grad_;
  std::vector<ParameterSlot> slots_;
};

}  // namespace headroom::worker
