// A picture of a run's memory, because people would rather look than read: host (and GPU,
// when there is one) memory as a percentage of the limit, per step and per worker, one
// line per rank and generation (a restart starts a new line where the run resumed), the
// guard's threshold and the limit as horizontal lines, and every action as a labelled
// vertical line at its step (guard actions in blue, OOM kills and crashes in red).
//
// Plain SVG 1.1 written by hand (svg_chart.h): no dependencies, opens in any browser.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/protocol/step_record.h"
#include "local/svg_chart.h"
#include "operator/runtime/job_status.h"

namespace headroom::local {

struct MemoryChartInput {
  std::string title;
  std::vector<protocol::StepRecord> records;  // every rank, every generation
  std::vector<runtime::ActionRecord> actions;
  int64_t total_steps = 0;
  int64_t host_limit_bytes = 0;  // used where a record has no limit
  double host_threshold = 0.9;   // fractions of the limit
  double gpu_threshold = 0.92;
};

std::string RenderMemoryChartSvg(const MemoryChartInput& input);

}  // namespace headroom::local
