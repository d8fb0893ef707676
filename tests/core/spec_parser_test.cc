// Parsing: what kubectl sends is accepted, every problem is reported with its path and
// line in one pass, types are strict the way the CRD schema is, unknown fields are errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/base/utf8.h"
#include "core/spec/training_job.h"
#include "tests/core/spec_test_util.h"

namespace headroom::spec {
namespace {

using testing_util::AllErrors;
using testing_util::ErrorPaths;
using testing_util::GoodJobWith;
using testing_util::kGoodJob;
using Paths = std::set<std::string>;

TEST(SpecParser, GoodJobParsesWithEveryFieldRead) {
  ParseResult r = ParseTrainingJob(kGoodJob);
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const TrainingJob& job = *r.job;
  EXPECT_EQ(job.metadata.name, "addition-tiny");
  EXPECT_EQ(job.spec.workers, 2);
  EXPECT_EQ(job.spec.resources.cpu, "2");
  EXPECT_EQ(job.spec.resources.cpu_millis, 2000);
  EXPECT_EQ(job.spec.resources.memory_bytes, 4LL << 30);
  EXPECT_EQ(job.spec.task.name, "addition");
  EXPECT_DOUBLE_EQ(job.spec.grpo.learning_rate, 3.0e-4);
  EXPECT_DOUBLE_EQ(job.spec.grpo.clip_high, 0.28);
  EXPECT_EQ(job.spec.sharding.stage, 2);
  EXPECT_EQ(job.spec.memory_guard.actions.size(), 4u);
  EXPECT_EQ(job.spec.memory_guard.actions[2], GuardAction::kShrinkMicroBatch);
}

TEST(SpecParser, ReportsEveryProblemInOnePassWithPathsAndLines) {
  std::string text = GoodJobWith("groupSize: 8", "groupSize: 1");
  text.replace(text.find("clipLow: 0.2"), 12, "clipLow: 1.5");
  text.replace(text.find("name: addition-tiny"), 19, "name: Addition_Tiny");
  ParseResult r = ParseTrainingJob(text);
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.grpo.groupSize", "spec.grpo.clipLow", "metadata.name"})) << AllErrors(r);
  for (const SpecError& e : r.errors) EXPECT_GT(e.line, 0) << e.ToString();
  bool found = false;
  for (const SpecError& e : r.errors) {
    if (e.path == "spec.grpo.groupSize") {
      EXPECT_EQ(e.message, "must be >= 2, got 1");
      EXPECT_EQ(e.line, 16);
      EXPECT_EQ(e.ToString(), "spec.grpo.groupSize: must be >= 2, got 1 (line 16)");
      found = true;
    }
  }
  EXPECT_TRUE(found);
  // Document order.
  EXPECT_EQ(r.errors.front().path, "metadata.name");
}

TEST(SpecParser, UnknownFieldsAreErrorsWithASuggestion) {
  ParseResult r = ParseTrainingJob(GoodJobWith("groupSize: 8", "groupsize: 8"));
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].path, "spec.grpo.groupsize");
  EXPECT_EQ(r.errors[0].message, "unknown field (did you mean groupSize?)");
  EXPECT_EQ(r.errors[0].line, 16);

  r = ParseTrainingJob(GoodJobWith("  image:", "  replicas: 3\n  image:"));
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.replicas"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, "unknown field");
  r = ParseTrainingJob(GoodJobWith("kind: TrainingJob", "kind: TrainingJob\nextra: 1"));
  EXPECT_EQ(ErrorPaths(r), (Paths{"extra"})) << AllErrors(r);
}

