// One line of a worker's step log (design.md, Worker): what one rank measured at the end
// of one step. The reconciler reads these from every backend — log files tailed by the
// local runtime, pod logs or /metrics scrapes on Kubernetes — so the shape lives here,
// free of how it was fetched.
//
// Contract: ParseStepLogLine() accepts exactly one JSON object per line with at least an
// integer "step"; every other key is optional (absent numbers stay 0) and unknown keys are
// ignored, so the worker may add keys without breaking the runtime. A line that is not a
// step record (a banner, a half-written line, a JSON object without "step") yields
// std::nullopt and an explanation in *why when why is non-null.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace headroom::runtime {

struct StepRecord {
  int rank = 0;
  int generation = 0;            // which launch of the job produced it (set by the backend)
  int64_t step = 0;              // the step just completed, 1-based
  double reward_mean = 0;
  double loss = 0;
  double kl = 0;
  int64_t host_bytes = 0;        // end-of-step working set
  int64_t host_peak_bytes = 0;   // peak during the step
  int64_t host_limit_bytes = 0;  // the limit the worker saw (cgroup or soft limit); 0 = none
  int64_t gpu_allocated_bytes = 0;
  int64_t gpu_reserved_bytes = 0;
  int64_t gpu_peak_bytes = 0;
  int64_t gpu_total_bytes = 0;   // device capacity: the GPU "limit"; 0 = no GPU
  int64_t tokens = 0;
  int64_t next_step_tokens = 0;
  double step_seconds = 0;
  double tokens_per_second = 0;
};

std::optional<StepRecord> ParseStepLogLine(const std::string& line, std::string* why = nullptr);

// The same object back as one JSON line (used by tests and the fake worker's peers).
std::string StepRecordToJsonLine(const StepRecord& record);

}  // namespace headroom::runtime
