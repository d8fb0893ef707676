#include "operator/runtime/crash_triage.h"

#include <algorithm>
#include <csignal>

#include "core/protocol/exit_codes.h"
#include "core/protocol/termination_message.h"

namespace headroom::runtime {
namespace {

// A rank OOM-killed while loading (before it reported the "loaded" phase,
// core/protocol/termination_message.h), this many generations in a row, ends the job: the
// memory went to loading the model or reading the dataset (a file far larger than its
// records, say), not to training, so more workers and smaller batches cannot help, and the
// guard does not act on it (a plain restart, in case it was passing pressure). A kill in
// the first step, after loading, is the guard's like any step's.
constexpr int kOomKillsBeforeAStepLimit = 3;

bool OutOfMemory(const RankExit& e) { return e.oom_killed || e.exit_code == protocol::kExitGpuOom; }

}  // namespace

std::string ReasonTheWorkerGave(const RankExit& e) {
  if (std::string stated = protocol::StatedReason(e.termination_message); !stated.empty()) return stated;
  const bool said = !e.termination_message.empty() && !protocol::LoadedPhaseNextStep(e.termination_message);
  return protocol::CrashReasonLine(said ? e.termination_message : e.last_output);
}

const RankObservation* MostTellingCrash(const RankObservation* so_far, const RankObservation& r,
                                        std::optional<int> first_crashed_rank) {
  if (!so_far || (OutOfMemory(*r.exit) && !OutOfMemory(*so_far->exit)) ||
      (!OutOfMemory(*so_far->exit) && first_crashed_rank == r.rank)) {
    return &r;
  }
  return so_far;
}

bool EndedByTheStop(const RankExit& e) {
  constexpr int kTerminated = 128 + SIGTERM;
  return !OutOfMemory(e) && (e.exit_code == kTerminated || e.exit_code == protocol::kExitKilled);
}

bool KilledWhileLoading(const RankExit& e, bool saw_step_this_generation) {
  return e.oom_killed && !saw_step_this_generation && !protocol::LoadedPhaseNextStep(e.termination_message);
}

std::string DescribeCrash(const RankObservation& crashed, int64_t reached, bool saw_step_this_generation,
                          const std::string& memory_limit) {
  const RankExit& e = *crashed.exit;
  const std::string rank = "rank " + std::to_string(crashed.rank);
  if (e.oom_killed) {
    return rank + " was OOM-killed by the kernel " +
           (KilledWhileLoading(e, saw_step_this_generation) ? "while loading its model and data, before step "
                                                            : "during step ") +
           std::to_string(reached + 1) + " (limit " + memory_limit + ")";
  }
  if (e.exit_code == protocol::kExitGpuOom) {
    std::string what = rank + " ran out of GPU memory during step " + std::to_string(reached + 1) + " (exit " +
                       std::to_string(protocol::kExitGpuOom) + ")";
    if (const auto report = protocol::GpuOomReport::FromJson(e.termination_message)) {
      what += ": " + report->Describe();
    } else if (!e.last_output.empty()) {
      what += ": " + e.last_output;
    }
    return what;
  }
  std::string what = rank + " crashed during step " + std::to_string(reached + 1) + " (" + e.reason + ", exit " +
                     std::to_string(e.exit_code) + ")";
  // On Kubernetes a worker that wrote no message has its log's tail there instead
  // (FallbackToLogsOnError): the reason is its error line, not a frame or a warning.
  const std::string said = ReasonTheWorkerGave(e);
  if (!said.empty()) what += ": " + said;
  return what;
}

void CrashLedger::OnFirstStep(int64_t first_step, JobStatus& status) {
  oom_kills_before_a_step_ = 0;
  // Steps the workers redo that the ledger has not counted yet: a crash whose checkpoint
  // was not visible, or a worker that resumed from further back than the step its
  // generation was expected to resume from (or not at all).
  if (unsettled_loss_from_step_) {
    status.steps_lost += std::max<int64_t>(0, *unsettled_loss_from_step_ - (first_step - 1));
    unsettled_loss_from_step_.reset();
  }
}

void CrashLedger::ExpectResumeAfter(int64_t step) {
  if (!unsettled_loss_from_step_) unsettled_loss_from_step_ = step;
}

void CrashLedger::CountOutOfMemoryEnds(const Observation& observed, int oom_kills, JobStatus& status) {
  status.oom_kills += oom_kills;
  for (const RankObservation& r : observed.ranks) {
    if (r.exit && r.exit->exit_code == protocol::kExitGpuOom && !r.exit->oom_killed) ++status.gpu_oom_kills;
  }
}

std::string CrashLedger::CountStepsLost(const Observation& observed, JobStatus& status) {
  const int64_t reached = status.step;
  if (!observed.checkpoint_step) {
    unsettled_loss_from_step_ = reached;
    return "; resuming from the last checkpoint";
  }
  const int64_t l = std::max<int64_t>(0, reached - *observed.checkpoint_step);
  status.steps_lost += l;
  unsettled_loss_from_step_ = std::min(reached, *observed.checkpoint_step);
  return "; resuming from checkpoint step " + std::to_string(*observed.checkpoint_step) + ", " + std::to_string(l) +
         " step(s) lost";
}

bool CrashLedger::EndsForInputsOutOfMemory(const RankExit& e, bool saw_step_this_generation) {
  oom_kills_before_a_step_ = KilledWhileLoading(e, saw_step_this_generation) ? oom_kills_before_a_step_ + 1 : 0;
  return oom_kills_before_a_step_ >= kOomKillsBeforeAStepLimit;
}

std::string CrashLedger::OutOfMemoryReadingInputs(const std::string& what) const {
  return "out of memory before the first step, " + std::to_string(oom_kills_before_a_step_) +
         " times in a row: the worker runs out reading its inputs, which more workers or smaller batches do not "
         "change; check spec.model.path and spec.task.dataset (a file far larger than it should be?) (" +
         what + ")";
}

}  // namespace headroom::runtime
