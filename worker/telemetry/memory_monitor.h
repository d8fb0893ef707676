// Per-step memory of this worker: host from the core probe (cgroup working set, else
// /proc) with a background peak sampler, GPU from a GpuMemorySource.
//
// Usage: BeginStep() before a step, EndStep() after it; EndStep() returns the end-of-step
// values, the peaks inside the step and the limits (what becomes the memory part of the
// step's protocol::StepRecord, worker/train/step_report.h).
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

// One end-of-step reading.
struct MemoryReading {
  int64_t host_bytes = 0;        // working set now
  int64_t host_peak_bytes = 0;   // peak since BeginStep(), at least host_bytes
  int64_t host_limit_bytes = 0;  // the limit in force (see above); 0 = none
  memory::GpuMemorySample gpu;   // the allocator now, its peaks since BeginStep()
};

class MemoryMonitor {
 public:
  MemoryMonitor(int64_t spec_limit_bytes, std::unique_ptr<memory::GpuMemorySource> gpu);
  ~MemoryMonitor();

  void BeginStep();
  MemoryReading EndStep();
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
