// Forecaster: trend, peaks from tokens, classes, on synthetic series with known answers.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/guard/forecaster.h"

namespace headroom::guard {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kGiB = 1LL << 30;

StepMemory Host(int step, double bytes, double peak, int64_t tokens, int64_t limit) {
  StepMemory m;
  m.step = step;
  m.host_bytes = static_cast<int64_t>(bytes);
  m.host_peak_bytes = static_cast<int64_t>(peak);
  m.tokens = tokens;
  m.host_limit_bytes = limit;
  return m;
}

TEST(ForecasterTest, LinearLeakWithNoiseGivesSlopeAndStepsToLimit) {
  Forecaster f;
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 2 * kMiB);
  for (int t = 0; t < 10; ++t) {
    double end = 400 * kMiB + 50 * kMiB * t + noise(rng);
    f.Observe(Host(t, end, end + 20 * kMiB, 1000, 2 * kGiB));
  }
  Forecast fc = f.ForecastNext(1000);
  EXPECT_EQ(fc.step, 9);
  EXPECT_TRUE(fc.host.present);
  EXPECT_FALSE(fc.gpu.present);
  EXPECT_EQ(fc.host.memory_class, MemoryClass::kLeak);
  EXPECT_NEAR(fc.host.growth_bytes_per_step, 50 * kMiB, 2.5 * kMiB);
  // Level ~850 MiB at step 9; peak excess 20 MiB; limit 2048 MiB:
  // 850 + 50 h + 20 >= 2048 -> h = 24; threshold (90% = 1843 MiB) -> h = 20.
  EXPECT_NEAR(fc.host.steps_to_limit, 24, 1);
  EXPECT_NEAR(fc.host.steps_to_threshold, 20, 1);
  ASSERT_EQ(fc.host.predicted_peak_bytes.size(), 2u);
  EXPECT_NEAR(static_cast<double>(fc.host.predicted_peak_bytes[0]), 920.0 * kMiB, 6 * kMiB);
  EXPECT_NEAR(static_cast<double>(fc.host.predicted_peak_bytes[1] - fc.host.predicted_peak_bytes[0]), 50.0 * kMiB,
              3 * kMiB);
  EXPECT_GT(fc.host.confidence, 0.5);
}

TEST(ForecasterTest, OneOutlierDoesNotBendTheTrend) {
  Forecaster f;
  for (int t = 0; t < 12; ++t) {
    double end = 1 * kGiB + (t == 6 ? 600 * kMiB : 0);  // a checkpoint-write burst
    f.Observe(Host(t, end, end, 1000, 4 * kGiB));
  }
  Forecast fc = f.ForecastNext(1000);
  EXPECT_NE(fc.host.memory_class, MemoryClass::kLeak);
  EXPECT_EQ(fc.host.growth_bytes_per_step, 0);
  EXPECT_EQ(fc.host.steps_to_threshold, kNever);
}

TEST(ForecasterTest, WarmUpThatLevelsOffIsNotALeak) {
  Forecaster f;
  for (int t = 0; t < 16; ++t) {
    double end = 3 * kGiB - 2 * kGiB * std::pow(0.5, t);
    f.Observe(Host(t, end, end + 50 * kMiB, 1000, 4 * kGiB));
    Forecast fc = f.ForecastNext(1000);
    EXPECT_NE(fc.host.memory_class, MemoryClass::kLeak) << "step " << t;
    EXPECT_EQ(fc.host.steps_to_threshold, kNever) << "step " << t;
  }
  Forecast fc = f.ForecastNext(1000);
  EXPECT_EQ(fc.host.memory_class, MemoryClass::kPlateau);
}

TEST(ForecasterTest, ALeakIsConfirmedAfterConfirmStepsOfGrowth) {
  ForecasterOptions o;
  o.confirm_steps = 8;
  Forecaster f(o);
  for (int t = 0; t < 10; ++t) {
    f.Observe(Host(t, 300 * kMiB + 40 * kMiB * t, 320 * kMiB + 40 * kMiB * t, 1000, 2 * kGiB));
    Forecast fc = f.ForecastNext(1000);
    if (t + 1 < o.min_history) {
      EXPECT_EQ(fc.host.trend_steps, 0) << "step " << t;
      continue;
    }
    EXPECT_EQ(fc.host.memory_class, MemoryClass::kLeak) << "step " << t;
    EXPECT_EQ(fc.host.trend_steps, t + 1) << "step " << t;
    EXPECT_EQ(fc.host.trend_confirmed, t + 1 >= 8) << "step " << t;
  }
}

