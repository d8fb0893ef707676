// Informer against the test API server: cache, indexes, handlers, resync, and a cache
// that stays consistent with the server through dropped watches, injected errors and
// relists.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "operator/controllerkit/informer.h"
#include "tests/helpers/eventually.h"
#include "tests/operator/testserver/api_server.h"

namespace headroom::controllerkit {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testserver::TestApiServer;

using headroom::testing::Eventually;

json Pod(const std::string& name, const std::string& job, const std::string& owner_uid) {
  json pod = {{"metadata", {{"name", name}, {"labels", {{"headroom.dev/job-name", job}}}}},
              {"spec", {{"containers", {{{"name", "w"}, {"image", "x"}}}}}}};
  if (!owner_uid.empty()) {
    pod["metadata"]["ownerReferences"] = {{{"apiVersion", "headroom.dev/v1alpha1"},
                                           {"kind", "TrainingJob"},
                                           {"name", job},
                                           {"uid", owner_uid},
                                           {"controller", true}}};
  }
  return pod;
}

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testserver::TestApiServerOptions options;
    options.bookmark_interval = 100ms;
    server_ = std::make_unique<TestApiServer>(options);
    server_->Start();
    client_ = std::make_unique<kubeclient::RestClient>(server_->ClientConfig());
  }
  kubeclient::ResourceClient Pods() { return kubeclient::ResourceClient(*client_, kubeclient::resources::kPods); }
  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<kubeclient::RestClient> client_;
};

TEST_F(InformerTest, CachesIndexesAndDispatches) {
  json with_managed_fields = Pod("a-0", "a", "uid-a");
  with_managed_fields["metadata"]["managedFields"] = {{{"manager", "kubectl"}, {"operation", "Update"}}};
  Pods().Create("ns1", with_managed_fields);
  Pods().Create("ns1", Pod("b-0", "b", "uid-b"));
  Informer::Options options;
  options.watch.ns = "ns1";
  // What the handlers write outlives the informer, whose threads may still deliver.
  std::mutex mu;
  std::vector<std::string> seen;
  Informer informer(Pods(), options);
  informer.AddIndex("owner", ControllerUidIndex());
  informer.AddIndex("job", NamespacedLabelIndex("headroom.dev/job-name"));
  informer.AddEventHandlers({[&](const json& o) {
    std::lock_guard<std::mutex> l(mu);
    seen.push_back("add " + kubeclient::Name(o));
                             },
                             [&](const json& o, const json& n) {
    std::lock_guard<std::mutex> l(mu);
    seen.push_back("update " + kubeclient::Name(n) + (o == n ? " same" : ""));
  },
                            [&](const json& o) {
    std::lock_guard<std::mutex> l(mu);
    seen.push_back("delete " + kubeclient::Name(o));
  }});
  EXPECT_FALSE(informer.HasSynced());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(5s));
  EXPECT_EQ(informer.size(), 2u);
  EXPECT_FALSE((*informer.Get("ns1", "a-0"))["metadata"].contains("managedFields")) << "stripped before caching";
  Pods().Create("ns1", Pod("a-1", "a", "uid-a"));
  ASSERT_TRUE(Eventually([&] { return informer.ByIndex("owner", "uid-a").size() == 2; }));
  EXPECT_EQ(informer.ByIndex("job", "ns1/b").size(), 1u);
  EXPECT_TRUE(informer.ByIndex("owner", "uid-zzz").empty());
  Pods().Patch("ns1", "a-0", {{"metadata", {{"labels", {{"headroom.dev/job-name", "b"}}}}}});
  ASSERT_TRUE(Eventually([&] { return informer.ByIndex("job", "ns1/b").size() == 2; })) << "an index follows updates";
  EXPECT_EQ(informer.ByIndex("job", "ns1/a").size(), 1u);
  Pods().Delete("ns1", "b-0");
  ASSERT_TRUE(Eventually([&] { return !informer.Get("ns1", "b-0").has_value(); }));
  EXPECT_TRUE(informer.ByIndex("owner", "uid-b").empty());
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(seen, (std::vector<std::string>{"add a-0", "add b-0", "add a-1", "update a-0", "delete b-0"}));
}

TEST_F(InformerTest, ResyncRedeliversUnchangedObjects) {
  Pods().Create("ns1", Pod("a-0", "a", ""));
  Informer::Options options;
  options.watch.ns = "ns1";
  options.resync_period = 50ms;
  std::atomic<int> same{0};  // outlives the informer, whose resync thread writes it
  Informer informer(Pods(), options);
  informer.AddEventHandlers({nullptr, [&](const json& o, const json& n) { same += o == n; }, nullptr});
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(5s));
  ASSERT_TRUE(Eventually([&] { return same >= 3; }, 3000ms));
  EXPECT_EQ(server_->write_requests(), 1) << "a resync reads the cache, never the API server";
}

