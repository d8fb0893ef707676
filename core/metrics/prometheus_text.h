// Reading Prometheus text exposition format 0.0.4 (what a worker's /metrics serves) into
// samples: the operator's view of a pod's progress (core/protocol/step_metrics.h turns
// them into a step record) and the operator benchmark's view of its own endpoint.
//
// Contract: `# HELP`/`# TYPE` and blank lines are skipped; each sample line is
// `name{label="value",...} value [timestamp]`, label values with \" \\ \n escapes;
// NaN/+Inf/-Inf values are parsed. A malformed line is skipped (one bad line must not
// blind the operator to the rest).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace headroom::metrics {

struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

std::vector<MetricSample> ParsePrometheusText(const std::string& text);

}  // namespace headroom::metrics
