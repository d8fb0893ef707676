// The memory guard's decision: one action (or none) with a reason a person can read.
//
// Decide() runs at every step boundary on every rank, with the forecast for the next
// steps. It acts only when a resource's forecast peak crosses its threshold within
// memoryGuard.horizonSteps (never on a trend that is not there: a level sitting steady
// below the threshold is left alone), or growth brings the limit itself within two steps
// allowing for this run's forecast error (ResourceForecast::forecast_margin_bytes). A
// crossing projected from growth is acted on only with evidence that waiting cannot buy: a
// leak confirmed over ForecasterOptions::confirm_steps, or the limit, with that margin,
// forecast within two steps (so the decision after this one would still be in time, once:
// a lead of one step leaves nothing for a peak that beats its forecast). A steep warm-up
// that levels off and the first tooth of a sawtooth therefore get no action, while a
// staircase is acted on before the jump that would cross. The cause picks the candidate
// actions:
//   leak                     restart (a fresh process gets its memory back)
//   state does not fit       reshard (more workers, each holding less), offload toggles
//   token-driven spike       shrinkMicroBatch, shrinkTokenBudget (the largest budget that
//                            fits), enableActivationCheckpointing, reshard (fewer sequences
//                            per worker)
// Every candidate but a restart is proven by the planner: the measured peak less what the
// plan says the action saves, scaled to the measurement, must fit under the threshold with
// the forecast's margin, and its reason says "planned peak X of a Y threshold, now Z".
// Candidates are tried in the order spec.memoryGuard.actions lists them, and only those
// listed; an action that cannot help (at maxWorkers, micro-batch already 1, offload
// already in that state, the other side has no room, restarts exhausted or the last restart
// bought fewer than horizon+1 steps) is skipped with its reason kept, so the next allowed
// action is an escalation. When nothing is left: fail, saying why for each. A restart
// that reclaimed nothing (GuardHistory::RestartReclaimedNothing: the level came back at the
// same step) is not repeated for that resource: the next action that fits is taken, and
// when none does and the level is still below the threshold, no action, the reason
// saying it carries on.
//
// Reasons read like: "host working set 812 MiB of 1 GiB limit (79%), growing 48 MiB/step
// (leak); forecast crosses the 90% threshold in 1 step: restart to reclaim leaked memory".
//
// `spec` is the job as it runs now (with earlier guard changes applied); `plan` (may be
// null: planned here) is PlanMemory for `current_workers`, possibly corrected by
// measurements (MemoryGuard passes its corrected plan), used to tell how many bytes an
// offload toggle moves. Reshard and micro-batch targets scale the *measured* peak by how
// uncorrected plans change with workers or micro-batch, so the absolute accuracy of the
// plan does not matter, only its shape. A forecast too young to classify (fewer than
// min_history steps) that rose by more than 1% of the limit per step counts as a leak.
#pragma once

#include "core/guard/decision.h"
#include "core/guard/forecaster.h"
#include "core/guard/guard_history.h"
#include "core/guard/planner.h"
#include "core/spec/training_job.h"

namespace headroom::guard {

Decision Decide(const Forecast& forecast, const spec::TrainingJobSpec& spec, const GuardHistory& history,
                const Plan* plan, int current_workers, const PlanOptions& plan_options = {});

// What the supervisor saw after the fact: a kernel OOM kill (host memory), a CUDA
// out-of-memory the worker caught (exit 77; GPU memory), or any other crash.
enum class ExitCause { kOomKill, kGpuOom, kCrash };

// After a worker died (kernel OOM kill or any other crash) at or after `failed_step`,
// with the newest checkpoint at `checkpoint_step`: restart from the checkpoint while
// restarts remain; when the last restart bought no progress (crashed again at the same
// step) escalate like Decide() does for an OOM kill (reshard / shrink micro-batch or token
// budget / checkpointing), each target the one the plan, scaled to the limit the worker was
// stopped at, shows under the threshold (else the older halving step, saying so); fail
// after maxRestarts, saying so.
Decision DecideAfterCrash(ExitCause cause, int failed_step, int checkpoint_step, const spec::TrainingJobSpec& spec,
                          const GuardHistory& history, int current_workers, const PlanOptions& plan_options = {});

}  // namespace headroom::guard
