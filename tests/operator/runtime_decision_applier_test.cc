// A guard decision becomes the next generation's spec: only what the guard may change
// changes, always to a spec the worker accepts.
#include "operator/runtime/decision_applier.h"

#include <gtest/gtest.h>

namespace headroom::runtime {
namespace {

using guard::DecisionAction;

spec::TrainingJob Job() {
  spec::TrainingJob job;
  job.metadata.name = "apply";
  job.spec.workers = 1;
  job.spec.min_workers = 1;
  job.spec.max_workers = 8;
  job.spec.grpo.prompts_per_step = 6;  // divides over 1, 2, 3, 6 workers
  job.spec.grpo.micro_batch_size = 24;
  return job;
}

guard::Decision Make(DecisionAction action) {
  guard::Decision d;
  d.action = action;
  d.reason = "because";
  return d;
}

TEST(DecisionApplier, ReshardPicksACountTheBatchDividesOver) {
  guard::Decision d = Make(DecisionAction::kReshard);
  d.target_workers = 2;
  SpecChange c = ApplyDecision(Job(), d);
  EXPECT_TRUE(c.reshard);
  EXPECT_EQ(c.job.spec.workers, 2);
  EXPECT_TRUE(spec::WorkerCountFits(c.job.spec.grpo, c.job.spec.workers));
  EXPECT_EQ(spec::RunDefinitionHash(c.job.spec), spec::RunDefinitionHash(Job().spec));
}

TEST(DecisionApplier, ReshardTargetAboveMaxIsClamped) {
  spec::TrainingJob job = Job();
  job.spec.max_workers = 3;
  guard::Decision d = Make(DecisionAction::kReshard);
  d.target_workers = 16;
  SpecChange c = ApplyDecision(job, d);
  EXPECT_LE(c.job.spec.workers, 3);
  EXPECT_GE(c.job.spec.workers, 2);
}

TEST(DecisionApplier, ReshardWithoutRoomFallsBackToRestart) {
  spec::TrainingJob job = Job();
  job.spec.max_workers = 1;
  guard::Decision d = Make(DecisionAction::kReshard);
  d.target_workers = 2;
  SpecChange c = ApplyDecision(job, d);
  EXPECT_FALSE(c.reshard);
  EXPECT_EQ(c.type, "restart");
  EXPECT_EQ(c.job, job);
  EXPECT_NE(c.reason.find("because"), std::string::npos);
}

TEST(DecisionApplier, ShrinkMicroBatchHalvesWithoutATarget) {
  SpecChange c = ApplyDecision(Job(), Make(DecisionAction::kShrinkMicroBatch));
  EXPECT_EQ(c.type, "shrinkMicroBatch");
  EXPECT_EQ(c.job.spec.grpo.micro_batch_size, 12);
  EXPECT_EQ(c.job.spec.workers, 1);
  spec::TrainingJob one = Job();
  one.spec.grpo.micro_batch_size = 1;
  c = ApplyDecision(one, Make(DecisionAction::kShrinkMicroBatch));
  EXPECT_EQ(c.type, "restart");
  EXPECT_EQ(c.job.spec.grpo.micro_batch_size, 1);
}

TEST(DecisionApplier, OffloadToggles) {
  SpecChange on = ApplyDecision(Job(), Make(DecisionAction::kEnableOffload));
  EXPECT_TRUE(on.job.spec.sharding.offload_optimizer);
  SpecChange off = ApplyDecision(on.job, Make(DecisionAction::kDisableOffload));
  EXPECT_FALSE(off.job.spec.sharding.offload_optimizer);
  EXPECT_FALSE(off.job.spec.sharding.offload_params);
  SpecChange again = ApplyDecision(off.job, Make(DecisionAction::kDisableOffload));
  EXPECT_EQ(again.type, "restart");
}

TEST(DecisionApplier, FailAndRestart) {
  EXPECT_TRUE(ApplyDecision(Job(), Make(DecisionAction::kFail)).fail);
  SpecChange r = ApplyDecision(Job(), Make(DecisionAction::kRestart));
  EXPECT_EQ(r.type, "restart");
  EXPECT_EQ(r.job, Job());
}

}  // namespace
}  // namespace headroom::runtime