TEST(ForecasterTest, ASteepWarmUpIsNeverAConfirmedLeak) {
  // +15, +11, +8 points of the limit per step (64% at step 3), levelling off at 84%.
  Forecaster f;
  for (int t = 0; t < 20; ++t) {
    double end = (0.84 - 0.54 * std::pow(0.73, t)) * 4 * kGiB;
    f.Observe(Host(t, end, end + 0.04 * 4 * kGiB, 1000, 4 * kGiB));
    Forecast fc = f.ForecastNext(1000);
    EXPECT_FALSE(fc.host.trend_confirmed) << "step " << t << ": " << fc.host.Describe();
    // Never within one step of the limit either: nothing to act on.
    EXPECT_NE(fc.host.steps_to_limit, 1) << "step " << t;
  }
}

TEST(ForecasterTest, ConfirmStepsStayWithinTheWindow) {
  ForecasterOptions o;
  o.window = 6;
  o.confirm_steps = 50;
  EXPECT_EQ(Forecaster(o).options().confirm_steps, 6);
  o.confirm_steps = 1;
  EXPECT_EQ(Forecaster(o).options().confirm_steps, Forecaster(o).options().min_history);
}

TEST(ForecasterTest, StaircaseIsSustainedGrowth) {
  Forecaster f;
  for (int t = 0; t < 15; ++t) {
    double end = 1 * kGiB + 96 * kMiB * (t / 3);  // a stair every third step
    f.Observe(Host(t, end, end, 1000, 4 * kGiB));
  }
  Forecast fc = f.ForecastNext(1000);
  EXPECT_EQ(fc.host.memory_class, MemoryClass::kLeak);
  EXPECT_NEAR(fc.host.growth_bytes_per_step, 32 * kMiB, 12 * kMiB);
  EXPECT_NE(fc.host.steps_to_limit, kNever);
}

TEST(ForecasterTest, OneJumpThenFlatIsALevelShiftJudgedByItsLevel) {
  // 30% for four steps, +28% of the limit at step 4, then flat: at every step after the
  // jump the forecast is the plateau, with no growth and no period, and names the shift.
  const int64_t limit = 128 * kGiB;
  Forecaster f;
  for (int t = 0; t < 20; ++t) {
    const double end = (t >= 4 ? 0.58 : 0.30) * limit + (t % 2 ? 0.002 : -0.002) * limit;
    f.Observe(Host(t, end, end + 0.02 * limit, 1000, limit));
    if (t < 4) continue;
    const Forecast fc = f.ForecastNext(1000);
    EXPECT_NE(fc.host.memory_class, MemoryClass::kLeak) << "step " << t;
    EXPECT_EQ(fc.host.period_steps, 0) << "step " << t;
    EXPECT_LT(fc.host.growth_bytes_per_step, 0.002 * limit) << "step " << t;
    EXPECT_EQ(fc.host.steps_to_threshold, kNever) << "step " << t;
    EXPECT_NEAR(static_cast<double>(fc.host.NextPeak()), 0.60 * limit, 0.01 * limit) << "step " << t;
    if (t < 4 + 11) {  // while the jump is in the 12-step window
      EXPECT_NEAR(fc.host.level_shift_bytes, 0.28 * limit, 0.01 * limit) << "step " << t;
      EXPECT_EQ(fc.host.level_shift_step, 4) << "step " << t;
      EXPECT_NE(fc.host.Describe().find("a level shift of"), std::string::npos) << fc.host.Describe();
    }
  }
}

TEST(ForecasterTest, AJumpToALevelNearTheLimitIsStillACrossing) {
  // The same jump, to 89% with a 3% in-step excess: the level itself crosses the 90%
  // threshold at the next step; no growth is needed for that.
  const int64_t limit = 64 * kGiB;
  Forecaster f;
  for (int t = 0; t < 6; ++t) {
    const double end = (t >= 5 ? 0.89 : 0.30) * limit;
    f.Observe(Host(t, end, end + 0.03 * limit, 1000, limit));
  }
  const Forecast fc = f.ForecastNext(1000);
  EXPECT_GT(fc.host.level_shift_bytes, 0);
  EXPECT_EQ(fc.host.steps_to_threshold, 1);
  EXPECT_EQ(fc.host.memory_class, MemoryClass::kCapacity);
}

