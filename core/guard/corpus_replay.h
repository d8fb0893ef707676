// The guard replayed over a generated trace corpus (trace_corpus.h), scored against its
// ground truth: what guard_bench prints and core_trace_corpus_test asserts.
//
// Per trace: the guard's first action (a decision at row t is made before step t+1 runs,
// so it is in time when t < crossing_step, with lead crossing_step - t) and on which
// resource. Scored:
//   recall        predictable crossings (and, separately, those known one step ahead)
//                 acted on in time, on the resource that crosses
//   false alarms  stable traces (no crossing) with any action at all
//   leads         of the predictable crossings acted on in time
//   unpredictable crossings: counted by whether the guard still acted in time; the rest
//                 are left to the supervisor's recovery after the crash (exit 137 on the
//                 host, 77 on the GPU: restart from the checkpoint)
//   forecast error |predicted peak(t+1) - measured peak(t+1)| / limit, every step of every
//                 trace on its shape's side (the limit, not the peak, so a low level's
//                 error is not inflated)
//
// Contract: deterministic (no timing); Replay's options are the defaults (the default
// memoryGuard) unless `options` says otherwise.
#pragma once

#include <string>
#include <vector>

#include "core/guard/replay.h"
#include "core/guard/trace_corpus.h"

namespace headroom::guard {

struct CorpusTraceResult {
  const TraceCorpusEntry* entry = nullptr;
  int first_action_step = -1;  // -1: never acted
  std::string first_action_resource;
  std::string first_action_reason;
  int actions = 0;       // steps with an action
  bool in_time = false;  // crosses, acted before it on its resource
  int lead = 0;          // crossing_step - first_action_step when in_time
};

struct CorpusScore {
  std::vector<CorpusTraceResult> traces;
  int predictable = 0, predictable_in_time = 0;
  int known_one_ahead = 0, known_one_ahead_in_time = 0;
  int unpredictable = 0, unpredictable_in_time = 0, left_to_host_recovery = 0, left_to_gpu_recovery = 0;
  int stable = 0, false_alarms = 0;
  std::vector<double> leads;  // predictable crossings acted on in time
  std::vector<double> forecast_errors;
};

CorpusScore ReplayCorpus(const std::vector<TraceCorpusEntry>& corpus, const ReplayOptions& options = {});

}  // namespace headroom::guard
