// The memory part of a job's status, from the workers' own forecasts: each rank's guard
// forecasts its own memory every step and logs it, and the status shows the worst rank of
// the newest step every rank has passed (ranks agree at step boundaries, so they are at
// most a step apart). A second forecaster here would fit the same numbers again, on a
// sparser series where the operator samples /metrics.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/guard/forecaster.h"
#include "core/protocol/step_record.h"
#include "operator/runtime/job_status.h"

namespace headroom::runtime {

class WorstRankMemory {
 public:
  // The worst over ranks of one step.
  struct View {
    int64_t host_bytes = 0, host_limit_bytes = 0, gpu_bytes = 0, gpu_limit_bytes = 0;
    double host_growth_bytes_per_step = 0;
    int host_forecast_steps = guard::kNever, host_threshold_steps = guard::kNever;
  };

  // A new generation: nothing seen.
  void Clear();
  // One rank's record; `spec_limit_bytes` (spec.resources.memory) stands in for a record
  // without a host limit.
  void Add(const protocol::StepRecord& r, int64_t spec_limit_bytes);
  // The view of the newest step all `workers` ranks have passed that was not taken yet,
  // and the steps before it dropped; nullopt when no step is newly complete.
  std::optional<View> TakeNewestComplete(int workers);

 private:
  std::map<int, int64_t> latest_step_by_rank_;
  std::map<int64_t, View> unfed_steps_;
};

// Whether memory is forecast to cross memoryGuard's threshold, as the MemoryPressure
// condition says it.
struct MemoryPressure {
  bool on = false;
  std::string reason, message;
};

// Writes `view` into `memory` and judges the pressure within `horizon_steps`.
MemoryPressure ApplyMemoryView(const WorstRankMemory::View& view, int horizon_steps, MemoryStatus& memory);

}  // namespace headroom::runtime
