// The TrainingJob controller against the in-process API server and test kubelet, with the
// fake worker (tests/helpers/fake_worker/) in the pods: children and ownership, the
// status and Events of a guard restart, invalid specs, zero writes per resync, suspend
// and resume, kubectl scale, preemption and eviction, deletion, and an operator restart
// mid-job.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/protocol/environment.h"
#include "tests/operator/test_cluster.h"

namespace headroom::trainingjob::testing {
namespace {

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

Cluster::Options FakeWorker(std::vector<std::pair<std::string, std::string>> env = {}) {
  Cluster::Options o;
  env.emplace_back("FAKE_STEP_SECONDS", "0.03");
  o.worker_env = std::move(env);
  return o;
}

TEST(TrainingJobController, GuardRestartStoryInStatusEventsAndOwnedChildren) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster c(
      FakeWorker({{"FAKE_GUARD_AT_STEP", "4"},
                  {"FAKE_GUARD_DECISION", R"({"action":"restart","reason":"host forecast crosses 85% in 2 steps"})"}}));
  c.StartOperator();
  JobShape shape;
  shape.name = "story";
  shape.steps = 10;
  const json created = c.Create(JobObject(shape));
  const std::string uid = created["metadata"]["uid"];

  ASSERT_TRUE(c.WaitForPhase("story", "Succeeded", 60s));
  const json status = c.Status("story");
  EXPECT_GE(status.value("restarts", 0), 1) << status.dump();
  EXPECT_EQ(status.value("generation", 0), 2) << "one relaunch: the guard restart";
  EXPECT_EQ(status.value("oomKills", -1), 0);
  EXPECT_EQ(status.value("stepsLost", -1), 0);
  EXPECT_EQ(status["lastAction"].value("type", ""), "restart");
  EXPECT_EQ(status.value("observedGeneration", 0), created["metadata"].value("generation", 0));
  ASSERT_TRUE(status.contains("startTime") && status.contains("completionTime")) << status.dump();
  EXPECT_LE(kubeclient::ParseTime(status["startTime"]), kubeclient::ParseTime(status["completionTime"]));

  // Every child is owned by the job (controller: true), so deleting it removes them.
  auto owned = [&](const json& o) {
    return o["metadata"].contains("ownerReferences") && o["metadata"]["ownerReferences"][0]["uid"] == uid &&
           o["metadata"]["ownerReferences"][0]["controller"] == true;
  };
  EXPECT_TRUE(owned(c.Services().Get("default", "story")));
  const json cm = c.ConfigMaps().Get("default", "story-spec");
  EXPECT_TRUE(owned(cm));
  EXPECT_EQ(cm["metadata"]["labels"][manifests::kLabelGeneration], "2");
  std::vector<json> pods = c.PodsOf("story");
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_TRUE(owned(pods[0]));
  EXPECT_EQ(pods[0]["metadata"]["labels"][manifests::kLabelGeneration], "2");
  bool history = false;
  for (const json& e : pods[0]["spec"]["containers"][0]["env"]) {
    if (e["name"] == protocol::kGuardHistoryEnv)
      history = e["value"].get<std::string>().find("\"restarts\":1") != std::string::npos;
  }
  EXPECT_TRUE(history) << "generation 2 carries the guard history: " << pods[0]["spec"]["containers"][0]["env"].dump();

  ASSERT_TRUE(c.WaitUntil([&] { return Has(c.EventReasons("story"), "Succeeded"); }, 5s));
  const std::vector<std::string> reasons = c.EventReasons("story");
  EXPECT_TRUE(Has(reasons, "Launched")) << c.EventMessages("story");
  EXPECT_TRUE(Has(reasons, "GuardRestart")) << c.EventMessages("story");
  EXPECT_EQ(reasons.back(), "Succeeded") << c.EventMessages("story");
  EXPECT_NE(c.EventMessages("story").find("host forecast crosses 85%"), std::string::npos) << c.EventMessages("story");

