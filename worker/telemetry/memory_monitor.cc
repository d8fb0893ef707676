#include "worker/telemetry/memory_monitor.h"

#include <algorithm>

namespace headroom::worker {

MemoryMonitor::MemoryMonitor(int64_t spec_limit_bytes, std::unique_ptr<memory::GpuMemorySource> gpu)
    : probe_("/"),
      gpu_(gpu ? std::move(gpu) : std::make_unique<memory::NullGpuMemorySource>()),
      sampler_([this] { return probe_.Read().working_set_bytes; }, std::chrono::milliseconds(5)),
      spec_limit_bytes_(spec_limit_bytes) {
  source_ = probe_.Read().source;
  sampler_.Start();
}

MemoryMonitor::~MemoryMonitor() { sampler_.Stop(); }

int64_t MemoryMonitor::LimitOf(const memory::HostMemorySample& s) const {
  if (s.source != "proc" && s.limit_bytes > 0) return s.limit_bytes;
  if (spec_limit_bytes_ > 0 && s.limit_bytes > 0) return std::min(spec_limit_bytes_, s.limit_bytes);
  return spec_limit_bytes_ > 0 ? spec_limit_bytes_ : s.limit_bytes;
}

void MemoryMonitor::BeginStep() {
  sampler_.Reset();
  gpu_->ResetPeak();
}

MemoryReading MemoryMonitor::EndStep() {
  const auto host = probe_.Read();
  MemoryReading reading;
  reading.host_bytes = host.working_set_bytes;
  reading.host_peak_bytes = std::max(sampler_.TakePeak(), reading.host_bytes);
  reading.host_limit_bytes = LimitOf(host);
  reading.gpu = gpu_->Read();
  return reading;
}

}  // namespace headroom::worker
