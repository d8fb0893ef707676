// GRPO steps over prompts of different lengths, left-padded (grpo_trainer.h), with a
// Hugging Face model: ZeRO stage 3 (blocks gathered, and recomputed in backward, one at a
// time, with the padded attention mask) trains the same parameters as stage 0 to rounding,
// and no loss, gradient or parameter turns NaN.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "worker/comm/communicator.h"
#include "worker/train/grpo_trainer.h"

namespace headroom::worker {
namespace {
namespace fs = std::filesystem;

// "reverse" with 1, 2 or 3 digits by prompt index: prompts of 3, 4 and 5 tokens in a step.
class MixedLengthReverse : public Task {
 public:
  explicit MixedLengthReverse(uint64_t seed) {
    for (int digits = 1; digits <= 3; ++digits) tasks_.push_back(MakeTask("reverse", digits, seed));
  }
  std::string name() const override { return "reverse, 1 to 3 digits"; }
  Problem Make(uint64_t global_index) const override { return tasks_[global_index % 3]->Make(global_index); }
  int64_t prompt_tokens() const override { return tasks_.back()->prompt_tokens(); }
  int64_t answer_tokens() const override { return tasks_.back()->answer_tokens(); }
  ResponseFormat response_format() const override { return tasks_.back()->response_format(); }
  double Score(const Problem& problem, const int64_t* response, int64_t n) const override {
    return tasks_.at(problem.answer.size() - 1)->Score(problem, response, n);
  }