  const std::string metrics = c.metrics().Render();
  EXPECT_NE(metrics.find(R"(headroom_operator_guard_actions_total{action="restart",reason="memoryGuard"} 1)"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(R"(headroom_operator_jobs{phase="Succeeded"} 1)"), std::string::npos) << metrics;
  // The phases it passed through count it no more (counts follow each change of phase).
  EXPECT_NE(metrics.find(R"(headroom_operator_jobs{phase="Running"} 0)"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find(R"(headroom_operator_jobs{phase="Restarting"} 0)"), std::string::npos) << metrics;
}

// The guard's token budget, as the operator shows it: the next generation's spec, the
// status's lastAction, a ShrinkTokenBudget Event and the guard-actions metric.
TEST(TrainingJobController, ShrinkTokenBudgetReachesTheSpecStatusEventsAndMetrics) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster c(FakeWorker({{"FAKE_GUARD_AT_STEP", "3"},
                        {"FAKE_GUARD_DECISION", R"({"action":"shrinkTokenBudget","reason":"a long prompt next",)"
                                                R"("target_max_tokens_per_micro_batch":56})"}}));
  c.StartOperator();
  JobShape shape;
  shape.name = "budget";
  shape.steps = 6;
  c.Create(JobObject(shape));
  ASSERT_TRUE(c.WaitForPhase("budget", "Succeeded", 60s));
  const json status = c.Status("budget");
  EXPECT_EQ(status["lastAction"].value("type", ""), "shrinkTokenBudget") << status.dump();
  EXPECT_EQ(status.value("stepsLost", -1), 0);
  const json cm = c.ConfigMaps().Get("default", "budget-spec");
  EXPECT_NE(cm.dump().find("maxTokensPerMicroBatch"), std::string::npos) << cm.dump();
  EXPECT_NE(cm.dump().find("56"), std::string::npos) << cm.dump();
  ASSERT_TRUE(c.WaitUntil([&] { return Has(c.EventReasons("budget"), "Succeeded"); }, 5s));
  EXPECT_TRUE(Has(c.EventReasons("budget"), "ShrinkTokenBudget")) << c.EventMessages("budget");
  EXPECT_NE(c.EventMessages("budget").find("a long prompt next"), std::string::npos) << c.EventMessages("budget");
  const std::string metrics = c.metrics().Render();
  EXPECT_NE(metrics.find(R"(headroom_operator_guard_actions_total{action="shrinkTokenBudget",reason="memoryGuard"} 1)"),
            std::string::npos)
      << metrics;
}

TEST(TrainingJobController, InvalidSpecFailsWithEveryProblemAndIsNotRetried) {
  Cluster::Options o;
  o.kubelet = false;
  o.resync = 200ms;
  Cluster c(o);
  c.StartOperator();
  JobShape shape;
  shape.name = "bad";
  json job = JobObject(shape);
  job["spec"]["grpo"]["groupSize"] = 1;
  job["spec"]["workers"] = 9;            // above maxWorkers 4
  job["spec"]["grpo"]["groupsize"] = 8;  // a typo: unknown field
  c.Create(job);
  ASSERT_TRUE(c.WaitForPhase("bad", "Failed", 10s));
  const json status = c.Status("bad");
  ASSERT_EQ(status["conditions"].size(), 1u) << status.dump();
  const json& cond = status["conditions"][0];
  EXPECT_EQ(cond["type"], "Failed");
  EXPECT_EQ(cond["status"], "True");
  EXPECT_EQ(cond["reason"], "InvalidSpec");
  const std::string message = cond["message"];
  EXPECT_NE(message.find("spec.grpo.groupSize"), std::string::npos) << message;
  EXPECT_NE(message.find("spec.workers"), std::string::npos) << message;
  EXPECT_NE(message.find("spec.grpo.groupsize"), std::string::npos) << message;
  EXPECT_TRUE(c.PodsOf("bad").empty());

  // Resyncs every 200 ms look at it again and write nothing: no status write, no Event.
  ASSERT_TRUE(c.WaitUntil([&] { return !c.EventReasons("bad").empty(); }, 5s));
  const int64_t writes = c.server().write_requests();
  std::this_thread::sleep_for(1200ms);
  EXPECT_EQ(c.server().write_requests(), writes) << "an invalid job must not be rewritten on resync";
  EXPECT_EQ(c.EventReasons("bad"), std::vector<std::string>{"InvalidSpec"});

  // Fixing the spec makes it a normal job.
  c.Jobs().Patch("default", "bad",
                 json{{"spec", {{"workers", 1}, {"grpo", {{"groupSize", 4}, {"groupsize", nullptr}}}}}});
  EXPECT_TRUE(c.WaitUntil([&] { return c.PodsOf("bad").size() == 1; }, 10s)) << c.Status("bad").dump();
}

// A worker that refuses its input (exit 2, the reason only in its log, as the real worker
// does): the reason reaches the Failed condition, lastAction and an Event, first.
TEST(TrainingJobController, AWorkerRefusalCarriesItsReasonIntoStatusAndEvents) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  const std::string reason = "/data/train.jsonl:3: not a JSON object";
  Cluster c(FakeWorker({{"FAKE_REFUSE", reason}}));
  c.StartOperator();
  JobShape shape;
  shape.name = "refused";
  c.Create(JobObject(shape));
  ASSERT_TRUE(c.WaitForPhase("refused", "Failed", 30s));
  const json status = c.Status("refused");
  std::string condition;
  for (const json& cond : status["conditions"]) {
    if (cond["type"] == "Failed") condition = cond.value("message", "");
  }
  EXPECT_EQ(condition.rfind(reason, 0), 0u) << status.dump();
  EXPECT_NE(status["lastAction"].dump().find(reason), std::string::npos) << status.dump();
  EXPECT_EQ(status.value("oomKills", -1), 0);
  ASSERT_TRUE(c.WaitUntil([&] { return Has(c.EventReasons("refused"), "Failed"); }, 5s)) << c.EventMessages("refused");
  EXPECT_NE(c.EventMessages("refused").find(reason), std::string::npos) << c.EventMessages("refused");
  EXPECT_EQ(c.EventMessages("refused").find("noise after the reason"), std::string::npos) << c.EventMessages("refused");
}

TEST(TrainingJobController, NothingWrittenPerResyncWhenNothingChanged) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster::Options o = FakeWorker();
  o.resync = 150ms;
  Cluster c(o);
  c.StartOperator();
  for (const char* name : {"quiet-a", "quiet-b", "quiet-c"}) {
    JobShape shape;
    shape.name = name;
    shape.steps = 3;
    c.Create(JobObject(shape));
  }
  for (const char* name : {"quiet-a", "quiet-b", "quiet-c"}) ASSERT_TRUE(c.WaitForPhase(name, "Succeeded", 30s));
  std::this_thread::sleep_for(500ms);  // the last Events and status land
  const int64_t writes = c.server().write_requests();
  const int64_t status_writes = c.op().status_writes();
  std::this_thread::sleep_for(1500ms);  // ~10 resyncs of every job
  EXPECT_EQ(c.server().write_requests(), writes);
  EXPECT_EQ(c.op().status_writes(), status_writes);
}

