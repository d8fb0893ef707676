#include "core/guard/memory_guard.h"

#include <algorithm>

namespace headroom::guard {

namespace {

PlanOptions WithJobModel(PlanOptions options, const spec::TrainingJobSpec& spec) {
  if (!options.model) options.model = JobModelShape(spec);
  return options;
}

}  // namespace

MemoryGuard::MemoryGuard(spec::TrainingJobSpec spec, int workers, GuardHistory history, PlanOptions plan_options)
    : spec_(std::move(spec)),
      workers_(std::max(1, workers)),
      history_(std::move(history)),
      plan_options_(WithJobModel(std::move(plan_options), spec_)),
      forecaster_(ForecasterOptionsFromSpec(spec_.memory_guard)),
      plan_(PlanMemory(spec_, workers_, plan_options_)) {}

void MemoryGuard::CheckLastRestart(const StepMemory& measured) {
  if (restart_checked_) return;
  const GuardHistory& h = history_;
  // Only right after the guard's own restart: a later relaunch (a reshard, a crash
  // restart) changed what runs, and its levels say nothing about that restart.
  const bool after_guard_restart = h.guard_restart_step >= 0 && h.restart_level_bytes > 0 &&
                                   h.last_action == "restart" && h.last_restart_step == h.guard_restart_step &&
                                   (h.restart_resource == "host" || h.restart_resource == "gpu");
  if (!after_guard_restart || h.RestartReclaimedNothing(h.restart_resource)) {
    restart_checked_ = true;
    return;
  }
  if (measured.step <= h.guard_restart_step) return;  // resumed from an older checkpoint
  restart_checked_ = true;
  const int64_t now = h.restart_resource == "gpu" ? measured.gpu_bytes : measured.host_bytes;
  if (static_cast<double>(now) >= (1.0 - kReclaimedNothingFraction) * static_cast<double>(h.restart_level_bytes)) {
    history_.AddRestartReclaimedNothing(h.restart_resource);
  }
}

Decision MemoryGuard::AfterStep(const StepMemory& measured, int64_t next_step_tokens) {
  CheckLastRestart(measured);
  forecaster_.Observe(measured);
  forecast_ = forecaster_.ForecastNext(next_step_tokens);
  // The plan learns measured/planned from each step's peaks (what the step really needed).
  const Plan uncorrected = PlanMemory(spec_, workers_, plan_options_);
  correction_.Observe(uncorrected, std::max(measured.host_peak_bytes, measured.host_bytes),
                      std::max(measured.gpu_peak_bytes, measured.gpu_bytes));
  plan_ = PlanMemory(spec_, workers_, plan_options_, correction_);
  Decision d = Decide(forecast_, spec_, history_, &plan_, workers_, plan_options_);
  d.restart_reclaimed_nothing = history_.restart_reclaimed_nothing;
  return d;
}

MemoryGuard MeasuredMemoryGuard(spec::TrainingJobSpec spec, int workers, GuardHistory history, int64_t host_limit_bytes,
                                int64_t gpu_limit_bytes, bool gpu_measured, std::optional<ModelShape> model) {
  if (host_limit_bytes > 0) spec.resources.memory_bytes = host_limit_bytes;
  if (gpu_measured && spec.resources.gpus == 0) spec.resources.gpus = 1;
  PlanOptions plan_options;
  plan_options.gpu_total_bytes = gpu_limit_bytes;
  plan_options.model = std::move(model);
  return MemoryGuard(std::move(spec), workers, std::move(history), plan_options);
}

}  // namespace headroom::guard