 private:
  std::vector<std::unique_ptr<Task>> tasks_;
};

spec::TrainingJobSpec Job(int stage, int max_tokens_per_micro_batch = 0) {
  spec::TrainingJobSpec spec;
  spec.model.path = (fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf/qwen2").string();
  spec.task.name = "reverse";
  spec.task.digits = 3;
  spec.task.seed = 5;
  spec.grpo.prompts_per_step = 3;
  spec.grpo.group_size = 4;
  spec.grpo.max_prompt_length = 5;
  spec.grpo.max_response_length = 4;
  spec.grpo.micro_batch_size = 5;  // micro-batches cut across prompts of different lengths
  spec.grpo.updates_per_step = 2;  // old log-probs computed before the first update
  spec.grpo.learning_rate = 1e-2;
  spec.grpo.kl_coef = 0.05;  // reference log-probs, padded too
  spec.grpo.max_tokens_per_micro_batch = max_tokens_per_micro_batch;
  spec.sharding.stage = stage;
  return spec;
}

// The parameters after `steps` GRPO steps at `stage`, flattened.
torch::Tensor Train(int stage, int steps, torch::Tensor* init = nullptr, int max_tokens_per_micro_batch = 0,
                    int64_t* update_tokens = nullptr) {
  auto comm = MakeLocalCommunicator();
  const spec::TrainingJobSpec spec = Job(stage, max_tokens_per_micro_batch);
  GrpoTrainer trainer(spec, *comm, torch::kCPU, std::make_unique<MixedLengthReverse>(spec.task.seed));
  auto flat = [&] {
    trainer.shards().GatherAll();
    std::vector<torch::Tensor> parts;
    for (const auto& [name, p] : trainer.model()->OrderedParameters()) {
      // A key bias adds q . b_k to every score of a query, which softmax ignores: its true
      // gradient is 0, and AdamW turns the rounding noise backward computes for it into
      // steps of +-lr whose sign depends on summation order (trainer_sharding_test.cc).
      const bool key_bias = name.size() > 12 && name.compare(name.size() - 12, 12, ".k_proj.bias") == 0;
      parts.push_back(key_bias ? torch::zeros({p.numel()}) : p.detach().reshape({-1}).clone());
    }
    trainer.shards().Release();
    return torch::cat(parts);
  };
  if (init) *init = flat();
  for (int step = 0; step < steps; ++step) {
    std::set<size_t> lengths;
    for (int64_t i = 0; i < trainer.local_prompts(); ++i) {
      lengths.insert(trainer.task().Make(static_cast<uint64_t>(trainer.GlobalPrompt(step, i))).prompt_tokens.size());
    }
    EXPECT_EQ(lengths.size(), 3u) << "step " << step << " must mix prompt lengths";
    const StepResult r = trainer.RunStep(step);
    EXPECT_TRUE(std::isfinite(r.loss) && std::isfinite(r.kl) && std::isfinite(r.grad_norm) && r.grad_norm > 0)
        << "stage " << stage << " step " << step << ": loss " << r.loss << ", kl " << r.kl << ", grad norm "
        << r.grad_norm;
    EXPECT_EQ(r.tokens, trainer.TokensPerStep()) << "the longest prompt (5 tokens) is in every step";
    if (update_tokens) *update_tokens += r.update_tokens;
  }
  return flat();
}

TEST(TrainerPadding, MixedPromptLengthsUnderZero3MatchStage0) {
  torch::Tensor init;
  const torch::Tensor stage0 = Train(0, 3, &init);
  const torch::Tensor stage3 = Train(3, 3);
  ASSERT_TRUE(torch::isfinite(stage0).all().item<bool>());
  ASSERT_TRUE(torch::isfinite(stage3).all().item<bool>());
  const double moved = (stage0 - init).abs().max().item<double>();
  const double apart = (stage3 - stage0).abs().max().item<double>();
  std::printf("parameters moved up to %.3g; stage 3 differs from stage 0 by up to %.3g\n", moved, apart);
  EXPECT_GT(moved, 1e-3) << "training barely moved the parameters: the comparison would prove nothing";
  // Stage 3 sums gradients in another order (per-block gathers, recomputed backward), and
  // AdamW divides by the gradient's own scale: an element whose gradient is near zero
  // turns rounding into a step of up to lr. So: almost every element equal to rounding,
  // and the few that are not (measured: 15 of 31,296 beyond 1e-5, the worst 4e-4) well
  // under one step. Padding leaking into attention moves most elements of every layer.
  const torch::Tensor apart_each = (stage3 - stage0).abs();
  const int64_t beyond_rounding = (apart_each > 1e-5).sum().item<int64_t>();
  EXPECT_LE(beyond_rounding, stage0.numel() / 1000)
      << beyond_rounding << " of " << stage0.numel() << " parameters differ by more than 1e-5";
  EXPECT_LT(apart, 0.1 * Job(0).grpo.learning_rate) << "max |stage 3 - stage 0| = " << apart;
}

// A token budget of 20 (two or three rows of at most 5 + 4 tokens, sorted by length and
// trimmed) in the update, the old and the reference log-prob passes, at stage 0 and at
// stage 3: the parameters the fixed split of 5 rows trains, to the rounding the test
// above allows (AdamW turns a near-zero gradient's rounding into up to one lr step).
TEST(TrainerPadding, TokenBudgetTrainsWhatTheFixedSplitTrains) {
  torch::Tensor init;
  int64_t fixed_tokens = 0;
  const torch::Tensor fixed = Train(0, 3, &init, 0, &fixed_tokens);
  for (int stage : {0, 3}) {
    int64_t budget_tokens = 0;
    const torch::Tensor budget = Train(stage, 3, nullptr, 20, &budget_tokens);
    // The budget's micro-batches ran trimmed: fewer padded tokens than 12 rows x 9 a step.
    EXPECT_EQ(fixed_tokens, 3 * 2 * 6 * 9);
    EXPECT_LT(budget_tokens, fixed_tokens) << "stage " << stage;
    std::printf("update tokens over 3 steps: fixed split %lld, budget %lld\n", static_cast<long long>(fixed_tokens),
                static_cast<long long>(budget_tokens));
    ASSERT_TRUE(torch::isfinite(budget).all().item<bool>()) << "stage " << stage;
    const torch::Tensor apart_each = (budget - fixed).abs();
    const int64_t beyond_rounding = (apart_each > 1e-5).sum().item<int64_t>();
    std::printf("stage %d, budget 20: differs from the fixed split by up to %.3g (%lld beyond 1e-5)\n", stage,
                apart_each.max().item<double>(), static_cast<long long>(beyond_rounding));
    EXPECT_LE(beyond_rounding, fixed.numel() / 1000)
        << "stage " << stage << ": " << beyond_rounding << " of " << fixed.numel() << " differ by more than 1e-5";
    EXPECT_LT(apart_each.max().item<double>(), 0.1 * Job(0).grpo.learning_rate) << "stage " << stage;
  }
  EXPECT_GT((fixed - init).abs().max().item<double>(), 1e-3);
}

}  // namespace
}  // namespace headroom::worker
