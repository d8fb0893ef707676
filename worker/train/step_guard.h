// The memory guard at the step boundary: feeds each finished step's memory to the core
// forecaster and asks the core policy what to do before the next step runs.
//
// On a decision other than none, WriteTerminationMessage() puts its JSON where the
// supervisor reads it: /dev/termination-log when present (Kubernetes), else the file
// named by $HEADROOM_TERMINATION_LOG; the worker then exits 76.
#pragma once

#include <optional>
#include <string>

#include "core/guard/decision.h"
#include "core/guard/forecaster.h"
#include "core/guard/guard_history.h"
#include "core/spec/training_job.h"

namespace headroom::worker {

class StepGuard {
 public:
  StepGuard(const spec::TrainingJobSpec& spec, int world_size);

  // Records step `memory`; returns the forecast and the decision for the next step.
  guard::Decision Check(const guard::StepMemory& memory, int64_t next_step_tokens);
  const guard::Forecast& last_forecast() const { return forecast_; }

 private:
  spec::TrainingJobSpec spec_;
  int world_size_;
  guard::Forecaster forecaster_;
  guard::GuardHistory history_;
  guard::Forecast forecast_;
};

// Returns the path written, or "" when neither destination exists/is set.
std::string WriteTerminationMessage(const std::string& message);

}  // namespace headroom::worker
