#include "core/guard/corpus_replay.h"

#include <algorithm>
#include <cmath>

namespace headroom::guard {

namespace {

CorpusTraceResult ScoreTrace(const TraceCorpusEntry& entry, const std::vector<ReplayStep>& steps,
                             std::vector<double>& errors) {
  CorpusTraceResult r;
  r.entry = &entry;
  const bool gpu = entry.resource == "gpu";
  for (size_t i = 0; i < steps.size(); ++i) {
    const Decision& d = steps[i].decision;
    if (d.acts()) {
      ++r.actions;
      if (r.first_action_step < 0) {
        r.first_action_step = steps[i].step;
        r.first_action_resource = d.resource;
        r.first_action_reason = d.reason;
      }
    }
    if (i + 1 < steps.size()) {
      const StepMemory& next = entry.steps[i + 1];
      const ResourceForecast& f = gpu ? steps[i].forecast.gpu : steps[i].forecast.host;
      const double actual = static_cast<double>(gpu ? std::max(next.gpu_peak_bytes, next.gpu_bytes)
                                                    : std::max(next.host_peak_bytes, next.host_bytes));
      const double limit = static_cast<double>(gpu ? next.gpu_limit_bytes : next.host_limit_bytes);
      if (f.present && limit > 0) errors.push_back(std::fabs(static_cast<double>(f.NextPeak()) - actual) / limit);
    }
  }
  if (entry.crosses() && r.first_action_step >= 0 && r.first_action_step < entry.crossing_step &&
      r.first_action_resource == entry.resource) {
    r.in_time = true;
    r.lead = entry.crossing_step - r.first_action_step;
  }
  return r;
}

}  // namespace

CorpusScore ReplayCorpus(const std::vector<TraceCorpusEntry>& corpus, const ReplayOptions& options) {
  CorpusScore score;
  score.traces.reserve(corpus.size());
  for (const TraceCorpusEntry& entry : corpus) {
    CorpusTraceResult r = ScoreTrace(entry, Replay(entry.steps, options), score.forecast_errors);
    if (!entry.crosses()) {
      ++score.stable;
      score.false_alarms += r.actions > 0;
    } else if (entry.predictable) {
      ++score.predictable;
      score.predictable_in_time += r.in_time;
      if (r.in_time) score.leads.push_back(r.lead);
    } else if (entry.known_one_ahead) {
      ++score.known_one_ahead;
      score.known_one_ahead_in_time += r.in_time;
    } else {
      ++score.unpredictable;
      score.unpredictable_in_time += r.in_time;
      if (!r.in_time) ++(entry.resource == "gpu" ? score.left_to_gpu_recovery : score.left_to_host_recovery);
    }
    score.traces.push_back(std::move(r));
  }
  return score;
}

}  // namespace headroom::guard
