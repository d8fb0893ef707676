// GrpoTrainer::EvaluateHeldOut on the example job's model and held-out file: every
// held-out problem is scored once, greedily, the same whether the problems run one at a
// time (no padding) or many to a left-padded batch, and evaluating changes nothing.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "tests/worker/helpers/example_text_task.h"
#include "worker/comm/communicator.h"
#include "worker/tasks/jsonl_dataset.h"
#include "worker/train/grpo_trainer.h"

namespace headroom::worker {
namespace {

const std::string kSource = HEADROOM_SOURCE_DIR;
const std::string kHeldOut = kSource + "/configs/data/addition-text/heldout.jsonl";

spec::TrainingJobSpec TextJob(int prompts_per_step, int group_size) {
  spec::TrainingJobSpec s;
  s.model.path = kSource + "/configs/models/qwen2-tiny-addition";
  s.task.seed = 1;
  headroom::testing::UseExampleTextTask(s);
  s.task.dataset.held_out = kHeldOut;
  s.task.reward.format_weight = 0.5;  // a response with any number earns half
  s.grpo.prompts_per_step = prompts_per_step;
  s.grpo.group_size = group_size;
  s.grpo.max_prompt_length = 64;
  s.grpo.max_response_length = 8;
  s.grpo.micro_batch_size = 64;
  s.grpo.learning_rate = 1e-2;
  s.grpo.kl_coef = 0.0;
  return s;
}

torch::Tensor AllParameters(GrpoTrainer& trainer) {
  trainer.shards().GatherAll();
  std::vector<torch::Tensor> parts;
  for (const auto& [name, p] : trainer.model()->OrderedParameters()) parts.push_back(p.detach().reshape({-1}).clone());
  trainer.shards().Release();
  return torch::cat(parts);
}

TEST(TrainerHeldOut, ScoresEveryProblemOnceTheSameAloneOrPaddedInABatch) {
  auto comm = MakeLocalCommunicator();
  const int64_t problems = JsonlDataset::Load(kHeldOut, "question", "answer").size();
  GrpoTrainer batched(TextJob(16, 8), *comm, torch::kCPU);  // batches of 128 prompts of 15-29 tokens
  GrpoTrainer alone(TextJob(1, 1), *comm, torch::kCPU);     // one prompt at a time: nothing padded
  // A few steps first, so that the policy answers with numbers (the same steps for both:
  // the trainers differ only in how many prompts a step reads).
  for (int step = 0; step < 3; ++step) batched.RunStep(step);
  alone.shards().GatherAll();
  batched.shards().GatherAll();
  {
    torch::NoGradGuard no_grad;
    auto dst = alone.model()->OrderedParameters();
    auto src = batched.model()->OrderedParameters();
    for (size_t i = 0; i < src.size(); ++i) dst[i].second.copy_(src[i].second);
  }
  alone.shards().Release();
  batched.shards().Release();

  const torch::Tensor before = AllParameters(batched);
  const auto a = batched.EvaluateHeldOut();
  const auto b = alone.EvaluateHeldOut();
  ASSERT_TRUE(a && b);
  std::printf("held-out reward %.4f (%.1f%% exact) over %lld problems\n", a->reward_mean, 100 * a->exact_fraction,
              static_cast<long long>(a->problems));
  EXPECT_EQ(a->problems, problems);
  EXPECT_EQ(b->problems, problems);
  EXPECT_GT(a->reward_mean, 0.0) << "no response held a number: the comparison would prove little";
  EXPECT_EQ(a->reward_mean, b->reward_mean);
  EXPECT_EQ(a->exact_fraction, b->exact_fraction);
  EXPECT_TRUE(torch::equal(AllParameters(batched), before)) << "evaluating changed the parameters";
  const auto again = batched.EvaluateHeldOut();
  EXPECT_EQ(again->reward_mean, a->reward_mean);
  const StepResult next = batched.RunStep(3);
  EXPECT_TRUE(std::isfinite(next.loss)) << "training goes on after an evaluation";
}

TEST(TrainerHeldOut, NothingToEvaluateWithoutAHeldOutFile) {
  auto comm = MakeLocalCommunicator();
  spec::TrainingJobSpec s = TextJob(2, 2);
  s.task.dataset.held_out.clear();
  GrpoTrainer trainer(s, *comm, torch::kCPU);
  EXPECT_FALSE(trainer.has_held_out());
  EXPECT_FALSE(trainer.EvaluateHeldOut());
}

}  // namespace
}  // namespace headroom::worker