TEST(TrainingJobController, SuspendDrainsToACheckpointAndUnsuspendResumes) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster c(FakeWorker());
  c.StartOperator();
  JobShape shape;
  shape.name = "pause";
  shape.steps = 60;
  shape.checkpoint_every = 100;  // only the drain writes a checkpoint
  c.Create(JobObject(shape));
  ASSERT_TRUE(c.WaitUntil(
      [&] {
    auto pods = c.PodsOf("pause");
    return pods.size() == 1 && pods[0]["status"].value("phase", "") == "Running";
      },
      15s));
  std::this_thread::sleep_for(400ms);  // some steps
  c.Jobs().Patch("default", "pause", json{{"spec", {{"suspend", true}}}});
  ASSERT_TRUE(c.WaitForPhase("pause", "Suspended", 20s));
  EXPECT_TRUE(c.WaitUntil([&] { return c.PodsOf("pause").empty(); }, 10s)) << "drained pods are deleted";
  const std::string latest = c.dir() + "/jobs/pause/checkpoints/latest";
  EXPECT_TRUE(std::filesystem::exists(latest)) << "the drain left a checkpoint";
  EXPECT_TRUE(c.WaitUntil([&] { return Has(c.EventReasons("pause"), "Suspended"); }, 5s)) << c.EventMessages("pause");

  // Resumed with a template edited while paused: the new pods carry it.
  c.Jobs().Patch("default", "pause",
                 json{{"spec", {{"suspend", false}, {"template", {{"metadata", {{"labels", {{"pool", "b"}}}}}}}}}});
  EXPECT_TRUE(c.WaitUntil(
      [&] {
    for (const json& pod : c.PodsOf("pause")) {
      if (pod["metadata"].value("labels", json::object()).value("pool", "") == "b") return true;
    }
    return false;
      },
      20s))
      << "the resumed generation's pods carry the template edited while suspended";
  ASSERT_TRUE(c.WaitForPhase("pause", "Succeeded", 40s));
  const json status = c.Status("pause");
  EXPECT_EQ(status.value("generation", 0), 2);
  // The user's own pause and resume are not restarts (nor count against maxRestarts).
  EXPECT_EQ(status.value("restarts", -1), 0) << status.dump();
  EXPECT_EQ(status.value("stepsLost", -1), 0) << status.dump();
  EXPECT_TRUE(c.WaitUntil([&] { return Has(c.EventReasons("pause"), "Resumed"); }, 5s)) << c.EventMessages("pause");
}

