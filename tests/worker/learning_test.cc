// It learns: a short GRPO run on the reverse task must raise the reward clearly, with a
// fixed seed (the full-size check is configs/reverse-tiny.yaml; numbers in the report).
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "worker/comm/communicator.h"
#include "worker/train/grpo_trainer.h"

namespace headroom::worker {
namespace {

TEST(Learning, ReverseOneDigitRewardRises) {
  torch::set_num_threads(2);
  spec::TrainingJobSpec spec;
  spec.model.preset = "tiny";
  spec.task = {"reverse", 1, 3};
  spec.grpo.steps = 40;
  spec.grpo.prompts_per_step = 8;
  spec.grpo.group_size = 8;
  spec.grpo.max_prompt_length = 3;
  spec.grpo.max_response_length = 3;
  spec.grpo.micro_batch_size = 64;
  spec.grpo.learning_rate = 3e-3;
  spec.grpo.kl_coef = 0.0;
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(spec, *comm, torch::kCPU);
  std::vector<double> rewards;
  for (int step = 0; step < spec.grpo.steps; ++step) rewards.push_back(trainer.RunStep(step).reward_mean);
  const double first = std::accumulate(rewards.begin(), rewards.begin() + 10, 0.0) / 10;
  const double last = std::accumulate(rewards.end() - 10, rewards.end(), 0.0) / 10;
  std::printf("reward first 10 steps %.3f, last 10 steps %.3f\n", first, last);
  EXPECT_LT(first, 0.2);
  EXPECT_GT(last, first + 0.15);
}

}  // namespace
}  // namespace headroom::worker
