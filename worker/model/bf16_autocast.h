// bf16 autocast for the duration of a forward on a CUDA device: matmuls run in bf16 while
// the weights stay fp32. On any other device nothing changes (the CPU build keeps fp32,
// where bf16 matmuls would be slower, not faster), unless asked for with also_on_cpu:
// passes over bf16 weights (inference_weights.h) need their fp32 activations cast to
// bf16 on the CPU too, which CPU autocast does.
//
// Scoped like Python's torch.autocast: nests, restores the previous enabled flag and dtype
// on exit, and drops the cache of cast weights when the outermost scope ends. The state is
// per thread.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "core/base/non_copyable.h"

namespace headroom::worker {

class Bf16Autocast : NonCopyable {
 public:
  explicit Bf16Autocast(const c10::Device& device, bool also_on_cpu = false);
  ~Bf16Autocast();

 private:
  bool active_ = false;
  c10::DeviceType type_ = c10::DeviceType::CUDA;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Undefined;
};

// This thread's CUDA autocast state (what Bf16Autocast sets).
bool CudaAutocastEnabled();
c10::ScalarType CudaAutocastDtype();

// x cast to the autocast dtype when this thread autocasts on x's device (CUDA, or CPU
// under also_on_cpu) and x is floating (what an autocast matmul would multiply it as); x
// itself otherwise.
at::Tensor InAutocastDtype(const at::Tensor& x);

}  // namespace headroom::worker
