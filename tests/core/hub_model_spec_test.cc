// spec.model.hub: parsed, checked field by field (no network), written back, and exclusive
// with spec.model.path.
#include <gtest/gtest.h>

#include "core/spec/training_job.h"
#include "tests/core/spec_test_util.h"

namespace headroom::spec {
namespace {

using testing_util::ErrorPaths;
using testing_util::GoodJobWith;

std::string WithHub(const std::string& hub) {
  return GoodJobWith("model: {preset: tiny}", "model: {hub: " + hub + "}");
}

TEST(HubModelSpec, ParsesWithRevisionDefaultingToMain) {
  ParseResult r = ParseTrainingJob(WithHub("{repo: Qwen/Qwen2.5-0.5B-Instruct}"));
  ASSERT_TRUE(r.ok()) << r.errors.front().ToString();
  EXPECT_EQ(r.job->spec.model.hub.repo, "Qwen/Qwen2.5-0.5B-Instruct");
  EXPECT_EQ(r.job->spec.model.hub.revision, "main");
  EXPECT_EQ(r.job->spec.model.hub.endpoint, "");

  r = ParseTrainingJob(WithHub("{repo: gpt2, revision: refs/pr/1, endpoint: \"https://hf-mirror.example/\"}"));
  ASSERT_TRUE(r.ok()) << r.errors.front().ToString();
  EXPECT_EQ(r.job->spec.model.hub.revision, "refs/pr/1");
  EXPECT_EQ(r.job->spec.model.hub.endpoint, "https://hf-mirror.example/");
}

TEST(HubModelSpec, RoundTripsThroughYaml) {
  ParseResult r = ParseTrainingJob(WithHub("{repo: org/name, revision: v1.0, endpoint: \"http://127.0.0.1:8080\"}"));
  ASSERT_TRUE(r.ok()) << r.errors.front().ToString();
  ParseResult again = ParseTrainingJob(ToYaml(*r.job));
  ASSERT_TRUE(again.ok()) << again.errors.front().ToString();
  EXPECT_EQ(*again.job, *r.job);
  // A job without a hub model writes no hub field (its run-definition hash is unchanged).
  ParseResult plain = ParseTrainingJob(testing_util::kGoodJob);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(ToYaml(*plain.job).find("hub"), std::string::npos);
}

TEST(HubModelSpec, ExclusiveWithPath) {
  ParseResult r =
      ParseTrainingJob(GoodJobWith("model: {preset: tiny}", "model: {path: /models/x, hub: {repo: org/x}}"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ErrorPaths(r), (std::set<std::string>{"spec.model.hub"}));
}

TEST(HubModelSpec, BadFieldsNameTheirPath) {
  struct Case {
    std::string hub, path, phrase;
  };
  for (const Case& c : std::vector<Case>{
           {"{repo: a/b/c}", "spec.model.hub.repo", "more than one '/'"},
           {"{repo: \"org/na me\"}", "spec.model.hub.repo", "character ' '"},
           {"{repo: org--x/y}", "spec.model.hub.repo", "\"--\""},
           {"{repo: -org/y}", "spec.model.hub.repo", "starts or ends"},
           {"{revision: v1}", "spec.model.hub.repo", "required"},
           {"{repo: org/x, revision: \"\"}", "spec.model.hub.revision", "is empty"},
           {"{repo: org/x, revision: ../../etc}", "spec.model.hub.revision", "\"..\""},
           {"{repo: org/x, endpoint: ftp://mirror}", "spec.model.hub.endpoint", "http:// or https://"},
           {"{repo: org/x, endpoint: \"https://user:secret@mirror\"}", "spec.model.hub.endpoint", "user or password"},
           {"{repo: org/x, token: abc}", "spec.model.hub.token", "unknown field"},
       }) {
    ParseResult r = ParseTrainingJob(WithHub(c.hub));
    ASSERT_FALSE(r.ok()) << c.hub;
    ASSERT_EQ(ErrorPaths(r), (std::set<std::string>{c.path})) << c.hub;
    EXPECT_NE(r.errors.front().message.find(c.phrase), std::string::npos) << c.hub << ": " << r.errors.front().message;
  }
}

// The worker turns a hub model into its snapshot path before the checkpoints hash the spec:
// where the cache lies is no part of the run, the repository and revision are.
TEST(HubModelSpec, RunDefinitionHashIgnoresTheResolvedSnapshotPath) {
  const ParseResult r = ParseTrainingJob(WithHub("{repo: Qwen/Qwen2.5-0.5B-Instruct}"));
  ASSERT_TRUE(r.ok());
  TrainingJobSpec here = r.job->spec, there = r.job->spec, other = r.job->spec;
  here.model.path = "/root/.cache/huggingface/hub/models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/abc";
  there.model.path = "/mnt/hf/models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/abc";
  EXPECT_EQ(RunDefinitionHash(here), RunDefinitionHash(there));
  EXPECT_EQ(RunDefinitionHash(here), RunDefinitionHash(r.job->spec));
  other.model.hub.revision = "v2";
  EXPECT_NE(RunDefinitionHash(other), RunDefinitionHash(r.job->spec));
}

}  // namespace
}  // namespace headroom::spec
