#include "operator/runtime/job_reconciler.h"

#include <algorithm>
#include <ctime>

#include "core/guard/next_spec.h"
#include "core/guard/planner.h"
#include "core/guard/policy.h"
#include "core/hf/hf_config.h"
#include "core/protocol/exit_codes.h"
#include "core/protocol/termination_message.h"

namespace headroom::runtime {

namespace {

std::string Rfc3339Now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool IsCleanExit(int code) {
  return code == protocol::kExitFinished || code == protocol::kExitDrained || code == protocol::kExitGuardStop;
}

std::string Percent(int64_t bytes, int64_t limit) {
  return limit > 0 ? std::to_string(100 * bytes / limit) + "%" : "?";
}

// Why a worker says it ended: its error line (core/protocol's rule), from its termination
// message, else (a worker that wrote none, or on Kubernetes the log tail the pod falls
// back to) its output. "" when it said nothing.
std::string ReasonTheWorkerGave(const RankExit& e) {
  const bool said = !e.termination_message.empty() && !protocol::LoadedPhaseNextStep(e.termination_message);
  return protocol::CrashReasonLine(said ? e.termination_message : e.last_output).substr(0, 300);
}

// A rank OOM-killed while loading (before it reported the "loaded" phase,
// core/protocol/termination_message.h), this many generations in a row, ends the job: the
// memory went to loading the model or reading the dataset (a file far larger than its
// records, say), not to training, so more workers and smaller batches cannot help, and the
// guard does not act on it (a plain restart, in case it was passing pressure). A kill in
// the first step, after loading, is the guard's like any step's.
constexpr int kOomKillsBeforeAStepLimit = 3;

}  // namespace

const char* NextStepKindName(NextStep::Kind kind) {
  switch (kind) {
    case NextStep::Kind::kWait: return "wait";
    case NextStep::Kind::kLaunch: return "launch";
    case NextStep::Kind::kDrain: return "drain";
    case NextStep::Kind::kKill: return "kill";
    case NextStep::Kind::kFinished: return "finished";
  }
  return "unknown";
}

JobReconciler::JobReconciler(spec::TrainingJob job, ReconcilerOptions options)
    : job_(std::move(job)),
      options_(std::move(options)) {
  if (!options_.guard_enabled) job_.spec.memory_guard.enabled = false;
  if (!options_.wall_clock) options_.wall_clock = Rfc3339Now;
  status_.total_steps = job_.spec.grpo.steps;
  status_.workers = job_.spec.workers;
  status_.micro_batch_size = job_.spec.grpo.micro_batch_size;
  status_.memory.host_limit_bytes = job_.spec.resources.memory_bytes;
  try {
    plan_options_.model = guard::JobModelShape(job_.spec);
  } catch (const hf::HfConfigError&) {
    // Unreadable here: see plan_options_.
  }
}

std::string JobReconciler::Now() const { return options_.wall_clock(); }

void JobReconciler::RequestStop(const std::string& reason) {
  if (!stop_requested_) stop_requested_ = reason;
}

void JobReconciler::RequestWorkers(int n) { workers_requested_ = n; }

void JobReconciler::Restore(const JobStatus& status, const guard::GuardHistory& history,
                            const spec::TrainingJob& running) {
  status_ = status;
  history_ = history;
  job_ = running;
  if (!options_.guard_enabled) job_.spec.memory_guard.enabled = false;
  unrequested_relaunches_ = status.restarts + status.reshards;
  generation_resumed_from_ = status.step;
}

void JobReconciler::MarkFailed(const std::string& reason) {
  if (!IsTerminal(status_.phase)) Finish(JobPhase::kFailed, reason);
}

void JobReconciler::Record(int64_t step, ActionType type, const std::string& reason) {
  ActionRecord a{step, type, reason, Now()};
  status_.actions.push_back(a);
  status_.last_action = a;
}

void JobReconciler::SetCondition(const std::string& type, bool on, const std::string& reason,
                                 const std::string& message) {
  const std::string value = on ? "True" : "False";
  for (Condition& c : status_.conditions) {
    if (c.type != type) continue;
    if (c.status != value) c.last_transition_time = Now();
    c.status = value;
    c.reason = reason;
    c.message = message;
    return;
  }
  status_.conditions.push_back({type, value, reason, message, Now()});
}

NextStep JobReconciler::Launch(const std::string& reason) {
  ++status_.generation;
  status_.workers = job_.spec.workers;
  status_.micro_batch_size = job_.spec.grpo.micro_batch_size;
  drain_sent_ = false;
  kill_sent_ = false;
  first_exit_at_.reset();
  first_crashed_rank_.reset();
  saw_step_this_generation_ = false;
  generation_resumed_from_ = status_.step;
  latest_by_rank_.clear();
  unfed_steps_.clear();
  NextStep next;
  next.kind = NextStep::Kind::kLaunch;
  next.launch.generation = status_.generation;
  next.launch.job = job_;
  next.launch.guard_history_json = history_.ToJson();
  next.reason = reason;
  return next;
}

NextStep JobReconciler::Finish(JobPhase phase, const std::string& message) {
  status_.phase = phase;
  status_.message = message;
  SetCondition("Running", false, JobPhaseName(phase), message);
  if (phase == JobPhase::kSucceeded) SetCondition("Succeeded", true, "AllStepsDone", message);
  if (phase == JobPhase::kFailed) {
    SetCondition("Failed", true, "GaveUp", message);
    Record(status_.step, ActionType::kFail, message);
  }
  NextStep next;
  next.kind = NextStep::Kind::kFinished;
  next.reason = message;
  return next;
}

void JobReconciler::Ingest(const Observation& observed) {
  if (observed.model_fetch && observed.model_fetch->generation == status_.generation) {
    status_.model_fetch = observed.model_fetch;
  }
  bool any = false;
  for (const protocol::StepRecord& r : observed.new_steps) {
    if (r.generation != status_.generation) continue;  // a straggler from an old generation
    any = true;
    if (!saw_step_this_generation_) {
      saw_step_this_generation_ = true;
      oom_kills_before_a_step_ = 0;
      generation_resumed_from_ = r.step - 1;
      // Steps the workers redo that the ledger has not counted yet: a crash whose
      // checkpoint was not visible, or a worker that resumed from further back than the
      // step its generation was expected to resume from (or not at all).
      if (unsettled_loss_from_step_) {
        status_.steps_lost += std::max<int64_t>(0, *unsettled_loss_from_step_ - (r.step - 1));
        unsettled_loss_from_step_.reset();
      }
    }
    latest_by_rank_[r.rank] = r;
    status_.step = std::max(status_.step, r.step);
    if (r.rank == 0) status_.final_reward = r.reward_mean;
    if (r.rank == 0 && r.heldout_accuracy >= 0) {
      status_.heldout_accuracy = r.heldout_accuracy;
    } else if (r.rank == 0 && r.heldout_accuracy_before >= 0) {
      status_.heldout_accuracy = r.heldout_accuracy_before;
    }
    MergeWorst(unfed_steps_[r.step], r);
  }
  if (!any) return;
  UpdateMemoryStatus();
  if (status_.phase == JobPhase::kPending || status_.phase == JobPhase::kRestarting ||
      status_.phase == JobPhase::kResharding) {
    status_.phase = JobPhase::kRunning;
    SetCondition("Running", true, "StepsCompleting",
                 "generation " + std::to_string(status_.generation) + " with " +
                     std::to_string(job_.spec.workers) + " worker(s)");
  }
}

void JobReconciler::MergeWorst(StepMemoryView& worst, const protocol::StepRecord& r) const {
  auto sooner = [](int a, int b) { return a == guard::kNever ? b : b == guard::kNever ? a : std::min(a, b); };
  worst.host_bytes = std::max(worst.host_bytes, r.host_bytes);
  worst.host_limit_bytes = r.host_limit_bytes > 0 ? r.host_limit_bytes : job_.spec.resources.memory_bytes;
  worst.gpu_bytes = std::max(worst.gpu_bytes, r.gpu_reserved_bytes);
  worst.gpu_limit_bytes = std::max(worst.gpu_limit_bytes, r.gpu_total_bytes);
  worst.host_growth_bytes_per_step = std::max(worst.host_growth_bytes_per_step, r.host_growth_bytes_per_step);
  worst.host_forecast_steps = sooner(worst.host_forecast_steps, r.host_forecast_steps);
  worst.host_threshold_steps = sooner(worst.host_threshold_steps, r.host_threshold_steps);
}

void JobReconciler::UpdateMemoryStatus() {
  // A step is complete for the supervisor once every rank has reported it (ranks agree at
  // step boundaries, so they are at most a step apart).
  int64_t all_passed = INT64_MAX;
  for (const auto& [rank, r] : latest_by_rank_) all_passed = std::min(all_passed, r.step);
  if (static_cast<int>(latest_by_rank_.size()) < job_.spec.workers) return;
  std::optional<StepMemoryView> newest;
  while (!unfed_steps_.empty() && unfed_steps_.begin()->first <= all_passed) {
    newest = unfed_steps_.begin()->second;
    unfed_steps_.erase(unfed_steps_.begin());
  }
  if (!newest) return;
  MemoryStatus& m = status_.memory;
  m.host_bytes = newest->host_bytes;
  m.host_limit_bytes = newest->host_limit_bytes;
  m.gpu_bytes = newest->gpu_bytes;
  m.gpu_limit_bytes = newest->gpu_limit_bytes;
  m.growth_bytes_per_step = newest->host_growth_bytes_per_step;
  m.forecast_steps_to_limit.reset();
  if (newest->host_forecast_steps != guard::kNever) m.forecast_steps_to_limit = newest->host_forecast_steps;
  // A /metrics scrape carries no threshold forecast: the limit forecast stands in for it.
  const int to_threshold =
      newest->host_threshold_steps != guard::kNever ? newest->host_threshold_steps : newest->host_forecast_steps;
  const bool pressure = to_threshold != guard::kNever && to_threshold <= job_.spec.memory_guard.horizon_steps;
  SetCondition("MemoryPressure", pressure, pressure ? "ForecastCrossesThreshold" : "BelowThreshold",
               "host " + Percent(m.host_bytes, m.host_limit_bytes) + " of the limit" +
                   (pressure ? ", forecast to cross the threshold within " + std::to_string(to_threshold) +
                                   " step(s)"
                             : ""));
}

NextStep JobReconciler::Reconcile(const Observation& observed) {
  if (IsTerminal(status_.phase)) {
    NextStep done;
    done.kind = NextStep::Kind::kFinished;
    done.reason = status_.message;
    return done;
  }
  if (status_.generation == 0) {
    if (stop_requested_) return Finish(JobPhase::kSuspended, *stop_requested_);
    if (job_.spec.suspend) return Finish(JobPhase::kSuspended, "spec.suspend is true");
    return Launch("first launch: " + std::to_string(job_.spec.workers) + " worker(s)");
  }
  Ingest(observed);

  if (observed.generation != status_.generation || observed.ranks.empty()) return {};

  int ended = 0;
  const RankObservation* crashed = nullptr;
  for (const RankObservation& r : observed.ranks) {
    if (!r.exit) continue;
    ++ended;
    if (!IsCleanExit(r.exit->exit_code) && !crashed) crashed = &r;
  }
  if (ended == static_cast<int>(observed.ranks.size())) return OnGenerationEnded(observed);

  NextStep next;
  if (ended > 0) {
    if (kill_sent_) return next;
    if (crashed) {
      kill_sent_ = true;
      first_crashed_rank_ = crashed->rank;
      next.kind = NextStep::Kind::kKill;
      next.reason = "rank " + std::to_string(crashed->rank) + " ended (" + crashed->exit->reason +
                    "); stopping the other ranks";
      return next;
    }
    if (!first_exit_at_) first_exit_at_ = observed.now;
    if (observed.now - *first_exit_at_ >= options_.peer_exit_timeout) {
      kill_sent_ = true;
      next.kind = NextStep::Kind::kKill;
      next.reason = "some ranks stopped cleanly but the others did not follow within " +
                    std::to_string(options_.peer_exit_timeout.count()) + " ms";
    }
    return next;
  }
  // Every rank is alive.
  const bool scale = workers_requested_ && *workers_requested_ != job_.spec.workers;
  if ((stop_requested_ || scale) && !drain_sent_) {
    drain_sent_ = true;
    next.kind = NextStep::Kind::kDrain;
    next.grace = options_.drain_grace;
    next.reason = stop_requested_ ? *stop_requested_
                                  : "resharding to " + std::to_string(*workers_requested_) +
                                        " workers on request";
  }
  return next;
}

NextStep JobReconciler::Relaunch(int64_t step, ActionType type, const std::string& reason,
                                 bool counts_as_restart, bool reshard) {
  if (counts_as_restart) {
    const int max = job_.spec.memory_guard.max_restarts;
    if (unrequested_relaunches_ >= max) {
      return Finish(JobPhase::kFailed, "gave up after " + std::to_string(unrequested_relaunches_) +
                                           " restarts (memoryGuard.maxRestarts = " + std::to_string(max) +
                                           "); another was needed because " + reason);
    }
    ++unrequested_relaunches_;
  }
  if (reshard) ++status_.reshards; else ++status_.restarts;
  Record(step, type, reason);
  status_.phase = reshard ? JobPhase::kResharding : JobPhase::kRestarting;
  // A planned stop checkpointed the step it stopped at: the next generation should
  // resume right after it. (OnCrash sets this to the checkpoint it already counted from.)
  if (!unsettled_loss_from_step_) unsettled_loss_from_step_ = status_.step;
  return Launch(reason);
}

NextStep JobReconciler::OnGenerationEnded(const Observation& observed) {
  int finished = 0, oom = 0;
  const RankObservation* guard_stop = nullptr;
  const RankObservation* crashed = nullptr;
  for (const RankObservation& r : observed.ranks) {
    const RankExit& e = *r.exit;
    if (e.exit_code == protocol::kExitInvalidSpec) {
      // The cause first: it is the line a user reads (progress view, summary, status).
      const std::string cause = ReasonTheWorkerGave(e);
      const std::string who = "rank " + std::to_string(r.rank) + " refused to start (exit 2)";
      return Finish(JobPhase::kFailed, cause.empty() ? who + " and gave no reason" : cause + " (" + who + ")");
    }
    if (e.oom_killed || e.exit_code == protocol::kExitGpuOom) ++oom;
    if (e.exit_code == protocol::kExitFinished) {
      ++finished;
    } else if (e.exit_code == protocol::kExitGuardStop) {
      if (!guard_stop) guard_stop = &r;
    } else if (e.exit_code != protocol::kExitDrained) {
      // The rank that says the most about why: an out-of-memory (the kernel's kill or a
      // CUDA OOM the worker caught), else the rank that ended first (its peers were killed
      // by us after it).
      auto out_of_memory = [](const RankExit& x) { return x.oom_killed || x.exit_code == protocol::kExitGpuOom; };
      if (!crashed || (out_of_memory(e) && !out_of_memory(*crashed->exit)) ||
          (!out_of_memory(*crashed->exit) && first_crashed_rank_ == r.rank)) {
        crashed = &r;
      }
    }
  }
  if (finished == static_cast<int>(observed.ranks.size())) {
    // Exit 0 means every step ran: the last ones may have finished between two reads of
    // the workers' progress (a fast worker can do dozens between scrapes).
    status_.step = std::max(status_.step, status_.total_steps);
    return Finish(JobPhase::kSucceeded, "all " + std::to_string(status_.total_steps) + " steps done");
  }
  if (crashed) return OnCrash(observed, *crashed, oom);
  if (stop_requested_) {
    Record(status_.step, ActionType::kSuspend, *stop_requested_);
    return Finish(JobPhase::kSuspended,
                  *stop_requested_ + "; the checkpoint at step " +
                      std::to_string(observed.checkpoint_step.value_or(status_.step)) + " is resumable");
  }
  if (guard_stop) return OnGuardStop(*guard_stop);

  // Every rank drained (75) and we did not ask for a stop: a scale request, or a drain
  // from outside (a node drain evicting pods). Resume either way.
  if (workers_requested_ && *workers_requested_ != job_.spec.workers) {
    const int from = job_.spec.workers;
    job_.spec.workers = guard::NearestWorkerCount(job_.spec, *workers_requested_, from);
    workers_requested_.reset();
    return Relaunch(status_.step, ActionType::kScale,
                    "resharded on request: workers " + std::to_string(from) + " -> " +
                        std::to_string(job_.spec.workers),
                    /*counts_as_restart=*/false, /*reshard=*/true);
  }
  if (resume_requested_) {
    const std::string reason = *resume_requested_;
    resume_requested_.reset();
    Record(status_.step, ActionType::kUnsuspend, reason);
    status_.phase = JobPhase::kPending;
    if (!unsettled_loss_from_step_) unsettled_loss_from_step_ = status_.step;
    return Launch(reason);
  }
  return Relaunch(status_.step, ActionType::kResume,
                  "workers drained (exit 75) without a stop request; resuming from the checkpoint", true,
                  false);
}

void JobReconciler::Resume(const std::string& reason) { resume_requested_ = reason; }

NextStep JobReconciler::OnCrash(const Observation& observed, const RankObservation& crashed, int oom_kills) {
  const RankExit& e = *crashed.exit;
  CountOutOfMemoryEnds(observed, oom_kills);
  const int64_t reached = status_.step;
  const int64_t checkpoint = observed.checkpoint_step.value_or(generation_resumed_from_);
  const std::string lost = CountStepsLost(observed);
  if (stop_requested_) {
    return Finish(JobPhase::kSuspended, *stop_requested_ + " (rank " + std::to_string(crashed.rank) +
                                            " ended with " + e.reason + " while draining)");
  }
  const std::string what = DescribeCrash(crashed, reached);
  // A CUDA out-of-memory is the GPU's OOM kill: counted with the kernel's, named apart.
  const bool gpu_oom_exit = e.exit_code == protocol::kExitGpuOom;
  const ActionType type = e.oom_killed    ? ActionType::kRestartAfterOOMKill
                          : gpu_oom_exit ? ActionType::kRestartAfterGpuOOM
                                         : ActionType::kRestartAfterCrash;
  const bool out_of_memory = e.oom_killed || gpu_oom_exit;

  if (EndsForInputsOutOfMemory(e)) return Finish(JobPhase::kFailed, OutOfMemoryReadingInputs(what));
  if (!options_.guard_enabled || KilledWhileLoading(e)) {
    NextStep next = Relaunch(reached, type, what + lost, true, false);
    if (next.kind == NextStep::Kind::kLaunch) {
      history_.RecordCrashRestart(static_cast<int>(checkpoint), out_of_memory);
      next.launch.guard_history_json = history_.ToJson();
    }
    return next;
  }
  // With the guard on, a crash that repeats at the same step escalates instead of looping.
  const guard::Decision d = guard::DecideAfterCrash(
      e.oom_killed ? guard::ExitCause::kOomKill : gpu_oom_exit ? guard::ExitCause::kGpuOom : guard::ExitCause::kCrash,
      static_cast<int>(reached + 1),
      static_cast<int>(checkpoint), job_.spec, history_, job_.spec.workers, plan_options_);
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

bool JobReconciler::KilledWhileLoading(const RankExit& e) const {
  return e.oom_killed && !saw_step_this_generation_ && !protocol::LoadedPhaseNextStep(e.termination_message);
}

void JobReconciler::CountOutOfMemoryEnds(const Observation& observed, int oom_kills) {
  status_.oom_kills += oom_kills;
  for (const RankObservation& r : observed.ranks) {
    if (r.exit && r.exit->exit_code == protocol::kExitGpuOom && !r.exit->oom_killed) ++status_.gpu_oom_kills;
  }
}

std::string JobReconciler::CountStepsLost(const Observation& observed) {
  const int64_t reached = status_.step;
  if (!observed.checkpoint_step) {
    unsettled_loss_from_step_ = reached;
    return "; resuming from the last checkpoint";
  }
  const int64_t l = std::max<int64_t>(0, reached - *observed.checkpoint_step);
  status_.steps_lost += l;
  unsettled_loss_from_step_ = std::min(reached, *observed.checkpoint_step);
  return "; resuming from checkpoint step " + std::to_string(*observed.checkpoint_step) + ", " +
         std::to_string(l) + " step(s) lost";
}

std::string JobReconciler::DescribeCrash(const RankObservation& crashed, int64_t reached) const {
  const RankExit& e = *crashed.exit;
  const std::string rank = "rank " + std::to_string(crashed.rank);
  if (e.oom_killed) {
    return rank + " was OOM-killed by the kernel " +
           (KilledWhileLoading(e) ? "while loading its model and data, before step " : "during step ") +
           std::to_string(reached + 1) + " (limit " + job_.spec.resources.memory + ")";
  }
  if (e.exit_code == protocol::kExitGpuOom) {
    std::string what = rank + " ran out of GPU memory during step " + std::to_string(reached + 1) + " (exit " +
                       std::to_string(protocol::kExitGpuOom) + ")";
    if (const auto report = protocol::GpuOomReport::FromJson(e.termination_message)) {
      what += ": " + report->Describe();
    } else if (!e.last_output.empty()) {
      what += ": " + e.last_output.substr(0, 200);
    }
    return what;
  }
  std::string what = rank + " crashed during step " + std::to_string(reached + 1) + " (" + e.reason + ", exit " +
                     std::to_string(e.exit_code) + ")";
  // On Kubernetes a worker that wrote no message has its log's tail there instead
  // (FallbackToLogsOnError): the reason is its error line, not a frame or a warning.
  const std::string said = ReasonTheWorkerGave(e);
  if (!said.empty()) what += ": " + said.substr(0, 200);
  return what;
}

bool JobReconciler::EndsForInputsOutOfMemory(const RankExit& e) {
  oom_kills_before_a_step_ = KilledWhileLoading(e) ? oom_kills_before_a_step_ + 1 : 0;
  return oom_kills_before_a_step_ >= kOomKillsBeforeAStepLimit;
}

std::string JobReconciler::OutOfMemoryReadingInputs(const std::string& what) const {
  return "out of memory before the first step, " + std::to_string(oom_kills_before_a_step_) +
         " times in a row: the worker runs out reading its inputs, which more workers or smaller batches do not "
         "change; check spec.model.path and spec.task.dataset (a file far larger than it should be?) (" +
         what + ")";
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
                    std::string("guard disabled: not applying the worker's ") +
                        guard::DecisionActionName(d.action) + " decision; resuming",
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
