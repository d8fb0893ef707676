// What the end of a generation leads to (job_reconciler.h's table): success, a restart
// or reshard with the guard's or the crash escalation's change, a suspension, a failure.
#include <algorithm>

#include "core/guard/next_spec.h"
#include "core/guard/policy.h"
#include "core/protocol/exit_codes.h"
#include "operator/runtime/crash_triage.h"
#include "operator/runtime/job_reconciler.h"

namespace headroom::runtime {

NextStep JobReconciler::Relaunch(int64_t step, ActionType type, const std::string& reason, bool counts_as_restart,
                                 bool reshard, bool counted) {
  if (counts_as_restart) {
    const int max = job_.spec.memory_guard.max_restarts;
    if (unrequested_relaunches_ >= max) {
      return Finish(JobPhase::kFailed, "gave up after " + std::to_string(unrequested_relaunches_) +
                                           " restarts (memoryGuard.maxRestarts = " + std::to_string(max) +
                                           "); another was needed because " + reason);
    }
    ++unrequested_relaunches_;
  }
  if (counted && reshard) ++status_.reshards;
  if (counted && !reshard) ++status_.restarts;
  Record(step, type, reason);
  status_.phase = reshard ? JobPhase::kResharding : JobPhase::kRestarting;
  // A planned stop checkpointed the step it stopped at: the next generation should
  // resume right after it. (OnCrash has set where it already counted from.)
  crashes_.ExpectResumeAfter(status_.step);
  return Launch(reason);
}

NextStep JobReconciler::OnGenerationEnded(const Observation& observed) {
  int finished = 0, oom = 0;
  const RankObservation* guard_stop = nullptr;
  const RankObservation* crashed = nullptr;
  const RankObservation* disrupted = nullptr;
  for (const RankObservation& r : observed.ranks) {
    const RankExit& e = *r.exit;
    if (!e.disruption.empty() && !disrupted) disrupted = &r;
    if (e.exit_code == protocol::kExitInvalidSpec) {
      // The cause first: it is the line a user reads (progress view, summary, status).
      const std::string cause = ReasonTheWorkerGave(e);
      // Exit 2 after a step is a worker that found retrying cannot help (a full disk a
      // save failed on twice), not a refusal to start.
      const std::string who =
          "rank " + std::to_string(r.rank) +
          (saw_step_this_generation_ ? " stopped: retrying cannot help (exit 2)" : " refused to start (exit 2)");
      return Finish(JobPhase::kFailed, cause.empty() ? who + " and gave no reason" : cause + " (" + who + ")");
    }
    if (e.oom_killed || e.exit_code == protocol::kExitGpuOom) ++oom;
    if (e.exit_code == protocol::kExitFinished) {
      ++finished;
    } else if (e.exit_code == protocol::kExitGuardStop) {
      if (!guard_stop) guard_stop = &r;
    } else if (e.exit_code != protocol::kExitDrained) {
      crashed = MostTellingCrash(crashed, r, first_crashed_rank_);
    }
  }
  if (finished == static_cast<int>(observed.ranks.size())) {
    // Exit 0 means every step ran: the last ones may have finished between two reads of
    // the workers' progress (a fast worker can do dozens between scrapes).
    status_.step = std::max(status_.step, status_.total_steps);
    return Finish(JobPhase::kSucceeded, "all " + std::to_string(status_.total_steps) + " steps done");
  }
  // Past spec.activeDeadlineSeconds nothing is relaunched, whatever ended the generation.
  if (deadline_exceeded_) return FailForDeadline(true);
  // A rank taken away from outside explains the end unless the memory did (an
  // out-of-memory end or a guard stop is the job's own, and the guard must see it) or the
  // user stopped the job anyway. A drain for a scale request that a disruption met stays
  // the reshard: neither costs a restart.
  const bool scale_pending = workers_requested_ && *workers_requested_ != job_.spec.workers;
  if (disrupted && oom == 0 && !guard_stop && !stop_requested_ && !(scale_pending && !crashed)) {
    return OnDisruption(observed, *disrupted, crashed != nullptr);
  }
  if (crashed && scale_pending && drain_sent_ && oom == 0 && !guard_stop && !stop_requested_ &&
      EndedByTheStop(*crashed->exit)) {
    // The drain for a scale request ended a rank before it checkpointed (it outlived the
    // grace, or the stop reached it before its handler), and what else failed came after
    // it (peers losing it in a collective, or killed with it): the reshard still happens,
    // from the checkpoint, with the steps since it counted as lost. Not a crash:
    // relaunching at the old size would only drain again, and a crash loop would fail the job.
    return ReshardOnRequest("; rank " + std::to_string(crashed->rank) + " did not drain (" + crashed->exit->reason +
                            ", exit " + std::to_string(crashed->exit->exit_code) + ")" +
                            crashes_.CountStepsLost(observed, status_));
  }
  if (crashed) return OnCrash(observed, *crashed, oom);
  if (stop_requested_) {
    Record(status_.step, ActionType::kSuspend, *stop_requested_);
    return Finish(JobPhase::kSuspended, *stop_requested_ + "; the checkpoint at step " +
                                            std::to_string(observed.checkpoint_step.value_or(status_.step)) +
                                            " is resumable");
  }
  if (guard_stop) return OnGuardStop(*guard_stop);

  // Every rank drained (75) and we did not ask for a stop: a scale request, or a drain
  // from outside (a node drain evicting pods). Resume either way.
  if (scale_pending) return ReshardOnRequest("");
  if (resume_requested_) {
    const std::string reason = *resume_requested_;
    resume_requested_.reset();
    Record(status_.step, ActionType::kUnsuspend, reason);
    status_.phase = JobPhase::kPending;
    crashes_.ExpectResumeAfter(status_.step);
    return Launch(reason);
  }
  return Relaunch(status_.step, ActionType::kResume,
                  "workers drained (exit 75) without a stop request; resuming from the checkpoint", true, false);
}

NextStep JobReconciler::ReshardOnRequest(const std::string& cost) {
  const int from = job_.spec.workers;
  job_.spec.workers = guard::NearestWorkerCount(job_.spec, *workers_requested_, from);
  workers_requested_.reset();
  return Relaunch(
      status_.step, ActionType::kScale,
      "resharded on request: workers " + std::to_string(from) + " -> " + std::to_string(job_.spec.workers) + cost,
      /*counts_as_restart=*/false, /*reshard=*/true);
}

NextStep JobReconciler::OnDisruption(const Observation& observed, const RankObservation& disrupted,
                                     bool some_rank_crashed) {
  // A rank that did not drain (killed at the end of its grace period, or its peers after
  // it) loses the steps since the checkpoint, counted as for a crash; ranks that drained
  // checkpointed the step they stopped at (Relaunch's ExpectResumeAfter settles the rest).
  const std::string resumed = some_rank_crashed ? crashes_.CountStepsLost(observed, status_)
                                                : "; drained to the checkpoint at step " +
                                                      std::to_string(observed.checkpoint_step.value_or(status_.step)) +
                                                      ", resuming from it";
  const std::string reason = "rank " + std::to_string(disrupted.rank) + ": " + disrupted.exit->disruption + resumed +
                             " (not counted as a restart)";
  ++status_.disruptions;
  return Relaunch(status_.step, ActionType::kResumeAfterDisruption, reason, /*counts_as_restart=*/false,
                  /*reshard=*/false, /*counted=*/false);
}

NextStep JobReconciler::OnCrash(const Observation& observed, const RankObservation& crashed, int oom_kills) {
  const RankExit& e = *crashed.exit;
  crashes_.CountOutOfMemoryEnds(observed, oom_kills, status_);
  const int64_t reached = status_.step;
  const int64_t checkpoint = observed.checkpoint_step.value_or(generation_resumed_from_);
  const std::string lost = crashes_.CountStepsLost(observed, status_);
  if (stop_requested_) {
    return Finish(JobPhase::kSuspended, *stop_requested_ + " (rank " + std::to_string(crashed.rank) + " ended with " +
                                            e.reason + " while draining)");
  }
  const std::string what = DescribeCrash(crashed, reached, saw_step_this_generation_, job_.spec.resources.memory);
  // A CUDA out-of-memory is the GPU's OOM kill: counted with the kernel's, named apart.
  const bool gpu_oom_exit = e.exit_code == protocol::kExitGpuOom;
  const ActionType type = e.oom_killed   ? ActionType::kRestartAfterOOMKill
                          : gpu_oom_exit ? ActionType::kRestartAfterGpuOOM
                                         : ActionType::kRestartAfterCrash;
  const bool out_of_memory = e.oom_killed || gpu_oom_exit;

  if (crashes_.EndsForInputsOutOfMemory(e, saw_step_this_generation_)) {
    return Finish(JobPhase::kFailed, crashes_.OutOfMemoryReadingInputs(what));
  }
  if (!options_.guard_enabled || KilledWhileLoading(e, saw_step_this_generation_)) {
    NextStep next = Relaunch(reached, type, what + lost, true, false);
    if (next.kind == NextStep::Kind::kLaunch) {
      history_.RecordCrashRestart(static_cast<int>(checkpoint), out_of_memory);
      next.launch.guard_history_json = history_.ToJson();
    }
    return next;
  }
  // With the guard on, a crash that repeats at the same step escalates instead of looping.
  const guard::Decision d = guard::DecideAfterCrash(e.oom_killed   ? guard::ExitCause::kOomKill
                                                    : gpu_oom_exit ? guard::ExitCause::kGpuOom
                                                                   : guard::ExitCause::kCrash,
                                                    static_cast<int>(reached + 1), static_cast<int>(checkpoint),
                                                    job_.spec, history_, job_.spec.workers, plan_options_);
  const guard::NextSpec change = guard::ApplyDecision(job_, d);
  if (change.fail()) return Finish(JobPhase::kFailed, what + "; " + change.reason);
  const bool plain = change.applied == guard::DecisionAction::kRestart;
  const spec::TrainingJob previous = job_;
  job_ = change.job;
  NextStep next = Relaunch(reached, plain ? type : FromDecision(change.applied),
                           plain ? what + lost : what + lost + "; " + change.reason, true, change.reshard);
  if (next.kind != NextStep::Kind::kLaunch) {
    job_ = previous;
    return next;
  }
  history_.RecordCrashRestart(static_cast<int>(checkpoint), out_of_memory);
  if (!plain) history_.Record(d);
  next.launch.guard_history_json = history_.ToJson();
  return next;
}

NextStep JobReconciler::OnGuardStop(const RankObservation& stopped) {
  guard::Decision d;
  try {
    d = guard::Decision::FromJson(stopped.exit->termination_message);
  } catch (const std::exception& e) {
    return Relaunch(status_.step, ActionType::kRestart,
                    "rank " + std::to_string(stopped.rank) +
                        " stopped for the memory guard but its decision is unreadable (" + e.what() +
                        "); restarting at the same size",
                    true, false);
  }
  const int64_t step = d.step > 0 ? d.step : status_.step;
  if (!options_.guard_enabled) {
    return Relaunch(step, ActionType::kResume,
                    std::string("guard disabled: not applying the worker's ") + guard::DecisionActionName(d.action) +
                        " decision; resuming",
                    true, false);
  }
  const guard::NextSpec change = guard::ApplyDecision(job_, d);
  if (change.fail()) return Finish(JobPhase::kFailed, "memory guard gave up: " + change.reason);
  const spec::TrainingJob previous = job_;
  job_ = change.job;
  NextStep next = Relaunch(step, FromDecision(change.applied), change.reason, true, change.reshard);
  if (next.kind != NextStep::Kind::kLaunch) {
    job_ = previous;
    return next;
  }
  history_.Record(d);
  next.launch.guard_history_json = history_.ToJson();
  return next;
}

}  // namespace headroom::runtime