TEST(TrainingJobController, ScaleSubresourceReshards) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster c(FakeWorker());
  c.StartOperator();
  JobShape shape;
  shape.name = "grow";
  shape.steps = 50;
  c.Create(JobObject(shape));
  ASSERT_TRUE(c.WaitUntil(
      [&] {
    auto pods = c.PodsOf("grow");
    return pods.size() == 1 && pods[0]["status"].value("phase", "") == "Running";
      },
      15s));
  // kubectl scale trainingjob/grow --replicas=2
  json scale = c.Jobs().GetScale("default", "grow");
  scale["spec"]["replicas"] = 2;
  c.Jobs().UpdateScale("default", "grow", scale);
  ASSERT_TRUE(c.WaitForJob(
      "grow", [](const json& j) { return j.value("status", json::object()).value("reshards", 0) == 1; }, 20s,
      "a reshard"));
  EXPECT_TRUE(c.WaitUntil(
      [&] {
    auto pods = c.PodsOf("grow");
    return pods.size() == 2 && pods[0]["metadata"]["labels"][manifests::kLabelGeneration] == "2" &&
           pods[1]["metadata"]["labels"][manifests::kLabelGeneration] == "2";
      },
      15s));
  ASSERT_TRUE(c.WaitForPhase("grow", "Succeeded", 40s));
  const json status = c.Status("grow");
  EXPECT_EQ(status.value("workers", 0), 2);
  EXPECT_EQ(status["lastAction"].value("type", ""), "scale");
  EXPECT_TRUE(Has(c.EventReasons("grow"), "Reshard")) << c.EventMessages("grow");
}

// Two ranks to a pod: 4 workers run as 2 pods, each its launcher and 2 ranks, every rank's
// steps read from its pod's one /metrics; `kubectl scale --replicas=2` reshards to 1 pod.
TEST(TrainingJobController, RanksPerPodRunTwoPodsOfTwoAndReshardToOne) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster c(FakeWorker());
  c.StartOperator();
  JobShape shape;
  shape.name = "pairs";
  shape.workers = 4;
  shape.ranks_per_pod = 2;
  shape.steps = 60;
  c.Create(JobObject(shape));
  ASSERT_TRUE(c.WaitUntil(
      [&] {
    auto pods = c.PodsOf("pairs");
    return pods.size() == 2 && pods[0]["status"].value("phase", "") == "Running" &&
           pods[1]["status"].value("phase", "") == "Running";
      },
      15s));
  std::set<std::string> names;
  for (const json& pod : c.PodsOf("pairs")) {
    names.insert(kubeclient::Name(pod));
    const json& container = pod["spec"]["containers"][0];
    EXPECT_EQ(container["args"][0], "launch");
    EXPECT_EQ(container["resources"]["limits"]["memory"], "512Mi");  // 2 x 256Mi
  }
  EXPECT_EQ(names, (std::set<std::string>{"pairs-worker-0", "pairs-worker-2"}));
  // The status' memory is the newest step all four ranks passed: only there once the
  // operator reads each rank's series out of its pod's scrape (hostLimitBytes is the
  // spec's from the start; hostBytes is measured).
  ASSERT_TRUE(c.WaitForJob(
      "pairs",
      [](const json& j) {
    return j.value("status", json::object()).value("memory", json::object()).value("hostBytes", 0) > 0;
      },
      20s, "memory from all four ranks"));

  json scale = c.Jobs().GetScale("default", "pairs");
  scale["spec"]["replicas"] = 2;
  c.Jobs().UpdateScale("default", "pairs", scale);
  ASSERT_TRUE(c.WaitForJob(
      "pairs", [](const json& j) { return j.value("status", json::object()).value("reshards", 0) == 1; }, 20s,
      "a reshard"));
  EXPECT_TRUE(c.WaitUntil(
      [&] {
    auto pods = c.PodsOf("pairs");
    return pods.size() == 1 && kubeclient::Name(pods[0]) == "pairs-worker-0" &&
           pods[0]["metadata"]["labels"][manifests::kLabelGeneration] == "2";
      },
      15s));
  ASSERT_TRUE(c.WaitForPhase("pairs", "Succeeded", 40s));
  const json status = c.Status("pairs");
  EXPECT_EQ(status.value("workers", 0), 2);
  EXPECT_EQ(status.value("restarts", -1), 0);
  EXPECT_EQ(status.value("step", 0), 60);
}