TEST(SpecParser, WrongTypesNameTheExpectedType) {
  struct Case {
    const char* from;
    const char* to;
    const char* path;
    const char* expect;
  };
  for (const Case& c : std::vector<Case>{
           {"workers: 2", "workers: \"2\"", "spec.workers", "expected integer, got string \"2\""},
           {"workers: 2", "workers: 2.5", "spec.workers", "expected integer, got number 2.5"},
           {"enabled: true", "enabled: yes", "spec.memoryGuard.enabled",
            "expected boolean (true or false), got string \"yes\""},
           {"learningRate: 3.0e-4", "learningRate: fast", "spec.grpo.learningRate",
            "expected number, got string \"fast\""},
           {"image: headroom-worker:0.1.0", "image: 7", "spec.image",
            "expected string, got integer 7 (quote it: \"7\")"},
           {"model: {preset: tiny}", "model: [tiny]", "spec.model", "expected map, got list"},
           {"actions: [restart, reshard, shrinkMicroBatch, disableOffload]", "actions: restart",
            "spec.memoryGuard.actions", "expected list of actions, got string \"restart\""},
           {"workers: 2", "workers: 99999999999", "spec.workers", "must be <= 2147483647, got 99999999999"},
       }) {
    ParseResult r = ParseTrainingJob(GoodJobWith(c.from, c.to));
    ASSERT_EQ(r.errors.size(), 1u) << c.to << "\n" << AllErrors(r);
    EXPECT_EQ(r.errors[0].path, c.path);
    EXPECT_EQ(r.errors[0].message, c.expect);
  }
}

TEST(SpecParser, EveryErrorPrintsOnOneLine) {
  ParseResult r = ParseTrainingJob(GoodJobWith("kind: TrainingJob", "kind: TrainingJob\n\"bad\\nkey\\x01\": 1"));
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].path, "bad\nkey\x01");
  EXPECT_EQ(r.errors[0].ToString(), "bad\\nkey\\x01: unknown field (line 3, column 17)");  // the value's column
}

// Found by the fuzzer: a byte that is not UTF-8 made ToJson throw. Such strings are now
// refused where they are written, and errors quoting them stay printable UTF-8.
TEST(SpecParser, RejectsStringsThatAreNotUtf8) {
  ParseResult r = ParseTrainingJob(
      GoodJobWith("model: {preset: tiny}", "model: {preset: tiny, init: checkpoint, initCheckpoint: /ckpt\xff}"));
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.model.initCheckpoint"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, "not valid UTF-8");
  r = ParseTrainingJob(GoodJobWith("  workers: 2", "  work\xc3\x28"
                                                   "ers: 2"));
  ASSERT_FALSE(r.ok());
  for (const SpecError& e : r.errors) EXPECT_TRUE(utf8::IsValid(e.ToString())) << e.ToString();
  EXPECT_TRUE(
      ParseTrainingJob(GoodJobWith("  name: addition-tiny",
                                   "  name: addition-tiny\n  annotations: {note: \"caf\xc3\xa9 \xe2\x9c\x93\"}"))
          .ok());

  nlohmann::json object = ToJsonValue(*ParseTrainingJob(kGoodJob).job);
  object["spec"]["image"] = std::string("img\xff");
  r = ParseTrainingJobJson(object);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("UTF-8"), std::string::npos);

  TrainingJob built = *ParseTrainingJob(kGoodJob).job;
  built.spec.image = "img\xff";
  EXPECT_NO_THROW(ToJson(built));
  EXPECT_NO_THROW(ToJsonValue(built));
}

TEST(Utf8, SequencesAndRejections) {
  EXPECT_TRUE(utf8::IsValid("plain ascii"));
  EXPECT_TRUE(utf8::IsValid("\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80"));  // é ✓ 😀
  EXPECT_FALSE(utf8::IsValid("\xff"));
  EXPECT_FALSE(utf8::IsValid("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(utf8::IsValid("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(utf8::IsValid("\xf4\x90\x80\x80"));  // beyond U+10FFFF
  EXPECT_FALSE(utf8::IsValid("\xe2\x9c"));          // truncated
  EXPECT_EQ(utf8::SequenceLength("\xf0\x9f\x98\x80", 0), 4u);
}

TEST(SpecParser, IntegralNumbersCountAsIntegersAsInJson) {
  ParseResult r = ParseTrainingJob(GoodJobWith("workers: 2", "workers: 2.0"));
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_EQ(r.job->spec.workers, 2);
}

TEST(SpecParser, MalformedYamlReportsTheLine) {
  ParseResult r = ParseTrainingJob("apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nspec:\n  workers: [1, 2\n");
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].path, "");
  EXPECT_NE(r.errors[0].message.find("malformed YAML"), std::string::npos);
  EXPECT_GE(r.errors[0].line, 4);
  EXPECT_EQ(r.errors[0].ToString().rfind("<document>: malformed YAML: ", 0), 0u) << r.errors[0].ToString();

  r = ParseTrainingJob("a: b\n c: d: e\n");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 2) << r.errors[0].ToString();
}

