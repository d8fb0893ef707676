#include "core/guard/policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/base/human_bytes.h"

namespace headroom::guard {

namespace {

// Why the forecast crosses: decides which actions can help.
enum class Cause {
  kLeak,   // sustained growth: a fresh process gets the memory back
  kState,  // the level itself (model state, caches) reaches the threshold
  kSpike,  // the level fits; the in-step peak driven by the batch does not
};

// Average rise per step, as a fraction of the limit, above which a history too short to
// classify is treated as a leak.
constexpr double kEarlyRiseFraction = 0.01;

const char* ResourceLabel(const std::string& resource) {
  return resource == "gpu" ? "GPU reserved memory" : "host working set";
}

std::string Steps(int n) { return std::to_string(n) + (n == 1 ? " step" : " steps"); }

std::string ThresholdPercent(double fraction) {
  return std::to_string(static_cast<int>(std::lround(fraction * 100))) + "%";
}

// Everything the candidate actions need to judge themselves.
struct Situation {
  const Forecast& forecast;
  const spec::TrainingJobSpec& spec;
  const GuardHistory& history;
  const Plan& plan;      // as passed: possibly corrected by measurements
  const Plan& baseline;  // uncorrected, for the current workers: how bytes scale with
                         // workers or micro-batch is read off uncorrected plans only
  int workers;
  const PlanOptions& plan_options;
  std::string resource;  // "host" | "gpu"
  const ResourceForecast& rf;
  const ResourceForecast& other;  // the other side
  double threshold_fraction;
  Cause cause;
  int min_progress;  // steps a restart must have bought to be tried again

  int64_t Threshold() const { return rf.threshold_bytes; }
  bool OnGpu() const { return resource == "gpu"; }
  // A plan is one rank's. On the host the forecast reads the pod's cgroup, which its
  // ranksPerPod ranks share (docs/design.md, "Ranks per pod"): the pod holds that many plans.
  int64_t PlanSide(const Plan& p) const {
    return OnGpu() ? p.gpu_total_bytes : p.host_total_bytes * std::max(1, spec.ranks_per_pod);
  }
  // Highest predicted peak within the horizon.
  int64_t HorizonPeak() const {
    int64_t m = 0;
    for (int64_t v : rf.predicted_peak_bytes) m = std::max(m, v);
    return m;
  }
};

struct Candidate {
  bool ok = false;
  std::string why;  // why it helps (ok) or why it was skipped (!ok)
  Decision decision;
};

Candidate Skip(std::string why) {
  Candidate c;
  c.why = std::move(why);
  return c;
}

// What the planner says an action leaves of the peak on the side that crosses: the
// measured peak (the forecast's highest within the horizon, or the last step's) less the
// bytes the plan says the action saves there, scaled to the measurement (clamped to
// [0.25, 4]: only the plan's shape is trusted, not its absolute size). It fits when it
// is under the threshold with the forecast's margin.
struct PlannedPeak {
  double measured = 0;
  double scale = 1;
  double margin = 0;
  double threshold = 0;
  int64_t planned_now = 0;  // the uncorrected plan of the job as it runs, this side

