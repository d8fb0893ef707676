// The TrainingJob .status the operator writes: stable JSON, read back for Restore, and the
// merge patch that turns one status into the next.
#include <gtest/gtest.h>

#include "operator/trainingjob/controller.h"
#include "operator/trainingjob/status.h"

namespace headroom::trainingjob {
namespace {

using nlohmann::json;

runtime::JobStatus Sample() {
  runtime::JobStatus s;
  s.phase = runtime::JobPhase::kRestarting;
  s.generation = 3;
  s.step = 17;
  s.workers = 2;
  s.restarts = 1;
  s.reshards = 1;
  s.oom_kills = 1;
  s.steps_lost = 4;
  s.memory.host_bytes = 900;
  s.memory.host_limit_bytes = 1000;
  s.memory.growth_bytes_per_step = 48.5;
  s.memory.forecast_steps_to_limit = 2;
  s.last_action =
      runtime::ActionRecord{17, runtime::ActionType::kReshard, "optimizer state does not fit", "2026-11-22T02:00:00Z"};
  s.conditions.push_back({"MemoryPressure", "True", "ForecastCrossesThreshold", "host 90%", "2026-11-22T02:00:00Z"});
  s.message = "resharding";
  return s;
}

TEST(TrainingJobStatus, RoundTripsWhatRestoreNeeds) {
  const json written = StatusJson(Sample(), 5);
  EXPECT_EQ(written["observedGeneration"], 5);
  EXPECT_EQ(written["phase"], "Restarting");
  const runtime::JobStatus back = JobStatusFromJson(written);
  EXPECT_EQ(StatusJson(back, 5), written) << "every field the operator writes comes back";
  EXPECT_EQ(back.phase, runtime::JobPhase::kRestarting);
  EXPECT_EQ(back.generation, 3);
  EXPECT_EQ(back.steps_lost, 4);
  ASSERT_TRUE(back.last_action);
  EXPECT_EQ(back.last_action->type, runtime::ActionType::kReshard);
}

TEST(TrainingJobStatus, ModelFetchIsTheHubDownloadsBytesAndFile) {
  EXPECT_FALSE(StatusJson(Sample(), 5).contains("modelFetch")) << "a model from a path fetches nothing";
  runtime::JobStatus s = Sample();
  s.model_fetch =
      protocol::ModelFetchRecord{"Qwen/Qwen2.5-0.5B-Instruct", "main", "model.safetensors", 1 << 20, 988097824};
  const json written = StatusJson(s, 5);
  ASSERT_TRUE(written.contains("modelFetch"));
  EXPECT_EQ(written["modelFetch"], (json{{"repo", "Qwen/Qwen2.5-0.5B-Instruct"},
                                         {"revision", "main"},
                                         {"file", "model.safetensors"},
                                         {"doneBytes", 1 << 20},
                                         {"totalBytes", 988097824}}));
  const runtime::JobStatus back = JobStatusFromJson(written);
  ASSERT_TRUE(back.model_fetch);
  EXPECT_EQ(back.model_fetch->done_bytes, 1 << 20);
  EXPECT_EQ(StatusJson(back, 5), written) << "an operator restart keeps the download's progress";
}

TEST(TrainingJobStatus, HeldOutAccuracyOnlyOnceMeasuredAndBackAfterARestart) {
  EXPECT_FALSE(StatusJson(Sample(), 5).contains("heldOutAccuracy")) << "no held-out set, or not measured yet";
  runtime::JobStatus s = Sample();
  s.heldout_accuracy = 0.735;
  const json written = StatusJson(s, 5);
  EXPECT_EQ(written["heldOutAccuracy"], 0.735);
  const runtime::JobStatus back = JobStatusFromJson(written);
  ASSERT_TRUE(back.heldout_accuracy);
  EXPECT_EQ(*back.heldout_accuracy, 0.735);
  EXPECT_EQ(StatusJson(back, 5), written);
}

TEST(TrainingJobStatus, StartAndCompletionTimesOnlyWhenKnown) {
  json j = StatusJson(Sample(), 1);
  EXPECT_FALSE(j.contains("startTime"));
  EXPECT_FALSE(j.contains("completionTime"));
  j = StatusJson(Sample(), 1, {"2026-11-22T01:00:00Z", "2026-11-22T02:00:00Z"});
  EXPECT_EQ(j["startTime"], "2026-11-22T01:00:00Z");
  const StatusTimes back = StatusTimesFromJson(j);
  EXPECT_EQ(back.start_time, "2026-11-22T01:00:00Z");
  EXPECT_EQ(back.completion_time, "2026-11-22T02:00:00Z");
}

TEST(TrainingJobStatus, SameStatusSameBytes) {
  EXPECT_EQ(StatusJson(Sample(), 5).dump(), StatusJson(Sample(), 5).dump());
}

TEST(TrainingJobStatus, HandEditedStatusDoesNotStopTheOperator) {
  const runtime::JobStatus s = JobStatusFromJson(json{{"phase", "Dancing"}, {"step", "seven"}, {"memory", 3}});
  EXPECT_EQ(s.phase, runtime::JobPhase::kPending);
  EXPECT_EQ(s.step, 0);
  EXPECT_EQ(JobStatusFromJson(json("not an object")).generation, 0);
  EXPECT_FALSE(JobPhaseFromName("running"));
  EXPECT_EQ(JobPhaseFromName("Succeeded"), runtime::JobPhase::kSucceeded);
}

TEST(MergePatchBetween, SetsChangedRemovesGoneKeepsSame) {
  const json from{{"a", 1}, {"b", {{"x", 1}, {"y", 2}}}, {"gone", true}, {"list", {1, 2}}};
  const json to{{"a", 1}, {"b", {{"x", 1}, {"y", 3}}}, {"new", "n"}, {"list", {1}}};
  const json patch = MergePatchBetween(from, to);
  EXPECT_EQ(patch, (json{{"b", {{"y", 3}}}, {"gone", nullptr}, {"new", "n"}, {"list", {1}}}));
  json applied = from;
  applied.merge_patch(patch);
  EXPECT_EQ(applied, to);
  EXPECT_EQ(MergePatchBetween(to, to), json::object());
}

}  // namespace
}  // namespace headroom::trainingjob