// `kubectl scale` right after `kubectl apply`: the drain reaches ranks still loading
// (FAKE_LOAD_SECONDS: before their stop handler exists, as a worker loading LibTorch). The
// stop waits for the handler, so they drain (75) and the job reshards; no rank dies of
// SIGTERM and reads as a crash, which a scale request still pending would repeat into a
// crash loop.
TEST(TrainingJobController, AScaleBeforeTheWorkersStartReshardsWithoutARestart) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster c(FakeWorker({{"FAKE_LOAD_SECONDS", "1"}}));
  c.StartOperator();
  JobShape shape;
  shape.name = "early";
  shape.workers = 4;
  shape.ranks_per_pod = 2;
  shape.steps = 20;
  c.Create(JobObject(shape));
  ASSERT_TRUE(c.WaitUntil([&] { return c.PodsOf("early").size() == 2; }, 15s));
  json scale = c.Jobs().GetScale("default", "early");
  scale["spec"]["replicas"] = 2;
  c.Jobs().UpdateScale("default", "early", scale);
  ASSERT_TRUE(c.WaitForPhase("early", "Succeeded", 40s)) << c.EventMessages("early");
  const json status = c.Status("early");
  EXPECT_EQ(status.value("workers", 0), 2);
  EXPECT_EQ(status.value("restarts", -1), 0) << c.EventMessages("early");
  EXPECT_EQ(status.value("reshards", 0), 1) << c.EventMessages("early");
}

