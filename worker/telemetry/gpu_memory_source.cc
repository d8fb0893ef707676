#include <spdlog/spdlog.h>

#include "worker/telemetry/gpu_memory_source.h"

namespace headroom::worker {

std::unique_ptr<memory::GpuMemorySource> MakeGpuMemorySource(const torch::Device& device) {
#if defined(HEADROOM_WITH_CUDA)
  if (device.is_cuda()) return MakeCudaGpuMemorySource(device.has_index() ? device.index() : 0);
#else
  (void)device;
#endif
  return std::make_unique<memory::NullGpuMemorySource>();
}

}  // namespace headroom::worker
