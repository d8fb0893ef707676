// Validation rules, one at a time, on the typed job (what the operator and the local
// runtime call after changing a spec) and through the parser.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/spec/training_job.h"
#include "tests/core/spec_test_util.h"

namespace headroom::spec {
namespace {

using testing_util::AllErrors;
using testing_util::ErrorPaths;
using testing_util::GoodJobWith;
using testing_util::kGoodJob;
using Paths = std::set<std::string>;

TrainingJob Good() { return *ParseTrainingJob(kGoodJob).job; }

Paths PathsOf(const std::vector<SpecError>& errors) {
  Paths p;
  for (const SpecError& e : errors) p.insert(e.path);
  return p;
}

std::string MessageAt(const std::vector<SpecError>& errors, const std::string& path) {
  for (const SpecError& e : errors) {
    if (e.path == path) return e.message;
  }
  return "<no error at " + path + ">";
}

TEST(SpecValidator, GoodJobHasNoErrors) { EXPECT_TRUE(Validate(Good()).empty()); }

TEST(SpecValidator, Ranges) {
  struct Case {
    void (*mutate)(TrainingJob&);
    const char* path;
    const char* message;
  };
  const Case cases[] = {
      {[](TrainingJob& j) { j.spec.grpo.steps = 0; }, "spec.grpo.steps", "must be >= 1, got 0"},
      {[](TrainingJob& j) { j.spec.grpo.group_size = 1; }, "spec.grpo.groupSize", "must be >= 2, got 1"},
      {[](TrainingJob& j) { j.spec.grpo.micro_batch_size = 0; }, "spec.grpo.microBatchSize", "must be >= 1, got 0"},
      {[](TrainingJob& j) { j.spec.grpo.learning_rate = 0; }, "spec.grpo.learningRate", "must be > 0, got 0"},
      {[](TrainingJob& j) { j.spec.grpo.clip_low = 1; }, "spec.grpo.clipLow", "must be in (0, 1), got 1"},
      {[](TrainingJob& j) { j.spec.grpo.clip_high = 0; }, "spec.grpo.clipHigh", "must be in (0, 1), got 0"},
      {[](TrainingJob& j) { j.spec.grpo.kl_coef = -0.1; }, "spec.grpo.klCoef", "must be >= 0, got -0.1"},
      {[](TrainingJob& j) { j.spec.grpo.temperature = 0; }, "spec.grpo.temperature", "must be > 0, got 0"},
      {[](TrainingJob& j) { j.spec.memory_guard.host_threshold = 0; }, "spec.memoryGuard.hostThreshold",
       "must be in (0, 1], got 0"},
      {[](TrainingJob& j) { j.spec.memory_guard.gpu_threshold = 1.5; }, "spec.memoryGuard.gpuThreshold",
       "must be in (0, 1], got 1.5"},
      {[](TrainingJob& j) { j.spec.memory_guard.horizon_steps = 0; }, "spec.memoryGuard.horizonSteps",
       "must be >= 1, got 0"},
      {[](TrainingJob& j) { j.spec.memory_guard.max_restarts = -1; }, "spec.memoryGuard.maxRestarts",
       "must be >= 0, got -1"},
      {[](TrainingJob& j) { j.spec.checkpoint.every_steps = 0; }, "spec.checkpoint.everySteps", "must be >= 1, got 0"},
      {[](TrainingJob& j) { j.spec.checkpoint.keep = 0; }, "spec.checkpoint.keep", "must be >= 1, got 0"},
      {[](TrainingJob& j) { j.spec.sharding.stage = 4; }, "spec.sharding.stage", "must be between 0 and 3, got 4"},
      {[](TrainingJob& j) { j.spec.task.digits = 13; }, "spec.task.digits", "must be between 1 and 12, got 13"},
      {[](TrainingJob& j) { j.spec.resources.gpus = -1; }, "spec.resources.gpus", "must be >= 0, got -1"},
      {[](TrainingJob& j) { j.spec.debug.host_leak_bytes_per_step = -5; }, "spec.debug.hostLeakBytesPerStep",
       "must be >= 0, got -5"},
      {[](TrainingJob& j) { j.spec.debug.host_leak_decay = 1.5; }, "spec.debug.hostLeakDecay",
       "must be in (0, 1], got 1.5"},
      {[](TrainingJob& j) { j.spec.debug.host_jump_at_step = -1; }, "spec.debug.hostJumpAtStep",
       "must be >= 0, got -1"},
      {[](TrainingJob& j) { j.spec.debug.host_jump_bytes = -5; }, "spec.debug.hostJumpBytes", "must be >= 0, got -5"},
      {[](TrainingJob& j) { j.spec.grpo.updates_per_step = 0; }, "spec.grpo.updatesPerStep", "must be >= 1, got 0"},
  };
  for (const Case& c : cases) {
    TrainingJob job = Good();
    c.mutate(job);
    std::vector<SpecError> errors = Validate(job);
    EXPECT_EQ(PathsOf(errors), Paths{c.path}) << c.path;
    EXPECT_EQ(MessageAt(errors, c.path), c.message);
  }
  // The edges that are allowed.
  TrainingJob job = Good();
  job.spec.memory_guard.host_threshold = 1.0;
  job.spec.grpo.kl_coef = 0;
  job.spec.grpo.group_size = 2;
  job.spec.sharding.stage = 0;
  job.spec.memory_guard.max_restarts = 0;
  job.spec.resources.gpus = 8;
  EXPECT_TRUE(Validate(job).empty()) << AllErrors({std::nullopt, Validate(job)});
}

TEST(SpecValidator, Enums) {
  TrainingJob job = Good();
  job.spec.model.preset = "huge";
  job.spec.task.name = "multiply";
  job.spec.grpo.loss_aggregation = "token_mean";
  job.spec.model.init = "pretrained";
  std::vector<SpecError> errors = Validate(job);
  EXPECT_EQ(PathsOf(errors),
            (Paths{"spec.model.preset", "spec.task.name", "spec.grpo.lossAggregation", "spec.model.init"}));
  EXPECT_EQ(MessageAt(errors, "spec.grpo.lossAggregation"),
            "unknown value \"token_mean\" (did you mean token-mean?); expected one of token-mean, "
            "seq-mean-token-mean, seq-mean-token-sum-norm");
}

TEST(SpecValidator, Names) {
  for (const char* bad : {"Addition", "addition_tiny", "-addition", "addition-", "1addition", "a.b"}) {
    TrainingJob job = Good();
    job.metadata.name = bad;
    EXPECT_EQ(PathsOf(Validate(job)), Paths{"metadata.name"}) << bad;
  }
  TrainingJob job = Good();
  job.metadata.name = "";
  EXPECT_EQ(MessageAt(Validate(job), "metadata.name"), "required");
  // maxWorkers 8: "-worker-7" leaves 54 characters.
  job.metadata.name = std::string(54, 'a');
  EXPECT_TRUE(Validate(job).empty());
  job.metadata.name = std::string(55, 'a');
  EXPECT_NE(MessageAt(Validate(job), "metadata.name").find("must be at most 54 characters so that pod names"),
            std::string::npos)
      << MessageAt(Validate(job), "metadata.name");
  job.metadata.name = std::string(53, 'a');
  job.spec.max_workers = 10;  // rank 9 still one digit
  EXPECT_TRUE(Validate(job).empty());
  job.spec.max_workers = 11;  // rank 10: two digits
  job.metadata.name = std::string(54, 'a');
  EXPECT_EQ(PathsOf(Validate(job)), Paths{"metadata.name"});

  job = Good();
  job.metadata.namespace_ = "Training";
  job.metadata.labels["bad key!"] = "ok";
  job.metadata.labels["ok"] = "bad value!";
  job.metadata.annotations["example.com/fine"] = "any text at all: yes";
  EXPECT_EQ(PathsOf(Validate(job)), (Paths{"metadata.namespace", "metadata.labels[bad key!]", "metadata.labels[ok]"}));
  job = Good();
  job.spec.checkpoint.volume = "Checkpoints";
  EXPECT_EQ(PathsOf(Validate(job)), Paths{"spec.checkpoint.volume"});
  job.spec.checkpoint.volume = "ckpt.pvc-1";
  EXPECT_TRUE(Validate(job).empty());
  job.spec.image = "";
  EXPECT_EQ(MessageAt(Validate(job), "spec.image"), "required");
  job.api_version = "headroom.dev/v1";
  job.kind = "Job";
  EXPECT_EQ(PathsOf(Validate(job)), (Paths{"spec.image", "apiVersion", "kind"}));
}

TEST(SpecValidator, WorkerBounds) {
  TrainingJob job = Good();
  job.spec.min_workers = 3;  // workers is 2
  EXPECT_EQ(MessageAt(Validate(job), "spec.minWorkers"), "must be <= workers (2), got 3");
  job = Good();
  job.spec.workers = 16;
  job.spec.grpo.prompts_per_step = 32;
  EXPECT_EQ(PathsOf(Validate(job)), Paths{"spec.workers"});
  EXPECT_EQ(MessageAt(Validate(job), "spec.workers"), "must be <= maxWorkers (8), got 16");
  job = Good();
  job.spec.min_workers = 0;
  EXPECT_EQ(PathsOf(Validate(job)), Paths{"spec.minWorkers"});
}

TEST(SpecValidator, RanksPerPodFillsWholePods) {
  TrainingJob job = Good();  // workers 2
  job.spec.ranks_per_pod = 2;
  EXPECT_TRUE(Validate(job).empty());
  job.spec.workers = 4;
  job.spec.ranks_per_pod = 8;  // four ranks cannot fill a pod of eight
  EXPECT_EQ(PathsOf(Validate(job)), Paths{"spec.workers"});
  EXPECT_EQ(MessageAt(Validate(job), "spec.workers"),
            "must be a multiple of ranksPerPod (8), got 4: every pod runs ranksPerPod ranks");
  job = Good();
  job.spec.ranks_per_pod = 0;
  EXPECT_EQ(MessageAt(Validate(job), "spec.ranksPerPod"), "must be >= 1, got 0");
  // Through the parser: the problem names the field and its line.
  const ParseResult parsed = ParseTrainingJob(GoodJobWith("  workers: 2\n", "  workers: 2\n  ranksPerPod: 4\n"));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(PathsOf(parsed.errors), Paths{"spec.workers"}) << AllErrors(parsed);
}

TEST(SpecValidator, SeveralRanksPerPodTakeOneGpuEach) {
  TrainingJob job = Good();
  job.spec.ranks_per_pod = 2;
  job.spec.resources.gpus = 1;
  EXPECT_TRUE(Validate(job).empty());
  job.spec.resources.gpus = 2;
  EXPECT_EQ(PathsOf(Validate(job)), Paths{"spec.resources.gpus"});
  EXPECT_EQ(MessageAt(Validate(job), "spec.resources.gpus"),
            "must be 0 or 1 (a rank's GPUs) when ranksPerPod > 1 (2), got 2: each pod requests ranksPerPod x gpus");
  job.spec.ranks_per_pod = 1;  // one rank may drive several GPUs, as before
  EXPECT_TRUE(Validate(job).empty());
}

TEST(SpecValidator, RanksPerPodIsNoPartOfTheRun) {
  TrainingJob job = Good();
  const std::string before = RunDefinitionHash(job.spec);
  job.spec.ranks_per_pod = 2;
  EXPECT_EQ(RunDefinitionHash(job.spec), before);
}

TEST(SpecValidator, WorkerCountFitsTheMiniBatch) {
  GrpoSpec g;
  g.prompts_per_step = 32;
  g.updates_per_step = 2;  // 16 prompts per mini-batch
  for (int w : {1, 2, 4, 8, 16}) EXPECT_TRUE(WorkerCountFits(g, w)) << w;
  for (int w : {0, 3, 5, 6, 32}) EXPECT_FALSE(WorkerCountFits(g, w)) << w;
  g.updates_per_step = 3;  // 32 does not split into 3 mini-batches
  EXPECT_FALSE(WorkerCountFits(g, 1));

  TrainingJob job = Good();
  job.spec.workers = 3;
  EXPECT_EQ(MessageAt(Validate(job), "spec.workers"),
            "must divide the prompts of each optimizer mini-batch (promptsPerStep / updatesPerStep = 32), got 3");
  job = Good();
  job.spec.grpo.updates_per_step = 3;
  EXPECT_EQ(PathsOf(Validate(job)), Paths{"spec.grpo.promptsPerStep"});
  EXPECT_EQ(MessageAt(Validate(job), "spec.grpo.promptsPerStep"), "must be divisible by updatesPerStep (3), got 32");
}

TEST(SpecValidator, ShardingAndInit) {
  TrainingJob job = Good();
  job.spec.sharding.offload_params = true;  // stage 2
  EXPECT_EQ(MessageAt(Validate(job), "spec.sharding.offloadParams"),
            "requires stage 3 (ZeRO-3 parameter offload), stage is 2");
  job.spec.sharding.stage = 3;
  EXPECT_TRUE(Validate(job).empty());
  job.spec.sharding.offload_optimizer = true;
  EXPECT_TRUE(Validate(job).empty());

  job = Good();
  job.spec.model.init = "checkpoint";
  EXPECT_EQ(MessageAt(Validate(job), "spec.model.initCheckpoint"), "required when init is checkpoint");
  job.spec.model.init_checkpoint = "/ckpt/warm";
  EXPECT_TRUE(Validate(job).empty());
  job.spec.model.init = "random";
  EXPECT_EQ(PathsOf(Validate(job)), Paths{"spec.model.initCheckpoint"});
}

TEST(SpecValidator, ModelDims) {
  ParseResult r =
      ParseTrainingJob(GoodJobWith("model: {preset: tiny}", "model: {preset: \"\", hidden: 100, heads: 3}"));
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.model.layers", "spec.model.heads"})) << AllErrors(r);
  for (const SpecError& e : r.errors) {
    if (e.path == "spec.model.layers") {
      EXPECT_EQ(e.message, "required when preset is \"\" (explicit dims)");
    }
    if (e.path == "spec.model.heads") {
      EXPECT_EQ(e.message, "must divide hidden (100), got 3");
    }
  }
  r = ParseTrainingJob(GoodJobWith("model: {preset: tiny}", "model: {preset: \"\", layers: 3, hidden: 96, heads: 3}"));
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_EQ(r.job->spec.model.ffn_hidden, 384);
  r = ParseTrainingJob(GoodJobWith("model: {preset: tiny}", "model: {preset: tiny, maxSeqLen: 20}"));
  EXPECT_EQ(ErrorPaths(r), Paths{"spec.model.maxSeqLen"}) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, "must be >= maxPromptLength + maxResponseLength (24), got 20");
}

TEST(SpecValidator, TaskShapesMustFit) {
  // addition, 3 digits: BOS + "123+456=" is 9 tokens; the answer is 4 digits + EOS.
  TrainingJob job = Good();
  job.spec.grpo.max_prompt_length = 8;
  job.spec.grpo.max_response_length = 4;
  job.spec.model.max_seq_len = 0;
  ApplyDefaults(job);
  std::vector<SpecError> errors = Validate(job);
  EXPECT_EQ(PathsOf(errors), (Paths{"spec.grpo.maxPromptLength", "spec.grpo.maxResponseLength"}));
  EXPECT_EQ(MessageAt(errors, "spec.grpo.maxPromptLength"),
            "must be >= 9 for addition with 3 digits (BOS + \"123+456=\"), got 8");
  EXPECT_EQ(MessageAt(errors, "spec.grpo.maxResponseLength"),
            "must be >= 5 for addition with 3 digits (the longest answer plus EOS), got 4");
  job.spec.grpo.max_prompt_length = 9;
  job.spec.grpo.max_response_length = 5;
  job.spec.model.max_seq_len = 0;  // positions follow the new lengths
  ApplyDefaults(job);
  EXPECT_TRUE(Validate(job).empty()) << AllErrors({std::nullopt, Validate(job)});
}

// A token budget must hold one whole sequence (maxPromptLength 16 + maxResponseLength 8
// in kGoodJob); the refusal is one line naming the field, with the numbers.
TEST(SpecValidator, TokenBudgetHoldsOneWholeSequence) {
  ParseResult r = ParseTrainingJob(
      GoodJobWith("    microBatchSize: 64\n", "    microBatchSize: 64\n    maxTokensPerMicroBatch: 23\n"));
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].path, "spec.grpo.maxTokensPerMicroBatch");
  EXPECT_EQ(r.errors[0].message, "must be 0 (off) or >= maxPromptLength + maxResponseLength (16 + 8 = 24), got 23");
  const std::string line = r.errors[0].ToString();
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_EQ(line.rfind("spec.grpo.maxTokensPerMicroBatch: ", 0), 0u) << line;
  EXPECT_NE(line.find("(line "), std::string::npos) << line;

  TrainingJob job = Good();
  for (int budget : {0, 24, 4096}) {
    job.spec.grpo.max_tokens_per_micro_batch = budget;
    EXPECT_TRUE(Validate(job).empty()) << budget << ": " << AllErrors({std::nullopt, Validate(job)});
  }
  job.spec.grpo.max_tokens_per_micro_batch = -1;
  EXPECT_EQ(PathsOf(Validate(job)), Paths{"spec.grpo.maxTokensPerMicroBatch"});
  // The rule follows the lengths: a longer response needs a larger budget.
  job.spec.grpo.max_tokens_per_micro_batch = 24;
  job.spec.grpo.max_response_length = 9;
  job.spec.model.max_seq_len = 0;
  ApplyDefaults(job);
  EXPECT_EQ(MessageAt(Validate(job), "spec.grpo.maxTokensPerMicroBatch"),
            "must be 0 (off) or >= maxPromptLength + maxResponseLength (16 + 9 = 25), got 24");
}

