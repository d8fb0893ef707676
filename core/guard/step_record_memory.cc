#include "core/guard/step_record_memory.h"

namespace headroom::guard {

StepMemory StepMemoryOf(const protocol::StepRecord& r) {
  StepMemory m;
  m.step = static_cast<int>(r.step);
  m.host_bytes = r.host_bytes;
  m.host_peak_bytes = r.host_peak_bytes;
  m.host_limit_bytes = r.host_limit_bytes;
  m.gpu_bytes = r.gpu_reserved_bytes;
  m.gpu_peak_bytes = r.gpu_peak_bytes;
  m.gpu_limit_bytes = r.gpu_total_bytes;
  // What the step's activation peak follows: its largest micro-batch (a worker that did
  // not write it: the step's tokens, the same whenever one micro-batch holds the step).
  m.tokens = r.micro_batch_tokens > 0 ? r.micro_batch_tokens : r.tokens;
  return m;
}

void SetForecastFields(const Forecast& f, protocol::StepRecord& r) {
  r.host_forecast_steps = f.host.steps_to_limit;
  r.host_threshold_steps = f.host.steps_to_threshold;
  r.host_growth_bytes_per_step = f.host.growth_bytes_per_step;
  r.gpu_forecast_steps = f.gpu.steps_to_limit;
  r.gpu_threshold_steps = f.gpu.steps_to_threshold;
  r.gpu_growth_bytes_per_step = f.gpu.growth_bytes_per_step;
}

}  // namespace headroom::guard