TEST_F(InformerTest, RelistTurnsMissedChangesIntoEvents) {
  Pods().Create("ns1", Pod("a", "a", ""));
  Pods().Create("ns1", Pod("b", "b", ""));
  Informer::Options options;
  options.watch.ns = "ns1";
  options.watch.min_backoff = 5ms;
  std::mutex mu;  // what the handlers write outlives the informer
  std::vector<std::string> seen;
  Informer informer(Pods(), options);
  informer.AddEventHandlers({[&](const json& o) {
    std::lock_guard<std::mutex> l(mu);
    seen.push_back("add " + kubeclient::Name(o));
                             },
                             [&](const json&, const json& n) {
    std::lock_guard<std::mutex> l(mu);
    seen.push_back("update " + kubeclient::Name(n));
  },
                            [&](const json& o) {
    std::lock_guard<std::mutex> l(mu);
    seen.push_back("delete " + kubeclient::Name(o));
  }});
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(5s));
  // Down: every request fails; meanwhile a pod is deleted, one changed, one created, and
  // the history is compacted past it all.
  testserver::FaultOptions all_fail;
  all_fail.error_fraction = 1.0;
  server_->SetFaults(all_fail);
  server_->DropAllWatches();
  auto& store = server_->store();
  const auto& pods = *store.Find("", "v1", "pods");
  store.Delete(pods, "ns1", "a", {});
  store.Patch(pods, "ns1", "b", {{"metadata", {{"labels", {{"x", "1"}}}}}}, "application/merge-patch+json", "");
  store.Create(pods, "ns1", Pod("c", "c", ""));
  store.Compact();
  server_->SetFaults({});
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> l(mu);
    return seen.size() == 5;
  }));
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(seen, (std::vector<std::string>{"add a", "add b", "add c", "update b", "delete a"}));
}

TEST_F(InformerTest, StaysConsistentThroughDroppedWatchesAndFaults) {
  Informer::Options options;
  options.watch.ns = "ns1";
  options.watch.min_backoff = 2ms;
  options.watch.page_size = 7;
  // A second view built only from the handlers must agree too; it outlives the informer.
  std::mutex mu;
  std::map<std::string, std::string> from_handlers;  // name -> resourceVersion
  Informer informer(Pods(), options);
  informer.AddEventHandlers({[&](const json& o) {
    std::lock_guard<std::mutex> l(mu);
    from_handlers[kubeclient::Name(o)] = kubeclient::ResourceVersionOf(o);
                             },
                             [&](const json&, const json& n) {
    std::lock_guard<std::mutex> l(mu);
    from_handlers[kubeclient::Name(n)] = kubeclient::ResourceVersionOf(n);
  },
                            [&](const json& o) {
    std::lock_guard<std::mutex> l(mu);
    from_handlers.erase(kubeclient::Name(o));
  }});
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(5s));

  testserver::FaultOptions faults;
  faults.error_fraction = 0.1;
  faults.drop_watch_probability = 0.1;
  faults.seed = 42;
  server_->SetFaults(faults);
  auto& store = server_->store();
  const auto& pods = *store.Find("", "v1", "pods");
  std::mt19937 rng(3);
  for (int i = 0; i < 300; ++i) {
    const std::string name = "p" + std::to_string(rng() % 40);
    try {
      switch (rng() % 3) {
        case 0: store.Create(pods, "ns1", Pod(name, "j", "")); break;
        case 1:
          store.Patch(pods, "ns1", name, {{"metadata", {{"labels", {{"i", std::to_string(i)}}}}}},
                      "application/merge-patch+json", "");
          break;
        case 2: store.Delete(pods, "ns1", name, {}); break;
      }
    } catch (const testserver::StoreError&) {
      // exists / not found: fine, the sequence is random
    }
    if (i == 150) store.Compact();  // and one forced relist halfway
    if (i % 50 == 0) std::this_thread::sleep_for(2ms);
  }
  auto server_view = [&] {
    std::map<std::string, std::string> view;
    json list = store.List(pods, "ns1", {}, {}, 0, "");
    for (const auto& item : list["items"]) view[kubeclient::Name(item)] = kubeclient::ResourceVersionOf(item);
    return view;
  };
  auto cache_view = [&] {
    std::map<std::string, std::string> view;
    for (const auto& item : informer.List()) view[kubeclient::Name(item)] = kubeclient::ResourceVersionOf(item);
    return view;
  };
  ASSERT_TRUE(Eventually([&] { return cache_view() == server_view(); }, 15000ms))
      << "cache has " << cache_view().size() << ", server " << server_view().size();
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(from_handlers, server_view());
  }
  EXPECT_GT(informer.watcher().watches(), 5) << "watches really were dropped";
  EXPECT_GT(server_->injected_faults(), 0);
}

}  // namespace
}  // namespace headroom::controllerkit
