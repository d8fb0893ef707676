// Reading a worker's /metrics (Prometheus text exposition format 0.0.4) back into the
// StepRecord the reconciler consumes: the operator's view of a pod's progress and memory.
//
// Contract:
//   - ParsePrometheusText() accepts the text format: `# HELP`/`# TYPE` and blank lines are
//     skipped; each sample line is `name{label="value",...} value [timestamp]`, label values
//     with \" \\ \n escapes; NaN/+Inf/-Inf values are parsed. A malformed line is skipped
//     (one bad line must not blind the operator to the rest).
//   - WorkerStepFromMetrics() builds a StepRecord from the headroom_worker_* series
//     (core/metrics/names.h); it returns nullopt while the worker has not published a step
//     (no headroom_worker_step sample, or step 0). Rank and generation are the caller's.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/protocol/model_fetch_record.h"
#include "core/protocol/step_record.h"

namespace headroom::trainingjob {

struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

std::vector<MetricSample> ParsePrometheusText(const std::string& text);

std::optional<protocol::StepRecord> WorkerStepFromMetrics(const std::vector<MetricSample>& samples);

// The model download a worker serves before its first step (the
// headroom_worker_model_fetch_{done,total}_bytes series, labelled {repo, revision, file});
// nullopt when it serves none or the total is not positive. Rank and generation are the
// caller's.
std::optional<protocol::ModelFetchRecord> WorkerModelFetchFromMetrics(const std::vector<MetricSample>& samples);

}  // namespace headroom::trainingjob
