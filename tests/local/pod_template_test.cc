// spec.template under `headroom run`: the worker's plain env values reach the local
// workers; what one machine cannot apply is named once in the run's output.
#include "local/local_pod_template.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <sstream>
#include <thread>

#include "local/local_process_backend.h"
#include "tests/local/local_test_support.h"

namespace headroom::local {
namespace {

using namespace std::chrono_literals;

const char* kTemplate = R"(
  template:
    metadata: {labels: {team: rl}}
    spec:
      nodeSelector: {pool: gpu}
      priorityClassName: high
      volumes:
      - {name: model, persistentVolumeClaim: {claimName: qwen, readOnly: true}}
      - {name: data, hostPath: {path: /usr}}
      - {name: gone, hostPath: {path: /nonexistent-headroom-test-dir}}
      - {name: cache, hostPath: {path: /srv/cache}}
      containers:
      - env:
        - {name: PODTEMPLATE_TEST_VAR, value: from-template}
        - {name: HF_TOKEN, valueFrom: {secretKeyRef: {name: hf, key: token}}}
        envFrom: [{secretRef: {name: store}}]
        volumeMounts:
        - {name: model, mountPath: /models, readOnly: true}
        - {name: data, mountPath: /usr}
        - {name: gone, mountPath: /nonexistent-headroom-test-dir}
        - {name: cache, mountPath: /cache}
)";

spec::TrainingJob JobWithTemplate(int steps) {
  spec::TrainingJob base = testing::MakeJob({.steps = steps});
  spec::ParseResult r = spec::ParseTrainingJob(spec::ToYaml(base) + "  template:" + std::string(kTemplate).substr(12));
  EXPECT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0].ToString());
  return r.ok() ? *r.job : base;
}

TEST(LocalPodTemplate, AppliesPlainEnvAndNamesEverythingElse) {
  const LocalPodTemplate local = ApplicableOnOneMachine(JobWithTemplate(3).spec.pod_template);
  ASSERT_EQ(local.env.size(), 1u);
  EXPECT_EQ(local.env[0], (std::pair<std::string, std::string>{"PODTEMPLATE_TEST_VAR", "from-template"}));
  const std::string notice = IgnoredTemplateNotice(local);
  for (const char* ignored : {"metadata.labels", "nodeSelector", "priorityClassName", "env HF_TOKEN (valueFrom",
                              "envFrom", "volume model (persistentVolumeClaim) mounted at /models",
                              "volume cache (hostPath /srv/cache) mounted at /cache",
                              "volume gone (hostPath /nonexistent-headroom-test-dir): no such path"}) {
    EXPECT_NE(notice.find(ignored), std::string::npos) << ignored << " missing from: " << notice;
  }
  // A hostPath mounted at its own path is already there for local workers (/usr is).
  EXPECT_EQ(notice.find("volume data"), std::string::npos) << notice;
  EXPECT_EQ(IgnoredTemplateNotice(ApplicableOnOneMachine(spec::PodTemplate{})), "");
}

TEST(LocalPodTemplate, WorkersSeeTheTemplatesEnvAndTheRunSaysOnceWhatItIgnores) {
  REQUIRE_FAKE_WORKER();
  testing::TempDir dir;
  ::setenv("PODTEMPLATE_TEST_VAR", "from-parent", 1);  // the template's value wins
  std::vector<std::string> notices;
  LocalBackendOptions o;
  o.workdir = dir.path() + "/work";
  o.worker_binary = testing::FakeWorkerPath();
  o.cgroups = LocalBackendOptions::Cgroups::kOff;
  o.extra_env = {{"FAKE_STEP_SECONDS", "0.01"}, {"FAKE_ECHO_ENV", "PODTEMPLATE_TEST_VAR"}};
  o.notice = [&](const std::string& m) { notices.push_back(m); };
  LocalProcessBackend backend(o);
  for (int generation = 1; generation <= 2; ++generation) {
    backend.Launch({generation, JobWithTemplate(2 * generation), "{}"});
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    runtime::Observation seen;
    while (std::chrono::steady_clock::now() < deadline) {
      seen = backend.Observe();
      if (!seen.ranks.empty() && seen.ranks[0].exit) break;
      std::this_thread::sleep_for(20ms);
    }
    ASSERT_TRUE(!seen.ranks.empty() && seen.ranks[0].exit);
    EXPECT_EQ(seen.ranks[0].exit->exit_code, 0) << seen.ranks[0].exit->reason;
    std::istringstream log(testing::ReadAll(backend.generation_dir(generation) + "/rank-0.log"));
    std::string line;
    ASSERT_TRUE(std::getline(log, line));
    EXPECT_EQ(nlohmann::json::parse(line)["env_echo"], "from-template");
  }
  ::unsetenv("PODTEMPLATE_TEST_VAR");
  int template_notices = 0;
  for (const std::string& n : notices) template_notices += n.rfind("spec.template: ignored", 0) == 0 ? 1 : 0;
  EXPECT_EQ(template_notices, 1) << "said once per run, not per generation";
}

}  // namespace
}  // namespace headroom::local
