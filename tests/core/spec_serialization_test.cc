// ToYaml/ToJson round trips, and the run-definition hash.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/spec/training_job.h"
#include "tests/core/spec_test_util.h"

namespace headroom::spec {
namespace {

using testing_util::AllErrors;
using testing_util::kGoodJob;

// A job that exercises awkward values: strings that look like numbers or booleans,
// labels with dots and slashes, tiny and large numbers, an empty action list.
TrainingJob AwkwardJob() {
  TrainingJob job = *ParseTrainingJob(kGoodJob).job;
  job.metadata.namespace_ = "ns-1";
  job.metadata.labels = {{"app.kubernetes.io/name", "headroom"}, {"version", "1.0"}, {"flag", "true"}};
  job.metadata.annotations = {{"note", "a: b # not a comment"}, {"empty", ""}, {"null", "null"}, {"multi", "x\ny"}};
  job.metadata.uid = "123";
  job.metadata.resource_version = "42";
  job.metadata.generation = 7;
  job.spec.image = "registry.example.com:5000/headroom-worker@sha256:0123";
  job.spec.resources.cpu = "1500m";
  job.spec.resources.memory = "1e9";
  job.spec.grpo.learning_rate = 1e-5;
  job.spec.grpo.clip_high = 1.0 / 3.0;
  job.spec.grpo.kl_coef = 0;
  job.spec.grpo.temperature = 2;
  job.spec.model.seed = 18446744073709551615ULL >> 1;
  job.spec.task.seed = 0;
  job.spec.memory_guard.actions = {};
  job.spec.debug.host_leak_bytes_per_step = 48LL << 20;
  job.spec.debug.host_leak_decay = 0.7;
  job.spec.debug.host_jump_at_step = 4;
  job.spec.debug.host_jump_bytes = 400LL << 20;
  job.spec.checkpoint.volume = "pvc";
  ApplyDefaults(job);
  return job;
}

TEST(SpecSerialization, YamlRoundTrip) {
  for (const TrainingJob& job : {*ParseTrainingJob(kGoodJob).job, AwkwardJob()}) {
    ASSERT_TRUE(Validate(job).empty());
    const std::string yaml = ToYaml(job);
    ParseResult r = ParseTrainingJob(yaml);
    ASSERT_TRUE(r.ok()) << AllErrors(r) << yaml;
    EXPECT_EQ(*r.job, job) << yaml;
    EXPECT_EQ(ToYaml(*r.job), yaml);
  }
}

TEST(SpecSerialization, JsonRoundTrip) {
  for (const TrainingJob& job : {*ParseTrainingJob(kGoodJob).job, AwkwardJob()}) {
    const std::string json = ToJson(job);
    ParseResult from_text = ParseTrainingJob(json);
    ASSERT_TRUE(from_text.ok()) << AllErrors(from_text) << json;
    EXPECT_EQ(*from_text.job, job);
    ParseResult from_value = ParseTrainingJobJson(ToJsonValue(job));
    ASSERT_TRUE(from_value.ok()) << AllErrors(from_value);
    EXPECT_EQ(*from_value.job, job);
  }
}

TEST(SpecSerialization, FullObjectWithDefaultsAndCamelCase) {
  TrainingJob job =
      *ParseTrainingJob("apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: m}\nspec: {}\n").job;
  nlohmann::json j = ToJsonValue(job);
  EXPECT_EQ(j["apiVersion"], "headroom.dev/v1alpha1");
  EXPECT_EQ(j["spec"]["grpo"]["groupSize"], 8);
  EXPECT_EQ(j["spec"]["model"]["ffnHidden"], 256);
  EXPECT_EQ(j["spec"]["memoryGuard"]["actions"][3], "shrinkTokenBudget");
  EXPECT_EQ(j["spec"]["memoryGuard"]["actions"][4], "enableActivationCheckpointing");
  EXPECT_EQ(j["spec"]["memoryGuard"]["actions"][5], "disableOffload");
  EXPECT_EQ(j["spec"]["grpo"]["activationCheckpointing"], false);
  EXPECT_EQ(j["spec"]["resources"]["memory"], "4Gi");
  EXPECT_EQ(j["spec"]["debug"]["hostLeakBytesPerStep"], 0);
  EXPECT_FALSE(j.contains("status"));
  const std::string yaml = ToYaml(job);
  EXPECT_NE(yaml.find("  grpo:\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("learningRate: 0.0003"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("cpu: \"2\""), std::string::npos) << yaml;  // a string, not a number
  EXPECT_LT(yaml.find("apiVersion"), yaml.find("spec:"));
}

TEST(RunDefinitionHash, StableAndHex) {
  const TrainingJobSpec spec = ParseTrainingJob(kGoodJob).job->spec;
  const std::string hash = RunDefinitionHash(spec);
  EXPECT_EQ(hash.size(), 16u);
  EXPECT_EQ(hash.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(RunDefinitionHash(spec), hash);
  // An unparsed spec with the same meaning hashes the same: defaults are applied first.
  TrainingJobSpec bare = spec;
  bare.model.layers = bare.model.hidden = bare.model.heads = bare.model.ffn_hidden = bare.model.max_seq_len = 0;
  bare.model.seed = 0;
  EXPECT_EQ(RunDefinitionHash(bare), hash);
}

TEST(RunDefinitionHash, IgnoresWhatTheGuardMayChange) {
  const TrainingJobSpec base = ParseTrainingJob(kGoodJob).job->spec;
  const std::string hash = RunDefinitionHash(base);
  std::vector<void (*)(TrainingJobSpec&)> guard_changes = {
      [](TrainingJobSpec& s) { s.grpo.micro_batch_size = 8; },
      [](TrainingJobSpec& s) { s.grpo.max_tokens_per_micro_batch = 4096; },
      [](TrainingJobSpec& s) { s.grpo.activation_checkpointing = true; },
      [](TrainingJobSpec& s) {  // every lever the guard pulls, at once
    s.grpo.micro_batch_size = 3;
    s.grpo.max_tokens_per_micro_batch = 4096;
    s.grpo.activation_checkpointing = true;
    s.sharding.offload_optimizer = true;
      },
      [](TrainingJobSpec& s) { s.workers = 4; },
      [](TrainingJobSpec& s) {
    s.min_workers = 2;
    s.max_workers = 4;
  },
                                          [](TrainingJobSpec& s) { s.sharding.stage = 3; },
                                          [](TrainingJobSpec& s) {
    s.sharding.offload_params = true;
    s.sharding.offload_optimizer = true;
  },
      [](TrainingJobSpec& s) {
    s.resources.memory = "64Gi";
    s.resources.cpu = "8";
    s.resources.gpus = 1;
      },
      [](TrainingJobSpec& s) {
    s.memory_guard.host_threshold = 0.5;
    s.memory_guard.actions.clear();
      },
      [](TrainingJobSpec& s) {
    s.checkpoint.every_steps = 5;
    s.checkpoint.volume = "pvc";
      }, [](TrainingJobSpec& s) { s.debug.host_leak_bytes_per_step = 1 << 20; },
      [](TrainingJobSpec& s) {
    s.suspend = true;
    s.image = "other:1";
      },
      };
  for (size_t i = 0; i < guard_changes.size(); ++i) {
    TrainingJobSpec changed = base;
    guard_changes[i](changed);
    EXPECT_EQ(RunDefinitionHash(changed), hash) << "change " << i;
  }
}

TEST(RunDefinitionHash, ChangesWithWhatDefinesTheRun) {
  const TrainingJobSpec base = ParseTrainingJob(kGoodJob).job->spec;
  const std::string hash = RunDefinitionHash(base);
  std::vector<void (*)(TrainingJobSpec&)> run_changes = {
      [](TrainingJobSpec& s) { s.task.seed = 2; },
      [](TrainingJobSpec& s) { s.grpo.learning_rate = 3.0001e-4; },
      [](TrainingJobSpec& s) { s.grpo.group_size = 4; },
      [](TrainingJobSpec& s) { s.grpo.prompts_per_step = 16; },
      [](TrainingJobSpec& s) { s.grpo.kl_coef = 0; },
      [](TrainingJobSpec& s) { s.task.name = "sort"; },
      [](TrainingJobSpec& s) { s.task.digits = 4; },
      [](TrainingJobSpec& s) {
    s.model.preset = "small";
    s.model.layers = s.model.hidden = s.model.heads = s.model.ffn_hidden = 0;
      },
      [](TrainingJobSpec& s) { s.model.seed = 12345; },
      [](TrainingJobSpec& s) {
    s.model.init = "checkpoint";
    s.model.init_checkpoint = "/warm";
  },
                                          [](TrainingJobSpec& s) { s.grpo.loss_aggregation = "seq-mean-token-mean"; },
                                          };
  std::set<std::string> seen = {hash};
  for (size_t i = 0; i < run_changes.size(); ++i) {
    TrainingJobSpec changed = base;
    run_changes[i](changed);
    EXPECT_TRUE(seen.insert(RunDefinitionHash(changed)).second) << "change " << i;
  }
}

}  // namespace
}  // namespace headroom::spec
