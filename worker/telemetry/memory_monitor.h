// Per-step memory of this worker: host from the core probe (cgroup working set, else
// /proc) with a background peak sampler, GPU from a GpuMemorySource.
//
// Usage: BeginStep() before a step, EndStep() after it; EndStep() writes the end-of-step
// values, the peaks inside the step and the limits into the step's record (the memory
// part of protocol::StepRecord: one shape from the probe to the guard).
//
// Host limit: the cgroup's limit when one applies; otherwise spec.resources.memory acts
// as a soft limit (what the pod would get on Kubernetes), capped at the machine's memory.
#pragma once

#include <cstdint>
#include <memory>

#include "core/memory/gpu_memory.h"
#include "core/memory/host_memory.h"
#include "core/memory/peak_sampler.h"
#include "core/protocol/step_record.h"

namespace headroom::worker {

class MemoryMonitor {
 public:
  MemoryMonitor(int64_t spec_limit_bytes, std::unique_ptr<memory::GpuMemorySource> gpu);
  ~MemoryMonitor();

  void BeginStep();
  void EndStep(protocol::StepRecord& record);
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
