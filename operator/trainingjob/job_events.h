// What the operator tells `kubectl describe` and Prometheus about a job: an Event for
// every action its reconciler recorded (and for reaching Succeeded, Suspended or Failed
// without one), and headroom_operator_guard_actions_total{action,reason} for each action.
#pragma once

#include <nlohmann/json.hpp>

#include "operator/controllerkit/operator_metrics.h"
#include "operator/trainingjob/event_recorder.h"
#include "operator/trainingjob/job_entry.h"

namespace headroom::trainingjob {

// Reports what happened since the last call (entry.actions_reported, entry.phase_reported)
// and advances those marks; each action and phase is reported once.
void ReportJobEvents(JobEntry& entry, const nlohmann::json& object, EventRecorder& events,
                     controllerkit::OperatorMetrics& metrics);

}  // namespace headroom::trainingjob
