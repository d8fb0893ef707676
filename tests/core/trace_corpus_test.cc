// The generated trace corpus: deterministic, large enough, every family and side, and
// labels that agree with the rows they label.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/guard/trace_corpus.h"

namespace headroom::guard {
namespace {

int64_t PeakOn(const StepMemory& m, bool gpu) {
  return gpu ? std::max(m.gpu_peak_bytes, m.gpu_bytes) : std::max(m.host_peak_bytes, m.host_bytes);
}

TEST(TraceCorpusTest, IsDeterministicPerSeedAndDiffersAcrossSeeds) {
  const auto a = GenerateTraceCorpus(5), b = GenerateTraceCorpus(5), c = GenerateTraceCorpus(6);
  ASSERT_EQ(a.size(), b.size());
  bool any_difference = false;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].name, b[i].name);
    ASSERT_EQ(a[i].steps.size(), b[i].steps.size()) << a[i].name;
    for (size_t t = 0; t < a[i].steps.size(); ++t) {
      ASSERT_EQ(a[i].steps[t].host_bytes, b[i].steps[t].host_bytes) << a[i].name << " step " << t;
      ASSERT_EQ(a[i].steps[t].gpu_peak_bytes, b[i].steps[t].gpu_peak_bytes) << a[i].name << " step " << t;
    }
    any_difference |=
        a[i].steps[0].host_bytes != c[i].steps[0].host_bytes || a[i].steps[0].gpu_bytes != c[i].steps[0].gpu_bytes;
  }
  EXPECT_TRUE(any_difference);
}

TEST(TraceCorpusTest, HasEveryFamilyOnBothSidesAndUniqueNames) {
  const auto corpus = GenerateTraceCorpus();
  ASSERT_GE(corpus.size(), 300u);
  std::set<std::string> names, families, gpu_families;
  for (const auto& e : corpus) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    families.insert(e.family);
    if (e.resource == "gpu") gpu_families.insert(e.family);
  }
  for (const char* f :
       {"linear-leak", "staircase", "accelerating", "sawtooth-trend", "creep", "long-prompt", "warmup-plateau",
        "sawtooth", "steady", "token-varying", "level-shift", "first-step-jump", "two-jumps", "jump-creep"}) {
    EXPECT_EQ(families.count(f), 1u) << f;
  }
  EXPECT_GE(gpu_families.size(), 8u);
}

TEST(TraceCorpusTest, LabelsAgreeWithTheRows) {
  int predictable = 0, stable = 0, staircases_predictable = 0;
  for (const auto& e : GenerateTraceCorpus()) {
    const bool gpu = e.resource == "gpu";
    int first = -1;
    for (const StepMemory& m : e.steps) {
      const int64_t limit = gpu ? m.gpu_limit_bytes : m.host_limit_bytes;
      ASSERT_GT(limit, 0) << e.name;
      if (first < 0 && PeakOn(m, gpu) >= limit) first = m.step;
    }
    EXPECT_EQ(first, e.crossing_step) << e.name;
    if (!e.crosses()) {
      ++stable;
      EXPECT_FALSE(e.predictable || e.known_one_ahead) << e.name;
      continue;
    }
    // Rows stop two steps past the crossing.
    EXPECT_LE(e.steps.back().step, e.crossing_step + 2) << e.name;
    if (e.predictable) {
      ++predictable;
      staircases_predictable += e.family == "staircase";
      EXPECT_GE(e.crossing_step - e.visible_step, 2) << e.name;
      EXPECT_GE(e.visible_step, 1) << e.name;  // two rises take two steps at least
    }
    if (e.known_one_ahead) {
      EXPECT_EQ(e.family, "long-prompt") << e.name;
    }
  }
  EXPECT_GE(predictable, 150);
  EXPECT_GE(stable, 100);
  EXPECT_GE(staircases_predictable, 60);
}

}  // namespace
}  // namespace headroom::guard
