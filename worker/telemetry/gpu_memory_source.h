// The GPU memory source for this build and device: the CUDA caching allocator's
// statistics in CUDA builds on a CUDA device (gpu_memory_cuda.cc), else no GPU.
#pragma once

#include <memory>

#include <torch/torch.h>

#include "core/memory/gpu_memory.h"

namespace headroom::worker {

std::unique_ptr<memory::GpuMemorySource> MakeGpuMemorySource(const torch::Device& device);

#if defined(HEADROOM_WITH_CUDA)
// gpu_memory_cuda.cc: c10::cuda::CUDACachingAllocator stats + cudaMemGetInfo.
std::unique_ptr<memory::GpuMemorySource> MakeCudaGpuMemorySource(int device_index);
#endif

}  // namespace headroom::worker
