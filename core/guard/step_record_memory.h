// Where the worker's step record (core/protocol/step_record.h) meets the guard: the
// memory part the guard reads, and the forecast fields the worker's guard fills in. Here,
// not in the record, because protocol sits below guard in core's layers (docs/design.md,
// "core's layers").
#pragma once

#include "core/guard/forecaster.h"
#include "core/protocol/step_record.h"

namespace headroom::guard {

// What the guard reads. The GPU side is the caching allocator's reserved bytes (what the
// device has given the process) against the device's total.
StepMemory StepMemoryOf(const protocol::StepRecord& record);

// The record's *_forecast_steps, *_threshold_steps and *_growth_bytes_per_step keys.
void SetForecastFields(const Forecast& forecast, protocol::StepRecord& record);

}  // namespace headroom::guard
