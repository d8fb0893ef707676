#include "operator/runtime/worst_rank_memory.h"

#include <algorithm>
#include <cstdint>

namespace headroom::runtime {
namespace {

std::string Percent(int64_t bytes, int64_t limit) {
  return limit > 0 ? std::to_string(100 * bytes / limit) + "%" : "?";
}

int Sooner(int a, int b) { return a == guard::kNever ? b : b == guard::kNever ? a : std::min(a, b); }

}  // namespace

void WorstRankMemory::Clear() {
  latest_step_by_rank_.clear();
  unfed_steps_.clear();
}

void WorstRankMemory::Add(const protocol::StepRecord& r, int64_t spec_limit_bytes) {
  latest_step_by_rank_[r.rank] = r.step;
  View& worst = unfed_steps_[r.step];
  worst.host_bytes = std::max(worst.host_bytes, r.host_bytes);
  worst.host_limit_bytes = r.host_limit_bytes > 0 ? r.host_limit_bytes : spec_limit_bytes;
  worst.gpu_bytes = std::max(worst.gpu_bytes, r.gpu_reserved_bytes);
  worst.gpu_limit_bytes = std::max(worst.gpu_limit_bytes, r.gpu_total_bytes);
  worst.host_growth_bytes_per_step = std::max(worst.host_growth_bytes_per_step, r.host_growth_bytes_per_step);
  worst.host_forecast_steps = Sooner(worst.host_forecast_steps, r.host_forecast_steps);
  worst.host_threshold_steps = Sooner(worst.host_threshold_steps, r.host_threshold_steps);
}

std::optional<WorstRankMemory::View> WorstRankMemory::TakeNewestComplete(int workers) {
  if (static_cast<int>(latest_step_by_rank_.size()) < workers) return std::nullopt;
  int64_t all_passed = INT64_MAX;
  for (const auto& [rank, step] : latest_step_by_rank_) all_passed = std::min(all_passed, step);
  std::optional<View> newest;
  while (!unfed_steps_.empty() && unfed_steps_.begin()->first <= all_passed) {
    newest = unfed_steps_.begin()->second;
    unfed_steps_.erase(unfed_steps_.begin());
  }
  return newest;
}

MemoryPressure ApplyMemoryView(const WorstRankMemory::View& v, int horizon_steps, MemoryStatus& m) {
  m.host_bytes = v.host_bytes;
  m.host_limit_bytes = v.host_limit_bytes;
  m.gpu_bytes = v.gpu_bytes;
  m.gpu_limit_bytes = v.gpu_limit_bytes;
  m.growth_bytes_per_step = v.host_growth_bytes_per_step;
  m.forecast_steps_to_limit.reset();
  if (v.host_forecast_steps != guard::kNever) m.forecast_steps_to_limit = v.host_forecast_steps;
  // A worker without a threshold forecast (an older /metrics): the limit's stands in.
  const int to_threshold = v.host_threshold_steps != guard::kNever ? v.host_threshold_steps : v.host_forecast_steps;
  MemoryPressure p;
  p.on = to_threshold != guard::kNever && to_threshold <= horizon_steps;
  p.reason = p.on ? "ForecastCrossesThreshold" : "BelowThreshold";
  p.message = "host " + Percent(m.host_bytes, m.host_limit_bytes) + " of the limit" +
              (p.on ? ", forecast to cross the threshold within " + std::to_string(to_threshold) + " step(s)" : "");
  return p;
}

}  // namespace headroom::runtime