TEST(SpecParser, DocumentLevelProblems) {
  EXPECT_EQ(ErrorPaths(ParseTrainingJob("")), (Paths{""}));
  EXPECT_EQ(ErrorPaths(ParseTrainingJob("# only a comment\n")), (Paths{""}));
  EXPECT_EQ(ErrorPaths(ParseTrainingJob("- a\n- b\n")), (Paths{""}));
  EXPECT_EQ(ErrorPaths(ParseTrainingJob(std::string(kGoodJob) + "---\n" + kGoodJob)), (Paths{""}));
  // A trailing "---" is an empty document, which kubectl skips too.
  EXPECT_TRUE(ParseTrainingJob(std::string("---\n") + kGoodJob + "---\n").ok());
  EXPECT_EQ(ErrorPaths(ParseTrainingJob("apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: x}\n")),
            (Paths{"spec"}));
  EXPECT_EQ(ErrorPaths(ParseTrainingJob("spec: {}\nmetadata: {name: x}\n")), (Paths{"apiVersion", "kind"}));
}

TEST(SpecParser, DuplicateKeysAreErrors) {
  ParseResult r = ParseTrainingJob(GoodJobWith("  workers: 2", "  workers: 2\n  workers: 3"));
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.workers"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, "duplicate key");
}

TEST(SpecParser, AcceptsWhatTheApiServerAddsAndIgnoresStatus) {
  const std::string text = GoodJobWith("  name: addition-tiny", R"(  name: addition-tiny
  namespace: training
  uid: 0b9c5c1e-1a2b-4c3d-8e9f-001122334455
  resourceVersion: "12345"
  generation: 3
  creationTimestamp: "2026-01-01T00:00:00Z"
  labels: {team: rl, app.kubernetes.io/name: headroom}
  annotations: {note: "anything: goes here"}
  finalizers: [headroom.dev/cleanup]
  managedFields: [{manager: kubectl, operation: Update}]
  ownerReferences: []
  generateName: addition-)") +
                           "status:\n  phase: Running\n  step: 12\n";
  ParseResult r = ParseTrainingJob(text);
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_EQ(r.job->metadata.namespace_, "training");
  EXPECT_EQ(r.job->metadata.generation, 3);
  EXPECT_EQ(r.job->metadata.resource_version, "12345");
  EXPECT_EQ(r.job->metadata.labels.at("app.kubernetes.io/name"), "headroom");
  EXPECT_EQ(r.job->metadata.annotations.at("note"), "anything: goes here");
}

TEST(SpecParser, NullMeansUnset) {
  ParseResult r =
      ParseTrainingJob(GoodJobWith("  debug: {hostLeakBytesPerStep: 0, gpuLeakBytesPerStep: 0}", "  debug:"));
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_EQ(r.job->spec.debug, DebugSpec{});
}

TEST(SpecParser, ByteCountsTakeIntegersOrQuantities) {
  ParseResult r = ParseTrainingJob(GoodJobWith("{hostLeakBytesPerStep: 0, gpuLeakBytesPerStep: 0}",
                                               "{hostLeakBytesPerStep: 48Mi, gpuLeakBytesPerStep: 1000}"));
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_EQ(r.job->spec.debug.host_leak_bytes_per_step, 48LL << 20);
  EXPECT_EQ(r.job->spec.debug.gpu_leak_bytes_per_step, 1000);
  r = ParseTrainingJob(GoodJobWith("hostLeakBytesPerStep: 0", "hostLeakBytesPerStep: 48MB"));
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.debug.hostLeakBytesPerStep"})) << AllErrors(r);
}

