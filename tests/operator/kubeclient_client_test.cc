// The Kubernetes client against the in-process test API server: CRUD, conflicts,
// merge patches, subresources, pagination, errors carrying metav1.Status, retries.
#include <gtest/gtest.h>

#include "core/net/free_port.h"
#include "operator/kubeclient/resource_client.h"
#include "operator/kubeclient/rest_client.h"
#include "tests/operator/testserver/api_server.h"

namespace headroom::kubeclient {
namespace {

using nlohmann::json;
using testserver::TestApiServer;

json Job(const std::string& name, int workers = 2) {
  return {{"metadata", {{"name", name}, {"labels", {{"app", "grpo"}, {"tier", name == "a" ? "gold" : "bronze"}}}}},
          {"spec", {{"workers", workers}, {"image", "headroom-worker:0.1.0"}}}};
}

class KubeClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Start();
    client_ = std::make_unique<RestClient>(server_.ClientConfig());
  }
  ResourceClient Jobs() { return ResourceClient(*client_, resources::kTrainingJobs); }
  ResourceClient Pods() { return ResourceClient(*client_, resources::kPods); }

  TestApiServer server_;
  std::unique_ptr<RestClient> client_;
};

TEST_F(KubeClientTest, CreateGetListDeleteWithServerMetadata) {
  json created = Jobs().Create("ns1", Job("a"));
  EXPECT_EQ(Name(created), "a");
  EXPECT_EQ(Namespace(created), "ns1");
  EXPECT_FALSE(Uid(created).empty());
  EXPECT_FALSE(ResourceVersionOf(created).empty());
  EXPECT_EQ(created["metadata"]["generation"], 1);
  EXPECT_EQ(created["apiVersion"], "headroom.dev/v1alpha1");

  json got = Jobs().Get("ns1", "a");
  EXPECT_EQ(Uid(got), Uid(created));
  EXPECT_FALSE(Jobs().TryGet("ns2", "a").has_value()) << "namespaces must separate objects";

  try {
    Jobs().Create("ns1", Job("a"));
    FAIL() << "second create must fail";
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.IsAlreadyExists());
    EXPECT_EQ(e.code(), 409);
    EXPECT_EQ(e.reason(), "AlreadyExists");
    EXPECT_NE(e.message().find("\"a\" already exists"), std::string::npos) << e.message();
  }

  EXPECT_TRUE(Jobs().Delete("ns1", "a"));
  EXPECT_FALSE(Jobs().Delete("ns1", "a")) << "second delete reports the object already gone";
  try {
    Jobs().Get("ns1", "a");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.IsNotFound());
    EXPECT_EQ(e.reason(), "NotFound");
    EXPECT_NE(e.message().find("trainingjobs.headroom.dev \"a\" not found"), std::string::npos) << e.message();
  }
}

TEST_F(KubeClientTest, InvalidNameIsRejectedWithReason) {
  try {
    Jobs().Create("ns1", Job("Bad_Name"));
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code(), 422);
    EXPECT_EQ(e.reason(), "Invalid");
    EXPECT_NE(std::string(e.what()).find("metadata.name"), std::string::npos);
  }
}

TEST_F(KubeClientTest, StaleUpdateConflictsAndUpdateWithRetryRereads) {
  json v1 = Jobs().Create("ns1", Job("a"));
  json v2 = v1;
  v2["spec"]["workers"] = 3;
  json after = Jobs().Update("ns1", v2);
  EXPECT_EQ(after["metadata"]["generation"], 2) << "a spec change bumps generation";
  EXPECT_NE(ResourceVersionOf(after), ResourceVersionOf(v1));

  json stale = v1;
  stale["spec"]["workers"] = 5;
  try {
    Jobs().Update("ns1", stale);
    FAIL() << "update from a stale resourceVersion must conflict";
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.IsConflict());
    EXPECT_EQ(e.reason(), "Conflict");
  }

  // A writer racing us: the first attempt conflicts, the retry re-reads and wins.
  int calls = 0;
  json result = Jobs().UpdateWithRetry("ns1", "a", [&](json& job) {
    if (++calls == 1) {
      json other = Jobs().Get("ns1", "a");
      other["metadata"]["labels"]["touched"] = "yes";
      Jobs().Update("ns1", other);
    }
    job["spec"]["workers"] = 7;
    return true;
  });
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(result["spec"]["workers"], 7);
  EXPECT_EQ(result["metadata"]["labels"]["touched"], "yes") << "the retry saw the other writer's change";

  // mutate returning false writes nothing.
  const auto writes = server_.write_requests();
  Jobs().UpdateWithRetry("ns1", "a", [](json&) { return false; });
  EXPECT_EQ(server_.write_requests(), writes);
}

