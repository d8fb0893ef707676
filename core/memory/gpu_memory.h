// GPU memory as the training process sees it. core/ cannot include CUDA or LibTorch, so
// this is an interface: the worker implements it from the CUDA caching allocator
// (c10::cuda::CUDACachingAllocator device stats: allocated/reserved current and peak,
// num_alloc_retries) and cudaMemGetInfo; CPU builds use NullGpuMemorySource.
//
// What the guard forecasts on the GPU is `reserved_bytes` (what the allocator holds from
// the device; a cudaMalloc fails when reserved + request exceeds what is free) and, for the
// per-step peak, the reserved peak (peak_bytes). The limit is total_bytes.
#pragma once

#include <cstdint>

namespace headroom::memory {

struct GpuMemorySample {
  bool present = false;              // false: no GPU (all other fields 0)
  int64_t allocated_bytes = 0;       // live tensors
  int64_t reserved_bytes = 0;        // held by the caching allocator (>= allocated)
  int64_t peak_bytes = 0;            // reserved peak since the last ResetPeak()
  int64_t allocated_peak_bytes = 0;  // allocated peak since the last ResetPeak()
  int64_t total_bytes = 0;           // device memory (cudaMemGetInfo total)
  int64_t free_bytes = 0;            // free on the device (cudaMemGetInfo free)
  int64_t alloc_retries = 0;         // allocator retries (cache flushed to satisfy a malloc): a near-OOM sign
};

class GpuMemorySource {
 public:
  virtual ~GpuMemorySource() = default;
  virtual GpuMemorySample Read() = 0;
  // Starts a new peak window (called at the start of each step).
  virtual void ResetPeak() = 0;
};

// No GPU: Read() returns present=false.
class NullGpuMemorySource final : public GpuMemorySource {
 public:
  GpuMemorySample Read() override { return {}; }
  void ResetPeak() override {}
};

}  // namespace headroom::memory