// As a Kubernetes Job's: unset unless written, a deadline of at least 1 s, a TTL of 0 or
// more; written back only when set.
TEST(SpecParser, JobDeadlineAndTtlAreOptional) {
  ParseResult r = ParseTrainingJob(kGoodJob);
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_FALSE(r.job->spec.active_deadline_seconds);
  EXPECT_FALSE(r.job->spec.ttl_seconds_after_finished);
  EXPECT_EQ(ToYaml(*r.job).find("activeDeadlineSeconds"), std::string::npos);
  EXPECT_EQ(ToYaml(*r.job).find("ttlSecondsAfterFinished"), std::string::npos);

  r = ParseTrainingJob(
      GoodJobWith("  workers: 2\n", "  workers: 2\n  activeDeadlineSeconds: 3600\n  ttlSecondsAfterFinished: 0\n"));
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_EQ(r.job->spec.active_deadline_seconds, 3600);
  EXPECT_EQ(r.job->spec.ttl_seconds_after_finished, 0);
  ParseResult again = ParseTrainingJob(ToYaml(*r.job));
  ASSERT_TRUE(again.ok()) << AllErrors(again);
  EXPECT_EQ(again.job->spec, r.job->spec);

  r = ParseTrainingJob(
      GoodJobWith("  workers: 2\n", "  workers: 2\n  activeDeadlineSeconds: 0\n  ttlSecondsAfterFinished: -1\n"));
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.activeDeadlineSeconds", "spec.ttlSecondsAfterFinished"})) << AllErrors(r);
  r = ParseTrainingJob(GoodJobWith("  workers: 2\n", "  workers: 2\n  activeDeadlineSeconds: soon\n"));
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.activeDeadlineSeconds"})) << AllErrors(r);
}

TEST(SpecParser, HostLeakDecayIsAFraction) {
  ParseResult r =
      ParseTrainingJob(GoodJobWith("hostLeakBytesPerStep: 0", "hostLeakBytesPerStep: 160Mi, hostLeakDecay: 0.7"));
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_DOUBLE_EQ(r.job->spec.debug.host_leak_decay, 0.7);
  r = ParseTrainingJob(GoodJobWith("hostLeakBytesPerStep: 0", "hostLeakBytesPerStep: 0, hostLeakDecay: fast"));
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.debug.hostLeakDecay"})) << AllErrors(r);
}

TEST(SpecParser, HostJumpTakesAStepAndAByteCount) {
  ParseResult r = ParseTrainingJob(
      GoodJobWith("hostLeakBytesPerStep: 0", "hostLeakBytesPerStep: 0, hostJumpAtStep: 4, hostJumpBytes: 400Mi"));
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_EQ(r.job->spec.debug.host_jump_at_step, 4);
  EXPECT_EQ(r.job->spec.debug.host_jump_bytes, 400LL << 20);
  r = ParseTrainingJob(GoodJobWith("hostLeakBytesPerStep: 0", "hostLeakBytesPerStep: 0, hostJumpBytes: 400MB"));
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.debug.hostJumpBytes"})) << AllErrors(r);
  r = ParseTrainingJob(GoodJobWith("hostLeakBytesPerStep: 0", "hostLeakBytesPerStep: 0, hostJumpAtStep: soon"));
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.debug.hostJumpAtStep"})) << AllErrors(r);
}

TEST(SpecParser, QuantitiesKeepTheirTextAndTakeNumbers) {
  ParseResult r = ParseTrainingJob(GoodJobWith("{cpu: \"2\", memory: 4Gi, gpus: 0}", "{cpu: 1.5, memory: 1.5G}"));
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_EQ(r.job->spec.resources.cpu, "1.5");
  EXPECT_EQ(r.job->spec.resources.cpu_millis, 1500);
  EXPECT_EQ(r.job->spec.resources.memory, "1.5G");
  EXPECT_EQ(r.job->spec.resources.memory_bytes, 1500000000);
  r = ParseTrainingJob(GoodJobWith("memory: 4Gi", "memory: 4GB"));
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.resources.memory"})) << AllErrors(r);
  EXPECT_NE(r.errors[0].message.find("unknown suffix \"GB\""), std::string::npos) << AllErrors(r);
}