TEST_F(KubeClientTest, MergePatchAndStrategicMergeRefusedForCustomResources) {
  Jobs().Create("ns1", Job("a"));
  json patched = Jobs().Patch(
      "ns1", "a", {{"metadata", {{"labels", {{"tier", nullptr}, {"x", "y"}}}}}, {"spec", {{"workers", 4}}}});
  EXPECT_EQ(patched["spec"]["workers"], 4);
  EXPECT_EQ(patched["spec"]["image"], "headroom-worker:0.1.0") << "merge patch keeps untouched fields";
  EXPECT_FALSE(patched["metadata"]["labels"].contains("tier")) << "null deletes a key";
  EXPECT_EQ(patched["metadata"]["labels"]["x"], "y");

  json smp = {{"spec", {{"workers", 1}}}};
  try {
    client_->Request("PATCH", resources::kTrainingJobs.Path("ns1", "a"), &smp,
                     "application/strategic-merge-patch+json");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code(), 415);
  }
  // A patch carrying a stale resourceVersion is a conditional write: 409.
  try {
    Jobs().Patch("ns1", "a", {{"metadata", {{"resourceVersion", "1"}}}, {"spec", {{"workers", 1}}}});
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.IsConflict());
  }
}

TEST_F(KubeClientTest, StatusSubresourceSeparatesSpecFromStatus) {
  json job = Jobs().Create("ns1", Job("a"));
  EXPECT_FALSE(job.contains("status"));
  json with_status = job;
  with_status["status"] = {{"phase", "Running"}, {"step", 3}};
  with_status["spec"]["workers"] = 6;  // ignored by the status endpoint
  json after = Jobs().UpdateStatus("ns1", with_status);
  EXPECT_EQ(after["status"]["phase"], "Running");
  EXPECT_EQ(after["spec"]["workers"], 2) << "status update must not change spec";
  EXPECT_EQ(after["metadata"]["generation"], 1) << "status never bumps generation";

  json main = after;
  main["status"]["phase"] = "Failed";  // ignored by the main endpoint
  main["spec"]["workers"] = 3;
  json after_main = Jobs().Update("ns1", main);
  EXPECT_EQ(after_main["status"]["phase"], "Running") << "main update must not change status";
  EXPECT_EQ(after_main["spec"]["workers"], 3);

  json patched = Jobs().PatchStatus("ns1", "a", {{"status", {{"step", 9}}}});
  EXPECT_EQ(patched["status"]["step"], 9);
  EXPECT_EQ(patched["status"]["phase"], "Running");
}

TEST_F(KubeClientTest, ScaleSubresourceReadsAndWritesWorkers) {
  Jobs().Create("ns1", Job("a", 2));
  Jobs().PatchStatus("ns1", "a", {{"status", {{"workers", 2}}}});
  json scale = Jobs().GetScale("ns1", "a");
  EXPECT_EQ(scale["kind"], "Scale");
  EXPECT_EQ(scale["spec"]["replicas"], 2);
  EXPECT_EQ(scale["status"]["replicas"], 2);
  scale["spec"]["replicas"] = 5;
  json updated = Jobs().UpdateScale("ns1", "a", scale);
  EXPECT_EQ(updated["spec"]["replicas"], 5);
  json job = Jobs().Get("ns1", "a");
  EXPECT_EQ(job["spec"]["workers"], 5);
  EXPECT_EQ(job["metadata"]["generation"], 2);
  // The scale carried the old resourceVersion: a second write with it conflicts.
  scale["spec"]["replicas"] = 1;
  EXPECT_THROW(Jobs().UpdateScale("ns1", "a", scale), ApiError);
}

TEST_F(KubeClientTest, ListWithLabelSelectorsAndPagination) {
  for (const char* name : {"a", "b", "c", "d", "e"}) Jobs().Create("ns1", Job(name));
  Jobs().Create("ns2", Job("f"));

  EXPECT_EQ(Jobs().List("ns1")["items"].size(), 5u);
  EXPECT_EQ(Jobs().List("")["items"].size(), 6u) << "empty namespace lists all namespaces";
  ListOptions gold;
  gold.label_selector = "tier=gold";
  EXPECT_EQ(Jobs().List("ns1", gold)["items"].size(), 1u);
  ListOptions in;
  in.label_selector = "tier in (gold, bronze),app==grpo";
  EXPECT_EQ(Jobs().List("ns1", in)["items"].size(), 5u);
  ListOptions notin;
  notin.label_selector = "tier notin (gold)";
  EXPECT_EQ(Jobs().List("ns1", notin)["items"].size(), 4u);

  ListOptions page;
  page.limit = 2;
  json first = Jobs().List("ns1", page);
  EXPECT_EQ(first["items"].size(), 2u);
  EXPECT_FALSE(first["metadata"].value("continue", "").empty());
  json all = Jobs().ListAll("ns1", page);
  ASSERT_EQ(all["items"].size(), 5u);
  std::vector<std::string> names;
  for (const auto& item : all["items"]) names.push_back(Name(item));
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(all["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"]);

  ListOptions bad;
  bad.label_selector = "tier in gold";
  try {
    Jobs().List("ns1", bad);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code(), 400);
    EXPECT_NE(e.message().find("tier in gold"), std::string::npos);
  }
}