TEST(ForecasterTest, AStaircaseNeedsASecondJumpToShowItsPeriod) {
  // Jumps of a fifth of the limit every fourth step: after the first, a level shift; after
  // the second, a staircase with its period.
  const int64_t limit = 64 * kGiB;
  Forecaster f;
  for (int t = 0; t <= 10; ++t) {
    const double end = (0.2 + 0.2 * ((t + 2) / 4)) * limit;  // jumps at steps 2, 6, 10
    f.Observe(Host(t, end, end, 1000, limit));
    const Forecast fc = f.ForecastNext(1000);
    if (t >= 2 && t < 6) {
      EXPECT_EQ(fc.host.period_steps, 0) << "step " << t << ": " << fc.host.Describe();
      EXPECT_NE(fc.host.memory_class, MemoryClass::kLeak) << "step " << t << ": " << fc.host.Describe();
    }
    if (t >= 6) EXPECT_EQ(fc.host.period_steps, 4) << "step " << t << ": " << fc.host.Describe();
  }
}

TEST(ForecasterTest, StaircaseIsProjectedStairByStairWithItsPeriod) {
  // Flat for a step, then a jump of a fifth of the limit (a cache rebuilt every second
  // generation): 20% at step 0, 40% at steps 1-2, 60% at steps 3-4, 80% at step 5.
  const int64_t limit = 64 * kGiB;
  Forecaster f;
  for (int t = 0; t <= 5; ++t) {
    double end = (0.2 + 0.2 * ((t + 1) / 2)) * limit;
    f.Observe(Host(t, end, end + 0.03 * limit, 1000, limit));
  }
  Forecast fc = f.ForecastNext(1000);
  EXPECT_EQ(fc.host.memory_class, MemoryClass::kLeak);
  EXPECT_EQ(fc.host.period_steps, 2);
  EXPECT_NEAR(fc.host.growth_per_period_bytes, 0.2 * limit, 1e-6 * limit);
  EXPECT_NEAR(fc.host.growth_bytes_per_step, 0.1 * limit, 1e-6 * limit);
  // Step 6 stays on the 80% stair; step 7 jumps to 100%: the peak crosses in 2 steps.
  EXPECT_NEAR(static_cast<double>(fc.host.predicted_end_bytes[0]), 0.8 * limit, 1e-6 * limit);
  EXPECT_NEAR(static_cast<double>(fc.host.predicted_end_bytes[1]), 1.0 * limit, 1e-6 * limit);
  EXPECT_EQ(fc.host.steps_to_limit, 2);
  EXPECT_EQ(fc.host.Describe(), "51.2 GiB of 64 GiB (80%), growing 12.8 GiB every 2 steps (leak)");

  // After a flat step the next jump is one step away, not "no growth".
  f.Observe(Host(6, 0.8 * limit, 0.83 * limit, 1000, limit));
  fc = f.ForecastNext(1000);
  EXPECT_EQ(fc.host.period_steps, 2);
  EXPECT_EQ(fc.host.steps_to_limit, 1);
}

TEST(ForecasterTest, LongPeriodStaircaseCountsStepsToTheNextJump) {
  // A jump of 30% every 5 steps: at 85% the next jump (to 115%) is 5 steps after the last.
  const int64_t limit = 64 * kGiB;
  Forecaster f;
  for (int t = 0; t <= 8; ++t) {
    double end = (0.25 + 0.3 * (t >= 1) + 0.3 * (t >= 6)) * limit;
    f.Observe(Host(t, end, end + 0.03 * limit, 1000, limit));
    Forecast fc = f.ForecastNext(1000);
    if (t < 6) continue;
    EXPECT_EQ(fc.host.period_steps, 5) << "step " << t;
    EXPECT_EQ(fc.host.steps_to_limit, 11 - t) << "step " << t;
  }
}

