#include "core/guard/replay.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/guard/guard_history.h"
#include "core/guard/memory_guard.h"
#include "core/guard/planner.h"

namespace headroom::guard {

std::vector<ReplayStep> Replay(const std::vector<StepMemory>& trace, const ReplayOptions& options) {
  spec::TrainingJobSpec spec = options.spec;
  if (options.host_threshold) spec.memory_guard.host_threshold = *options.host_threshold;
  if (options.gpu_threshold) spec.memory_guard.gpu_threshold = *options.gpu_threshold;
  if (options.horizon) spec.memory_guard.horizon_steps = *options.horizon;

  // The trace's own limits stand in for the spec's resources, so the planner's view of
  // "where is room" matches what was measured.
  int64_t host_limit = options.host_limit_bytes, gpu_limit = options.gpu_limit_bytes;
  bool has_gpu = false;
  for (const StepMemory& m : trace) {
    if (options.host_limit_bytes <= 0 && m.host_limit_bytes > 0) host_limit = m.host_limit_bytes;
    if (options.gpu_limit_bytes <= 0 && m.gpu_limit_bytes > 0) gpu_limit = m.gpu_limit_bytes;
    has_gpu |= m.gpu_bytes > 0 || m.gpu_peak_bytes > 0;
  }
  const int workers = options.workers > 0 ? options.workers : std::max(1, spec.workers);

  // Replay shows what the guard would do at every step, never applying it: the history
  // stays empty and the trace goes on as recorded.
  MemoryGuard guard = MeasuredMemoryGuard(spec, workers, GuardHistory{}, host_limit, gpu_limit, has_gpu);
  std::vector<ReplayStep> out;
  out.reserve(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    StepMemory m = trace[i];
    if (options.host_limit_bytes > 0) m.host_limit_bytes = options.host_limit_bytes;
    if (options.gpu_limit_bytes > 0) m.gpu_limit_bytes = options.gpu_limit_bytes;
    const int64_t next_tokens = i + 1 < trace.size() ? trace[i + 1].tokens : 0;
    ReplayStep r;
    r.step = m.step;
    r.decision = guard.AfterStep(m, next_tokens);
    r.forecast = guard.last_forecast();
    out.push_back(std::move(r));
  }
  return out;
}

std::string ReplayLineJson(const ReplayStep& step) {
  const Decision& d = step.decision;
  nlohmann::ordered_json j = {
      {"step", step.step},
      {"action", DecisionActionName(d.action)},
      {"resource", d.resource},
      {"forecast_peak_bytes", d.forecast_peak_bytes},
      {"steps_to_limit", d.steps_to_limit},
      {"reason", d.reason},
  };
  if (d.target_workers) j["target_workers"] = *d.target_workers;
  if (d.target_micro_batch_size) j["target_micro_batch_size"] = *d.target_micro_batch_size;
  if (d.target_max_tokens_per_micro_batch) {
    j["target_max_tokens_per_micro_batch"] = *d.target_max_tokens_per_micro_batch;
  }
  if (d.target_offload_params) j["target_offload_params"] = *d.target_offload_params;
  if (d.target_offload_optimizer) j["target_offload_optimizer"] = *d.target_offload_optimizer;
  return j.dump();
}

}  // namespace headroom::guard
