#include "worker/model/bf16_autocast.h"

#include <ATen/autocast_mode.h>

#include "worker/torch_version.h"

namespace headroom::worker {
namespace {

// LibTorch 2.4 gave autocast's controls a device-type argument and deprecated the CUDA-only
// ones, which print a warning on every call.
#if HEADROOM_TORCH_AT_LEAST(2, 4)
void SetCudaAutocastEnabled(bool enabled) { at::autocast::set_autocast_enabled(c10::DeviceType::CUDA, enabled); }
void SetCudaAutocastDtype(c10::ScalarType dtype) { at::autocast::set_autocast_dtype(c10::DeviceType::CUDA, dtype); }
#else
void SetCudaAutocastEnabled(bool enabled) { at::autocast::set_enabled(enabled); }
void SetCudaAutocastDtype(c10::ScalarType dtype) { at::autocast::set_autocast_gpu_dtype(dtype); }
#endif

}  // namespace

#if HEADROOM_TORCH_AT_LEAST(2, 4)
bool CudaAutocastEnabled() { return at::autocast::is_autocast_enabled(c10::DeviceType::CUDA); }
c10::ScalarType CudaAutocastDtype() { return at::autocast::get_autocast_dtype(c10::DeviceType::CUDA); }
#else
bool CudaAutocastEnabled() { return at::autocast::is_enabled(); }
c10::ScalarType CudaAutocastDtype() { return at::autocast::get_autocast_gpu_dtype(); }
#endif

at::Tensor InAutocastDtype(const at::Tensor& x) {
  if (!x.is_cuda() || !x.is_floating_point() || !CudaAutocastEnabled()) return x;
  return x.to(CudaAutocastDtype());
}

Bf16Autocast::Bf16Autocast(const c10::Device& device) {
  if (!device.is_cuda()) return;
  active_ = true;
  previous_enabled_ = CudaAutocastEnabled();
  previous_dtype_ = CudaAutocastDtype();
  SetCudaAutocastDtype(c10::ScalarType::BFloat16);
  SetCudaAutocastEnabled(true);
  at::autocast::increment_nesting();
}

Bf16Autocast::~Bf16Autocast() {
  if (!active_) return;
  // The cast copies of the weights live until the outermost scope ends, as in torch.autocast.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  SetCudaAutocastEnabled(previous_enabled_);
  SetCudaAutocastDtype(previous_dtype_);
}

}  // namespace headroom::worker
