// A guard decision becomes the next generation's spec: only what the guard may change
// changes, always to a spec the worker accepts.
#include "core/guard/next_spec.h"

#include <gtest/gtest.h>

namespace headroom::guard {
namespace {

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

Decision Make(DecisionAction action) {
  Decision d;
  d.action = action;
  d.reason = "because";
  return d;
}

TEST(NextSpec, ReshardPicksACountTheBatchDividesOver) {
  Decision d = Make(DecisionAction::kReshard);
  d.target_workers = 2;
  NextSpec c = ApplyDecision(Job(), d);
  EXPECT_TRUE(c.reshard);
  EXPECT_EQ(c.applied, DecisionAction::kReshard);
  EXPECT_EQ(c.job.spec.workers, 2);
  EXPECT_TRUE(spec::WorkerCountFits(c.job.spec.grpo, c.job.spec.workers));
  EXPECT_EQ(spec::RunDefinitionHash(c.job.spec), spec::RunDefinitionHash(Job().spec));
}

TEST(NextSpec, ReshardTargetThatDoesNotDivideTheBatchMovesUpToOneThatDoes) {
  Decision d = Make(DecisionAction::kReshard);
  d.target_workers = 4;  // 6 prompts do not divide over 4; 6 workers is the next that does
  NextSpec c = ApplyDecision(Job(), d);
  EXPECT_EQ(c.job.spec.workers, 6);
  EXPECT_NE(c.reason.find("workers 1 -> 6"), std::string::npos) << c.reason;
}

TEST(NextSpec, ReshardWithoutATargetDoubles) {
  spec::TrainingJob job = Job();
  job.spec.workers = 3;
  NextSpec c = ApplyDecision(job, Make(DecisionAction::kReshard));
  EXPECT_EQ(c.job.spec.workers, 6);
}

TEST(NextSpec, ReshardTargetAboveMaxIsClamped) {
  spec::TrainingJob job = Job();
  job.spec.max_workers = 3;
  Decision d = Make(DecisionAction::kReshard);
  d.target_workers = 16;
  NextSpec c = ApplyDecision(job, d);
  EXPECT_EQ(c.job.spec.workers, 3);
}

TEST(NextSpec, ReshardWithoutRoomFallsBackToRestart) {
  spec::TrainingJob job = Job();
  job.spec.max_workers = 1;
  Decision d = Make(DecisionAction::kReshard);
  d.target_workers = 2;
  NextSpec c = ApplyDecision(job, d);
  EXPECT_FALSE(c.reshard);
  EXPECT_EQ(c.applied, DecisionAction::kRestart);
  EXPECT_EQ(c.job, job);
  EXPECT_NE(c.reason.find("because"), std::string::npos);
  EXPECT_NE(c.reason.find("restarting at the same size"), std::string::npos) << c.reason;
}

TEST(NextSpec, EnableActivationCheckpointingSwitchesTheLeverOnce) {
  NextSpec c = ApplyDecision(Job(), Make(DecisionAction::kEnableActivationCheckpointing));
  EXPECT_EQ(c.applied, DecisionAction::kEnableActivationCheckpointing);
  EXPECT_TRUE(c.job.spec.grpo.activation_checkpointing);
  EXPECT_NE(c.reason.find("activationCheckpointing off -> on"), std::string::npos) << c.reason;
  EXPECT_EQ(spec::RunDefinitionHash(c.job.spec), spec::RunDefinitionHash(Job().spec)) << "the same run";
  c = ApplyDecision(c.job, Make(DecisionAction::kEnableActivationCheckpointing));
  EXPECT_EQ(c.applied, DecisionAction::kRestart) << "already on: a plain restart";
}

TEST(NextSpec, ShrinkMicroBatchTakesTheTargetOrHalves) {
  NextSpec c = ApplyDecision(Job(), Make(DecisionAction::kShrinkMicroBatch));
  EXPECT_EQ(c.applied, DecisionAction::kShrinkMicroBatch);
  EXPECT_EQ(c.job.spec.grpo.micro_batch_size, 12);
  EXPECT_EQ(c.job.spec.workers, 1);
  Decision d = Make(DecisionAction::kShrinkMicroBatch);
  d.target_micro_batch_size = 5;
  EXPECT_EQ(ApplyDecision(Job(), d).job.spec.grpo.micro_batch_size, 5);
  d.target_micro_batch_size = 48;  // never grows
  EXPECT_EQ(ApplyDecision(Job(), d).applied, DecisionAction::kRestart);
  spec::TrainingJob one = Job();
  one.spec.grpo.micro_batch_size = 1;
  c = ApplyDecision(one, Make(DecisionAction::kShrinkMicroBatch));
  EXPECT_EQ(c.applied, DecisionAction::kRestart);
  EXPECT_EQ(c.job.spec.grpo.micro_batch_size, 1);
}

// A token budget that is off counts as microBatchSize full-length rows (24 rows here):
// the decision's target, clamped to at least one sequence, or half; never larger.
TEST(NextSpec, ShrinkTokenBudgetTakesTheTargetClampedOrHalves) {
  const spec::TrainingJob job = Job();
  const int seq = job.spec.grpo.max_prompt_length + job.spec.grpo.max_response_length;
  const int rows = job.spec.grpo.micro_batch_size * seq;
  NextSpec c = ApplyDecision(job, Make(DecisionAction::kShrinkTokenBudget));
  EXPECT_EQ(c.applied, DecisionAction::kShrinkTokenBudget);
  EXPECT_EQ(c.job.spec.grpo.max_tokens_per_micro_batch, rows / 2);
  EXPECT_EQ(c.job.spec.grpo.micro_batch_size, job.spec.grpo.micro_batch_size) << "only the budget changes";
  EXPECT_EQ(c.job.spec.workers, 1);
  EXPECT_NE(
      c.reason.find("(maxTokensPerMicroBatch off (" + std::to_string(rows) + ") -> " + std::to_string(rows / 2) + ")"),
      std::string::npos)
      << c.reason;
  EXPECT_EQ(spec::RunDefinitionHash(c.job.spec), spec::RunDefinitionHash(job.spec)) << "the same run";
  // Halving again counts from the budget now set.
  NextSpec again = ApplyDecision(c.job, Make(DecisionAction::kShrinkTokenBudget));
  EXPECT_EQ(again.job.spec.grpo.max_tokens_per_micro_batch, rows / 4);
  EXPECT_NE(again.reason.find("(maxTokensPerMicroBatch " + std::to_string(rows / 2) + " -> "), std::string::npos)
      << again.reason;

  Decision d = Make(DecisionAction::kShrinkTokenBudget);
  d.target_max_tokens_per_micro_batch = 3 * seq + 5;
  EXPECT_EQ(ApplyDecision(job, d).job.spec.grpo.max_tokens_per_micro_batch, 3 * seq + 5);
  d.target_max_tokens_per_micro_batch = seq / 2;  // under one sequence: one sequence
  EXPECT_EQ(ApplyDecision(job, d).job.spec.grpo.max_tokens_per_micro_batch, seq);
  d.target_max_tokens_per_micro_batch = 2 * rows;  // never grows
  c = ApplyDecision(job, d);
  EXPECT_EQ(c.applied, DecisionAction::kRestart);
  EXPECT_EQ(c.job, job);
  EXPECT_NE(c.reason.find("maxTokensPerMicroBatch is already " + std::to_string(rows)), std::string::npos) << c.reason;

  // One sequence already (a budget of seq, or microBatchSize 1): a plain restart.
  spec::TrainingJob one = job;
  one.spec.grpo.max_tokens_per_micro_batch = seq;
  EXPECT_EQ(ApplyDecision(one, Make(DecisionAction::kShrinkTokenBudget)).applied, DecisionAction::kRestart);
  one = job;
  one.spec.grpo.micro_batch_size = 1;
  c = ApplyDecision(one, Make(DecisionAction::kShrinkTokenBudget));
  EXPECT_EQ(c.applied, DecisionAction::kRestart);
  EXPECT_EQ(c.job, one);
}

TEST(NextSpec, OffloadToggles) {
  NextSpec on = ApplyDecision(Job(), Make(DecisionAction::kEnableOffload));
  EXPECT_TRUE(on.job.spec.sharding.offload_optimizer);
  EXPECT_FALSE(on.job.spec.sharding.offload_params);
  NextSpec off = ApplyDecision(on.job, Make(DecisionAction::kDisableOffload));
  EXPECT_FALSE(off.job.spec.sharding.offload_optimizer);
  EXPECT_FALSE(off.job.spec.sharding.offload_params);
  NextSpec again = ApplyDecision(off.job, Make(DecisionAction::kDisableOffload));
  EXPECT_EQ(again.applied, DecisionAction::kRestart);
}

TEST(NextSpec, OffloadTargetsNameTheFlags) {
  Decision d = Make(DecisionAction::kEnableOffload);
  d.target_offload_params = true;
  NextSpec c = ApplyDecision(Job(), d);
  EXPECT_TRUE(c.job.spec.sharding.offload_params);
  EXPECT_FALSE(c.job.spec.sharding.offload_optimizer);
  EXPECT_EQ(c.job.spec.workers, 1) << "only a reshard changes the size";
}

TEST(NextSpec, FailAndRestart) {
  EXPECT_TRUE(ApplyDecision(Job(), Make(DecisionAction::kFail)).fail());
  NextSpec r = ApplyDecision(Job(), Make(DecisionAction::kRestart));
  EXPECT_EQ(r.applied, DecisionAction::kRestart);
  EXPECT_FALSE(r.fail());
  EXPECT_EQ(r.job, Job());
  EXPECT_EQ(ApplyDecision(Job(), Make(DecisionAction::kNone)).applied, DecisionAction::kRestart);
}

}  // namespace
}  // namespace headroom::guard