TEST_F(KubeClientTest, OwnerDeletionCollectsDependentsAndOrphanKeepsThem) {
  json owner = Jobs().Create("ns1", Job("a"));
  json ref = {{"apiVersion", "headroom.dev/v1alpha1"},
              {"kind", "TrainingJob"},
              {"name", "a"},
              {"uid", Uid(owner)},
              {"controller", true}};
  ResourceClient cms(*client_, resources::kConfigMaps);
  cms.Create("ns1", {{"metadata", {{"name", "a-spec"}, {"ownerReferences", {ref}}}}, {"data", {{"k", "v"}}}});
  Pods().Create("ns1", {{"metadata", {{"name", "a-worker-0"}, {"ownerReferences", {ref}}}},
                        {"spec", {{"containers", {{{"name", "w"}, {"image", "x"}}}}}}});
  EXPECT_EQ(ControllerUid(cms.Get("ns1", "a-spec")), Uid(owner));
  Jobs().Delete("ns1", "a", {std::nullopt, "Background", ""});
  EXPECT_FALSE(cms.TryGet("ns1", "a-spec").has_value());
  EXPECT_FALSE(Pods().TryGet("ns1", "a-worker-0").has_value()) << "an unscheduled pod goes at once";

  json owner2 = Jobs().Create("ns1", Job("b"));
  ref["uid"] = Uid(owner2);
  cms.Create("ns1", {{"metadata", {{"name", "b-spec"}, {"ownerReferences", {ref}}}}});
  Jobs().Delete("ns1", "b", {std::nullopt, "Orphan", ""});
  auto orphan = cms.TryGet("ns1", "b-spec");
  ASSERT_TRUE(orphan.has_value());
  EXPECT_TRUE((*orphan)["metadata"]["ownerReferences"].empty());
}

TEST_F(KubeClientTest, BoundPodsAreDeletedGracefully) {
  Pods().Create("ns1", {{"metadata", {{"name", "p"}}},
                        {"spec", {{"nodeName", "node-1"}, {"containers", {{{"name", "w"}, {"image", "x"}}}}}}});
  Pods().Delete("ns1", "p", {int64_t{5}, "", ""});
  json terminating = Pods().Get("ns1", "p");
  EXPECT_TRUE(terminating["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(terminating["metadata"]["deletionGracePeriodSeconds"], 5);
  Pods().Delete("ns1", "p", {int64_t{0}, "", ""});  // what the kubelet does once the process is gone
  EXPECT_FALSE(Pods().TryGet("ns1", "p").has_value());
}

TEST_F(KubeClientTest, RetriesInjectedFaultsOnReadsAndReportsThemOnWrites) {
  Jobs().Create("ns1", Job("a"));
  testserver::FaultOptions faults;
  faults.error_fraction = 0.3;
  faults.seed = 7;
  server_.SetFaults(faults);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(Name(Jobs().Get("ns1", "a")), "a");
  EXPECT_GT(server_.injected_faults(), 0) << "the faults really happened and the reads survived them";

  int failed_writes = 0;
  for (int i = 0; i < 40; ++i) {
    try {
      Jobs().Patch("ns1", "a", {{"metadata", {{"labels", {{"i", std::to_string(i)}}}}}});
    } catch (const ApiError& e) {
      EXPECT_EQ(e.code(), 500) << "429 is retried for writes, 500 is not";
      ++failed_writes;
    }
  }
  EXPECT_GT(failed_writes, 0);
  EXPECT_LT(failed_writes, 40);
}

TEST_F(KubeClientTest, UnreachableServerIsATransportError) {
  KubeConfig config = server_.ClientConfig();
  config.server = "http://127.0.0.1:" + std::to_string(net::FreePort());
  RestClientOptions options;
  options.max_retries = 1;
  RestClient dead(config, options);
  try {
    ResourceClient(dead, resources::kPods).Get("ns1", "x");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.IsTransport());
    EXPECT_TRUE(e.IsRetryable());
  }
}

TEST(KubeTimeTest, MicroTimeRoundTrips) {
  auto t = std::chrono::system_clock::time_point(std::chrono::microseconds(1700000000123456LL));
  EXPECT_EQ(FormatMicroTime(t), "2023-11-14T22:13:20.123456Z");
  EXPECT_EQ(FormatTime(t), "2023-11-14T22:13:20Z");
  EXPECT_EQ(ParseTime("2023-11-14T22:13:20.123456Z"), t);
  EXPECT_EQ(ParseTime("2023-11-14T23:13:20.123456+01:00"), t);
  EXPECT_THROW(ParseTime("yesterday"), std::invalid_argument);
}

}  // namespace
}  // namespace headroom::kubeclient