  double After(int64_t planned_after) const {
    return measured - static_cast<double>(planned_now - planned_after) * scale;
  }
  bool Fits(double after) const { return after + margin <= threshold; }
  // "planned peak 11.2 GiB of a 14.7 GiB threshold, now 17.9 GiB"
  std::string Numbers(double after) const {
    return "planned peak " + HumanBytes(after) + " of a " + HumanBytes(threshold) + " threshold, now " +
           HumanBytes(measured);
  }
};

PlannedPeak PlannedPeakOf(const Situation& s) {
  PlannedPeak p;
  p.planned_now = s.PlanSide(s.baseline);
  p.measured = static_cast<double>(std::max(s.HorizonPeak(), s.rf.current_peak_bytes));
  p.scale = p.planned_now > 0 ? std::clamp(p.measured / static_cast<double>(p.planned_now), 0.25, 4.0) : 1.0;
  p.margin = static_cast<double>(std::max<int64_t>(0, s.rf.forecast_margin_bytes));
  p.threshold = static_cast<double>(s.Threshold());
  return p;
}

// A restart whose next step came back to the level it restarted at bought nothing: what
// grew there is needed at that step of the run (a level shift that looked like a leak),
// and a fresh process only grows it again. Not repeated for that resource.
std::string RestartReclaimedNothingWhy(const Situation& s) {
  std::string when = s.history.restart_resource == s.resource && s.history.guard_restart_step >= 0
                         ? " at step " + std::to_string(s.history.guard_restart_step) + " (from " +
                               HumanBytes(static_cast<double>(s.history.restart_level_bytes)) + ")"
                         : "";
  return "restart: the guard's restart" + when + " reclaimed nothing, the " + s.resource +
         " level came back at the same step: not repeated for this cause";
}

Candidate TryRestart(const Situation& s) {
  if (s.cause != Cause::kLeak) {
    return Skip("restart: would not help, the memory is needed " +
                std::string(s.cause == Cause::kSpike ? "by the step's batch" : "state") + ", not leaked");
  }
  if (s.history.RestartReclaimedNothing(s.resource)) {
    return Skip(RestartReclaimedNothingWhy(s));
  }
  const spec::MemoryGuardSpec& g = s.spec.memory_guard;
  if (s.history.restarts >= g.max_restarts) {
    return Skip("restart: all " + std::to_string(g.max_restarts) + " restarts of maxRestarts used");
  }
  const int progress = s.history.StepsSinceLastRestart(s.forecast.step);
  if (progress < s.min_progress) {
    return Skip("restart: the last one (at step " + std::to_string(s.history.last_restart_step) + ") bought only " +
                Steps(std::max(0, progress)) + " of progress");
  }
  Candidate c;
  c.ok = true;
  c.decision.action = DecisionAction::kRestart;
  c.why = "restart from a checkpoint at step " + std::to_string(s.forecast.step) + " to reclaim leaked memory";
  return c;
}

Candidate TryReshard(const Situation& s) {
  const spec::TrainingJobSpec& spec = s.spec;
  if (s.workers >= spec.max_workers) {
    return Skip("reshard: already at maxWorkers (" + std::to_string(spec.max_workers) + ")");
  }
  const int64_t planned_now = s.PlanSide(s.baseline);
  if (planned_now <= 0) return Skip("reshard: the plan puts nothing on the " + s.resource + " side");
  if (s.cause == Cause::kSpike && s.plan.Find("generation cache") != nullptr) {
    // Activations per micro-batch do not shrink with more workers; the rollout batch does.
    const PlanComponent* cache = s.plan.Find("generation cache");
    const PlanComponent* act = s.plan.Find("activations");
    int64_t cache_side = s.OnGpu() ? cache->gpu_bytes : cache->host_bytes;
    int64_t act_side = act ? (s.OnGpu() ? act->gpu_bytes : act->host_bytes) : 0;
    if (cache_side < act_side) {
      return Skip("reshard: the spike is activations per micro-batch, which more workers do not shrink");
    }
  }
  // Scale the plan by what we measure, so a wrong estimate of the absolute size does not
  // matter: only how the per-worker bytes fall with the worker count.
  const PlannedPeak peak = PlannedPeakOf(s);
  const double measured = peak.measured;
  const double scale = measured / planned_now;
  std::string last_reason;
  double expected = 0;
  const int w = FindWorkerCount(spec, s.workers + 1, spec.max_workers, [&](int n) {
    expected = s.PlanSide(PlanMemory(spec, n, s.plan_options)) * scale;
    if (s.cause == Cause::kLeak) {
      // A leak keeps growing wherever it runs; reshard only as an escalation that lowers
      // the per-worker level, to the first count that lowers it.
      return expected < measured;
    }
    if (!peak.Fits(expected)) {
      last_reason = "would not fit at " + std::to_string(n) + " workers: " + peak.Numbers(expected);
      return false;
    }
    return true;
  });
  if (w > 0) {
    Candidate c;
    c.ok = true;
    c.decision.action = DecisionAction::kReshard;
    c.decision.target_workers = w;
    c.why = "reshard from " + std::to_string(s.workers) + " to " + std::to_string(w) +
            " workers: " + peak.Numbers(expected) + " per worker on the " + s.resource +
            " side (planned, scaled to the measurement)";
    return c;
  }
  if (!last_reason.empty()) return Skip("reshard: " + last_reason);
  return Skip("reshard: no worker count in (" + std::to_string(s.workers) + ", " + std::to_string(spec.max_workers) +
              "] divides the batch and lowers the per-worker memory");
}

// bytes the plan puts on `side` for offloadable state (parameters, reference model,
// gradients and optimizer); which of them move depends on the flags.
int64_t OffloadableBytes(const Plan& plan, bool gpu_side, bool params, bool optimizer) {
  int64_t total = 0;
  for (const PlanComponent& c : plan.components) {
    bool is_param = c.name == "parameters" || c.name == "reference model";
    bool is_optim = c.name == "optimizer" || c.name == "gradients";
    if ((params && is_param) || (optimizer && is_optim)) total += gpu_side ? c.gpu_bytes : c.host_bytes;
  }
  return total;
}

Candidate TryShrinkMicroBatch(const Situation& s) {
  if (s.cause == Cause::kState)
    return Skip("shrinkMicroBatch: the level itself crosses; smaller micro-batches cannot help");
  const int micro = s.spec.grpo.micro_batch_size;
  if (micro <= 1) return Skip("shrinkMicroBatch: microBatchSize is already 1");
  const int h = std::clamp(s.rf.steps_to_threshold, 1, static_cast<int>(s.rf.predicted_peak_bytes.size()));
  const double end = static_cast<double>(s.rf.predicted_end_bytes[h - 1]);
  const double excess = static_cast<double>(s.rf.predicted_peak_bytes[h - 1]) - end;
  const double room = static_cast<double>(s.Threshold()) - end;
  if (excess <= 0 || room <= 0) {
    return Skip("shrinkMicroBatch: the step's peak is not what crosses (no room below the threshold for any batch)");
  }
  // The in-step excess (activations, logits) scales with the micro-batch; keep 10% spare.
  int target = static_cast<int>(std::floor(micro * 0.9 * room / excess));
  // The planner's view, scaled to the measurement, must agree.
  const int64_t planned_now = s.PlanSide(s.baseline);
  if (planned_now > 0) {
    PlanCorrection corr;
    double scale = static_cast<double>(s.HorizonPeak()) / planned_now;
    (s.OnGpu() ? corr.gpu_scale : corr.host_scale) = std::clamp(scale, 0.25, 4.0);
    int planned = LargestFittingMicroBatch(s.spec, s.workers, s.plan_options, corr);
    if (planned > 0 && planned < micro) target = std::min(target, planned);
  }
  target = std::clamp(target, 1, micro - 1);
  // The proof: the measured peak less the in-step part the smaller micro-batch sheds, by
  // how the plan's token-driven bytes (activations and logits) fall from `micro` to the
  // target; the largest target at or under the estimate above that fits with the
  // forecast's margin.
  const PlannedPeak peak = PlannedPeakOf(s);
  auto token_driven = [&](int m) {
    spec::TrainingJobSpec with = s.spec;
    with.grpo.micro_batch_size = m;
    const Plan p = PlanMemory(with, s.workers, s.plan_options);
    return static_cast<double>(s.OnGpu() ? p.gpu_activation_bytes : p.host_activation_bytes);
  };
  const double now_driven = token_driven(micro);
  auto after = [&](int m) {
    const double ratio = now_driven > 0 ? token_driven(m) / now_driven : static_cast<double>(m) / micro;
    return peak.measured - excess * (1 - ratio);
  };
  while (target > 1 && !peak.Fits(after(target))) --target;
  if (!peak.Fits(after(target))) {
    return Skip("shrinkMicroBatch: would not fit even at microBatchSize 1: " + peak.Numbers(after(1)));
  }
  Candidate c;
  c.ok = true;
  c.decision.action = DecisionAction::kShrinkMicroBatch;
  c.decision.target_micro_batch_size = target;
  c.why = "shrink microBatchSize from " + std::to_string(micro) + " to " + std::to_string(target) + ": " +
          peak.Numbers(after(target)) + " (the step's batch adds " + HumanBytes(excess) + " on top of a level of " +
          HumanBytes(end) + ", and that part scales with the micro-batch)";
  return c;
}

// The spec refuses LoRA dropout with activation checkpointing (a recomputed block would
// draw another dropout mask than its forward did), so the guard must not propose it.
constexpr const char* kLoraDropoutNote =
    "LoRA dropout (spec.model.lora.dropout > 0) cannot be recomputed with the same mask";
bool LoraDropoutForbidsRecompute(const spec::TrainingJobSpec& spec) {
  return spec.model.lora.enabled() && spec.model.lora.dropout > 0;
}

// Activation checkpointing lowers the step's activations (and, on a GPU, the weight casts
// its backward keeps) to what recomputed blocks need. The planner says by how much: the
// plan with it against the plan without, scaled to the measurement like the other
// targets, must bring the peak under the threshold with the forecast's margin.
Candidate TryEnableActivationCheckpointing(const Situation& s) {
  constexpr const char* kName = "enableActivationCheckpointing";
  if (s.spec.grpo.activation_checkpointing) return Skip(std::string(kName) + ": already on");
  if (s.spec.sharding.stage >= 3) return Skip(std::string(kName) + ": ZeRO stage 3 recomputes every block already");
  if (LoraDropoutForbidsRecompute(s.spec)) return Skip(std::string(kName) + ": " + kLoraDropoutNote);
  if (s.cause == Cause::kLeak) return Skip(std::string(kName) + ": growth from step to step is not the activations");
  const int64_t planned_now = s.PlanSide(s.baseline);
  if (planned_now <= 0) return Skip(std::string(kName) + ": the plan puts nothing on the " + s.resource + " side");
  spec::TrainingJobSpec with = s.spec;
  with.grpo.activation_checkpointing = true;
  const PlannedPeak peak = PlannedPeakOf(s);
  const double after = peak.After(s.PlanSide(PlanMemory(with, s.workers, s.plan_options)));
  const std::string numbers = peak.Numbers(after);
  if (!peak.Fits(after)) return Skip(std::string(kName) + ": would not fit: " + numbers);
  Candidate c;
  c.ok = true;
  c.decision.action = DecisionAction::kEnableActivationCheckpointing;
  c.why = "enable activation checkpointing: " + numbers + " (blocks recomputed in backward)";
  return c;
}

// A token budget cuts the update's micro-batches by padded tokens, so the step's
// activations and logits shrink with it. The largest budget (at least one full-length
// sequence) whose plan, scaled to the measurement, fits under the threshold with the
// forecast's margin; a budget that is off counts as microBatchSize full-length rows.
Candidate TryShrinkTokenBudget(const Situation& s) {
  constexpr const char* kName = "shrinkTokenBudget";
  if (s.cause == Cause::kState) return Skip(std::string(kName) + ": the level itself crosses; a budget cannot help");
  if (s.cause == Cause::kLeak) return Skip(std::string(kName) + ": growth from step to step is not the batch");
  const int seq = s.spec.grpo.max_prompt_length + s.spec.grpo.max_response_length;
  const int now = EffectiveTokenBudget(s.spec.grpo);
  if (now <= seq) return Skip(std::string(kName) + ": the budget is already one full-length sequence");
  const PlannedPeak peak = PlannedPeakOf(s);
  if (peak.planned_now <= 0) {
    return Skip(std::string(kName) + ": the plan puts nothing on the " + s.resource + " side");
  }
  auto after = [&](int budget) {
    spec::TrainingJobSpec with = s.spec;
    with.grpo.max_tokens_per_micro_batch = budget;
    return peak.After(s.PlanSide(PlanMemory(with, s.workers, s.plan_options)));
  };
  auto fits = [&](int budget) { return peak.Fits(after(budget)); };
  auto numbers = [&](int budget) { return peak.Numbers(after(budget)); };
  if (!fits(seq))
    return Skip(std::string(kName) + ": would not fit even at " + std::to_string(seq) + " tokens: " + numbers(seq));
  // The planned peak grows with the budget: the largest fitting one, by bisection.
  int lo = seq, hi = now - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  Candidate c;
  c.ok = true;
  c.decision.action = DecisionAction::kShrinkTokenBudget;
  c.decision.target_max_tokens_per_micro_batch = lo;
  c.why = "shrink maxTokensPerMicroBatch from " + std::to_string(now) + " to " + std::to_string(lo) +
          " tokens: " + numbers(lo);
  return c;
}

Candidate TryOffload(const Situation& s, bool enable) {
  const char* name = enable ? "enableOffload" : "disableOffload";
  const spec::ShardingSpec& sh = s.spec.sharding;
  if (s.spec.resources.gpus <= 0) return Skip(std::string(name) + ": no GPU, everything is on the host already");
  if (enable != s.OnGpu()) {
    return Skip(std::string(name) + ": moves memory onto the " + (enable ? "host" : "GPU") + ", not away from it");
  }
  if (!enable && !sh.offload_params && !sh.offload_optimizer) return Skip("disableOffload: offload is already off");
  if (enable && sh.offload_params && sh.offload_optimizer) return Skip("enableOffload: offload is already on");
  if (enable && s.history.offload_disabled > 0) {
    return Skip("enableOffload: the guard disabled offload before; turning it back on would oscillate");
  }
  if (!enable && s.history.offload_enabled > 0) {
    return Skip("disableOffload: the guard enabled offload before; turning it back off would oscillate");
  }
  const bool params = enable ? !sh.offload_params : sh.offload_params;
  const bool optimizer = enable ? !sh.offload_optimizer : sh.offload_optimizer;
  const int64_t planned_here = s.PlanSide(s.plan);
  const double scale = planned_here > 0 ? static_cast<double>(s.rf.current_bytes) / planned_here : 1.0;
  // Enabling moves every rank of a pod onto the host they share.
  const double ranks_moving = enable ? std::max(1, s.spec.ranks_per_pod) : 1;
  const double moved =
      OffloadableBytes(s.plan, /*gpu_side=*/enable, params, optimizer) * std::max(scale, 1.0) * ranks_moving;
  const ResourceForecast& dest = s.other;
  if (!dest.present && enable) {
    // Host is always there; a missing host forecast means no data yet.
    return Skip(std::string(name) + ": no measurement of the host side yet");
  }
  if (dest.limit_bytes <= 0) return Skip(std::string(name) + ": the destination's limit is unknown");
  int64_t dest_peak = 0;
  for (int64_t v : dest.predicted_peak_bytes) dest_peak = std::max(dest_peak, v);
  dest_peak = std::max(dest_peak, dest.current_peak_bytes);
  if (dest_peak + moved > dest.threshold_bytes) {
    return Skip(std::string(name) + ": the " + (enable ? "host" : "GPU") + " has no room for " + HumanBytes(moved) +
                " (forecast " + HumanBytes(static_cast<double>(dest_peak)) + " of a " +
                HumanBytes(static_cast<double>(dest.threshold_bytes)) + " threshold)");
  }
  const PlannedPeak peak = PlannedPeakOf(s);
  const double after = peak.measured - moved;
  if (!peak.Fits(after)) {
    return Skip(std::string(name) + ": moving " + HumanBytes(moved) + " would not fit: " + peak.Numbers(after));
  }
  Candidate c;
  c.ok = true;
  c.decision.action = enable ? DecisionAction::kEnableOffload : DecisionAction::kDisableOffload;
  if (params) c.decision.target_offload_params = enable;
  if (optimizer) c.decision.target_offload_optimizer = enable;
  std::string what = params && optimizer ? "parameters and optimizer state" : params ? "parameters" : "optimizer state";
  c.why = std::string(enable ? "enable offload: move " : "disable offload: move ") + what + " (about " +
          HumanBytes(moved) + ") to the " + (enable ? "host" : "GPU") + ": " + peak.Numbers(after) + "; the " +
          (enable ? "host" : "GPU") + " has room (forecast " + HumanBytes(static_cast<double>(dest_peak)) + " of a " +
          HumanBytes(static_cast<double>(dest.threshold_bytes)) + " threshold)";
  return c;
}

Candidate TryAction(spec::GuardAction a, const Situation& s) {
  switch (a) {
    case spec::GuardAction::kRestart: return TryRestart(s);
    case spec::GuardAction::kReshard: return TryReshard(s);
    case spec::GuardAction::kShrinkMicroBatch: return TryShrinkMicroBatch(s);
    case spec::GuardAction::kShrinkTokenBudget: return TryShrinkTokenBudget(s);
    case spec::GuardAction::kEnableActivationCheckpointing: return TryEnableActivationCheckpointing(s);
    case spec::GuardAction::kDisableOffload: return TryOffload(s, /*enable=*/false);
    case spec::GuardAction::kEnableOffload: return TryOffload(s, /*enable=*/true);
  }
  return Skip("unknown action");
}

// The first step at which a crossing in view happens (threshold or, with the margin, the limit).
int FirstCrossing(const ResourceForecast& rf) {
  constexpr int kFar = std::numeric_limits<int>::max();
  const int t = rf.steps_to_threshold == kNever ? kFar : rf.steps_to_threshold;
  const int l = rf.steps_to_limit_with_margin == kNever ? kFar : rf.steps_to_limit_with_margin;
  return std::min(t, l);
}

// How close a resource's forecast is to its threshold (for picking what to report).
double Pressure(const ResourceForecast& rf) {
  if (!rf.present || rf.threshold_bytes <= 0) return -1;
  int64_t peak = std::max(rf.current_peak_bytes, rf.NextPeak());
  return static_cast<double>(peak) / rf.threshold_bytes;
}

// Steps within which the limit, allowing for this run's forecast margin, makes unconfirmed
// growth worth acting on: at 2 the decision after this one is still in time, so a peak that
// beats its forecast by more than the margin once still meets a guard that acts.
constexpr int kSpareSteps = 2;
// Steps of growth a trend must rest on before the limit two steps away is acted on: a
// slope fitted to four or five noisy steps can be noise or a warm-up's first rise, and one
// step away is late enough to trust it.
constexpr int kSpareEvidenceSteps = 6;

// Whether a resource's forecast calls for a decision now: the threshold within the horizon,
// or growth bringing the limit (with the margin) within kSpareSteps.
bool CrossingInView(const ResourceForecast& rf, int horizon) {
  if (rf.steps_to_threshold != kNever && rf.steps_to_threshold <= horizon) return true;
  const int within = rf.trend_steps >= kSpareEvidenceSteps ? kSpareSteps : 1;
  return rf.growth_bytes_per_step > 0 && rf.steps_to_limit_with_margin != kNever &&
         rf.steps_to_limit_with_margin <= within;
}

// Why a crossing in view is enough to act on now; empty: not yet. A crossing projected
// from growth needs evidence, since a warm-up's steep first steps and a sawtooth's first
// tooth rise like a leak and a restart helps neither (the warm-up comes back, the tooth
// drops by itself): either the growth is a confirmed leak, or the limit itself, allowing
// for how far this run's peaks have beaten their forecasts, comes within kSpareSteps.
// Crossings that project no growth (the level is there, or the next batch's known token
// count spikes the peak) are acted on at once: waiting brings no new evidence.
std::string EvidenceToAct(const ResourceForecast& rf) {
  if (rf.growth_bytes_per_step <= 0) return "no growth projected";
  if (rf.trend_confirmed) return "a leak confirmed over " + Steps(rf.trend_steps);
  const int within = rf.trend_steps >= kSpareEvidenceSteps ? kSpareSteps : 1;
  if (rf.steps_to_limit_with_margin != kNever && rf.steps_to_limit_with_margin <= within) {
    std::string when = rf.steps_to_limit_with_margin == 1 ? "for the next step" : "within " + Steps(kSpareSteps);
    if (rf.forecast_margin_bytes <= 0) return "the limit itself is forecast " + when;
    return "the limit itself is forecast " + when + ", allowing for this run's forecast error of " +
           HumanBytes(static_cast<double>(rf.forecast_margin_bytes));
  }
  return "";
}

void FillForecastFields(Decision& d, const ResourceForecast& rf) {
  d.forecast_peak_bytes = 0;
  for (int64_t v : rf.predicted_peak_bytes) d.forecast_peak_bytes = std::max(d.forecast_peak_bytes, v);
  d.steps_to_limit = rf.steps_to_limit;
  d.growth_bytes_per_step = rf.growth_bytes_per_step;
  d.memory_class = MemoryClassName(rf.memory_class);
  d.level_bytes = rf.current_bytes;
}

}  // namespace

namespace {

// The resource that crosses first within the horizon (ties: the one under more
// pressure), among those with the evidence to act now; the others are said to be waiting.
struct Crossing {
  const ResourceForecast* forecast = nullptr;
  std::string resource;
  std::string waiting;  // "; gpu forecast crosses ... waiting for evidence", per resource
};

Crossing FirstCrossingToActOn(const Forecast& forecast, const spec::MemoryGuardSpec& g, int horizon) {
  Crossing c;
  for (const auto& [name, rf] : {std::pair<std::string, const ResourceForecast*>{"host", &forecast.host},
                                 std::pair<std::string, const ResourceForecast*>{"gpu", &forecast.gpu}}) {
    if (!rf->present || rf->limit_bytes <= 0 || !CrossingInView(*rf, horizon)) continue;
    if (EvidenceToAct(*rf).empty()) {
      const double fraction = name == "host" ? g.host_threshold : g.gpu_threshold;
      c.waiting += "; " + name + " forecast crosses the " + ThresholdPercent(fraction) + " threshold in " +
                   Steps(rf->steps_to_threshold) + " on growth seen over " + Steps(rf->trend_steps) +
                   (rf->warming_up ? " that is levelling off" : "") +
                   ", not a confirmed leak, and the limit is not forecast within " + Steps(kSpareSteps) +
                   ": waiting for evidence";
      continue;
    }
    if (c.forecast == nullptr || FirstCrossing(*rf) < FirstCrossing(*c.forecast) ||
        (FirstCrossing(*rf) == FirstCrossing(*c.forecast) && Pressure(*rf) > Pressure(*c.forecast))) {
      c.forecast = rf;
      c.resource = name;
    }
  }
  return c;
}

// No action: the reason says where each resource stands and why nothing is done.
Decision NoAction(Decision d, const Forecast& forecast, const spec::MemoryGuardSpec& g, int horizon,
                  const std::string& waiting) {
  const bool host_first = Pressure(forecast.host) >= Pressure(forecast.gpu);
  const ResourceForecast& shown = host_first ? forecast.host : forecast.gpu;
  if (shown.present) {
    d.resource = host_first ? "host" : "gpu";
    FillForecastFields(d, shown);
  }
  std::string text;
  if (forecast.host.present) text += "host " + forecast.host.Describe();
  if (forecast.gpu.present) text += std::string(text.empty() ? "" : "; ") + "gpu " + forecast.gpu.Describe();
  if (!g.enabled) {
    d.reason = (text.empty() ? "" : text + "; ") + "memory guard disabled";
  } else {
    d.reason = (text.empty() ? std::string("no measurements yet") : text) +
               (waiting.empty() ? "; no forecast crosses a threshold within " + Steps(horizon) : waiting);
  }
  return d;
}

Cause ClassifyCause(const ResourceForecast& rf) {
  const int h = std::clamp(rf.steps_to_threshold, 1, static_cast<int>(rf.predicted_end_bytes.size()));
  // Too early to classify, but rising fast at every step so far: treat it as a leak, since
  // a restart is the cheapest action and the no-progress rule escalates if it is not one.
  const bool early_rise = rf.memory_class == MemoryClass::kUnknown && rf.limit_bytes > 0 &&
                          rf.raw_growth_bytes_per_step > kEarlyRiseFraction * rf.limit_bytes;
  if (rf.memory_class == MemoryClass::kLeak || early_rise) return Cause::kLeak;
  if (rf.predicted_end_bytes[h - 1] >= rf.threshold_bytes || rf.warming_up) return Cause::kState;
  return Cause::kSpike;
}

// "host working set ...; forecast peak ... crosses the 90% threshold in 1 step (...)".
std::string DescribeSituation(const ResourceForecast& rf, const std::string& resource, double fraction, Cause cause,
                              int horizon, int64_t forecast_peak_bytes) {
  const bool threshold_in_horizon = rf.steps_to_threshold != kNever && rf.steps_to_threshold <= horizon;
  std::string situation = std::string(ResourceLabel(resource)) + " " + rf.Describe() + "; forecast peak " +
                          HumanBytes(static_cast<double>(forecast_peak_bytes)) +
                          (threshold_in_horizon ? " crosses the " + ThresholdPercent(fraction) + " threshold in " +
                                                      Steps(rf.steps_to_threshold)
                                                : std::string(" is still under the threshold")) +
                          " (" + EvidenceToAct(rf) + ")";
  if (cause == Cause::kSpike && rf.next_step_tokens > 0) {
    situation += " (next batch " + std::to_string(rf.next_step_tokens) + " tokens)";
  }
  return situation;
}

std::string JoinSkipped(const std::vector<std::string>& skipped) {
  std::string out;
  for (size_t i = 0; i < skipped.size(); ++i) out += (i ? "; " : "") + skipped[i];
  return out;
}

// The first of spec.memoryGuard.actions that can help, or fail naming why each could not.
Decision FirstActionThatHelps(Decision d, const Situation& s, const std::string& situation) {
  std::vector<std::string> skipped;
  for (spec::GuardAction a : s.spec.memory_guard.actions) {
    Candidate c = TryAction(a, s);
    if (!c.ok) {
      skipped.push_back(c.why);
      continue;
    }
    Decision out = c.decision;
    out.step = d.step;
    out.resource = d.resource;
    FillForecastFields(out, s.rf);
    out.reason = situation + ": " + c.why + (skipped.empty() ? "" : " (skipped " + JoinSkipped(skipped) + ")");
    return out;
  }
  // A leak whose restart reclaimed nothing, with nothing else that fits: while the level
  // is still below the threshold, carry on (the forecast is watched at every step) rather
  // than fail a job that may never reach it.
  if (s.cause == Cause::kLeak && s.history.RestartReclaimedNothing(s.resource) &&
      s.rf.current_peak_bytes < s.Threshold() && s.rf.current_bytes < s.Threshold()) {
    d.action = DecisionAction::kNone;
    d.reason = situation + ": carrying on, the level is below the " + ThresholdPercent(s.threshold_fraction) +
               " threshold and nothing else fits (" + JoinSkipped(skipped) + ")";
    return d;
  }
  d.action = DecisionAction::kFail;
  d.reason = situation + ": nothing left to try" +
             (s.spec.memory_guard.actions.empty() ? std::string(" (spec.memoryGuard.actions is empty)")
                                                  : " (" + JoinSkipped(skipped) + ")");
  return d;
}

}  // namespace

Decision Decide(const Forecast& forecast, const spec::TrainingJobSpec& spec, const GuardHistory& history,
                const Plan* plan_in, int current_workers, const PlanOptions& plan_options) {
  Decision d;
  d.step = forecast.step;
  const spec::MemoryGuardSpec& g = spec.memory_guard;
  const int horizon = std::max(1, g.horizon_steps);

  const Crossing crossing = FirstCrossingToActOn(forecast, g, horizon);
  if (crossing.forecast == nullptr || !g.enabled) return NoAction(d, forecast, g, horizon, crossing.waiting);

  const ResourceForecast& rf = *crossing.forecast;
  const std::string& resource = crossing.resource;
  const ResourceForecast& other = resource == "host" ? forecast.gpu : forecast.host;
  d.resource = resource;
  FillForecastFields(d, rf);
  const double fraction = resource == "host" ? g.host_threshold : g.gpu_threshold;
  const Cause cause = ClassifyCause(rf);
  const std::string situation = DescribeSituation(rf, resource, fraction, cause, horizon, d.forecast_peak_bytes);

  Plan own_plan;
  const Plan* plan = plan_in;
  const int workers = std::max(1, current_workers);
  if (plan == nullptr) {
    own_plan = PlanMemory(spec, workers, plan_options);
    plan = &own_plan;
  }
  const Plan baseline = PlanMemory(spec, workers, plan_options);
  Situation s{forecast, spec, history, *plan,    baseline, workers,    plan_options,
              resource, rf,   other,   fraction, cause,    horizon + 1};
  return FirstActionThatHelps(d, s, situation);
}

Decision DecideAfterCrash(ExitCause cause, int failed_step, int checkpoint_step, const spec::TrainingJobSpec& spec,
                          const GuardHistory& history, int current_workers, const PlanOptions& plan_options) {
  Decision d;
  d.step = checkpoint_step;
  d.resource = cause == ExitCause::kOomKill ? "host" : cause == ExitCause::kGpuOom ? "gpu" : "";
  const spec::MemoryGuardSpec& g = spec.memory_guard;
  const int lost = std::max(0, failed_step - checkpoint_step);
  std::string what =
      cause == ExitCause::kOomKill  ? "worker OOM-killed by the kernel at step " + std::to_string(failed_step)
      : cause == ExitCause::kGpuOom ? "worker ran out of GPU memory at step " + std::to_string(failed_step)
                                    : "worker crashed at step " + std::to_string(failed_step);
  what += " (" + Steps(lost) + " lost since the checkpoint at step " + std::to_string(checkpoint_step) + ")";

  if (history.restarts >= g.max_restarts) {
    d.action = DecisionAction::kFail;
    d.reason = what + ": all " + std::to_string(g.max_restarts) + " restarts of maxRestarts used, giving up";
    return d;
  }
  const int min_progress = std::max(1, g.horizon_steps) + 1;
  const bool no_progress = history.last_restart_step >= 0 && history.crash_restarts > 0 &&
                           failed_step - history.last_restart_step < min_progress;
  if (!no_progress) {
    d.action = DecisionAction::kRestart;
    d.reason = what + ": restart from the checkpoint at step " + std::to_string(checkpoint_step);
    return d;
  }
  // A crash at or before the step the last restart resumed from (a worker that failed
  // before its first step, or one that fell back to an older checkpoint) made no progress
  // at all: said as such, not as a count of steps that would be zero or negative.
  const int since_restart = failed_step - history.last_restart_step;
  const std::string restart_at = "the restart at step " + std::to_string(history.last_restart_step);
  std::string again = what + (since_restart > 0 ? ", again within " + Steps(since_restart) + " of " + restart_at
                                                : ", again without getting past " + restart_at);
  if (cause == ExitCause::kCrash) {
    d.action = DecisionAction::kFail;
    d.reason = again + ": a crash loop the memory guard cannot fix, giving up";
    return d;
  }
  // Repeated OOM kills at the same place: memory per worker must come down. The worker
  // was stopped at its limit, so the peak it was reaching is at least the limit: each
  // target is the one the plan, scaled to that, shows under the threshold, with the
  // numbers. Where the limit is unknown or no target fits by the plan, the older step is
  // taken (the first worker count that holds less, half the micro-batch or budget), saying
  // the plan could not show a fit.
  const int workers = std::max(1, current_workers);
  const bool gpu = cause == ExitCause::kGpuOom;
  auto side = [&](const Plan& p) { return gpu ? p.gpu_total_bytes : p.host_total_bytes; };
  auto side_with = [&](const spec::TrainingJobSpec& with, int w) { return side(PlanMemory(with, w, plan_options)); };
  const int64_t limit = gpu ? plan_options.gpu_total_bytes : spec.resources.memory_bytes;
  PlannedPeak peak;
  peak.planned_now = side_with(spec, workers);
  peak.measured = static_cast<double>(limit);
  peak.threshold = (gpu ? g.gpu_threshold : g.host_threshold) * static_cast<double>(limit);
  const bool provable = limit > 0 && peak.planned_now > 0;
  if (provable) peak.scale = std::clamp(peak.measured / static_cast<double>(peak.planned_now), 0.25, 4.0);
  auto numbers = [&](double after) { return peak.Numbers(after) + " (the limit it was stopped at)"; };
  const std::string unproven = provable ? " (the plan shows none under the threshold)" : " (no limit to plan against)";
  std::vector<std::string> skipped;
  for (spec::GuardAction a : g.actions) {
    if (a == spec::GuardAction::kReshard) {
      // Per-worker bytes scale with the plan's ratio between worker counts, as in Decide.
      auto at = [&](int w) {
        return static_cast<double>(side_with(spec, w)) * peak.measured / static_cast<double>(peak.planned_now);
      };
      const int fits =
          provable ? FindWorkerCount(spec, workers + 1, spec.max_workers, [&](int w) { return peak.Fits(at(w)); }) : 0;
      const int target = fits > 0 ? fits : FindWorkerCount(spec, workers + 1, spec.max_workers, [&](int w) {
        return side_with(spec, w) < peak.planned_now;
      });
      if (target > 0) {
        d.action = DecisionAction::kReshard;
        d.target_workers = target;
        d.reason = again + ": reshard from " + std::to_string(workers) + " to " + std::to_string(target) + " workers" +
                   (fits > 0 ? ": " + numbers(at(target)) + " per worker" : " so each holds less" + unproven);
        return d;
      }
      skipped.push_back("reshard: no larger worker count up to maxWorkers divides the batch and holds less");
    } else if (a == spec::GuardAction::kShrinkMicroBatch) {
      const int micro = spec.grpo.micro_batch_size;
      if (micro > 1) {
        auto after = [&](int m) {
          spec::TrainingJobSpec with = spec;
          with.grpo.micro_batch_size = m;
          return peak.After(side_with(with, workers));
        };
        int fits = 0;
        if (provable) {
          for (int m = micro - 1; m >= 1 && fits == 0; --m) {
            if (peak.Fits(after(m))) fits = m;
          }
        }
        d.action = DecisionAction::kShrinkMicroBatch;
        d.target_micro_batch_size = fits > 0 ? fits : std::max(1, micro / 2);
        d.reason = again + (fits > 0 ? ": shrink" : ": halve") + " microBatchSize from " + std::to_string(micro) +
                   " to " + std::to_string(*d.target_micro_batch_size) +
                   (fits > 0 ? ": " + numbers(after(fits)) : unproven);
        return d;
      }
      skipped.push_back("shrinkMicroBatch: microBatchSize is already 1");
    } else if (a == spec::GuardAction::kShrinkTokenBudget) {
      // The padded tokens a micro-batch may hold, down to one full-length sequence.
      const int seq = spec.grpo.max_prompt_length + spec.grpo.max_response_length;
      const int now = EffectiveTokenBudget(spec.grpo);
      if (now > seq) {
        auto after = [&](int budget) {
          spec::TrainingJobSpec with = spec;
          with.grpo.max_tokens_per_micro_batch = budget;
          return peak.After(side_with(with, workers));
        };
        int fits = 0;
        if (provable && peak.Fits(after(seq))) {
          // The planned peak grows with the budget: the largest fitting one, by bisection.
          int lo = seq, hi = now - 1;
          while (lo < hi) {
            const int mid = lo + (hi - lo + 1) / 2;
            if (peak.Fits(after(mid))) {
              lo = mid;
            } else {
              hi = mid - 1;
            }
          }
          fits = lo;
        }
        d.action = DecisionAction::kShrinkTokenBudget;
        d.target_max_tokens_per_micro_batch = fits > 0 ? fits : std::max(seq, now / 2);
        d.reason = again + (fits > 0 ? ": shrink" : ": halve") + " maxTokensPerMicroBatch from " + std::to_string(now) +
                   " to " + std::to_string(*d.target_max_tokens_per_micro_batch) + " tokens" +
                   (fits > 0 ? ": " + numbers(after(fits)) : unproven);
        return d;
      }
      skipped.push_back("shrinkTokenBudget: the budget is already one full-length sequence");
    } else if (a == spec::GuardAction::kEnableActivationCheckpointing) {
      // What the planner says recomputed blocks save on the side that ran out.
      spec::TrainingJobSpec with = spec;
      with.grpo.activation_checkpointing = true;
      const int64_t before_bytes = peak.planned_now;
      const int64_t after_bytes = side_with(with, workers);
      if (!spec.grpo.activation_checkpointing && spec.sharding.stage < 3 && !LoraDropoutForbidsRecompute(spec) &&
          after_bytes < before_bytes) {
        const double after = peak.After(after_bytes);
        d.action = DecisionAction::kEnableActivationCheckpointing;
        d.reason = again + ": enable activation checkpointing: " +
                   (provable ? numbers(after) + (peak.Fits(after) ? "" : ", still over the threshold by the plan")
                             : "planned peak " + HumanBytes(static_cast<double>(after_bytes)) + " instead of " +
                                   HumanBytes(static_cast<double>(before_bytes)) + " per worker");
        return d;
      }
      skipped.push_back(spec.grpo.activation_checkpointing || spec.sharding.stage >= 3
                            ? "enableActivationCheckpointing: blocks are recomputed already"
                        : LoraDropoutForbidsRecompute(spec)
                            ? std::string("enableActivationCheckpointing: ") + kLoraDropoutNote
                            : "enableActivationCheckpointing: the plan saves nothing on that side");
    } else if (a == spec::GuardAction::kRestart) {
      skipped.push_back("restart: the last one bought no progress");
    }
  }
  d.action = DecisionAction::kFail;
  d.reason = again + ": nothing left to try";
  if (!skipped.empty()) {
    d.reason += " (";
    for (size_t i = 0; i < skipped.size(); ++i) d.reason += (i ? "; " : "") + skipped[i];
    d.reason += ")";
  }
  return d;
}

}  // namespace headroom::guard
