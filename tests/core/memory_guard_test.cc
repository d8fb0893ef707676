// MemoryGuard over simulated worker lifetimes: the supervisor applies each decision,
// records it in the history, and starts a fresh process that resumes from the checkpoint.
#include <gtest/gtest.h>

#include <functional>

#include "core/guard/memory_guard.h"

namespace headroom::guard {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kGiB = 1LL << 30;

spec::TrainingJobSpec Drill() {
  spec::TrainingJobSpec job;
  job.resources.memory_bytes = kGiB;
  job.memory_guard.host_threshold = 0.85;
  job.memory_guard.horizon_steps = 2;
  job.memory_guard.max_restarts = 5;
  job.grpo.steps = 40;
  return job;
}

struct Outcome {
  int steps_done = 0;
  int restarts = 0;
  bool crossed_limit = false;
  Decision last;
};

// A leak of `leak` bytes per step on top of `base`, reset by every restart. Runs until the
// job's steps are done or the guard fails it.
Outcome Simulate(const spec::TrainingJobSpec& job, int64_t base, int64_t leak) {
  Outcome o;
  GuardHistory history;
  int step = 0;
  while (step < job.grpo.steps) {
    MemoryGuard guard(job, 1, history);
    int64_t level = base;
    bool relaunched = false;
    for (; step < job.grpo.steps; ++step) {
      level += leak;
      StepMemory m;
      m.step = step;
      m.host_bytes = level;
      m.host_peak_bytes = level + 16 * kMiB;
      m.host_limit_bytes = job.resources.memory_bytes;
      m.tokens = 512;
      if (m.host_peak_bytes >= m.host_limit_bytes) o.crossed_limit = true;
      Decision d = guard.AfterStep(m, 512);
      if (!d.acts()) continue;
      o.last = d;
      if (d.action == DecisionAction::kFail) {
        o.steps_done = step + 1;
        o.restarts = history.restarts;
        return o;
      }
      history.Record(d);  // checkpoint at `step`, relaunch, resume at step + 1
      ++step;
      relaunched = true;
      break;
    }
    if (!relaunched) break;
  }
  o.steps_done = step;
  o.restarts = history.restarts;
  return o;
}

TEST(MemoryGuardTest, LeakDrillFinishesThroughRestartsWithoutCrossingTheLimit) {
  Outcome o = Simulate(Drill(), 250 * kMiB, 48 * kMiB);
  EXPECT_EQ(o.steps_done, 40);
  EXPECT_FALSE(o.crossed_limit);
  EXPECT_GE(o.restarts, 2);
  EXPECT_LE(o.restarts, 5);
  EXPECT_EQ(o.last.action, DecisionAction::kRestart) << o.last.reason;
}

TEST(MemoryGuardTest, RestartsThatBuyNoProgressFailInsteadOfLooping) {
  spec::TrainingJobSpec job = Drill();
  job.memory_guard.actions = {spec::GuardAction::kRestart};
  // Starts at 78% and leaks 4% per step: a fresh process crosses within two steps.
  Outcome o = Simulate(job, static_cast<int64_t>(0.78 * kGiB), static_cast<int64_t>(0.04 * kGiB));
  EXPECT_FALSE(o.crossed_limit);
  EXPECT_EQ(o.last.action, DecisionAction::kFail) << o.last.reason;
  EXPECT_NE(o.last.reason.find("bought only 2 steps of progress"), std::string::npos) << o.last.reason;
  EXPECT_LT(o.steps_done, 10);
}

// Memory that follows the step, not the process: what a restart cannot reclaim (a level
// shift at a fixed step, state that grows with the data seen). `level(step)`.
Outcome SimulateByStep(const spec::TrainingJobSpec& job, const std::function<int64_t(int)>& level) {
  Outcome o;
  GuardHistory history;
  int step = 0;
  while (step < job.grpo.steps) {
    MemoryGuard guard(job, 1, history);
    bool relaunched = false;
    for (; step < job.grpo.steps; ++step) {
      StepMemory m;
      m.step = step;
      m.host_bytes = level(step);
      m.host_peak_bytes = m.host_bytes + 4 * kMiB;
      m.host_limit_bytes = job.resources.memory_bytes;
      m.tokens = 512;
      if (m.host_peak_bytes >= m.host_limit_bytes) o.crossed_limit = true;
      Decision d = guard.AfterStep(m, 512);
      o.last = d;
      if (!d.acts()) continue;
      if (d.action == DecisionAction::kFail) {
        o.steps_done = step + 1;
        o.restarts = history.restarts;
        return o;
      }
      history.Record(d);
      ++step;
      relaunched = true;
      break;
    }
    if (!relaunched) break;
  }
  o.steps_done = step;
  o.restarts = history.restarts;
  return o;
}

TEST(MemoryGuardTest, ARestartThatReclaimedNothingIsNotRepeated) {
  spec::TrainingJobSpec job = Drill();
  job.memory_guard.actions = {spec::GuardAction::kRestart};
  // +25 MiB every step of the run, whichever process runs it: the guard restarts once on
  // the confirmed leak; the next process is back at the same level at the next step, so
  // it restarts no more (each restart would have bought 3 steps: enough progress to loop
  // until maxRestarts) and stops the job before the limit, saying why.
  Outcome o = SimulateByStep(job, [](int step) { return 200 * kMiB + 25 * kMiB * step; });
  EXPECT_FALSE(o.crossed_limit);
  EXPECT_EQ(o.restarts, 1);
  EXPECT_EQ(o.last.action, DecisionAction::kFail) << o.last.reason;
  EXPECT_NE(o.last.reason.find("reclaimed nothing"), std::string::npos) << o.last.reason;
  EXPECT_EQ(o.last.restart_reclaimed_nothing, "host");

  // A leak a restart does reclaim is restarted as often as it needs (the drill above).
  Outcome leak = Simulate(job, 250 * kMiB, 48 * kMiB);
  EXPECT_EQ(leak.steps_done, 40);
  EXPECT_GE(leak.restarts, 2);
}

TEST(MemoryGuardTest, RestartsStopAtMaxRestarts) {
  spec::TrainingJobSpec job = Drill();
  job.memory_guard.actions = {spec::GuardAction::kRestart};
  // Each process lasts three steps: progress, but the job never gets far.
  Outcome o = Simulate(job, static_cast<int64_t>(0.70 * kGiB), static_cast<int64_t>(0.06 * kGiB));
  EXPECT_FALSE(o.crossed_limit);
  EXPECT_EQ(o.restarts, 5);
  EXPECT_EQ(o.last.action, DecisionAction::kFail) << o.last.reason;
  EXPECT_NE(o.last.reason.find("all 5 restarts of maxRestarts used"), std::string::npos) << o.last.reason;
}

TEST(MemoryGuardTest, DisabledGuardForecastsButNeverActs) {
  spec::TrainingJobSpec job = Drill();
  job.memory_guard.enabled = false;
  Outcome o = Simulate(job, 250 * kMiB, 48 * kMiB);
  EXPECT_TRUE(o.crossed_limit);
  EXPECT_EQ(o.restarts, 0);
  MemoryGuard guard(job, 1);
  for (int t = 0; t < 6; ++t) {
    StepMemory m{t, (300 + 50 * t) * kMiB, (300 + 50 * t) * kMiB, 0, 0, 100, kGiB, 0};
    guard.AfterStep(m, 100);
  }
  EXPECT_EQ(guard.last_forecast().host.memory_class, MemoryClass::kLeak);
}

TEST(MemoryGuardTest, PlanCorrectionFollowsMeasurements) {
  spec::TrainingJobSpec job = Drill();
  MemoryGuard guard(job, 1);
  const int64_t planned = guard.plan().host_total_bytes;
  for (int t = 0; t < 10; ++t) {
    StepMemory m{t, planned * 2, planned * 2, 0, 0, 100, kGiB, 0};
    guard.AfterStep(m, 100);
  }
  EXPECT_NEAR(guard.correction().host_scale, 2.0, 0.01);
  EXPECT_NEAR(static_cast<double>(guard.plan().host_total_bytes), 2.0 * planned, 0.02 * planned);
}

}  // namespace
}  // namespace headroom::guard
