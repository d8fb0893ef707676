// bf16 autocast for the duration of a forward on a CUDA device: matmuls run in bf16 while
// the weights stay fp32. On any other device nothing changes (the CPU build keeps fp32,
// where bf16 matmuls would be slower, not faster).
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
  explicit Bf16Autocast(const c10::Device& device);
  ~Bf16Autocast();

 private:
  bool active_ = false;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Undefined;
};

// This thread's CUDA autocast state (what Bf16Autocast sets).
bool CudaAutocastEnabled();
c10::ScalarType CudaAutocastDtype();

// x cast to the autocast dtype when this thread autocasts and x is a floating CUDA tensor
// (what an autocast matmul would multiply it as); x itself otherwise.
at::Tensor InAutocastDtype(const at::Tensor& x);

}  // namespace headroom::worker
