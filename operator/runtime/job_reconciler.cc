#include "operator/runtime/job_reconciler.h"

#include <algorithm>
#include <ctime>

#include "core/guard/planner.h"
#include "core/hf/hf_config.h"
#include "core/protocol/exit_codes.h"

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
    : job_(std::move(job)), options_(std::move(options)) {
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
  memory_.Clear();
  NextStep next;
  next.kind = NextStep::Kind::kLaunch;
  next.launch.generation = status_.generation;
  next.launch.job = job_;
  next.launch.guard_history_json = history_.ToJson();
  next.reason = reason;
  return next;
}

NextStep JobReconciler::Finish(JobPhase phase, const std::string& message, const std::string& condition_reason) {
  status_.phase = phase;
  status_.message = message;
  SetCondition("Running", false, JobPhaseName(phase), message);
  if (phase == JobPhase::kSucceeded) SetCondition("Succeeded", true, "AllStepsDone", message);
  if (phase == JobPhase::kFailed) {
    SetCondition("Failed", true, condition_reason, message);
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
      generation_resumed_from_ = r.step - 1;
      crashes_.OnFirstStep(r.step, status_);
    }
    status_.step = std::max(status_.step, r.step);
    if (r.rank == 0) status_.final_reward = r.reward_mean;
    if (r.rank == 0 && r.heldout_accuracy >= 0) {
      status_.heldout_accuracy = r.heldout_accuracy;
    } else if (r.rank == 0 && r.heldout_accuracy_before >= 0) {
      status_.heldout_accuracy = r.heldout_accuracy_before;
    }
    memory_.Add(r, job_.spec.resources.memory_bytes);
  }
  if (!any) return;
  UpdateMemoryStatus();
  if (status_.phase == JobPhase::kPending || status_.phase == JobPhase::kRestarting ||
      status_.phase == JobPhase::kResharding) {
    status_.phase = JobPhase::kRunning;
    SetCondition("Running", true, "StepsCompleting",
                 "generation " + std::to_string(status_.generation) + " with " + std::to_string(job_.spec.workers) +
                     " worker(s)");
  }
}

void JobReconciler::UpdateMemoryStatus() {
  const std::optional<WorstRankMemory::View> newest = memory_.TakeNewestComplete(job_.spec.workers);
  if (!newest) return;
  const MemoryPressure p = ApplyMemoryView(*newest, job_.spec.memory_guard.horizon_steps, status_.memory);
  SetCondition("MemoryPressure", p.on, p.reason, p.message);
}

bool JobReconciler::DeadlineUp(std::chrono::steady_clock::time_point now) {
  const std::optional<int64_t>& limit = job_.spec.active_deadline_seconds;
  if (!limit || !active_since_) return false;
  if (!deadline_exceeded_ && now - *active_since_ >= std::chrono::seconds(*limit)) {
    deadline_exceeded_ = "spec.activeDeadlineSeconds (" + std::to_string(*limit) + " s) exceeded at step " +
                         std::to_string(status_.step) + " of " + std::to_string(status_.total_steps);
  }
  return deadline_exceeded_.has_value();
}

NextStep JobReconciler::FailForDeadline(bool workers_ended) {
  return Finish(JobPhase::kFailed,
                *deadline_exceeded_ + (workers_ended ? "; the workers stopped, the newest checkpoint is kept" : ""),
                "DeadlineExceeded");
}

NextStep JobReconciler::Reconcile(const Observation& observed) {
  if (IsTerminal(status_.phase)) return Finished();
  if (!active_since_) active_since_ = observed.now;
  if (status_.generation == 0) return FirstLaunch();
  Ingest(observed);
  // Past the deadline with no rank to drain, the job ends here; with ranks, they drain
  // first (OnEveryRankRunning) and their end is the job's (OnGenerationEnded).
  if (DeadlineUp(observed.now) && observed.ranks.empty()) return FailForDeadline(false);
  if (observed.generation != status_.generation || observed.ranks.empty()) return {};
  int ended = 0;
  const RankObservation* crashed = nullptr;
  for (const RankObservation& r : observed.ranks) {
    if (!r.exit) continue;
    ++ended;
    if (!protocol::IsOrderlyExit(r.exit->exit_code) && !crashed) crashed = &r;
  }
  if (ended == static_cast<int>(observed.ranks.size())) return OnGenerationEnded(observed);
  if (ended > 0) return OnSomeRanksEnded(observed, crashed);
  return OnEveryRankRunning();
}

NextStep JobReconciler::Finished() const {
  NextStep done;
  done.kind = NextStep::Kind::kFinished;
  done.reason = status_.message;
  return done;
}

NextStep JobReconciler::FirstLaunch() {
  if (stop_requested_) return Finish(JobPhase::kSuspended, *stop_requested_);
  if (job_.spec.suspend) return Finish(JobPhase::kSuspended, "spec.suspend is true");
  return Launch("first launch: " + std::to_string(job_.spec.workers) + " worker(s)");
}

NextStep JobReconciler::OnSomeRanksEnded(const Observation& observed, const RankObservation* crashed) {
  NextStep next;
  if (kill_sent_) return next;
  if (crashed) {
    kill_sent_ = true;
    first_crashed_rank_ = crashed->rank;
    next.kind = NextStep::Kind::kKill;
    next.reason =
        "rank " + std::to_string(crashed->rank) + " ended (" + crashed->exit->reason + "); stopping the other ranks";
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

NextStep JobReconciler::OnEveryRankRunning() {
  NextStep next;
  const bool scale = workers_requested_ && *workers_requested_ != job_.spec.workers;
  if ((stop_requested_ || scale || deadline_exceeded_) && !drain_sent_) {
    drain_sent_ = true;
    next.kind = NextStep::Kind::kDrain;
    next.grace = options_.drain_grace;
    next.reason = deadline_exceeded_ ? *deadline_exceeded_
                  : stop_requested_  ? *stop_requested_
                                     : "resharding to " + std::to_string(*workers_requested_) + " workers on request";
  }
  return next;
}

void JobReconciler::Resume(const std::string& reason) { resume_requested_ = reason; }

}  // namespace headroom::runtime