// The cluster takes the worker's pod away three ways, each as Kubernetes does it: the
// scheduler preempts it (DisruptionTarget PreemptionByScheduler by a strategic merge patch
// of its status, then a deletion with a grace period), a node drain evicts it (the
// pods/eviction subresource), and someone deletes it by hand (no condition). Each time the
// worker drains to a checkpoint (SIGTERM) and the job resumes, with the cause in
// lastAction and a Disrupted Event, and none is a restart: maxRestarts 0 would fail the job
// on the first.
TEST(TrainingJobController, PreemptionEvictionAndForeignDeletionResumeWithoutARestart) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster c(FakeWorker());
  c.StartOperator();
  JobShape shape;
  shape.name = "bumped";
  shape.steps = 400;
  shape.checkpoint_every = 1000;  // only the drains write checkpoints
  shape.max_restarts = 0;
  c.Create(JobObject(shape));
  const std::string pod = manifests::WorkerPodName("bumped", 0);
  // Generation g's pod runs and the job has stepped past `after`.
  auto stepping = [&](int g, int64_t after) {
    return c.WaitUntil(
        [&] {
      const std::vector<json> pods = c.PodsOf("bumped");
      return pods.size() == 1 && pods[0]["metadata"]["labels"][manifests::kLabelGeneration] == std::to_string(g) &&
             pods[0]["status"].value("phase", "") == "Running" && c.Status("bumped").value("step", 0) > after;
        },
        20s);
  };
  auto resumed = [&](int g, const std::string& cause) {
    return c.WaitForJob(
        "bumped",
        [&](const json& j) {
      const json s = j.value("status", json::object());
      return s.value("generation", 0) == g &&
             s.value("lastAction", json::object()).value("type", "") == "resumeAfterDisruption" &&
             s["lastAction"].value("reason", "").find(cause) != std::string::npos;
        },
        30s, "generation " + std::to_string(g) + " after '" + cause + "'");
  };
  kubeclient::ResourceClient pods = c.Pods();
  kubeclient::DeleteOptions grace;
  grace.grace_period_seconds = 10;

  // Preempted.
  ASSERT_TRUE(stepping(1, 0)) << c.Status("bumped").dump();
  const json preempting = {{"status",
                            {{"conditions",
                              {{{"type", "DisruptionTarget"},
                                {"status", "True"},
                                {"reason", "PreemptionByScheduler"},
                                {"message", "default-scheduler: preempting to accommodate a higher priority pod"}}}}}}};
  pods.rest().Request("PATCH", pods.type().Path("default", pod, "status"), &preempting,
                      "application/strategic-merge-patch+json");
  pods.Delete("default", pod, grace);
  ASSERT_TRUE(resumed(2, "preempted by the scheduler"));

  // Evicted by a node drain (kubectl drain calls the eviction subresource).
  ASSERT_TRUE(stepping(2, c.Status("bumped").value("step", 0))) << c.Status("bumped").dump();
  const json eviction = {{"apiVersion", "policy/v1"},
                         {"kind", "Eviction"},
                         {"metadata", {{"name", pod}, {"namespace", "default"}}},
                         {"deleteOptions", {{"gracePeriodSeconds", 10}}}};
  pods.rest().Request("POST", pods.type().Path("default", pod, "eviction"), &eviction);
  ASSERT_TRUE(resumed(3, "evicted by a node drain"));

  // Deleted by hand: no condition, a deletion the operator did not make.
  ASSERT_TRUE(stepping(3, c.Status("bumped").value("step", 0))) << c.Status("bumped").dump();
  pods.Delete("default", pod, grace);
  ASSERT_TRUE(resumed(4, "deleted by someone other than the operator"));

  ASSERT_TRUE(c.WaitForPhase("bumped", "Succeeded", 60s));
  const json status = c.Status("bumped");
  EXPECT_EQ(status.value("restarts", -1), 0) << status.dump();
  EXPECT_EQ(status.value("disruptions", 0), 3) << status.dump();
  EXPECT_EQ(status.value("stepsLost", -1), 0) << "every disruption drained to a checkpoint: " << status.dump();
  EXPECT_EQ(status.value("generation", 0), 4);
  ASSERT_TRUE(c.WaitUntil([&] { return Has(c.EventReasons("bumped"), "Succeeded"); }, 5s)) << c.EventMessages("bumped");
  const std::vector<std::string> reasons = c.EventReasons("bumped");
  EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "Disrupted"), 3) << c.EventMessages("bumped");
  const std::string messages = c.EventMessages("bumped");
  for (const char* cause : {"preempted by the scheduler for a higher-priority pod (DisruptionTarget "
                            "PreemptionByScheduler: default-scheduler: preempting",
                            "evicted by a node drain (the Eviction API) (DisruptionTarget EvictionByEvictionAPI",
                            "deleted by someone other than the operator", "not counted as a restart",
                            "3 disruption(s) (pods preempted or evicted; resumed, not restarts)"}) {
    EXPECT_NE(messages.find(cause), std::string::npos) << cause << "\n" << messages;
  }
  const std::string metrics = c.metrics().Render();
  EXPECT_NE(metrics.find(R"(headroom_operator_guard_actions_total{action="resume",reason="disruption"} 3)"),
            std::string::npos)
      << metrics;
}

TEST(TrainingJobController, DeletingTheJobRemovesItsChildren) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster c(FakeWorker());
  c.StartOperator();
  JobShape shape;
  shape.name = "gone";
  shape.steps = 500;
  shape.workers = 2;
  c.Create(JobObject(shape));
  ASSERT_TRUE(c.WaitUntil([&] { return c.PodsOf("gone").size() == 2; }, 15s));
  c.Jobs().Delete("default", "gone");
  EXPECT_TRUE(c.WaitUntil(
      [&] {
    return c.PodsOf("gone").empty() && !c.Services().TryGet("default", "gone") &&
           !c.ConfigMaps().TryGet("default", "gone-spec");
      },
      20s));
  EXPECT_TRUE(c.WaitUntil([&] { return c.op().jobs_tracked() == 0; }, 5s)) << "the in-memory reconciler is dropped";
  const std::string metrics = c.metrics().Render();
  for (const char* phase : {"Pending", "Running", "Succeeded", "Failed"}) {
    EXPECT_NE(metrics.find(std::string("headroom_operator_jobs{phase=\"") + phase + "\"} 0"), std::string::npos)
        << "a deleted job is counted in no phase: " << metrics;
  }
}

