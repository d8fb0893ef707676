// Running the guard over a recorded trace, step by step, as the worker would have run it:
// after row t is observed, the decision for the step after it is made with row t+1's
// tokens known (its batch is formed before it runs). This is `headroom replay`, and what
// the tests and the bench use to judge the guard on the failure reports.
//
// Replay does not change the trace after an action (it shows what the guard would decide
// at every step, if nothing were done), so a trace shows the first step the guard acts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/guard/decision.h"
#include "core/guard/forecaster.h"
#include "core/spec/training_job.h"

namespace headroom::guard {

struct ReplayOptions {
  int64_t host_limit_bytes = 0;  // overrides the trace's column when > 0
  int64_t gpu_limit_bytes = 0;
  std::optional<double> host_threshold;  // default: the spec's
  std::optional<double> gpu_threshold;
  std::optional<int> horizon;
  spec::TrainingJobSpec spec;  // the guard's settings and the job (defaults when absent)
  int workers = 0;             // current workers; 0 = spec.workers
};

struct ReplayStep {
  int step = 0;
  Decision decision;
  Forecast forecast;
};

std::vector<ReplayStep> Replay(const std::vector<StepMemory>& trace, const ReplayOptions& options);

// {"step","action","resource","forecast_peak_bytes","steps_to_limit","reason"} (docs/design.md).
std::string ReplayLineJson(const ReplayStep& step);

}  // namespace headroom::guard
