// The memory guard as a worker runs it: one object per process, fed once per step.
//
//   guard::MemoryGuard guard(spec, world_size, guard::GuardHistory::FromEnvironment(), plan_options);
//   ... after step t finishes, with step t+1's batch already formed:
//   guard::Decision d = guard.AfterStep(measured_step_t, tokens_of_step_t_plus_1);
//   if (d.acts()) { checkpoint step t; write d.ToJson() to the termination message; exit 76; }
//
// It owns the Forecaster (window and thresholds from spec.memoryGuard), plans the job for
// the current worker count, and folds every measured peak into a PlanCorrection so the
// plan the policy consults follows what this process really uses. `headroom replay` runs
// the same object over a trace, so a replay shows exactly what a worker would decide.
//
// A restart that reclaimed nothing: with a history whose last relaunch was the guard's
// restart (guard_history.h), the first step observed after the restart's step is compared
// with the level the guard restarted at, on that resource; back within
// kReclaimedNothingFraction of it, the history (this process's copy) records that the
// restart reclaimed nothing, the policy does not restart for that resource again, and
// every decision from then on carries it to the supervisor.
//
// Contract: AfterStep() is cheap (tens of microseconds; see bench/core/guard_bench) and
// never throws. With memoryGuard.enabled false it still forecasts (for metrics) but the
// decision is always none.
#pragma once

#include "core/guard/decision.h"
#include "core/guard/forecaster.h"
#include "core/guard/guard_history.h"
#include "core/guard/planner.h"
#include "core/guard/policy.h"
#include "core/spec/training_job.h"

namespace headroom::guard {

class MemoryGuard {
 public:
  // Plans with plan_options.model, or when unset JobModelShape(spec) (a spec.model.path
  // job reads its config.json here, once; throws hf::HfConfigError when it cannot).
  MemoryGuard(spec::TrainingJobSpec spec, int workers, GuardHistory history = {}, PlanOptions plan_options = {});

  // Observes step `measured` and decides what to do before the next step runs.
  Decision AfterStep(const StepMemory& measured, int64_t next_step_tokens);

  const Forecast& last_forecast() const { return forecast_; }
  const Plan& plan() const { return plan_; }  // corrected by measurements
  const PlanCorrection& correction() const { return correction_; }
  const spec::TrainingJobSpec& spec() const { return spec_; }
  const GuardHistory& history() const { return history_; }

 private:
  spec::TrainingJobSpec spec_;
  int workers_;
  GuardHistory history_;
  PlanOptions plan_options_;
  Forecaster forecaster_;
  PlanCorrection correction_;
  Plan plan_;
  Forecast forecast_;
  bool restart_checked_ = false;  // the step after the last restart has been compared

  void CheckLastRestart(const StepMemory& measured);
};

// The guard for memory measured where the job runs: the measured host limit stands in
// for spec.resources.memory (a cgroup's limit is what the kernel enforces, whatever the
// spec asked for), a measured GPU makes the job a GPU job for the planner, and the
// device's size is the planner's GPU limit. The worker builds its guard with this after
// its first step and `headroom replay` with a trace's limits, so a replay of a worker's
// step log decides what the worker decided. `model`: the job's shape when the caller has
// resolved it already (the worker's ModelSource); unset, JobModelShape(spec) reads it.
MemoryGuard MeasuredMemoryGuard(spec::TrainingJobSpec spec, int workers, GuardHistory history, int64_t host_limit_bytes,
                                int64_t gpu_limit_bytes, bool gpu_measured,
                                std::optional<ModelShape> model = std::nullopt);

}  // namespace headroom::guard
