// The one mapping between a step record's fields and the worker's Prometheus series: the
// worker's exporter (worker/telemetry/worker_metrics.cc) publishes each row, and the
// operator's reader (StepRecordFromMetrics) reads each back, so the operator sees every
// field the worker logs. Adding a field to StepRecord means adding its row here (a test
// fails while a field does not round-trip).
//
// Series are gauges labelled {job, rank} (rank also fills StepRecord::rank on the way
// back); a row with a resource is one of a family labelled {resource="host"|"gpu"}.
// guard_action, the one text field, is a gauge of value 1 labelled {action="..."}.
// Some rows hold an evaluation, not the step: the latest held-out evaluation's change only
// on steps that evaluate (heldout_problems > 0), the starting model's only on the record
// that carries it (heldout_problems_before > 0); a gauge keeps them in between. Besides the rows, the worker keeps docs/design.md's running
// total of tokens and the step-duration histogram.
#pragma once

#include <optional>
#include <vector>

#include "core/metrics/prometheus_text.h"
#include "core/protocol/model_fetch_record.h"
#include "core/protocol/step_record.h"

namespace headroom::protocol {

// Which records a row is published from.
enum class MetricCadence {
  kEveryStep,
  kHeldOutEvaluation,  // records with heldout_problems > 0
  kStartingEvaluation  // the record with heldout_problems_before > 0
};

struct StepMetric {
  const char* key;   // the step log key (step_record.h)
  const char* name;  // the series (core/metrics/names.h)
  const char* help;
  const char* resource;  // the {resource} label value, or nullptr
  double (*get)(const StepRecord&);
  void (*set)(StepRecord&, double);
  MetricCadence cadence;
};

// Whether `record` carries the row's value (see MetricCadence).
bool CarriesMetric(const StepMetric& row, const StepRecord& record);

// Every numeric field of StepRecord but rank (a label); `key` is the member's name, which
// is also its step log key.
const std::vector<StepMetric>& StepMetrics();

// The step record a worker's series describe; nullopt while it has published no step (no
// headroom_worker_step sample, or step 0). Series missing or not finite (NaN, +Inf) keep
// the record's defaults; generation is the caller's.
std::optional<StepRecord> StepRecordFromMetrics(const std::vector<metrics::MetricSample>& samples);

// The model download a worker serves before its first step (the
// headroom_worker_model_fetch_{done,total}_bytes series, labelled {repo, revision, file});
// nullopt when it serves none or the total is not positive. Rank and generation are the
// caller's.
std::optional<ModelFetchRecord> ModelFetchFromMetrics(const std::vector<metrics::MetricSample>& samples);

}  // namespace headroom::protocol
