// Defaults (docs/design.md's values), model presets, parameter counts and task shapes.
#include <gtest/gtest.h>

#include "core/spec/model_presets.h"
#include "core/spec/task_shapes.h"
#include "core/spec/training_job.h"
#include "tests/core/spec_test_util.h"

namespace headroom::spec {
namespace {

using testing_util::AllErrors;

const char* kMinimal = "apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: m}\nspec: {}\n";

TEST(SpecDefaults, AnEmptySpecGetsDesignMdDefaults) {
  ParseResult r = ParseTrainingJob(kMinimal);
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const TrainingJobSpec& s = r.job->spec;
  EXPECT_FALSE(s.suspend);
  EXPECT_EQ(s.workers, 1);
  EXPECT_EQ(s.min_workers, 1);
  EXPECT_EQ(s.max_workers, 8);
  EXPECT_EQ(s.image, "headroom-worker:0.1.0");
  EXPECT_EQ(s.resources.cpu, "2");
  EXPECT_EQ(s.resources.cpu_millis, 2000);
  EXPECT_EQ(s.resources.memory, "4Gi");
  EXPECT_EQ(s.resources.memory_bytes, 4LL << 30);
  EXPECT_EQ(s.resources.gpus, 0);
  EXPECT_EQ(s.model.preset, "tiny");
  EXPECT_EQ(s.model.layers, 2);
  EXPECT_EQ(s.model.hidden, 64);
  EXPECT_EQ(s.model.heads, 4);
  EXPECT_EQ(s.model.ffn_hidden, 256);
  EXPECT_EQ(s.model.max_seq_len, 16 + 8);
  EXPECT_EQ(s.model.init, "random");
  EXPECT_EQ(s.model.seed, 1u);  // the task seed
  EXPECT_EQ(s.task.name, "addition");
  EXPECT_EQ(s.task.digits, 3);
  EXPECT_EQ(s.task.seed, 1u);
  EXPECT_EQ(s.grpo.steps, 200);
  EXPECT_EQ(s.grpo.prompts_per_step, 32);
  EXPECT_EQ(s.grpo.group_size, 8);
  EXPECT_EQ(s.grpo.max_prompt_length, 16);
  EXPECT_EQ(s.grpo.max_response_length, 8);
  EXPECT_EQ(s.grpo.micro_batch_size, 64);
  EXPECT_EQ(s.grpo.updates_per_step, 1);
  EXPECT_DOUBLE_EQ(s.grpo.learning_rate, 3.0e-4);
  EXPECT_DOUBLE_EQ(s.grpo.clip_low, 0.2);
  EXPECT_DOUBLE_EQ(s.grpo.clip_high, 0.28);
  EXPECT_DOUBLE_EQ(s.grpo.kl_coef, 0.01);
  EXPECT_EQ(s.grpo.loss_aggregation, "token-mean");
  EXPECT_DOUBLE_EQ(s.grpo.temperature, 1.0);
  EXPECT_EQ(s.sharding.stage, 2);
  EXPECT_FALSE(s.sharding.offload_params);
  EXPECT_FALSE(s.sharding.offload_optimizer);
  EXPECT_EQ(s.checkpoint.every_steps, 50);
  EXPECT_EQ(s.checkpoint.keep, 2);
  EXPECT_EQ(s.checkpoint.volume, "");
  EXPECT_TRUE(s.memory_guard.enabled);
  EXPECT_DOUBLE_EQ(s.memory_guard.host_threshold, 0.90);
  EXPECT_DOUBLE_EQ(s.memory_guard.gpu_threshold, 0.92);
  EXPECT_EQ(s.memory_guard.horizon_steps, 2);
  EXPECT_EQ(s.memory_guard.max_restarts, 10);
  EXPECT_EQ(s.memory_guard.actions,
            (std::vector<GuardAction>{GuardAction::kRestart, GuardAction::kReshard, GuardAction::kShrinkMicroBatch,
                                      GuardAction::kShrinkTokenBudget, GuardAction::kEnableActivationCheckpointing,
                                      GuardAction::kDisableOffload}));
  EXPECT_FALSE(s.grpo.activation_checkpointing);
  EXPECT_EQ(s.grpo.max_tokens_per_micro_batch, 0);
  EXPECT_EQ(s.debug.host_leak_bytes_per_step, 0);
  EXPECT_EQ(s.debug.gpu_leak_bytes_per_step, 0);
}

TEST(SpecDefaults, ApplyDefaultsIsIdempotent) {
  TrainingJob job = *ParseTrainingJob(kMinimal).job;
  TrainingJob again = job;
  ApplyDefaults(again);
  EXPECT_EQ(job, again);
}

TEST(SpecDefaults, PresetsFillOnlyUnsetDims) {
  TrainingJob job;
  job.metadata.name = "p";
  job.spec.model.preset = "small";
  job.spec.model.layers = 3;  // an explicit value overrides the preset
  job.spec.model.seed = 99;
  ApplyDefaults(job);
  EXPECT_EQ(job.spec.model.layers, 3);
  EXPECT_EQ(job.spec.model.hidden, 512);
  EXPECT_EQ(job.spec.model.heads, 8);
  EXPECT_EQ(job.spec.model.ffn_hidden, 2048);
  EXPECT_EQ(job.spec.model.seed, 99u);
  EXPECT_TRUE(Validate(job).empty());
}

TEST(SpecDefaults, ResourcesFollowTheirText) {
  TrainingJob job = *ParseTrainingJob(kMinimal).job;
  job.spec.resources.memory = "512Mi";
  job.spec.resources.cpu = "500m";
  EXPECT_EQ(Validate(job).size(), 2u);  // text and numbers disagree until defaults run
  ApplyDefaults(job);
  EXPECT_EQ(job.spec.resources.memory_bytes, 512LL << 20);
  EXPECT_EQ(job.spec.resources.cpu_millis, 500);
  EXPECT_TRUE(Validate(job).empty());
}

TEST(ModelPresets, ParameterCounts) {
  auto count = [](const char* preset, int max_seq_len) {
    ModelSpec m;
    m.preset = preset;
    const ModelPreset p = *FindModelPreset(preset);
    m.layers = p.layers;
    m.hidden = p.hidden;
    m.heads = p.heads;
    m.ffn_hidden = p.ffn_hidden;
    m.max_seq_len = max_seq_len;
    return ParameterCount(m);
  };
  // tiny by hand: token embedding 32*64, learned positions 24*64, 2 blocks of (two
  // RMSNorms 2*64, q/k/v/o 4*64*64, gate/up/down 3*64*256), final RMSNorm 64, untied head
  // 64*32 (rotary positions hold no parameters).
  const int64_t block = 2 * 64 + 4 * 64 * 64 + 3 * 64 * 256;
  EXPECT_EQ(count("tiny", 24), 32 * 64 + 24 * 64 + 2 * block + 64 + 64 * 32);
  EXPECT_EQ(count("tiny", 24), 137024);
  EXPECT_NEAR(count("small", 24) / 1e6, 25.2, 0.1);
  EXPECT_NEAR(count("base", 24) / 1e6, 169.9, 0.1);
  EXPECT_EQ(kVocabSize, 32);
  EXPECT_FALSE(FindModelPreset(""));
  EXPECT_FALSE(FindModelPreset("huge"));
  EXPECT_EQ(ModelPresetNames(), (std::vector<std::string>{"tiny", "small", "base"}));
}

TEST(TaskShapes, PromptAndAnswerTokens) {
  // addition: BOS + "123+456=" and "0579" + EOS.
  EXPECT_EQ(PromptTokens("addition", 3), 9);
  EXPECT_EQ(MaxAnswerTokens("addition", 3), 5);
  // reverse / sort: BOS + "123>" and "321" + EOS.
  EXPECT_EQ(PromptTokens("reverse", 3), 5);
  EXPECT_EQ(MaxAnswerTokens("reverse", 3), 4);
  EXPECT_EQ(PromptTokens("sort", 12), 14);
  EXPECT_EQ(MaxAnswerTokens("sort", 12), 13);
  EXPECT_EQ(PromptTokens("multiply", 3), 0);
  EXPECT_EQ(PromptTokens("addition", 0), 0);
  EXPECT_EQ(PromptExample("addition", 3), "BOS + \"123+456=\"");
  EXPECT_EQ(PromptExample("reverse", 4), "BOS + \"1234>\"");
  EXPECT_TRUE(IsKnownTask("sort"));
  EXPECT_FALSE(IsKnownTask("Sort"));
}

}  // namespace
}  // namespace headroom::spec