// spec.activeDeadlineSeconds and spec.ttlSecondsAfterFinished, as a Kubernetes Job's: the
// job runs out of time and fails with reason DeadlineExceeded, then goes (with its pods,
// Service and ConfigMap) no sooner than the TTL after its completionTime.
TEST(TrainingJobController, ActiveDeadlineFailsTheJobAndTtlDeletesItWithItsChildren) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster c(FakeWorker());
  c.StartOperator();
  JobShape shape;
  shape.name = "bounded";
  shape.steps = 100000;
  shape.workers = 2;
  json job = JobObject(shape);
  job["spec"]["activeDeadlineSeconds"] = 3;
  job["spec"]["ttlSecondsAfterFinished"] = 2;
  c.Create(job);
  ASSERT_TRUE(c.WaitForPhase("bounded", "Failed", 40s));
  const json status = c.Status("bounded");
  bool deadline = false;
  for (const json& cond : status.value("conditions", json::array())) {
    deadline = deadline || (cond.value("type", "") == "Failed" && cond.value("reason", "") == "DeadlineExceeded");
  }
  EXPECT_TRUE(deadline) << status.dump();
  EXPECT_NE(status.value("message", "").find("spec.activeDeadlineSeconds (3 s) exceeded"), std::string::npos)
      << status.dump();
  EXPECT_EQ(status.value("restarts", -1), 0) << status.dump();
  ASSERT_TRUE(status.contains("completionTime")) << status.dump();
  const auto completed = kubeclient::ParseTime(status["completionTime"].get<std::string>());

  ASSERT_TRUE(c.WaitUntil([&] { return !c.Jobs().TryGet("default", "bounded"); }, 30s)) << "deleted after the TTL";
  EXPECT_GE(std::chrono::system_clock::now(), completed + 2s) << "not before completionTime + ttlSecondsAfterFinished";
  EXPECT_TRUE(c.WaitUntil(
      [&] {
    return c.PodsOf("bounded").empty() && !c.Services().TryGet("default", "bounded") &&
           !c.ConfigMaps().TryGet("default", "bounded-spec");
      },
      20s))
      << "its children go with it";
}

TEST(TrainingJobController, PicksUpARunningJobAfterAnOperatorRestart) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster c(FakeWorker({{"FAKE_GUARD_AT_STEP", "3"}}));
  c.StartOperator();
  JobShape shape;
  shape.name = "survivor";
  shape.steps = 40;
  c.Create(JobObject(shape));
  ASSERT_TRUE(c.WaitForJob(
      "survivor", [](const json& j) { return j.value("status", json::object()).value("generation", 0) == 2; }, 20s,
      "generation 2"));
  ASSERT_TRUE(c.WaitUntil(
      [&] {
    auto pods = c.PodsOf("survivor");
    return pods.size() == 1 && pods[0]["metadata"]["labels"][manifests::kLabelGeneration] == "2";
      },
      10s));
  const std::string pod_uid = c.PodsOf("survivor")[0]["metadata"]["uid"];
  c.StopOperator();
  c.StartOperator();
  ASSERT_TRUE(c.WaitForPhase("survivor", "Succeeded", 40s));
  const json status = c.Status("survivor");
  EXPECT_EQ(status.value("generation", 0), 2) << "the new operator adopted generation 2, launched nothing";
  EXPECT_EQ(status.value("restarts", 0), 1);
  EXPECT_EQ(c.PodsOf("survivor")[0]["metadata"]["uid"], pod_uid);
  const std::vector<std::string> reasons = c.EventReasons("survivor");
  EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "GuardRestart"), 1) << c.EventMessages("survivor");
}

}  // namespace
}  // namespace headroom::trainingjob::testing
