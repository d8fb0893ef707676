// The planner with LoRA (core/guard/planner.h): only the adapters carry gradients and
// optimizer state, the base is counted once (bf16 on a GPU) and the reference model is
// not counted at all. Qwen2.5-7B (tests/core/testdata/qwen2.5-7b/config.json: its published
// config.json) with LoRA r 16 on all linear layers fits one 80 GB GPU; the same job
// fully fine-tuned at stage 0 does not.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>

#include "core/guard/planner.h"
#include "core/hf/hf_config.h"
#include "core/spec/lora_targets.h"
#include "core/spec/model_presets.h"

namespace headroom::guard {
namespace {

constexpr int64_t kGpu80GB = 80'000'000'000;

spec::TrainingJobSpec SevenBJob(bool lora) {
  spec::TrainingJobSpec s;
  s.model.path = std::string(HEADROOM_SOURCE_DIR) + "/tests/core/testdata/qwen2.5-7b";
  s.resources.gpus = 1;
  s.resources.memory = "256Gi";
  s.resources.memory_bytes = 256LL << 30;
  s.sharding.stage = 0;
  s.grpo.prompts_per_step = 8;
  s.grpo.group_size = 8;
  s.grpo.max_prompt_length = 512;
  s.grpo.max_response_length = 512;
  s.grpo.micro_batch_size = 4;
  s.grpo.kl_coef = 0.01;
  if (lora) {
    s.model.lora.r = 16;
    s.model.lora.alpha = 32;
    s.model.lora.target_modules = {"all-linear"};
  }
  return s;
}

Plan PlanOf(const spec::TrainingJobSpec& s) {
  PlanOptions o;
  o.gpu_total_bytes = kGpu80GB;
  o.model = JobModelShape(s);
  return PlanMemory(s, 1, o);
}

TEST(PlannerLora, SevenBWithLoraFitsOneGpuAndFullFineTuningDoesNot) {
  const spec::TrainingJobSpec lora = SevenBJob(true), full = SevenBJob(false);
  const Plan with = PlanOf(lora), without = PlanOf(full);
  const hf::HfModelConfig config = hf::LoadHfConfig(lora.model.path);
  const int64_t adapters = spec::LoraParameterCount(config, lora.model.lora);
  // r 16 on every projection of 28 blocks: 16 x (in + out) summed, about 40M.
  EXPECT_EQ(adapters,
            28 * 16 * ((3584 + 3584) + 2 * (3584 + 512) + (3584 + 3584) + 2 * (3584 + 18944) + (18944 + 3584)));
  const double psi = static_cast<double>(config.ParameterCount());
  // The base once in bf16 plus the adapters in fp32; gradients and moments of the adapters only.
  EXPECT_EQ(with.Find("parameters")->gpu_bytes, static_cast<int64_t>(2 * psi + 4.0 * adapters));
  EXPECT_EQ(with.Find("gradients")->gpu_bytes, 4 * adapters);
  EXPECT_EQ(with.Find("optimizer")->gpu_bytes, 8 * adapters);
  EXPECT_EQ(with.Find("reference model"), nullptr) << "the reference is the base with the adapters off";
  EXPECT_NE(without.Find("reference model"), nullptr);
  EXPECT_EQ(with.Find("head gradient"), nullptr) << "the head is frozen";

  const spec::MemoryGuardSpec guard;
  EXPECT_TRUE(PlanFits(with, guard)) << with.gpu_total_bytes << " bytes planned";
  EXPECT_FALSE(PlanFits(without, guard)) << without.gpu_total_bytes << " bytes planned";
  // By how much: the margin below the guard's threshold, and the full job's excess.
  const double limit = guard.gpu_threshold * kGpu80GB;
  EXPECT_GT(limit - with.gpu_total_bytes, 10e9) << "LoRA leaves more than 10 GB of headroom";
  EXPECT_GT(without.gpu_total_bytes, 1.4 * limit) << "full fine-tuning needs far more than one GPU";
  std::cout << "Qwen2.5-7B, 1 x 80 GB, stage 0: LoRA r 16 plans " << with.gpu_total_bytes / 1e9 << " GB ("
            << (limit - with.gpu_total_bytes) / 1e9 << " GB under the " << guard.gpu_threshold
            << " threshold); full fine-tuning plans " << without.gpu_total_bytes / 1e9 << " GB\n";
}

// Stage 3 shards the frozen base too (worker/sharding/model_shards.h): each of 4 workers
// holds a quarter of the base and of the adapters, plus one block of them gathered at a
// time beside the embeddings and head (gathered through a mini-batch); gradients and
// moments stay the adapters' alone.
TEST(PlannerLora, StageThreeCountsAShardOfTheBaseAndOneGatheredBlock) {
  spec::TrainingJobSpec s = SevenBJob(true);
  s.sharding.stage = 3;
  PlanOptions o;
  o.gpu_total_bytes = kGpu80GB;
  o.model = JobModelShape(s);
  const int workers = 4;
  const Plan p = PlanMemory(s, workers, o);
  const hf::HfModelConfig config = hf::LoadHfConfig(s.model.path);
  const double adapters = static_cast<double>(spec::LoraParameterCount(config, s.model.lora));
  const double psi = static_cast<double>(config.ParameterCount());
  const double outer =
      static_cast<double>(config.vocab_size) * config.hidden_size * (config.tie_word_embeddings ? 1 : 2) +
      config.hidden_size;  // embeddings, head, final norm
  const double block = (psi - outer) / config.num_hidden_layers;
  EXPECT_EQ(p.Find("parameters")->gpu_bytes, static_cast<int64_t>(std::llround((2 * psi + 4 * adapters) / workers)));
  ASSERT_NE(p.Find("gathered layer"), nullptr);
  EXPECT_NEAR(static_cast<double>(p.Find("gathered layer")->gpu_bytes),
              2 * (block + outer) + 4 * adapters / config.num_hidden_layers, 1.0);
  EXPECT_EQ(p.Find("gradients")->gpu_bytes, static_cast<int64_t>(std::llround(4 * adapters / workers)));
  EXPECT_EQ(p.Find("optimizer")->gpu_bytes, static_cast<int64_t>(std::llround(8 * adapters / workers)));
  EXPECT_EQ(p.Find("reference model"), nullptr);
  const Plan stage0 = PlanOf(SevenBJob(true));
  EXPECT_LT(p.Find("parameters")->gpu_bytes + p.Find("gathered layer")->gpu_bytes, stage0.Find("parameters")->gpu_bytes)
      << "a shard and one block are less than the whole base";
  std::cout << "Qwen2.5-7B, LoRA r 16, stage 3 on " << workers << " workers: parameters "
            << p.Find("parameters")->gpu_bytes / 1e9 << " GB + gathered " << p.Find("gathered layer")->gpu_bytes / 1e9
            << " GB per GPU (stage 0: " << stage0.Find("parameters")->gpu_bytes / 1e9 << " GB)\n";
}

TEST(PlannerLora, PresetAdaptersAreCountedExactly) {
  // The planner derives the MLP width from a block's parameters: for a preset it must give
  // the preset's own adapter count.
  spec::TrainingJobSpec s;
  s.model.preset = "small";
  s.model.lora.r = 8;
  s.model.lora.target_modules = {"all-linear"};
  const Plan p = PlanMemory(s, 1);
  const int64_t adapters = spec::LoraParameterCount(spec::PresetModelConfig(spec::ResolvedModelSpec(s)), s.model.lora);
  EXPECT_EQ(p.Find("gradients")->host_bytes, 4 * adapters);
  EXPECT_EQ(p.Find("optimizer")->host_bytes, 8 * adapters);
}

}  // namespace
}  // namespace headroom::guard