// activationCheckpointing is on or off (every block); an interval or a word is refused in
// one line naming the field, not read as true.
TEST(SpecValidator, ActivationCheckpointingTakesOnlyABoolean) {
  for (const char* value : {"2", "every", "0.5"}) {
    ParseResult r = ParseTrainingJob(
        GoodJobWith("    microBatchSize: 64\n",
                    std::string("    microBatchSize: 64\n    activationCheckpointing: ") + value + "\n"));
    ASSERT_EQ(r.errors.size(), 1u) << value << ": " << AllErrors(r);
    EXPECT_FALSE(r.job.has_value()) << value;
    EXPECT_EQ(r.errors[0].path, "spec.grpo.activationCheckpointing") << value;
    const std::string line = r.errors[0].ToString();
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    EXPECT_NE(line.find("(line "), std::string::npos) << line;
  }
  for (const char* value : {"true", "false"}) {
    ParseResult r = ParseTrainingJob(
        GoodJobWith("    microBatchSize: 64\n",
                    std::string("    microBatchSize: 64\n    activationCheckpointing: ") + value + "\n"));
    EXPECT_TRUE(r.errors.empty()) << value << ": " << AllErrors(r);
  }
}

TEST(SpecValidator, DuplicateActionsInABuiltJob) {
  TrainingJob job = Good();
  job.spec.memory_guard.actions = {GuardAction::kRestart, GuardAction::kReshard, GuardAction::kRestart};
  EXPECT_EQ(MessageAt(Validate(job), "spec.memoryGuard.actions[2]"), "duplicate action \"restart\" (already at [0])");
}

TEST(SpecValidator, ValidateErrorsGetTheLineOfTheFieldOrItsParent) {
  ParseResult r = ParseTrainingJob(GoodJobWith("  minWorkers: 1", "  minWorkers: 3"));
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].ToString(), "spec.minWorkers: must be <= workers (2), got 3 (line 7)");
  r = ParseTrainingJob(GoodJobWith("  name: addition-tiny\n", "  labels: {a: b}\n"));
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].ToString(), "metadata.name: required (line 4)");  // the metadata map
}

}  // namespace
}  // namespace headroom::spec

namespace headroom::spec {
namespace {

// spec.model.path's config.json is parsed where it can be read, and refused naming the
// field; a reader that parses it itself (the worker's model source) can skip that.
TEST(Validate, ReadsTheModelsConfigJsonUnlessTold) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("headroom-validate-config-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": "wide"})";
  TrainingJob job = Good();
  job.spec.model.path = dir.string();
  const std::vector<SpecError> read = Validate(job);
  EXPECT_EQ(MessageAt(read, "spec.model.path").find("<no error"), std::string::npos) << "config.json was not read";
  EXPECT_EQ(PathsOf(Validate(job, {.read_model_config = false})).count("spec.model.path"), 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace headroom::spec
