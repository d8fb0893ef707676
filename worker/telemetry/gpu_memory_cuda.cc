// CUDA builds only (HEADROOM_WITH_CUDA; needs a CUDA LibTorch).
#include <spdlog/spdlog.h>

#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>

#include "worker/telemetry/gpu_memory_source.h"
#include "worker/torch_version.h"

namespace headroom::worker {
namespace {

// LibTorch 2.5 moved the allocator's statistics types from the CUDA allocator to the
// device-generic one (c10/core/CachingDeviceAllocator.h, which CUDACachingAllocator.h includes).
#if HEADROOM_TORCH_AT_LEAST(2, 5)
using StatType = c10::CachingDeviceAllocator::StatType;
#else
using StatType = c10::cuda::CUDACachingAllocator::StatType;
#endif

class CudaGpuMemorySource final : public memory::GpuMemorySource {
 public:
  explicit CudaGpuMemorySource(int device) : device_(device) {}

  memory::GpuMemorySample Read() override {
    memory::GpuMemorySample s;
    s.present = true;
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device_));
    const auto agg = static_cast<size_t>(StatType::AGGREGATE);
    s.allocated_bytes = stats.allocated_bytes[agg].current;
    s.allocated_peak_bytes = stats.allocated_bytes[agg].peak;
    s.reserved_bytes = stats.reserved_bytes[agg].current;
    s.peak_bytes = stats.reserved_bytes[agg].peak;
    s.alloc_retries = stats.num_alloc_retries;
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(device_) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      s.free_bytes = static_cast<int64_t>(free_bytes);
      s.total_bytes = static_cast<int64_t>(total_bytes);
    }
    return s;
  }

  void ResetPeak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device_)); }

 private:
  int device_;
};

}  // namespace

std::unique_ptr<memory::GpuMemorySource> MakeCudaGpuMemorySource(int device_index) {
  return std::make_unique<CudaGpuMemorySource>(device_index);
}

}  // namespace headroom::worker
