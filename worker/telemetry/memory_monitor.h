// Per-step memory of this worker: host from the core probe (cgroup working set, else
// /proc) with a background peak sampler, GPU from a GpuMemorySource.
//
// Usage: BeginStep() before a step, EndStep() after it; EndStep() returns the end-of-step
// values and the peaks inside the step.
//
// Host limit: the cgroup's limit when one applies; otherwise spec.resources.memory acts
// as a soft limit (what the pod would get on Kubernetes), capped at the machine's memory.
#pragma once

#include <cstdint>
#include <memory>

#include "core/memory/gpu_memory.h"
#include "core/memory/host_memory.h"
#include "core/memory/peak_sampler.h"

namespace headroom::worker {

struct StepMemoryReading {
  int64_t host_bytes = 0, host_peak_bytes = 0, host_limit_bytes = 0;
  memory::GpuMemorySample gpu;
};

class MemoryMonitor {
 public:
  MemoryMonitor(int64_t spec_limit_bytes, std::unique_ptr<memory::GpuMemorySource> gpu);
  ~MemoryMonitor();

  void BeginStep();
  StepMemoryReading EndStep();
  const char* host_source() const { return source_.c_str(); }

 private:
  int64_t LimitOf(const memory::HostMemorySample& s) const;

  memory::HostMemoryProbe probe_;
  std::unique_ptr<memory::GpuMemorySource> gpu_;
  memory::PeakSampler sampler_;
  int64_t spec_limit_bytes_;
  std::string source_;
};

}  // namespace headroom::worker
