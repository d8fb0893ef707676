// Policy: one decision, with a reason, from a forecast and the job's memoryGuard.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "core/base/human_bytes.h"
#include "core/guard/policy.h"
#include "core/protocol/environment.h"

namespace headroom::guard {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kGiB = 1LL << 30;

using spec::GuardAction;

// Feeds `steps` of host memory (end, peak) and returns the forecast for the next step.
Forecast HostForecast(const spec::TrainingJobSpec& job, int steps, double start, double growth, double excess,
                      int64_t limit, int first_step = 0) {
  Forecaster f(ForecasterOptionsFromSpec(job.memory_guard));
  for (int i = 0; i < steps; ++i) {
    StepMemory m;
    m.step = first_step + i;
    m.host_bytes = static_cast<int64_t>(start + growth * i);
    m.host_peak_bytes = static_cast<int64_t>(start + growth * i + excess);
    m.host_limit_bytes = limit;
    m.tokens = 1000;
    f.Observe(m);
  }
  return f.ForecastNext(1000);
}

// GPU state flat at `level`, activations proportional to tokens; the next batch has
// `next_tokens`.
Forecast GpuSpikeForecast(const spec::TrainingJobSpec& job, double level, double per_token, int64_t next_tokens,
                          int64_t limit, double host_level = 2.0 * kGiB) {
  Forecaster f(ForecasterOptionsFromSpec(job.memory_guard));
  for (int i = 0; i < 8; ++i) {
    StepMemory m;
    m.step = i;
    m.tokens = 1000 + 20 * (i % 3);
    m.gpu_bytes = static_cast<int64_t>(level);
    m.gpu_peak_bytes = static_cast<int64_t>(level + per_token * m.tokens);
    m.gpu_limit_bytes = limit;
    m.host_bytes = static_cast<int64_t>(host_level);
    m.host_peak_bytes = static_cast<int64_t>(host_level);
    m.host_limit_bytes = 16 * kGiB;
    f.Observe(m);
  }
  return f.ForecastNext(next_tokens);
}

spec::TrainingJobSpec DefaultJob() {
  spec::TrainingJobSpec s;
  s.resources.memory_bytes = kGiB;
  return s;
}

TEST(PolicyTest, LeakGetsARestartWithAReadableReason) {
  spec::TrainingJobSpec job = DefaultJob();
  // Ten steps: a leak confirmed (confirm_steps is 8); last 788 MiB, peak +48.
  Forecast fc = HostForecast(job, 10, 356 * kMiB, 48 * kMiB, 48 * kMiB, kGiB);
  Decision d = Decide(fc, job, GuardHistory{}, nullptr, 1);
  EXPECT_EQ(d.action, DecisionAction::kRestart) << d.reason;
  EXPECT_EQ(d.resource, "host");
  EXPECT_EQ(d.step, 9);
  EXPECT_EQ(d.memory_class, "leak");
  EXPECT_NEAR(d.growth_bytes_per_step, 48.0 * kMiB, kMiB);
  EXPECT_EQ(d.reason,
            "host working set 788 MiB of 1 GiB (77%), growing 48 MiB/step (leak); forecast peak 932 MiB crosses "
            "the 90% threshold in 2 steps (a leak confirmed over 10 steps): restart from a checkpoint at step 9 to "
            "reclaim leaked memory");
}

TEST(PolicyTest, GrowthTooShortToConfirmWaitsUntilTheLimitIsTwoStepsAway) {
  spec::TrainingJobSpec job = DefaultJob();
  // Six steps of +60 MiB, last 800 MiB, peak +48: the threshold (922 MiB) is crossed within
  // the horizon, the limit (1024 MiB) is not reached by the next step's peak (908 MiB).
  Forecast fc = HostForecast(job, 6, 500 * kMiB, 60 * kMiB, 48 * kMiB, kGiB);
  ASSERT_LE(fc.host.steps_to_threshold, 2);
  ASSERT_FALSE(fc.host.trend_confirmed);
  Decision d = Decide(fc, job, GuardHistory{}, nullptr, 1);
  EXPECT_EQ(d.action, DecisionAction::kNone) << d.reason;
  EXPECT_NE(d.reason.find("on growth seen over 6 steps, not a confirmed leak, and the limit is not forecast "
                          "within 2 steps: waiting for evidence"),
            std::string::npos)
      << d.reason;

  // One step later the peak after next (1028 MiB) reaches the limit: the decision after
  // this one would be the last in time, so the guard acts now, with a step to spare.
  fc = HostForecast(job, 6, 560 * kMiB, 60 * kMiB, 48 * kMiB, kGiB);
  ASSERT_EQ(fc.host.steps_to_limit, 2);
  ASSERT_FALSE(fc.host.trend_confirmed);
  d = Decide(fc, job, GuardHistory{}, nullptr, 1);
  EXPECT_EQ(d.action, DecisionAction::kRestart) << d.reason;
  EXPECT_NE(d.reason.find("(the limit itself is forecast within 2 steps)"), std::string::npos) << d.reason;
}

TEST(PolicyTest, AStaircaseIsActedOnBeforeTheJumpThatCrossesWithItsPeriodNamed) {
  // Host flat for a step, then +22 GiB, against a 110 GiB limit: 22 GiB at step 0, 44 at
  // steps 1-2, 66 at 3-4, 88 at 5 and 6; step 7 would jump to 110 GiB.
  spec::TrainingJobSpec job = DefaultJob();
  const int64_t limit = 110 * kGiB;
  job.resources.memory_bytes = limit;
  Forecaster f(ForecasterOptionsFromSpec(job.memory_guard));
  Decision first;
  for (int t = 0; t <= 6; ++t) {
    StepMemory m;
    m.step = t;
    m.host_bytes = 22 * kGiB * (1 + (t + 1) / 2);
    m.host_peak_bytes = m.host_bytes + kGiB;
    m.host_limit_bytes = limit;
    m.tokens = 1000;
    f.Observe(m);
    Decision d = Decide(f.ForecastNext(1000), job, GuardHistory{}, nullptr, 1);
    if (d.acts()) {
      first = d;
      break;
    }
  }
  ASSERT_TRUE(first.acts());
  EXPECT_EQ(first.step, 5);  // two steps before the crossing at step 7
  EXPECT_EQ(first.action, DecisionAction::kRestart) << first.reason;
  EXPECT_NE(first.reason.find("growing 22 GiB every 2 steps (leak)"), std::string::npos) << first.reason;
}

TEST(PolicyTest, ANoisyRunActsEarlierByItsForecastError) {
  // The same leak (+80 MiB a step, too young to be confirmed when it crosses), once clean
  // and once 60 MiB off its line at two steps in three: allowing for its forecast error,
  // the noisy run is acted on earlier than the clean one.
  spec::TrainingJobSpec job = DefaultJob();
  Forecaster clean(ForecasterOptionsFromSpec(job.memory_guard)), noisy(ForecasterOptionsFromSpec(job.memory_guard));
  int clean_step = -1, noisy_step = -1;
  std::string noisy_reason;
  for (int t = 0; t < 14 && (clean_step < 0 || noisy_step < 0); ++t) {
    StepMemory m;
    m.step = t;
    m.host_bytes = 300 * kMiB + 80 * kMiB * t;
    m.host_peak_bytes = m.host_bytes + 20 * kMiB;
    m.host_limit_bytes = kGiB;
    m.tokens = 1000;
    clean.Observe(m);
    m.host_bytes += (t % 3 == 0 ? 60 : t % 3 == 1 ? -60 : 0) * kMiB;
    m.host_peak_bytes = m.host_bytes + 20 * kMiB;
    noisy.Observe(m);
    Decision c = Decide(clean.ForecastNext(1000), job, GuardHistory{}, nullptr, 1);
    Decision n = Decide(noisy.ForecastNext(1000), job, GuardHistory{}, nullptr, 1);
    if (c.acts() && clean_step < 0) clean_step = t;
    if (n.acts() && noisy_step < 0) {
      noisy_step = t;
      noisy_reason = n.reason;
    }
  }
  ASSERT_GE(clean_step, 0);
  ASSERT_GE(noisy_step, 0);
  EXPECT_LT(noisy_step, clean_step) << noisy_reason;
  EXPECT_NE(noisy_reason.find("allowing for this run's forecast error of"), std::string::npos) << noisy_reason;
}

TEST(PolicyTest, ACrossingThatProjectsNoGrowthIsActedOnAtOnce) {
  // A level already past the threshold: there is no trend to wait for.
  spec::TrainingJobSpec job = DefaultJob();
  Forecast fc = HostForecast(job, 3, 0.93 * kGiB, 0, 0, kGiB);
  ASSERT_EQ(fc.host.growth_bytes_per_step, 0);
  Decision d = Decide(fc, job, GuardHistory{}, nullptr, 1);
  EXPECT_TRUE(d.acts()) << d.reason;
  EXPECT_NE(d.reason.find("(no growth projected)"), std::string::npos) << d.reason;
}

TEST(PolicyTest, AJumpToALevelOverTheThresholdIsActedOnAtTheNextStep) {
  // 30% for five steps, then one jump to 89% with a 3% in-step excess: a level shift, not
  // a leak, so no restart, but the level itself crosses the 90% threshold: acted on at once.
  spec::TrainingJobSpec job = DefaultJob();
  Forecaster f(ForecasterOptionsFromSpec(job.memory_guard));
  for (int t = 0; t < 6; ++t) {
    StepMemory m;
    m.step = t;
    m.host_bytes = static_cast<int64_t>((t >= 5 ? 0.89 : 0.30) * kGiB);
    m.host_peak_bytes = m.host_bytes + static_cast<int64_t>(0.03 * kGiB);
    m.host_limit_bytes = kGiB;
    m.tokens = 1000;
    f.Observe(m);
  }
  Decision d = Decide(f.ForecastNext(1000), job, GuardHistory{}, nullptr, 1);
  EXPECT_TRUE(d.acts()) << d.reason;
  EXPECT_NE(d.action, DecisionAction::kRestart) << d.reason;
  EXPECT_NE(d.reason.find("a level shift of"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("crosses the 90% threshold in 1 step (no growth projected)"), std::string::npos) << d.reason;
}

TEST(PolicyTest, StableNearTheThresholdIsLeftAlone) {
  spec::TrainingJobSpec job = DefaultJob();
  Forecast fc = HostForecast(job, 20, 0.88 * kGiB, 0, 0, kGiB);
  Decision d = Decide(fc, job, GuardHistory{}, nullptr, 1);
  EXPECT_EQ(d.action, DecisionAction::kNone);
  EXPECT_NE(d.reason.find("no forecast crosses a threshold within 2 steps"), std::string::npos) << d.reason;
}

TEST(PolicyTest, GuardDisabledNeverActs) {
  spec::TrainingJobSpec job = DefaultJob();
  job.memory_guard.enabled = false;
  Forecast fc = HostForecast(job, 7, 500 * kMiB, 80 * kMiB, 0, kGiB);
  Decision d = Decide(fc, job, GuardHistory{}, nullptr, 1);
  EXPECT_EQ(d.action, DecisionAction::kNone);
  EXPECT_NE(d.reason.find("disabled"), std::string::npos);
}

TEST(PolicyTest, ARestartThatBoughtNoProgressEscalatesToReshard) {
  spec::TrainingJobSpec job = DefaultJob();
  job.model.preset = "small";
  job.sharding.stage = 2;
  job.resources.memory_bytes = kGiB;
  Forecast fc = HostForecast(job, 9, 320 * kMiB, 60 * kMiB, 48 * kMiB, kGiB, /*first_step=*/7);
  GuardHistory h;
  h.restarts = 1;
  h.last_restart_step = 14;  // restarted at step 14, now at 15: one step of progress
  Decision d = Decide(fc, job, h, nullptr, 1);
  EXPECT_EQ(d.action, DecisionAction::kReshard) << d.reason;
  ASSERT_TRUE(d.target_workers.has_value());
  EXPECT_GT(*d.target_workers, 1);
  EXPECT_TRUE(spec::WorkerCountFits(job.grpo, *d.target_workers));
  EXPECT_NE(d.reason.find("skipped restart: the last one (at step 14) bought only 1 step of progress"),
            std::string::npos)
      << d.reason;

  // Enough progress since: restart is fine again.
  h.last_restart_step = 5;
  EXPECT_EQ(Decide(fc, job, h, nullptr, 1).action, DecisionAction::kRestart);
}

TEST(PolicyTest, ARestartThatReclaimedNothingIsNotRepeatedForThatResource) {
  spec::TrainingJobSpec job = DefaultJob();
  job.model.preset = "small";
  job.sharding.stage = 2;
  // A confirmed leak, last 788 MiB, crossing in 2 steps (as in the first test).
  Forecast fc = HostForecast(job, 10, 356 * kMiB, 48 * kMiB, 48 * kMiB, kGiB);
  GuardHistory h;
  h.restarts = 1;
  h.last_restart_step = h.guard_restart_step = 2;
  h.last_action = "restart";
  h.restart_resource = "host";
  h.restart_level_bytes = 450 * kMiB;
  ASSERT_EQ(Decide(fc, job, h, nullptr, 1).action, DecisionAction::kRestart);
  h.AddRestartReclaimedNothing("host");
  // Another action the planner shows fits: reshard, the restart skipped with the reason.
  Decision d = Decide(fc, job, h, nullptr, 1);
  EXPECT_EQ(d.action, DecisionAction::kReshard) << d.reason;
  EXPECT_NE(d.reason.find("skipped restart: the guard's restart at step 2 (from 450 MiB) reclaimed nothing"),
            std::string::npos)
      << d.reason;
  EXPECT_EQ(d.level_bytes, 788 * kMiB);

  // Nothing else allowed, the level (788 MiB) below the 90% threshold: carry on, saying so.
  job.memory_guard.actions = {GuardAction::kRestart};
  d = Decide(fc, job, h, nullptr, 1);
  EXPECT_EQ(d.action, DecisionAction::kNone) << d.reason;
  EXPECT_NE(d.reason.find("carrying on, the level is below the 90% threshold and nothing else fits (restart: "
                          "the guard's restart at step 2"),
            std::string::npos)
      << d.reason;

  // The other resource is not affected: a GPU restart that reclaimed nothing says nothing
  // about the host.
  GuardHistory gpu_only;
  gpu_only.AddRestartReclaimedNothing("gpu");
  EXPECT_EQ(Decide(fc, job, gpu_only, nullptr, 1).action, DecisionAction::kRestart);
}

TEST(PolicyTest, MaxRestartsSpentWithNothingElseAllowedFails) {
  spec::TrainingJobSpec job = DefaultJob();
  job.memory_guard.actions = {GuardAction::kRestart};
  job.memory_guard.max_restarts = 3;
  Forecast fc = HostForecast(job, 10, 356 * kMiB, 48 * kMiB, 48 * kMiB, kGiB);
  GuardHistory h;
  h.restarts = 3;
  Decision d = Decide(fc, job, h, nullptr, 1);
  EXPECT_EQ(d.action, DecisionAction::kFail);
  EXPECT_NE(d.reason.find("nothing left to try (restart: all 3 restarts of maxRestarts used)"), std::string::npos)
      << d.reason;
}

TEST(PolicyTest, OnlyListedActionsAreUsed) {
  spec::TrainingJobSpec job = DefaultJob();
  job.memory_guard.actions = {GuardAction::kShrinkMicroBatch};  // no restart for a leak
  Forecast fc = HostForecast(job, 10, 356 * kMiB, 48 * kMiB, 48 * kMiB, kGiB);
  Decision d = Decide(fc, job, GuardHistory{}, nullptr, 1);
  EXPECT_NE(d.action, DecisionAction::kRestart);
  job.memory_guard.actions = {};
  d = Decide(fc, job, GuardHistory{}, nullptr, 1);
  EXPECT_EQ(d.action, DecisionAction::kFail);
  EXPECT_NE(d.reason.find("spec.memoryGuard.actions is empty"), std::string::npos) << d.reason;
}

TEST(PolicyTest, TokenSpikeShrinksTheMicroBatchToWhatFits) {
  spec::TrainingJobSpec job = DefaultJob();
  job.resources.gpus = 1;
  job.grpo.micro_batch_size = 64;
  // 40 GiB state + 20 MiB/token; next batch 3000 tokens -> 100 GiB peak on an 80 GiB card.
  Forecast fc = GpuSpikeForecast(job, 40.0 * kGiB, 20.0 * kMiB, 3000, 80 * kGiB);
  Decision d = Decide(fc, job, GuardHistory{}, nullptr, 1, PlanOptions{80 * kGiB});
  EXPECT_EQ(d.action, DecisionAction::kShrinkMicroBatch) << d.reason;
  EXPECT_EQ(d.resource, "gpu");
  ASSERT_TRUE(d.target_micro_batch_size.has_value());
  // Room 73.6 - 40 = 33.6 GiB for a 58.6 GiB excess, 10% spare: 64 * 0.9 * 33.6 / 58.6 = 33.
  EXPECT_EQ(*d.target_micro_batch_size, 33);
  EXPECT_NE(d.reason.find("next batch 3000 tokens"), std::string::npos) << d.reason;

  // Already at 1: nothing to shrink; with nothing else allowed, fail.
  job.grpo.micro_batch_size = 1;
  job.memory_guard.actions = {GuardAction::kShrinkMicroBatch};
  d = Decide(fc, job, GuardHistory{}, nullptr, 1, PlanOptions{80 * kGiB});
  EXPECT_EQ(d.action, DecisionAction::kFail);
  EXPECT_NE(d.reason.find("microBatchSize is already 1"), std::string::npos) << d.reason;
}

// A token-driven spike the planner shows recomputed blocks bring under the threshold:
// the guard enables activation checkpointing and says the planned peak; where the plan
// shows it would not fit, it is skipped with the numbers.
TEST(PolicyTest, TokenSpikeEnablesActivationCheckpointingWhenThePlanShowsItFits) {
  spec::TrainingJobSpec job = DefaultJob();
  job.model.preset = "small";
  job.resources.gpus = 1;
  job.memory_guard.actions = {GuardAction::kEnableActivationCheckpointing};
  const PlanOptions options{80 * kGiB};
  spec::TrainingJobSpec with = job;
  with.grpo.activation_checkpointing = true;
  const Plan off = PlanMemory(job, 1, options), on = PlanMemory(with, 1, options);
  ASSERT_LT(on.gpu_total_bytes, off.gpu_total_bytes);
  // Measured as planned: state flat, the activations driven by a 1000-token batch; a limit
  // whose threshold lies three quarters of the way from the plan with to the plan without.
  const double per_token = static_cast<double>(off.gpu_activation_bytes) / 1000;
  const double threshold = on.gpu_total_bytes + 0.75 * static_cast<double>(off.gpu_total_bytes - on.gpu_total_bytes);
  const auto limit = static_cast<int64_t>(threshold / job.memory_guard.gpu_threshold);
  Forecast fc = GpuSpikeForecast(job, static_cast<double>(off.gpu_state_bytes), per_token, 1000, limit);
  Decision d = Decide(fc, job, GuardHistory{}, nullptr, 1, options);
  EXPECT_EQ(d.action, DecisionAction::kEnableActivationCheckpointing) << d.reason;
  EXPECT_EQ(d.resource, "gpu");
  EXPECT_NE(d.reason.find("enable activation checkpointing: planned peak "), std::string::npos) << d.reason;

  // Already on (or stage 3): nothing to enable.
  d = Decide(fc, with, GuardHistory{}, nullptr, 1, options);
  EXPECT_EQ(d.action, DecisionAction::kFail) << d.reason;
  EXPECT_NE(d.reason.find("enableActivationCheckpointing: already on"), std::string::npos) << d.reason;

  // LoRA with dropout: the spec refuses checkpointing with it, so the guard does not propose it.
  spec::TrainingJobSpec lora = job;
  lora.model.lora.r = 8;
  lora.model.lora.dropout = 0.05;
  d = Decide(fc, lora, GuardHistory{}, nullptr, 1, options);
  EXPECT_EQ(d.action, DecisionAction::kFail) << d.reason;
  EXPECT_NE(d.reason.find("enableActivationCheckpointing: LoRA dropout"), std::string::npos) << d.reason;

  // A threshold below even the plan with it: skipped, saying the numbers.
  const auto tight = static_cast<int64_t>(0.9 * on.gpu_total_bytes / job.memory_guard.gpu_threshold);
  fc = GpuSpikeForecast(job, static_cast<double>(off.gpu_state_bytes), per_token, 1000, tight);
  d = Decide(fc, job, GuardHistory{}, nullptr, 1, options);
  EXPECT_NE(d.action, DecisionAction::kEnableActivationCheckpointing) << d.reason;
  EXPECT_NE(d.reason.find("enableActivationCheckpointing: would not fit: planned peak"), std::string::npos) << d.reason;
}

// Eight ranks in one pod share its cgroup, and the host forecast reads that cgroup: the
// pod holds eight ranks' plans. Measured exactly as planned for eight ranks, a threshold
// a quarter of the way from the pod's plan with recomputed blocks (8 on) to the plan
// without (8 off) is met by turning them on; read as one rank's plan, the measured/planned
// scale clamps at 4x, the saving counts 4 (off - on), and 8 off - 4 (off - on) lies above
// that threshold: the lever would be wrongly refused.
TEST(PolicyTest, APodsRanksShareTheHostLimitTheForecastReads) {
  spec::TrainingJobSpec job = DefaultJob();
  job.model.preset = "small";
  job.workers = job.min_workers = job.max_workers = 8;
  job.ranks_per_pod = 8;
  job.memory_guard.actions = {GuardAction::kEnableActivationCheckpointing};
  spec::TrainingJobSpec with = job;
  with.grpo.activation_checkpointing = true;
  const Plan off = PlanMemory(job, 8), on = PlanMemory(with, 8);
  ASSERT_LT(on.host_total_bytes, off.host_total_bytes);
  const double pod = 8;
  const double threshold =
      pod * (on.host_total_bytes + 0.25 * static_cast<double>(off.host_total_bytes - on.host_total_bytes));
  const auto limit = static_cast<int64_t>(threshold / job.memory_guard.host_threshold);
  job.resources.memory_bytes = limit / 8;  // a rank's
  const double state = pod * static_cast<double>(off.host_total_bytes - off.host_activation_bytes);
  const double per_token = pod * static_cast<double>(off.host_activation_bytes) / 1000;
  Forecaster f(ForecasterOptionsFromSpec(job.memory_guard));
  for (int i = 0; i < 8; ++i) {
    StepMemory m;
    m.step = i;
    m.tokens = 1000 - 20 * (i % 3);
    m.host_bytes = static_cast<int64_t>(state);
    m.host_peak_bytes = static_cast<int64_t>(state + per_token * m.tokens);
    m.host_limit_bytes = limit;
    f.Observe(m);
  }
  const Decision d = Decide(f.ForecastNext(1000), job, GuardHistory{}, nullptr, 8);
  EXPECT_EQ(d.action, DecisionAction::kEnableActivationCheckpointing) << d.reason;
  EXPECT_EQ(d.resource, "host");
}

// The largest budget the plan, scaled to the measurement, fits under the threshold with
// the forecast's margin: what the policy reads off a forecast (decision_test helpers).
struct TokenBudgetFit {
  double measured = 0, scale = 1, margin = 0, threshold = 0;
  int64_t planned_now = 0;
  bool Fits(const spec::TrainingJobSpec& job, int budget, const PlanOptions& options) const {
    spec::TrainingJobSpec with = job;
    with.grpo.max_tokens_per_micro_batch = budget;
    const double after = measured - (planned_now - PlanMemory(with, 1, options).gpu_total_bytes) * scale;
    return after + margin <= threshold;
  }
};

TokenBudgetFit GpuFitOf(const Forecast& fc, const spec::TrainingJobSpec& job, const PlanOptions& options) {
  TokenBudgetFit f;
  for (int64_t v : fc.gpu.predicted_peak_bytes) f.measured = std::max(f.measured, static_cast<double>(v));
  f.measured = std::max(f.measured, static_cast<double>(fc.gpu.current_peak_bytes));
  f.planned_now = PlanMemory(job, 1, options).gpu_total_bytes;
  f.scale = std::clamp(f.measured / static_cast<double>(f.planned_now), 0.25, 4.0);
  f.margin = static_cast<double>(std::max<int64_t>(0, fc.gpu.forecast_margin_bytes));
  f.threshold = static_cast<double>(fc.gpu.threshold_bytes);
  return f;
}

// A token-driven spike: the guard asks the planner for the largest token budget whose
// planned peak, scaled to the measurement, fits, and says the numbers. The threshold lies
// between the plans at 3 and 4 full-length sequences, so the budget lands in between.
TEST(PolicyTest, TokenSpikeShrinksTheTokenBudgetToTheLargestThatFits) {
  spec::TrainingJobSpec job = DefaultJob();
  job.model.preset = "small";
  job.resources.gpus = 1;
  job.grpo.micro_batch_size = 8;
  job.memory_guard.actions = {GuardAction::kShrinkTokenBudget};
  const PlanOptions options{80 * kGiB};
  const int seq = job.grpo.max_prompt_length + job.grpo.max_response_length;
  auto plan_at = [&](int budget) {
    spec::TrainingJobSpec with = job;
    with.grpo.max_tokens_per_micro_batch = budget;
    return PlanMemory(with, 1, options);
  };
  const Plan off = PlanMemory(job, 1, options), at3 = plan_at(3 * seq), at4 = plan_at(4 * seq);
  ASSERT_LT(at3.gpu_total_bytes, at4.gpu_total_bytes);
  ASSERT_LT(at4.gpu_total_bytes, off.gpu_total_bytes);
  // Measured as planned: the state flat, the token-driven part at a 1000-token batch.
  const double per_token = static_cast<double>(off.gpu_activation_bytes) / 1000;
  const double threshold = at3.gpu_total_bytes + 0.5 * static_cast<double>(at4.gpu_total_bytes - at3.gpu_total_bytes);
  const auto limit = static_cast<int64_t>(threshold / job.memory_guard.gpu_threshold);
  Forecast fc = GpuSpikeForecast(job, static_cast<double>(off.gpu_state_bytes), per_token, 1000, limit);
  Decision d = Decide(fc, job, GuardHistory{}, nullptr, 1, options);
  ASSERT_EQ(d.action, DecisionAction::kShrinkTokenBudget) << d.reason;
  EXPECT_EQ(d.resource, "gpu");
  ASSERT_TRUE(d.target_max_tokens_per_micro_batch.has_value());
  const int target = *d.target_max_tokens_per_micro_batch;
  EXPECT_GE(target, 3 * seq) << d.reason;
  EXPECT_LT(target, 4 * seq) << d.reason;
  // The largest: it fits and one token more does not.
  const TokenBudgetFit fit = GpuFitOf(fc, job, options);
  EXPECT_TRUE(fit.Fits(job, target, options)) << d.reason;
  EXPECT_FALSE(fit.Fits(job, target + 1, options)) << d.reason;
  EXPECT_NE(d.reason.find("shrink maxTokensPerMicroBatch from " + std::to_string(8 * seq) + " to " +
                          std::to_string(target) + " tokens: planned peak "),
            std::string::npos)
      << d.reason;
  EXPECT_NE(d.reason.find(" threshold, now "), std::string::npos) << d.reason;

  // A budget already set counts from itself, not from the micro-batch's rows.
  spec::TrainingJobSpec budgeted = job;
  budgeted.grpo.max_tokens_per_micro_batch = 6 * seq;
  d = Decide(fc, budgeted, GuardHistory{}, nullptr, 1, options);
  EXPECT_NE(d.reason.find("from " + std::to_string(6 * seq) + " to "), std::string::npos) << d.reason;

  // Already one full-length sequence per micro-batch (a budget of seq, or microBatchSize 1):
  // nothing to shrink.
  for (auto one : {std::pair{8, seq}, std::pair{1, 0}}) {
    spec::TrainingJobSpec at_one = job;
    at_one.grpo.micro_batch_size = one.first;
    at_one.grpo.max_tokens_per_micro_batch = one.second;
    d = Decide(fc, at_one, GuardHistory{}, nullptr, 1, options);
    EXPECT_EQ(d.action, DecisionAction::kFail) << d.reason;
    EXPECT_NE(d.reason.find("shrinkTokenBudget: the budget is already one full-length sequence"), std::string::npos)
        << d.reason;
  }

  // A threshold over the state but below even one sequence's plan: skipped, saying the numbers.
  const double state = static_cast<double>(off.gpu_state_bytes);
  const auto tight = static_cast<int64_t>((state + 0.5 * (static_cast<double>(plan_at(seq).gpu_total_bytes) - state)) /
                                          job.memory_guard.gpu_threshold);
  fc = GpuSpikeForecast(job, static_cast<double>(off.gpu_state_bytes), per_token, 1000, tight);
  d = Decide(fc, job, GuardHistory{}, nullptr, 1, options);
  EXPECT_NE(d.action, DecisionAction::kShrinkTokenBudget) << d.reason;
  EXPECT_NE(d.reason.find("shrinkTokenBudget: would not fit even at " + std::to_string(seq) + " tokens: planned peak "),
            std::string::npos)
      << d.reason;
}

// A budget cuts the step's batch: it does not help a leak or a level that crosses by itself.
TEST(PolicyTest, ShrinkTokenBudgetSkipsALeakAndALevelThatCrosses) {
  spec::TrainingJobSpec job = DefaultJob();
  job.grpo.micro_batch_size = 8;
  job.memory_guard.actions = {GuardAction::kShrinkTokenBudget};
  Decision d = Decide(HostForecast(job, 10, 356 * kMiB, 48 * kMiB, 48 * kMiB, kGiB), job, GuardHistory{}, nullptr, 1);
  EXPECT_EQ(d.action, DecisionAction::kFail) << d.reason;
  EXPECT_NE(d.reason.find("shrinkTokenBudget: growth from step to step is not the batch"), std::string::npos)
      << d.reason;
  // Flat at 95% of the limit: the level itself is over the 90% threshold.
  d = Decide(HostForecast(job, 8, 0.95 * kGiB, 0, 0, kGiB), job, GuardHistory{}, nullptr, 1);
  EXPECT_EQ(d.action, DecisionAction::kFail) << d.reason;
  EXPECT_NE(d.reason.find("shrinkTokenBudget: the level itself crosses; a budget cannot help"), std::string::npos)
      << d.reason;
}

// OOM-killed again right after the restart: halve the padded tokens a micro-batch may hold,
// never below one full-length sequence; at one sequence it is skipped, saying so.
TEST(PolicyTest, RepeatedOomKillHalvesTheTokenBudgetDownToOneSequence) {
  spec::TrainingJobSpec job = DefaultJob();
  job.grpo.micro_batch_size = 8;
  job.memory_guard.actions = {GuardAction::kRestart, GuardAction::kShrinkTokenBudget};
  const int seq = job.grpo.max_prompt_length + job.grpo.max_response_length;
  GuardHistory h;
  h.RecordCrashRestart(50, /*oom_kill=*/true);
  Decision d = DecideAfterCrash(ExitCause::kOomKill, 51, 50, job, h, 1);
  EXPECT_EQ(d.action, DecisionAction::kShrinkTokenBudget) << d.reason;
  EXPECT_EQ(d.target_max_tokens_per_micro_batch, 4 * seq);
  EXPECT_NE(d.reason.find("halve maxTokensPerMicroBatch from " + std::to_string(8 * seq) + " to " +
                          std::to_string(4 * seq) + " tokens"),
            std::string::npos)
      << d.reason;
  job.grpo.max_tokens_per_micro_batch = seq + seq / 2;  // half of it is under one sequence
  d = DecideAfterCrash(ExitCause::kOomKill, 51, 50, job, h, 1);
  EXPECT_EQ(d.target_max_tokens_per_micro_batch, seq) << d.reason;
  job.grpo.max_tokens_per_micro_batch = seq;
  d = DecideAfterCrash(ExitCause::kOomKill, 51, 50, job, h, 1);
  EXPECT_EQ(d.action, DecisionAction::kFail) << d.reason;
  EXPECT_NE(d.reason.find("shrinkTokenBudget: the budget is already one full-length sequence"), std::string::npos)
      << d.reason;
}

TEST(PolicyTest, RepeatedGpuOomEnablesActivationCheckpointingWhenListed) {
  spec::TrainingJobSpec job = DefaultJob();
  job.model.preset = "small";
  job.resources.gpus = 1;
  job.memory_guard.actions = {GuardAction::kRestart, GuardAction::kEnableActivationCheckpointing};
  GuardHistory h;
  h.RecordCrashRestart(50, /*oom_kill=*/false);
  Decision d = DecideAfterCrash(ExitCause::kGpuOom, 51, 50, job, h, 1, PlanOptions{80 * kGiB});
  EXPECT_EQ(d.action, DecisionAction::kEnableActivationCheckpointing) << d.reason;
  EXPECT_NE(d.reason.find("enable activation checkpointing: planned peak"), std::string::npos) << d.reason;
  job.sharding.stage = 3;
  d = DecideAfterCrash(ExitCause::kGpuOom, 51, 50, job, h, 1, PlanOptions{80 * kGiB});
  EXPECT_EQ(d.action, DecisionAction::kFail) << d.reason;
  EXPECT_NE(d.reason.find("blocks are recomputed already"), std::string::npos) << d.reason;
  job.sharding.stage = 2;
  job.model.lora.r = 8;
  job.model.lora.dropout = 0.05;
  d = DecideAfterCrash(ExitCause::kGpuOom, 51, 50, job, h, 1, PlanOptions{80 * kGiB});
  EXPECT_EQ(d.action, DecisionAction::kFail) << d.reason;
  EXPECT_NE(d.reason.find("enableActivationCheckpointing: LoRA dropout"), std::string::npos) << d.reason;
}

TEST(PolicyTest, NormalBatchesWithTheSameStateDoNotAct) {
  spec::TrainingJobSpec job = DefaultJob();
  job.resources.gpus = 1;
  Forecast fc = GpuSpikeForecast(job, 40.0 * kGiB, 20.0 * kMiB, 1000, 80 * kGiB);
  EXPECT_EQ(Decide(fc, job, GuardHistory{}, nullptr, 1).action, DecisionAction::kNone);
}

TEST(PolicyTest, StateThatDoesNotFitReshardsToTheSmallestFittingCount) {
  spec::TrainingJobSpec job = DefaultJob();
  job.model.preset = "small";
  job.sharding.stage = 2;
  job.grpo.prompts_per_step = 24;
  job.min_workers = 1;
  job.max_workers = 8;
  const Plan plan1 = PlanMemory(job, 1);
  // Measured as planned at 1 worker, with a limit the plan only fits under at 3+ workers.
  job.resources.memory_bytes = static_cast<int64_t>(PlanMemory(job, 3).host_total_bytes / 0.9) + kMiB;
  const double level = static_cast<double>(plan1.host_total_bytes);
  Forecast fc = HostForecast(job, 8, level, 0, 0, job.resources.memory_bytes);
  Decision d = Decide(fc, job, GuardHistory{}, &plan1, 1);
  EXPECT_EQ(d.action, DecisionAction::kReshard) << d.reason;
  ASSERT_TRUE(d.target_workers.has_value());
  EXPECT_EQ(*d.target_workers, 3) << d.reason;
  EXPECT_NE(d.reason.find("reshard from 1 to 3 workers: planned peak "), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("skipped restart: would not help"), std::string::npos) << d.reason;

  // At maxWorkers, no reshard.
  job.max_workers = 1;
  job.memory_guard.actions = {GuardAction::kReshard};
  d = Decide(fc, job, GuardHistory{}, &plan1, 1);
  EXPECT_EQ(d.action, DecisionAction::kFail);
  EXPECT_NE(d.reason.find("already at maxWorkers (1)"), std::string::npos) << d.reason;
  // Two workers allowed: the plan shows 2 still over the threshold, saying by how much.
  job.max_workers = 2;
  d = Decide(fc, job, GuardHistory{}, &plan1, 1);
  EXPECT_EQ(d.action, DecisionAction::kFail);
  EXPECT_NE(d.reason.find("reshard: would not fit at 2 workers: planned peak "), std::string::npos) << d.reason;
}

TEST(PolicyTest, OffloadMovesStateToTheSideWithRoom) {
  spec::TrainingJobSpec job = DefaultJob();
  job.model.preset = "base";
  job.resources.gpus = 1;
  job.resources.memory_bytes = 4 * kGiB;
  job.sharding.offload_params = true;
  job.sharding.offload_optimizer = true;
  job.memory_guard.actions = {GuardAction::kDisableOffload, GuardAction::kEnableOffload};
  const PlanOptions po{24 * kGiB};

  // Host full of offloaded state (flat, over the threshold); GPU nearly empty.
  Forecaster f(ForecasterOptionsFromSpec(job.memory_guard));
  for (int i = 0; i < 6; ++i) {
    StepMemory m;
    m.step = i;
    m.host_bytes = m.host_peak_bytes = static_cast<int64_t>(3.8 * kGiB);
    m.host_limit_bytes = 4 * kGiB;
    m.gpu_bytes = m.gpu_peak_bytes = 4 * kGiB;
    m.gpu_limit_bytes = 24 * kGiB;
    f.Observe(m);
  }
  Decision d = Decide(f.ForecastNext(), job, GuardHistory{}, nullptr, 1, po);
  EXPECT_EQ(d.action, DecisionAction::kDisableOffload) << d.reason;
  EXPECT_NE(d.reason.find(" to the GPU: planned peak "), std::string::npos) << d.reason;
  EXPECT_EQ(d.target_offload_params, false);
  EXPECT_EQ(d.target_offload_optimizer, false);

  // Never ping-pong: the guard enabled offload before, so it will not disable it now.
  GuardHistory h;
  h.offload_enabled = 1;
  d = Decide(f.ForecastNext(), job, h, nullptr, 1, po);
  EXPECT_EQ(d.action, DecisionAction::kFail);
  EXPECT_NE(d.reason.find("would oscillate"), std::string::npos) << d.reason;

  // The GPU side full instead, offload off, host with room: enableOffload.
  job.sharding.offload_params = job.sharding.offload_optimizer = false;
  Forecaster g(ForecasterOptionsFromSpec(job.memory_guard));
  for (int i = 0; i < 6; ++i) {
    StepMemory m;
    m.step = i;
    m.host_bytes = m.host_peak_bytes = 1 * kGiB;
    m.host_limit_bytes = 64 * kGiB;
    m.gpu_bytes = m.gpu_peak_bytes = 23 * kGiB;
    m.gpu_limit_bytes = 24 * kGiB;
    g.Observe(m);
  }
  d = Decide(g.ForecastNext(), job, GuardHistory{}, nullptr, 1, po);
  EXPECT_EQ(d.action, DecisionAction::kEnableOffload) << d.reason;
  EXPECT_EQ(d.resource, "gpu");
  EXPECT_EQ(d.target_offload_params, true);
  EXPECT_EQ(d.target_offload_optimizer, true);
}

TEST(PolicyTest, AfterAnOomKillRestartThenEscalateThenFail) {
  spec::TrainingJobSpec job = DefaultJob();
  job.model.preset = "small";
  job.memory_guard.max_restarts = 3;
  GuardHistory h;
  Decision d = DecideAfterCrash(ExitCause::kOomKill, 57, 50, job, h, 1);
  EXPECT_EQ(d.action, DecisionAction::kRestart);
  EXPECT_EQ(d.step, 50);
  EXPECT_EQ(d.reason, "worker OOM-killed by the kernel at step 57 (7 steps lost since the checkpoint at step 50): "
                      "restart from the checkpoint at step 50");

  h.RecordCrashRestart(50, /*oom_kill=*/true);
  d = DecideAfterCrash(ExitCause::kOomKill, 51, 50, job, h, 1);  // killed again right away
  EXPECT_EQ(d.action, DecisionAction::kReshard) << d.reason;
  EXPECT_EQ(d.target_workers, 2);

  job.memory_guard.actions = {GuardAction::kRestart, GuardAction::kShrinkMicroBatch};
  d = DecideAfterCrash(ExitCause::kOomKill, 51, 50, job, h, 1);
  EXPECT_EQ(d.action, DecisionAction::kShrinkMicroBatch) << d.reason;
  ASSERT_TRUE(d.target_micro_batch_size.has_value());
  EXPECT_LT(*d.target_micro_batch_size, job.grpo.micro_batch_size);

  d = DecideAfterCrash(ExitCause::kCrash, 51, 50, job, h, 1);
  EXPECT_EQ(d.action, DecisionAction::kFail);
  EXPECT_NE(d.reason.find("crash loop"), std::string::npos) << d.reason;

  h.restarts = 3;
  d = DecideAfterCrash(ExitCause::kOomKill, 90, 50, job, h, 1);
  EXPECT_EQ(d.action, DecisionAction::kFail);
  EXPECT_NE(d.reason.find("all 3 restarts of maxRestarts used"), std::string::npos) << d.reason;
}

// After a repeated OOM kill the worker's peak was at least its limit: each target is the
// one the plan, scaled to the limit, shows under the threshold (the largest micro-batch,
// the smallest worker count), with the numbers; where nothing fits by the plan, or no limit
// is known, the older step (half, or the first count that holds less), saying so.
TEST(PolicyTest, RepeatedOomKillTakesTheTargetThePlanShowsFitsAtTheLimit) {
  spec::TrainingJobSpec job = DefaultJob();
  job.model.preset = "small";
  job.grpo.micro_batch_size = 64;
  job.grpo.max_prompt_length = 200;  // long sequences: the activations matter
  job.grpo.max_response_length = 56;
  job.memory_guard.actions = {GuardAction::kRestart, GuardAction::kShrinkMicroBatch};
  GuardHistory h;
  h.RecordCrashRestart(50, /*oom_kill=*/true);
  auto host_at = [&](int micro, int workers) {
    spec::TrainingJobSpec with = job;
    with.grpo.micro_batch_size = micro;
    return static_cast<double>(PlanMemory(with, workers).host_total_bytes);
  };
  const double now = host_at(64, 1);
  // The measured peak is the limit; the plan scaled to it (clamped as in the policy).
  const auto after = [&](int micro, double limit) {
    const double scale = std::clamp(limit / now, 0.25, 4.0);
    return limit - (now - host_at(micro, 1)) * scale;
  };
  // A limit at the plan itself: killed there, the job needs at least that, so the target
  // is the largest micro-batch whose plan is under 90% of it.
  job.resources.memory_bytes = static_cast<int64_t>(now);
  const double limit = static_cast<double>(job.resources.memory_bytes);
  const double threshold = job.memory_guard.host_threshold * limit;
  Decision d = DecideAfterCrash(ExitCause::kOomKill, 51, 50, job, h, 1);
  ASSERT_EQ(d.action, DecisionAction::kShrinkMicroBatch) << d.reason;
  ASSERT_TRUE(d.target_micro_batch_size.has_value());
  const int target = *d.target_micro_batch_size;
  EXPECT_GT(target, 1) << d.reason;
  EXPECT_LT(target, 63) << d.reason;
  EXPECT_LE(after(target, limit), threshold) << d.reason;
  EXPECT_GT(after(target + 1, limit), threshold) << d.reason << ": the largest that fits";
  EXPECT_NE(d.reason.find(": shrink microBatchSize from 64 to " + std::to_string(target) + ": planned peak "),
            std::string::npos)
      << d.reason;
  EXPECT_NE(d.reason.find("threshold, now " + HumanBytes(limit) + " (the limit it was stopped at)"), std::string::npos)
      << d.reason;

  // With no limit to plan against: half, saying so.
  spec::TrainingJobSpec unlimited = job;
  unlimited.resources.memory_bytes = 0;
  d = DecideAfterCrash(ExitCause::kOomKill, 51, 50, unlimited, h, 1);
  EXPECT_EQ(d.target_micro_batch_size, 32) << d.reason;
  EXPECT_NE(d.reason.find("halve microBatchSize from 64 to 32 (no limit to plan against)"), std::string::npos)
      << d.reason;

  // Reshard: the smallest worker count whose plan, scaled to the limit, is under the
  // threshold, with the numbers; at a limit no count fits, the first that holds less.
  job.sharding.stage = 2;
  job.grpo.prompts_per_step = 24;
  job.max_workers = 8;
  job.memory_guard.actions = {GuardAction::kRestart, GuardAction::kReshard};
  const double one = static_cast<double>(PlanMemory(job, 1).host_total_bytes);
  const double three = static_cast<double>(PlanMemory(job, 3).host_total_bytes);
  const double two = static_cast<double>(PlanMemory(job, 2).host_total_bytes);
  ASSERT_LT(three, two);
  // The threshold between the plans at 3 and 2 workers, as fractions of the one at 1 (the
  // limit): 2 workers do not fit, 3 do.
  job.memory_guard.host_threshold = (two + three) / 2 / one;
  job.resources.memory_bytes = static_cast<int64_t>(one);
  d = DecideAfterCrash(ExitCause::kOomKill, 51, 50, job, h, 1);
  EXPECT_EQ(d.action, DecisionAction::kReshard) << d.reason;
  EXPECT_EQ(d.target_workers, 3) << d.reason;
  EXPECT_NE(d.reason.find("reshard from 1 to 3 workers: planned peak "), std::string::npos) << d.reason;
  // Under even 8 workers' plan: none fits.
  job.memory_guard.host_threshold = 0.5 * static_cast<double>(PlanMemory(job, 8).host_total_bytes) / one;
  d = DecideAfterCrash(ExitCause::kOomKill, 51, 50, job, h, 1);
  EXPECT_EQ(d.target_workers, 2) << d.reason;
  EXPECT_NE(d.reason.find("so each holds less (the plan shows none under the threshold)"), std::string::npos)
      << d.reason;
}

// Every candidate is proven by the planner: the reasons of reshard and shrinkMicroBatch
// give the planned peak, the threshold and the peak now, and when none fits the failure
// lists each one skipped with its numbers.
TEST(PolicyTest, EveryCandidateSaysItsPlannedPeakAndNoneFittingFailsListingEach) {
  spec::TrainingJobSpec job = DefaultJob();
  job.model.preset = "small";
  job.resources.gpus = 1;
  job.grpo.micro_batch_size = 8;
  const PlanOptions options{80 * kGiB};
  const Plan off = PlanMemory(job, 1, options);
  const double per_token = static_cast<double>(off.gpu_activation_bytes) / 1000;
  const double state = static_cast<double>(off.gpu_state_bytes);
  // The threshold halfway up the token-driven part: half the micro-batch fits.
  auto limit_at = [&](double fraction_of_activations) {
    return static_cast<int64_t>((state + fraction_of_activations * static_cast<double>(off.gpu_activation_bytes)) /
                                job.memory_guard.gpu_threshold);
  };
  job.memory_guard.actions = {GuardAction::kShrinkMicroBatch};
  Forecast fc = GpuSpikeForecast(job, state, per_token, 1000, limit_at(0.6));
  Decision d = Decide(fc, job, GuardHistory{}, nullptr, 1, options);
  ASSERT_EQ(d.action, DecisionAction::kShrinkMicroBatch) << d.reason;
  EXPECT_NE(d.reason.find("shrink microBatchSize from 8 to " + std::to_string(*d.target_micro_batch_size) +
                          ": planned peak "),
            std::string::npos)
      << d.reason;
  EXPECT_NE(d.reason.find(" threshold, now "), std::string::npos) << d.reason;

  // A threshold under the state plus any batch: every token-driven lever is skipped with
  // its numbers, and the failure lists them all.
  job.memory_guard.actions = {GuardAction::kShrinkMicroBatch, GuardAction::kShrinkTokenBudget};
  fc = GpuSpikeForecast(job, state, per_token, 1000, limit_at(0.001));
  d = Decide(fc, job, GuardHistory{}, nullptr, 1, options);
  EXPECT_EQ(d.action, DecisionAction::kFail) << d.reason;
  for (const char* skip : {"shrinkMicroBatch: would not fit even at microBatchSize 1: planned peak ",
                           "shrinkTokenBudget: would not fit even at "}) {
    EXPECT_NE(d.reason.find(skip), std::string::npos) << skip << " in " << d.reason;
  }
  EXPECT_NE(d.reason.find("nothing left to try ("), std::string::npos) << d.reason;
}

// A worker that dies before passing the step its restart resumed from (it failed while
// resuming, or fell back to an older, intact checkpoint) made no progress: the reason says
// so instead of counting zero or negative steps.
TEST(PolicyTest, ACrashBeforeTheRestartStepIsNamedAsNoProgress) {
  spec::TrainingJobSpec job = DefaultJob();
  GuardHistory h;
  h.RecordCrashRestart(5, /*oom_kill=*/false);
  for (int failed_step : {4, 5}) {
    const Decision d = DecideAfterCrash(ExitCause::kCrash, failed_step, 4, job, h, 1);
    EXPECT_EQ(d.action, DecisionAction::kFail) << d.reason;
    EXPECT_NE(d.reason.find("again without getting past the restart at step 5: a crash loop"), std::string::npos)
        << d.reason;
    EXPECT_EQ(d.reason.find("within -"), std::string::npos) << d.reason;
    EXPECT_EQ(d.reason.find("within 0"), std::string::npos) << d.reason;
  }
  const Decision later = DecideAfterCrash(ExitCause::kCrash, 6, 5, job, h, 1);
  EXPECT_NE(later.reason.find("again within 1 step of the restart at step 5"), std::string::npos) << later.reason;
}

TEST(PolicyTest, AfterAGpuOutOfMemoryRestartThenBringGpuMemoryPerWorkerDown) {
  spec::TrainingJobSpec job = DefaultJob();
  job.model.preset = "small";
  job.resources.gpus = 1;
  job.sharding.stage = 2;  // more workers hold less gradient and optimizer state each
  job.memory_guard.max_restarts = 3;
  GuardHistory h;
  Decision d = DecideAfterCrash(ExitCause::kGpuOom, 57, 50, job, h, 1);
  EXPECT_EQ(d.action, DecisionAction::kRestart);
  EXPECT_EQ(d.resource, "gpu");
  EXPECT_EQ(d.reason, "worker ran out of GPU memory at step 57 (7 steps lost since the checkpoint at step 50): "
                      "restart from the checkpoint at step 50");

  // Out of GPU memory again right away: not a crash loop to give up on, but memory per
  // worker that must come down.
  h.RecordCrashRestart(50, /*oom_kill=*/true);
  d = DecideAfterCrash(ExitCause::kGpuOom, 51, 50, job, h, 1);
  EXPECT_EQ(d.action, DecisionAction::kReshard) << d.reason;
  EXPECT_EQ(d.resource, "gpu");
  EXPECT_EQ(d.target_workers, 2);
  job.memory_guard.actions = {GuardAction::kRestart, GuardAction::kShrinkMicroBatch};
  d = DecideAfterCrash(ExitCause::kGpuOom, 51, 50, job, h, 1);
  EXPECT_EQ(d.action, DecisionAction::kShrinkMicroBatch) << d.reason;
}

TEST(DecisionTest, JsonRoundTripAndApply) {
  Decision d;
  d.action = DecisionAction::kReshard;
  d.resource = "host";
  d.reason = "host working set \"full\"";
  d.step = 12;
  d.forecast_peak_bytes = 123456789;
  d.steps_to_limit = 2;
  d.growth_bytes_per_step = 1.5e6;
  d.memory_class = "capacity";
  d.target_workers = 4;
  d.target_offload_optimizer = false;
  d.target_max_tokens_per_micro_batch = 3072;
  Decision back = Decision::FromJson(d.ToJson());
  EXPECT_EQ(back.action, d.action);
  EXPECT_EQ(back.reason, d.reason);
  EXPECT_EQ(back.step, 12);
  EXPECT_EQ(back.forecast_peak_bytes, 123456789);
  EXPECT_EQ(back.target_workers, 4);
  EXPECT_FALSE(back.target_micro_batch_size.has_value());
  EXPECT_EQ(back.target_max_tokens_per_micro_batch, 3072);
  EXPECT_NE(d.ToJson().find("\"target_max_tokens_per_micro_batch\":3072"), std::string::npos) << d.ToJson();
  EXPECT_FALSE(Decision::FromJson(Decision{}.ToJson()).target_max_tokens_per_micro_batch.has_value());
  EXPECT_EQ(back.target_offload_optimizer, false);
  EXPECT_FALSE(back.target_offload_params.has_value());
  EXPECT_EQ(d.ToJson().rfind("{\"action\":\"reshard\"", 0), 0u) << d.ToJson();
}

TEST(DecisionTest, BadJsonNamesTheProblem) {
  auto error = [](const std::string& json) {
    try {
      Decision::FromJson(json);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("{\"action\":\"explode\"}").find("unknown action \"explode\""), std::string::npos);
  EXPECT_NE(error("{\"reason\":\"x\"}").find("\"action\" is missing"), std::string::npos);
  EXPECT_NE(error("{\"action\":\"restart\",\"step\":\"seven\"}").find("\"step\""), std::string::npos);
  EXPECT_NE(error("[1]").find("expected an object"), std::string::npos);
  EXPECT_NE(error("{").find("not JSON"), std::string::npos);
  for (const char* name : {"none", "restart", "reshard", "shrinkMicroBatch", "shrinkTokenBudget",
                           "enableActivationCheckpointing", "disableOffload", "enableOffload", "fail"}) {
    EXPECT_EQ(DecisionActionName(*DecisionActionFromName(name)), std::string(name));
  }
  EXPECT_EQ(FromGuardAction(GuardAction::kShrinkMicroBatch), DecisionAction::kShrinkMicroBatch);
  EXPECT_EQ(FromGuardAction(GuardAction::kShrinkTokenBudget), DecisionAction::kShrinkTokenBudget);
  EXPECT_EQ(ToGuardAction(DecisionAction::kShrinkTokenBudget), GuardAction::kShrinkTokenBudget);
  EXPECT_EQ(ToGuardAction(DecisionAction::kFail), std::nullopt);
}

TEST(GuardHistoryTest, RecordsJsonAndEnvironment) {
  GuardHistory h;
  Decision restart;
  restart.action = DecisionAction::kRestart;
  restart.step = 14;
  h.Record(restart);
  Decision reshard;
  reshard.action = DecisionAction::kReshard;
  reshard.step = 30;
  h.Record(reshard);
  Decision budget;
  budget.action = DecisionAction::kShrinkTokenBudget;
  budget.step = 35;
  h.Record(budget);
  EXPECT_EQ(h.token_budget_shrinks, 1);
  EXPECT_EQ(h.last_restart_step, 35);
  EXPECT_NE(h.ToJson().find("\"token_budget_shrinks\":1"), std::string::npos) << h.ToJson();
  h.RecordCrashRestart(40, /*oom_kill=*/true);
  EXPECT_EQ(h.restarts, 2);
  EXPECT_EQ(h.reshards, 1);
  EXPECT_EQ(h.crash_restarts, 1);
  EXPECT_EQ(h.oom_kills, 1);
  EXPECT_EQ(h.last_restart_step, 40);
  EXPECT_EQ(h.StepsSinceLastRestart(47), 7);
  EXPECT_EQ(GuardHistory::FromJson(h.ToJson()), h);

  // A guard restart keeps its step, resource and level; a decision's finding that a
  // restart reclaimed nothing is kept for every generation after it.
  Decision guard_restart;
  guard_restart.action = DecisionAction::kRestart;
  guard_restart.step = 50;
  guard_restart.resource = "gpu";
  guard_restart.level_bytes = 60 * kGiB;
  h.Record(guard_restart);
  EXPECT_EQ(h.guard_restart_step, 50);
  EXPECT_EQ(h.restart_resource, "gpu");
  EXPECT_EQ(h.restart_level_bytes, 60 * kGiB);
  EXPECT_FALSE(h.RestartReclaimedNothing("gpu"));
  Decision next;
  next.action = DecisionAction::kReshard;
  next.step = 60;
  next.restart_reclaimed_nothing = "gpu";
  h.Record(next);
  h.Record(reshard);
  EXPECT_TRUE(h.RestartReclaimedNothing("gpu"));
  EXPECT_FALSE(h.RestartReclaimedNothing("host"));
  h.AddRestartReclaimedNothing("host,gpu");
  EXPECT_EQ(h.restart_reclaimed_nothing, "gpu,host");
  EXPECT_EQ(GuardHistory::FromJson(h.ToJson()), h);
  EXPECT_EQ(Decision::FromJson(next.ToJson()).restart_reclaimed_nothing, "gpu");

  ::setenv(protocol::kGuardHistoryEnv, h.ToJson().c_str(), 1);
  EXPECT_EQ(GuardHistory::FromEnvironment(), h);
  ::setenv(protocol::kGuardHistoryEnv, "{\"restart\":1}", 1);
  try {
    GuardHistory::FromEnvironment();
    FAIL() << "a misspelled key must be an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("HEADROOM_GUARD_HISTORY"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unknown key \"restart\""), std::string::npos) << e.what();
  }
  ::unsetenv(protocol::kGuardHistoryEnv);
  EXPECT_EQ(GuardHistory::FromEnvironment(), GuardHistory{});
}

}  // namespace
}  // namespace headroom::guard
