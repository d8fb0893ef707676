// Reading a worker's /metrics back into a StepRecord (core/protocol/step_metrics.h) and
// the Prometheus text parser under it (core/metrics/prometheus_text.h). That every field
// round-trips through the worker's exporter: tests/worker/step_metrics_round_trip_test.cc.
#include "core/protocol/step_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/metrics/prometheus_text.h"

namespace headroom::protocol {
namespace {

// What prometheus-cpp serves for a worker at step 7 (names from core/metrics/names.h).
const char* kWorkerPage = R"(# HELP headroom_worker_step Last completed step
# TYPE headroom_worker_step gauge
headroom_worker_step{job="drill",rank="0"} 7
# TYPE headroom_worker_host_memory_bytes gauge
headroom_worker_host_memory_bytes{job="drill",rank="0"} 536870912
headroom_worker_host_memory_peak_bytes{job="drill",rank="0"} 6.0e+08
headroom_worker_host_memory_limit_bytes{job="drill",rank="0"} 1073741824
headroom_worker_gpu_memory_reserved_bytes{job="drill",rank="0"} 0
headroom_worker_memory_growth_bytes_per_step{job="drill",rank="0",resource="host"} 50331648
headroom_worker_oom_forecast_steps{job="drill",rank="0",resource="host"} +Inf
headroom_worker_reward_mean{job="drill",rank="0"} 0.4375
headroom_worker_loss{job="drill",rank="0"} -0.012
headroom_worker_kl{job="drill",rank="0"} NaN
headroom_worker_step_duration_seconds_count{job="drill",rank="0"} 7
headroom_worker_step_duration_seconds_sum{job="drill",rank="0"} 3.5
headroom_worker_step_duration_seconds_bucket{job="drill",rank="0",le="+Inf"} 7
)";

TEST(StepMetrics, ParsesSamplesLabelsAndSpecialValues) {
  std::vector<metrics::MetricSample> s = metrics::ParsePrometheusText(
      "# comment\n\nm{a=\"x \\\"q\\\"\",b=\"1\\n2\"} 3 1700000000\nbare 4.5\nbroken{a=\"x\" 1\ninf -Inf\r\n");
  ASSERT_EQ(s.size(), 3u) << "the malformed line is skipped, the rest kept";
  EXPECT_EQ(s[0].name, "m");
  EXPECT_EQ(s[0].labels.at("a"), "x \"q\"");
  EXPECT_EQ(s[0].labels.at("b"), "1\n2");
  EXPECT_EQ(s[0].value, 3);
  EXPECT_EQ(s[1].name, "bare");
  EXPECT_EQ(s[1].value, 4.5);
  EXPECT_TRUE(std::isinf(s[2].value) && s[2].value < 0);
}

TEST(StepMetrics, BuildsTheStepRecordFromTheWorkerSeries) {
  std::optional<StepRecord> r = StepRecordFromMetrics(metrics::ParsePrometheusText(kWorkerPage));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->step, 7);
  EXPECT_EQ(r->host_bytes, 536870912);
  EXPECT_EQ(r->host_peak_bytes, 600000000);
  EXPECT_EQ(r->host_limit_bytes, 1073741824);
  // The worker's own forecast, from the {resource="host"} series; +Inf = never.
  EXPECT_EQ(r->host_growth_bytes_per_step, 50331648);
  EXPECT_EQ(r->host_forecast_steps, -1);
  EXPECT_DOUBLE_EQ(r->reward_mean, 0.4375);
  EXPECT_DOUBLE_EQ(r->loss, -0.012);
  EXPECT_EQ(r->kl, 0) << "NaN reads as unknown";
  EXPECT_DOUBLE_EQ(r->step_seconds, 0.5);
}

TEST(StepMetrics, NoStepYetIsNoRecord) {
  EXPECT_FALSE(StepRecordFromMetrics(metrics::ParsePrometheusText("headroom_worker_step{rank=\"0\"} 0\n")));
  EXPECT_FALSE(StepRecordFromMetrics(metrics::ParsePrometheusText("process_cpu_seconds_total 3\n")));
}

TEST(StepMetrics, AModelDownloadBeforeTheFirstStepIsItsFetchRecord) {
  const std::vector<metrics::MetricSample> page = metrics::ParsePrometheusText(
      "# TYPE headroom_worker_model_fetch_done_bytes gauge\n"
      "headroom_worker_model_fetch_done_bytes{file=\"model.safetensors\",job=\"j\",rank=\"1\",repo=\"org/name\","
      "revision=\"main\"} 1048576\n"
      "headroom_worker_model_fetch_total_bytes{file=\"model.safetensors\",job=\"j\",rank=\"1\",repo=\"org/name\","
      "revision=\"main\"} 988097824\n");
  EXPECT_FALSE(StepRecordFromMetrics(page)) << "no step yet";
  const std::optional<ModelFetchRecord> f = ModelFetchFromMetrics(page);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->repo, "org/name");
  EXPECT_EQ(f->revision, "main");
  EXPECT_EQ(f->file, "model.safetensors");
  EXPECT_EQ(f->done_bytes, 1048576);
  EXPECT_EQ(f->total_bytes, 988097824);
  EXPECT_FALSE(ModelFetchFromMetrics(metrics::ParsePrometheusText(kWorkerPage))) << "a training worker fetches nothing";
  EXPECT_FALSE(ModelFetchFromMetrics(metrics::ParsePrometheusText(
      "headroom_worker_model_fetch_done_bytes 0\nheadroom_worker_model_fetch_total_bytes 0\n")));
}

TEST(StepMetrics, EveryFieldOfTheStepRecordButRankHasOneRow) {
  std::set<std::string> keys;
  const nlohmann::json record = nlohmann::json::parse(StepRecord().ToJson());
  for (const auto& [key, value] : record.items()) keys.insert(key);
  keys.erase("rank");          // the {rank} label
  keys.erase("guard_action");  // the {action} label of headroom_worker_guard_action
  std::set<std::string> rows;
  for (const StepMetric& row : StepMetrics()) {
    EXPECT_TRUE(rows.insert(row.key).second) << row.key << " has two rows";
  }
  EXPECT_EQ(rows, keys);
}

TEST(StepMetrics, TheNewestStepGaugeWinsOverTheHistogramMean) {
  const auto r = StepRecordFromMetrics(
      metrics::ParsePrometheusText(std::string(kWorkerPage) + "headroom_worker_step_seconds 0.75\n"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->step_seconds, 0.75);
}

}  // namespace
}  // namespace headroom::protocol