TEST(ForecasterTest, AStaircaseThatStoppedIsNotALeak) {
  // Three jumps while caches fill, then flat for good.
  const int64_t limit = 64 * kGiB;
  Forecaster f;
  for (int t = 0; t < 16; ++t) {
    double end = (0.3 + 0.1 * std::min(3, (t + 1) / 2)) * limit;
    f.Observe(Host(t, end, end, 1000, limit));
  }
  Forecast fc = f.ForecastNext(1000);
  EXPECT_EQ(fc.host.period_steps, 0);
  EXPECT_NE(fc.host.memory_class, MemoryClass::kLeak);
  EXPECT_EQ(fc.host.steps_to_limit, kNever);
}

TEST(ForecasterTest, MarginFollowsThisRunsOneStepErrors) {
  // The same leak without noise and with 2% (of the limit) noise: the margin is what the
  // forecasts missed by, about two deviations of the noise, and 0 when they never miss.
  const int64_t limit = 16 * kGiB;
  Forecaster clean, noisy;
  std::mt19937 rng(11);
  std::normal_distribution<double> noise(0, 0.02 * limit);
  for (int t = 0; t < 16; ++t) {
    double end = 0.3 * limit + 0.01 * limit * t;
    clean.Observe(Host(t, end, end, 1000, limit));
    double e = end + noise(rng);
    noisy.Observe(Host(t, e, e, 1000, limit));
  }
  // Clean: off only by the forecasts' rounding to whole bytes.
  EXPECT_LE(clean.ForecastNext(1000).host.forecast_margin_bytes, 4);
  const double margin = static_cast<double>(noisy.ForecastNext(1000).host.forecast_margin_bytes);
  EXPECT_GT(margin, 0.02 * limit);
  EXPECT_LT(margin, 0.12 * limit);
  // With the margin the limit comes sooner than the point forecast says.
  Forecast fc = noisy.ForecastNext(1000);
  EXPECT_LE(fc.host.steps_to_limit_with_margin, fc.host.steps_to_limit);
}

TEST(ForecasterTest, AcceleratingGrowthWidensTheMarginByTheForecastsBias) {
  // Growth that grows: a straight line runs low at every step, and the margin says by how much.
  const int64_t limit = 16 * kGiB;
  Forecaster f;
  for (int t = 0; t < 14; ++t) {
    double end = (0.2 + 0.002 * t * t) * limit;
    f.Observe(Host(t, end, end, 1000, limit));
  }
  EXPECT_GT(f.ForecastNext(1000).host.forecast_margin_bytes, 0.002 * limit);
}

TEST(ForecasterTest, AResumeForgetsTheErrorsOfTheStepsItReplaces) {
  const int64_t limit = 16 * kGiB;
  Forecaster f;
  for (int t = 0; t < 10; ++t) {
    double end = (0.3 + (t % 2 ? 0.05 : 0.0)) * limit;  // forecasts off by 5% every step
    f.Observe(Host(t, end, end, 1000, limit));
  }
  ASSERT_GT(f.ForecastNext(1000).host.forecast_margin_bytes, 0);
  // Resumed from the start, steady this time: the alternating steps and their errors are gone.
  for (int t = 0; t < 8; ++t) f.Observe(Host(t, 0.3 * limit, 0.3 * limit, 1000, limit));
  EXPECT_LE(f.ForecastNext(1000).host.forecast_margin_bytes, 4);
}

TEST(ForecasterTest, SawtoothHasNoTrendAndForecastsItsTop) {
  Forecaster f;
  for (int t = 0; t < 20; ++t) {
    double end = 2 * kGiB + 300 * kMiB * (t % 4);  // rises three steps, then a flush
    f.Observe(Host(t, end, end, 1000, 4 * kGiB));
  }
  Forecast fc = f.ForecastNext(1000);  // step 19 sits at the top (phase 3)
  EXPECT_EQ(fc.host.memory_class, MemoryClass::kSawtooth);
  EXPECT_EQ(fc.host.growth_bytes_per_step, 0);
  EXPECT_EQ(fc.host.steps_to_threshold, kNever);
  EXPECT_LE(fc.host.NextPeak(), 2 * kGiB + 900 * kMiB + kMiB);
}

TEST(ForecasterTest, SawtoothWithRisingTopsIsALeak) {
  Forecaster f;
  for (int t = 0; t < 24; ++t) {
    double end = 1 * kGiB + 200 * kMiB * (t % 4) + 40 * kMiB * t;  // the flush misses some
    f.Observe(Host(t, end, end, 1000, 8 * kGiB));
  }
  Forecast fc = f.ForecastNext(1000);
  EXPECT_EQ(fc.host.memory_class, MemoryClass::kLeak);
  EXPECT_NEAR(fc.host.growth_bytes_per_step, 40 * kMiB, 10 * kMiB);
}

