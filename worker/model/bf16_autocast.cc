#include "worker/model/bf16_autocast.h"

#include <ATen/autocast_mode.h>

#include "worker/torch_version.h"

namespace headroom::worker {
namespace {

// LibTorch 2.4 gave autocast's controls a device-type argument and deprecated the
// per-device ones, which print a warning on every call.
#if HEADROOM_TORCH_AT_LEAST(2, 4)
bool AutocastEnabled(c10::DeviceType type) { return at::autocast::is_autocast_enabled(type); }
c10::ScalarType AutocastDtype(c10::DeviceType type) { return at::autocast::get_autocast_dtype(type); }
void SetAutocastEnabled(c10::DeviceType type, bool enabled) { at::autocast::set_autocast_enabled(type, enabled); }
void SetAutocastDtype(c10::DeviceType type, c10::ScalarType dtype) { at::autocast::set_autocast_dtype(type, dtype); }
#else
bool AutocastEnabled(c10::DeviceType type) {
  return type == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
c10::ScalarType AutocastDtype(c10::DeviceType type) {
  return type == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                       : at::autocast::get_autocast_cpu_dtype();
}
void SetAutocastEnabled(c10::DeviceType type, bool enabled) {
  type == c10::DeviceType::CUDA ? at::autocast::set_enabled(enabled) : at::autocast::set_cpu_enabled(enabled);
}
void SetAutocastDtype(c10::DeviceType type, c10::ScalarType dtype) {
  type == c10::DeviceType::CUDA ? at::autocast::set_autocast_gpu_dtype(dtype)
                                : at::autocast::set_autocast_cpu_dtype(dtype);
}
#endif

}  // namespace

bool CudaAutocastEnabled() { return AutocastEnabled(c10::DeviceType::CUDA); }
c10::ScalarType CudaAutocastDtype() { return AutocastDtype(c10::DeviceType::CUDA); }

at::Tensor InAutocastDtype(const at::Tensor& x) {
  if (!x.is_floating_point() || !(x.is_cuda() || x.is_cpu())) return x;
  const c10::DeviceType type = x.device().type();
  if (!AutocastEnabled(type)) return x;
  return x.to(AutocastDtype(type));
}

Bf16Autocast::Bf16Autocast(const c10::Device& device, bool also_on_cpu) {
  if (!device.is_cuda() && !(also_on_cpu && device.is_cpu())) return;
  active_ = true;
  type_ = device.type();
  previous_enabled_ = AutocastEnabled(type_);
  previous_dtype_ = AutocastDtype(type_);
  SetAutocastDtype(type_, c10::ScalarType::BFloat16);
  SetAutocastEnabled(type_, true);
  at::autocast::increment_nesting();
}

Bf16Autocast::~Bf16Autocast() {
  if (!active_) return;
  // The cast copies of the weights live until the outermost scope ends, as in torch.autocast.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  SetAutocastEnabled(type_, previous_enabled_);
  SetAutocastDtype(type_, previous_dtype_);
}

}  // namespace headroom::worker
