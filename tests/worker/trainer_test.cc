// The GRPO step recipe: reproducible for a seed, no reference model when klCoef == 0, a
// reference (and a KL) when it is > 0, and token counts known before a step runs.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>

#include "worker/comm/communicator.h"
#include "worker/train/grpo_trainer.h"

namespace headroom::worker {
namespace {

spec::TrainingJobSpec SmallJob(double kl_coef) {
  spec::TrainingJobSpec spec;
  spec.model.preset = "tiny";
  spec.task = {"addition", 1, 4};
  spec.grpo.prompts_per_step = 4;
  spec.grpo.group_size = 4;
  spec.grpo.max_prompt_length = 5;
  spec.grpo.max_response_length = 4;
  spec.grpo.micro_batch_size = 6;  // 16 sequences: micro-batches of 6, 6, 4
  spec.grpo.updates_per_step = 2;
  spec.grpo.learning_rate = 1e-3;
  spec.grpo.kl_coef = kl_coef;
  return spec;
}

// Every parameter, flattened in model order (gathered at stage 3).
torch::Tensor AllParameters(GrpoTrainer& trainer) {
  trainer.shards().GatherAll();
  std::vector<torch::Tensor> parts;
  for (const auto& [name, p] : trainer.model()->OrderedParameters()) parts.push_back(p.detach().reshape({-1}).clone());
  trainer.shards().Release();
  return torch::cat(parts);
}

TEST(GrpoTrainer, SameSeedSameRun) {
  auto comm = MakeLocalCommunicator();
  GrpoTrainer a(SmallJob(0.0), *comm, torch::kCPU), b(SmallJob(0.0), *comm, torch::kCPU);
  for (int step = 0; step < 3; ++step) {
    const auto ra = a.RunStep(step), rb = b.RunStep(step);
    EXPECT_EQ(ra.reward_mean, rb.reward_mean) << step;
    EXPECT_EQ(ra.loss, rb.loss) << step;
    EXPECT_EQ(ra.generated_tokens, rb.generated_tokens) << step;
  }
  EXPECT_TRUE(torch::equal(AllParameters(a), AllParameters(b)));
}

TEST(GrpoTrainer, NoReferenceModelWithoutKl) {
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(SmallJob(0.0), *comm, torch::kCPU);
  EXPECT_FALSE(trainer.has_reference_model());
  EXPECT_EQ(trainer.RunStep(0).kl, 0.0);
}

TEST(GrpoTrainer, ReferenceModelAndKlWithKlCoef) {
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(SmallJob(0.1), *comm, torch::kCPU);
  EXPECT_TRUE(trainer.has_reference_model());
  const auto first = trainer.RunStep(0);
  EXPECT_GE(first.kl, 0.0);
  // After updates the policy has moved away from the frozen reference.
  const auto second = trainer.RunStep(1);
  EXPECT_GT(second.kl, 0.0);
}

TEST(GrpoTrainer, TokensKnownBeforeTheStep) {
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(SmallJob(0.0), *comm, torch::kCPU);
  // addition, 1 digit: BOS + "a+b=" = 5 prompt tokens; 16 sequences x (5 + 4).
  EXPECT_EQ(trainer.TokensPerStep(), 16 * 9);
  const auto r = trainer.RunStep(0);
  EXPECT_EQ(r.tokens, trainer.TokensPerStep());
  EXPECT_GT(r.generated_tokens, 0);
  EXPECT_LE(r.generated_tokens, 16 * 4);
}

// Weights that turn NaN make every later loss NaN and every reward 0: the step that sees a
// non-finite loss or gradient norm stops the run, naming the step, instead of training on.
TEST(GrpoTrainer, ANonFiniteLossStopsTheRunNamingTheStep) {
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(SmallJob(0.0), *comm, torch::kCPU);
  trainer.RunStep(0);
  trainer.shards().GatherAll();
  {
    torch::NoGradGuard no_grad;
    trainer.model()->OrderedParameters().back().second.fill_(std::numeric_limits<float>::quiet_NaN());
  }
  try {
    trainer.RunStep(1);
    ADD_FAILURE() << "a step with NaN weights finished";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("step 2: loss ", 0), 0u) << what;
    EXPECT_NE(what.find("nan"), std::string::npos) << what;
    EXPECT_NE(what.find("not finite"), std::string::npos) << what;
  }
}

TEST(GrpoTrainer, SpecsItCannotRunAreNamed) {
  auto comm = MakeLocalCommunicator();
  auto spec = SmallJob(0.0);
  spec.grpo.max_prompt_length = 3;
  try {
    GrpoTrainer trainer(spec, *comm, torch::kCPU);
    FAIL() << "accepted a prompt longer than maxPromptLength";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("spec.grpo.maxPromptLength"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headroom::worker
