// spec.model.lora: PEFT's vocabulary and defaults, the validator's refusals naming the
// field (unknown module, a rank larger than a wrapped projection, ZeRO stage 3, dropout
// with recomputed blocks, a PEFT adapter directory that does not match), the YAML round
// trip, and the run-definition hash (LoRA defines the run; a job without it keeps its hash).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <unistd.h>

#include "core/spec/lora_targets.h"
#include "core/spec/model_presets.h"
#include "core/spec/training_job.h"
#include "tests/core/spec_test_util.h"

namespace headroom::spec {
namespace {

using testing_util::AllErrors;
using testing_util::ErrorPaths;
using testing_util::GoodJobWith;

std::string WithLora(const std::string& lora) {
  return GoodJobWith("model: {preset: tiny}", "model: {preset: tiny, lora: " + lora + "}");
}

std::string ErrorAt(const ParseResult& r, const std::string& path) {
  for (const SpecError& e : r.errors) {
    if (e.path == path) return e.message;
  }
  return "<no error at " + path + ">; errors: " + AllErrors(r);
}

TEST(SpecLora, PeftDefaults) {
  ParseResult r = ParseTrainingJob(WithLora("{r: 16}"));
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const LoraSpec& l = r.job->spec.model.lora;
  EXPECT_EQ(l.r, 16);
  EXPECT_EQ(l.alpha, 16);  // PEFT: lora_alpha 8 at r 8, scale 1
  EXPECT_EQ(l.dropout, 0);
  EXPECT_EQ(l.target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_FALSE(l.rs_lora);
  EXPECT_DOUBLE_EQ(LoraScale(l), 1.0);
  LoraSpec rs = l;
  rs.rs_lora = true;
  rs.alpha = 32;
  EXPECT_DOUBLE_EQ(LoraScale(rs), 32.0 / 4.0);
}

TEST(SpecLora, OffWhenUnset) {
  ParseResult r = ParseTrainingJob(testing_util::kGoodJob);
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_FALSE(r.job->spec.model.lora.enabled());
  EXPECT_EQ(ToYaml(*r.job).find("lora"), std::string::npos) << "an unset lora is not written";
}

TEST(SpecLora, RoundTrips) {
  ParseResult r = ParseTrainingJob(
      WithLora("{r: 8, alpha: 16, dropout: 0.05, targetModules: [q_proj, k_proj, down_proj], rsLora: true}"));
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  ParseResult again = ParseTrainingJob(ToYaml(*r.job));
  ASSERT_TRUE(again.ok()) << AllErrors(again) << ToYaml(*r.job);
  EXPECT_EQ(again.job->spec.model.lora, r.job->spec.model.lora);
  EXPECT_EQ(again.job->spec.model.lora.target_modules, (std::vector<std::string>{"q_proj", "k_proj", "down_proj"}));
}

TEST(SpecLora, AllLinearIsEverySevenProjections) {
  ParseResult r = ParseTrainingJob(WithLora("{r: 4, targetModules: [all-linear]}"));
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_EQ(LoraTargets(r.job->spec.model.lora, hf::Architecture::kQwen2).size(), 7u);
  // tiny: 2 layers, hidden 64, ffn 256: 4 x r (64 + 64) + 3 x r (64 + 256) per layer.
  const hf::HfModelConfig c = PresetModelConfig(r.job->spec.model);
  EXPECT_EQ(LoraParameterCount(c, r.job->spec.model.lora), 2 * (4 * 4 * 128 + 3 * 4 * 320));
}

TEST(SpecLora, UnknownModuleIsNamedWithItsIndex) {
  ParseResult r = ParseTrainingJob(WithLora("{r: 4, targetModules: [q_proj, vproj]}"));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(ErrorAt(r, "spec.model.lora.targetModules[1]").find("v_proj"), std::string::npos) << AllErrors(r);
  ParseResult twice = ParseTrainingJob(WithLora("{r: 4, targetModules: [q_proj, q_proj]}"));
  EXPECT_NE(ErrorAt(twice, "spec.model.lora.targetModules[1]").find("duplicate"), std::string::npos);
  ParseResult mixed = ParseTrainingJob(WithLora("{r: 4, targetModules: [all-linear, q_proj]}"));
  EXPECT_EQ(ErrorPaths(mixed).count("spec.model.lora.targetModules"), 1u) << AllErrors(mixed);
}

TEST(SpecLora, RankLargerThanAWrappedProjectionIsRefused) {
  // tiny: hidden 64, so q_proj is [64 x 64]: r 64 fits, 65 does not.
  EXPECT_TRUE(ParseTrainingJob(WithLora("{r: 64}")).ok());
  ParseResult r = ParseTrainingJob(WithLora("{r: 65}"));
  EXPECT_NE(ErrorAt(r, "spec.model.lora.r").find("at most 64"), std::string::npos) << AllErrors(r);
  EXPECT_NE(ErrorAt(r, "spec.model.lora.r").find("q_proj"), std::string::npos);
}

TEST(SpecLora, OtherFieldsWithoutARankAreRefused) {
  ParseResult r = ParseTrainingJob(WithLora("{targetModules: [q_proj]}"));
  EXPECT_EQ(ErrorPaths(r), (std::set<std::string>{"spec.model.lora.r"})) << AllErrors(r);
}

// Stage 3 shards the frozen base and replays a block's dropout mask in its recompute, so
// LoRA runs there with or without dropout (activationCheckpointing is stage 3's own
// recompute there); activation checkpointing at stages 0-2 cannot replay it.
TEST(SpecLora, StageThreeRunsAndDropoutWithRecomputeBelowItIsRefused) {
  auto at_stage3 = [](std::string text) { return text.replace(text.find("stage: 2"), 8, "stage: 3"); };
  auto with_ac = [](std::string text) {
    return text.replace(text.find("temperature: 1.0"), 16, "temperature: 1.0\n    activationCheckpointing: true");
  };
  ParseResult stage3 = ParseTrainingJob(at_stage3(WithLora("{r: 4}")));
  EXPECT_TRUE(stage3.ok()) << AllErrors(stage3);
  ParseResult dropout3 = ParseTrainingJob(with_ac(at_stage3(WithLora("{r: 4, dropout: 0.1}"))));
  EXPECT_TRUE(dropout3.ok()) << AllErrors(dropout3);
  ParseResult ac = ParseTrainingJob(with_ac(WithLora("{r: 4, dropout: 0.1}")));
  EXPECT_NE(ErrorAt(ac, "spec.model.lora.dropout").find("activationCheckpointing"), std::string::npos) << AllErrors(ac);
  EXPECT_NE(ErrorAt(ac, "spec.model.lora.dropout").find("stage 0-2"), std::string::npos) << AllErrors(ac);
  ParseResult range = ParseTrainingJob(WithLora("{r: 4, dropout: 1}"));
  EXPECT_EQ(ErrorPaths(range).count("spec.model.lora.dropout"), 1u) << AllErrors(range);
}

TEST(SpecLora, APeftAdapterThatDoesNotMatchIsRefusedNamingTheFile) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("headroom-lora-from-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "adapter_config.json")
        << R"({"peft_type": "LORA", "r": 8, "lora_alpha": 8, "target_modules": ["v_proj", "q_proj"],
              "task_type": "CAUSAL_LM"})";
  }
  EXPECT_TRUE(ParseTrainingJob(WithLora("{r: 8, from: " + dir.string() + "}")).ok());
  ParseResult r = ParseTrainingJob(WithLora("{r: 16, from: " + dir.string() + "}"));
  const std::string why = ErrorAt(r, "spec.model.lora.from");
  EXPECT_NE(why.find((dir / "adapter_config.json").string()), std::string::npos) << why;
  EXPECT_NE(why.find("r is 8"), std::string::npos) << why;
  ParseResult modules = ParseTrainingJob(WithLora("{r: 8, targetModules: [all-linear], from: " + dir.string() + "}"));
  EXPECT_NE(ErrorAt(modules, "spec.model.lora.from").find("target_modules"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(SpecLora, TheRunDefinitionHashCoversLora) {
  ParseResult plain = ParseTrainingJob(testing_util::kGoodJob);
  ParseResult r8 = ParseTrainingJob(WithLora("{r: 8}"));
  ParseResult r16 = ParseTrainingJob(WithLora("{r: 16}"));
  ParseResult r8_all = ParseTrainingJob(WithLora("{r: 8, targetModules: [all-linear]}"));
  ASSERT_TRUE(plain.ok() && r8.ok() && r16.ok() && r8_all.ok());
  const std::string h = RunDefinitionHash(plain.job->spec);
  EXPECT_NE(RunDefinitionHash(r8.job->spec), h);
  EXPECT_NE(RunDefinitionHash(r8.job->spec), RunDefinitionHash(r16.job->spec));
  EXPECT_NE(RunDefinitionHash(r8.job->spec), RunDefinitionHash(r8_all.job->spec));
  // Unset and written-out defaults define the same run: {r: 8} is {r: 8, alpha: 8, q/v}.
  ParseResult spelled = ParseTrainingJob(WithLora("{r: 8, alpha: 8, targetModules: [q_proj, v_proj]}"));
  ASSERT_TRUE(spelled.ok());
  EXPECT_EQ(RunDefinitionHash(spelled.job->spec), RunDefinitionHash(r8.job->spec));
  // A job without LoRA hashes as it did before the field existed: its model's JSON has no
  // lora key, so its checkpoints still resume.
  EXPECT_FALSE(ToJsonValue(*plain.job)["spec"]["model"].contains("lora"));
  EXPECT_TRUE(ToJsonValue(*r8.job)["spec"]["model"].contains("lora"));
}

}  // namespace
}  // namespace headroom::spec