TEST(ForecasterTest, PeakFollowsTheNextBatchTokens) {
  Forecaster f;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> tokens(900, 1100);
  for (int t = 0; t < 8; ++t) {
    int64_t n = tokens(rng);
    StepMemory m;
    m.step = t;
    m.gpu_bytes = 10 * kGiB;
    m.gpu_peak_bytes = 10 * kGiB + n * 4 * kMiB;  // 4 MiB of activations per token
    m.gpu_limit_bytes = 24 * kGiB;
    m.tokens = n;
    m.host_bytes = 2 * kGiB;
    m.host_limit_bytes = 16 * kGiB;
    f.Observe(m);
  }
  Forecast normal = f.ForecastNext(1000);
  EXPECT_NEAR(static_cast<double>(normal.gpu.NextPeak()), 10.0 * kGiB + 4000.0 * kMiB, 64.0 * kMiB);
  EXPECT_EQ(normal.gpu.steps_to_threshold, kNever);
  Forecast spike = f.ForecastNext(4000);  // a long-prompt batch: 16000 MiB of activations
  EXPECT_NEAR(static_cast<double>(spike.gpu.NextPeak()), 10.0 * kGiB + 16000.0 * kMiB, 256.0 * kMiB);
  EXPECT_EQ(spike.gpu.steps_to_threshold, 1);
  EXPECT_EQ(spike.gpu.steps_to_limit, 1);
  // After the spike the typical batch is back: step 2 is predicted at the median.
  EXPECT_LT(spike.gpu.predicted_peak_bytes[1], 15 * kGiB);
  EXPECT_NE(spike.gpu.memory_class, MemoryClass::kLeak);
}

TEST(ForecasterTest, FewStepsGiveNoTrendButStillPeaks) {
  Forecaster f;
  f.Observe(Host(0, 1 * kGiB, 1.35 * kGiB, 100, 2 * kGiB));
  f.Observe(Host(1, 1.5 * kGiB, 1.85 * kGiB, 100, 2 * kGiB));
  Forecast fc = f.ForecastNext(100);
  EXPECT_EQ(fc.host.memory_class, MemoryClass::kUnknown);
  EXPECT_EQ(fc.host.growth_bytes_per_step, 0);
  EXPECT_EQ(fc.host.confidence, 0);
  EXPECT_EQ(fc.host.steps_to_threshold, 1);  // a 1.85 GiB peak is over 90% of 2 GiB
}

TEST(ForecasterTest, NoLimitMeansNoStepsToLimit) {
  Forecaster f;
  for (int t = 0; t < 8; ++t) f.Observe(Host(t, (1 + t) * kGiB, (1 + t) * kGiB, 100, 0));
  Forecast fc = f.ForecastNext(100);
  EXPECT_EQ(fc.host.memory_class, MemoryClass::kLeak);
  EXPECT_EQ(fc.host.steps_to_limit, kNever);
  EXPECT_EQ(fc.host.steps_to_threshold, kNever);
}

TEST(ForecasterTest, AResumedWorkerReplacesTheStepsAfterItsCheckpoint) {
  Forecaster f;
  for (int t = 0; t < 10; ++t) f.Observe(Host(t, (1 + 0.1 * t) * kGiB, (1 + 0.1 * t) * kGiB, 100, 4 * kGiB));
  f.Observe(Host(6, 1 * kGiB, 1 * kGiB, 100, 4 * kGiB));  // restarted from step 5's checkpoint
  EXPECT_EQ(f.size(), 7u);
  EXPECT_EQ(f.history().back().step, 6);
  EXPECT_EQ(f.history().back().host_bytes, 1 * kGiB);
}

TEST(ForecasterTest, DescribeReadsLikeAReason) {
  Forecaster f;
  for (int t = 0; t < 8; ++t) f.Observe(Host(t, 500 * kMiB + 48 * kMiB * t, 500 * kMiB + 48 * kMiB * t, 0, kGiB));
  std::string d = f.ForecastNext().host.Describe();
  EXPECT_EQ(d, "836 MiB of 1 GiB (82%), growing 48 MiB/step (leak)");
}

}  // namespace
}  // namespace headroom::guard