TEST(SpecParser, ActionsAreNamedByIndex) {
  ParseResult r = ParseTrainingJob(GoodJobWith("[restart, reshard, shrinkMicroBatch, disableOffload]",
                                               "[restart, reshard, shrinkMicrobatch, restart, 7]"));
  EXPECT_EQ(ErrorPaths(r),
            (Paths{"spec.memoryGuard.actions[2]", "spec.memoryGuard.actions[3]", "spec.memoryGuard.actions[4]"}))
      << AllErrors(r);
  for (const SpecError& e : r.errors) {
    if (e.path.ends_with("[2]")) {
      EXPECT_NE(e.message.find("did you mean shrinkMicroBatch?"), std::string::npos);
    }
    if (e.path.ends_with("[3]")) {
      EXPECT_EQ(e.message, "duplicate action \"restart\" (already at [0])");
    }
  }
}

TEST(SpecParser, AnchorsAndAliasesWorkButCannotExplode) {
  ParseResult r = ParseTrainingJob(GoodJobWith("  workers: 2", "  workers: &n 2\n  maxWorkers: *n").replace(0, 0, ""));
  // maxWorkers now appears twice (8 and the alias): a duplicate key.
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.maxWorkers"})) << AllErrors(r);
  // A billion laughs: each level doubles; the node budget stops it.
  std::string laughs = "a0: &a0 [x, x]\n";
  for (int i = 1; i < 40; ++i) {
    laughs += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [*a" + std::to_string(i - 1) + ", *a" +
              std::to_string(i - 1) + "]\n";
  }
  r = ParseTrainingJob(laughs);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_NE(r.errors[0].message.find("too large"), std::string::npos) << AllErrors(r);
}

TEST(SpecParser, DeepNestingIsAnErrorNotACrash) {
  for (const std::string open : {"[", "{a: "}) {
    std::string text;
    for (int i = 0; i < 100000; ++i) text += open;
    ParseResult r = ParseTrainingJob(text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.errors[0].path, "");
  }
  std::string block = "spec:\n";
  for (int i = 0; i < 100; ++i) block += std::string(2 * (i + 1), ' ') + "a:\n";
  ParseResult r = ParseTrainingJob(block);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_NE(r.errors[0].message.find("nested deeper than 64"), std::string::npos) << AllErrors(r);
}

TEST(SpecParser, JsonObjectsFromTheApiServer) {
  nlohmann::json object = nlohmann::json::parse(ToJson(*ParseTrainingJob(kGoodJob).job));
  object["metadata"]["managedFields"] = nlohmann::json::array({{{"manager", "kubectl"}}});
  object["status"] = {{"phase", "Running"}};
  ParseResult r = ParseTrainingJobJson(object);
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_EQ(r.job->spec.grpo.group_size, 8);

  object["spec"]["grpo"]["groupSize"] = 1;
  object["spec"]["grpo"]["temprature"] = 1.0;
  object["spec"]["workers"] = "2";
  r = ParseTrainingJobJson(object);
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.grpo.groupSize", "spec.grpo.temprature", "spec.workers"})) << AllErrors(r);
  for (const SpecError& e : r.errors) EXPECT_EQ(e.line, 0);
}

TEST(SpecParser, JsonTextIsYamlToo) {
  ParseResult r = ParseTrainingJob(ToJson(*ParseTrainingJob(kGoodJob).job));
  ASSERT_TRUE(r.ok()) << AllErrors(r);
}

TEST(SpecParser, UnreadableFile) {
  ParseResult r = ParseTrainingJobFile("/nonexistent/job.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].path, "");
  EXPECT_EQ(r.errors[0].message, "cannot read /nonexistent/job.yaml: No such file or directory");
  r = ParseTrainingJobFile("/tmp");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("directory"), std::string::npos);
}

}  // namespace
}  // namespace headroom::spec
