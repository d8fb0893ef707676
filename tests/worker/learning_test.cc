// It learns: a short GRPO run from scratch must learn which prompt digit to copy, not
// only the answer's length. The full-size check is configs/reverse-tiny.yaml (reward above 0.9 over
// steps 135-150); this is a smaller variant (8 prompts x 8, 80 steps, about a minute
// on a loaded 2-core machine).
//
// Why the thresholds sit above the length-only plateau: with GPT-2's N(0, 0.02) init the
// policy learned the answer's length and never which digit to copy, and the old check
// ("rose by 0.15" on one digit) let that pass.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "worker/comm/communicator.h"
#include "worker/train/grpo_trainer.h"

namespace headroom::worker {
namespace {

TEST(Learning, ReverseTwoDigitsFromScratch) {
  torch::set_num_threads(2);
  spec::TrainingJobSpec spec;
  spec.model.preset = "tiny";
  spec.task = {"reverse", 2, 1};
  spec.grpo.steps = 80;
  spec.grpo.prompts_per_step = 8;
  spec.grpo.group_size = 8;
  spec.grpo.max_prompt_length = 4;
  spec.grpo.max_response_length = 4;
  spec.grpo.micro_batch_size = 64;
  spec.grpo.learning_rate = 3e-3;
  spec.grpo.kl_coef = 0.0;
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(spec, *comm, torch::kCPU);
  std::vector<double> rewards, exact;
  for (int step = 0; step < spec.grpo.steps; ++step) {
    const StepResult r = trainer.RunStep(step);
    rewards.push_back(r.reward_mean);
    exact.push_back(r.exact_fraction);
  }
  auto mean = [](auto begin, auto end) { return std::accumulate(begin, end, 0.0) / static_cast<double>(end - begin); };
  const double first = mean(rewards.begin(), rewards.begin() + 10);
  const double last = mean(rewards.end() - 10, rewards.end());
  const double last_exact = mean(exact.end() - 10, exact.end());
  std::printf("reward first 10 steps %.3f, last 10 steps %.3f (exact %.3f)\n", first, last, last_exact);
  // Measured with seed 1 (loaded 2-core machine, 110-220 s): first 0.105, last 0.919,
  // exact 0.883. A policy that only learned the length and guesses digits scores about
  // 0.5 * (1 + 0.2) / 3 = 0.2 with no exact answers; that is where the old init stopped.
  EXPECT_LT(first, 0.2);
  EXPECT_GT(last, 0.35);
  EXPECT_GT(last_exact, 0.1);
}

}  // namespace
}  // namespace headroom::worker
