// Watches against the test API server: events arrive as they happen (not when the
// response ends), bookmarks advance the resourceVersion, dropped streams resume without
// losing or repeating events, and 410 Gone — in the stream or as a status — relists.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "operator/kubeclient/watcher.h"
#include "tests/helpers/eventually.h"
#include "tests/operator/testserver/api_server.h"

namespace headroom::kubeclient {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testserver::TestApiServer;

json Job(const std::string& name) { return {{"metadata", {{"name", name}}}, {"spec", {{"workers", 1}}}}; }

using headroom::testing::Eventually;

TEST(KubeStreamTest, EventsArriveBeforeTheStreamEnds) {
  TestApiServer server;
  server.Start();
  RestClient client(server.ClientConfig());
  ResourceClient jobs(client, resources::kTrainingJobs);
  const std::string rv = jobs.List("ns1")["metadata"]["resourceVersion"];

  std::mutex mu;
  std::vector<std::string> lines;
  StreamCanceller cancel;
  std::atomic<bool> ended{false};
  std::thread reader([&] {
    WatchOptions options;
    options.resource_version = rv;
    options.allow_bookmarks = false;
    options.timeout_seconds = 60;  // far longer than the test: the stream stays open
    client.Stream(
        jobs.WatchTarget("ns1", options),
        [&](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu);
      lines.push_back(line);
        },
        cancel);
    ended = true;
  });
  ASSERT_TRUE(Eventually([&] { return server.open_watches() == 1; }));
  jobs.Create("ns1", Job("a"));
  ASSERT_TRUE(Eventually(
      [&] {
    std::lock_guard<std::mutex> lock(mu);
    return lines.size() == 1;
      },
      3000ms))
      << "the ADDED event must arrive while the watch is still open";
  EXPECT_FALSE(ended);
  jobs.Patch("ns1", "a", {{"spec", {{"workers", 2}}}});
  ASSERT_TRUE(Eventually(
      [&] {
    std::lock_guard<std::mutex> lock(mu);
    return lines.size() == 2;
      },
      3000ms));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(ParseWatchLine(lines[0]).first, "ADDED");
    auto [type, object] = ParseWatchLine(lines[1]);
    EXPECT_EQ(type, "MODIFIED");
    EXPECT_EQ(object["spec"]["workers"], 2);
  }
  const auto t0 = std::chrono::steady_clock::now();
  cancel.Cancel();
  reader.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "cancelling ends the stream promptly";
}

TEST(KubeStreamTest, WatchTimeoutEndsTheStreamWithABookmark) {
  testserver::TestApiServerOptions options;
  options.bookmark_interval = 100ms;
  TestApiServer server(options);
  server.Start();
  RestClient client(server.ClientConfig());
  ResourceClient jobs(client, resources::kTrainingJobs);
  ResourceClient pods(client, resources::kPods);
  const std::string rv = jobs.List("ns1")["metadata"]["resourceVersion"];
  pods.Create("ns1", {{"metadata", {{"name", "p"}}}, {"spec", {{"containers", json::array()}}}});
  std::vector<std::string> lines;
  WatchOptions watch;
  watch.resource_version = rv;
  watch.timeout_seconds = 1;
  StreamCanceller cancel;
  const auto t0 = std::chrono::steady_clock::now();
  client.Stream(
      jobs.WatchTarget("ns1", watch), [&](const std::string& l) { lines.push_back(l); }, cancel);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 900ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  ASSERT_FALSE(lines.empty());
  auto [type, object] = ParseWatchLine(lines.back());
  EXPECT_EQ(type, "BOOKMARK");
  EXPECT_GT(std::stoll(ResourceVersionOf(object)), std::stoll(rv))
      << "a bookmark moves past revisions of other kinds, so a re-watch starts later";
}

// Collects what a Watcher hands over into a map, as an informer would.
struct Mirror {
  std::mutex mu;
  std::map<std::string, json> objects;
  std::vector<std::string> log;  // "ADDED a", "REPLACE 3", ...
  int replaces = 0;

  Watcher::Handlers Handlers() {
    Watcher::Handlers h;
    h.on_replace = [this](std::vector<json> items) {
      std::lock_guard<std::mutex> lock(mu);
      objects.clear();
      for (auto& item : items) objects[KeyOf(item)] = item;
      ++replaces;
      log.push_back("REPLACE " + std::to_string(items.size()));
    };
    h.on_event = [this](const WatchEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      const std::string key = KeyOf(e.object);
      static const char* kNames[] = {"ADDED", "MODIFIED", "DELETED"};
      log.push_back(std::string(kNames[static_cast<int>(e.type)]) + " " + Name(e.object));
      if (e.type == WatchEvent::Type::kDeleted) {
        objects.erase(key);
      } else {
        objects[key] = e.object;
      }
    };
    return h;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return objects.size();
  }
  int count(const std::string& entry) {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<int>(std::count(log.begin(), log.end(), entry));
  }
};

class KubeWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testserver::TestApiServerOptions options;
    options.bookmark_interval = 100ms;
    server_ = std::make_unique<TestApiServer>(options);
    server_->Start();
    client_ = std::make_unique<RestClient>(server_->ClientConfig());
  }
  ResourceClient Jobs() { return ResourceClient(*client_, resources::kTrainingJobs); }
  std::unique_ptr<Watcher> StartWatcher(Mirror& mirror) {
    Watcher::Options options;
    options.ns = "ns1";
    options.page_size = 2;  // exercise pagination in the list
    options.min_backoff = 5ms;
    auto w = std::make_unique<Watcher>(Jobs(), options, mirror.Handlers());
    w->Start();
    return w;
  }
  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<RestClient> client_;
};

TEST_F(KubeWatcherTest, ListsThenDeliversChangesInOrder) {
  for (const char* n : {"a", "b", "c"}) Jobs().Create("ns1", Job(n));
  Jobs().Create("other", Job("x"));
  Mirror mirror;
  auto watcher = StartWatcher(mirror);
  ASSERT_TRUE(Eventually([&] { return mirror.replaces == 1; }));
  EXPECT_EQ(mirror.size(), 3u) << "paginated list, one namespace";
  Jobs().Create("ns1", Job("d"));
  Jobs().Patch("ns1", "a", {{"spec", {{"workers", 3}}}});
  Jobs().Delete("ns1", "b");
  ASSERT_TRUE(Eventually([&] { return mirror.count("DELETED b") == 1; }));
  std::lock_guard<std::mutex> lock(mirror.mu);
  EXPECT_EQ(mirror.log, (std::vector<std::string>{"REPLACE 3", "ADDED d", "MODIFIED a", "DELETED b"}));
  EXPECT_EQ(mirror.objects["ns1/a"]["spec"]["workers"], 3);
  EXPECT_EQ(watcher->lists(), 1);
}

TEST_F(KubeWatcherTest, DroppedWatchesResumeWithoutLossOrDuplicates) {
  Mirror mirror;
  auto watcher = StartWatcher(mirror);
  ASSERT_TRUE(Eventually([&] { return mirror.replaces == 1; }));
  testserver::FaultOptions faults;
  faults.drop_watch_after_events = 3;
  server_->SetFaults(faults);
  for (int i = 0; i < 20; ++i) Jobs().Create("ns1", Job("j" + std::to_string(i)));
  ASSERT_TRUE(Eventually([&] { return mirror.size() == 20; }));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(mirror.count("ADDED j" + std::to_string(i)), 1) << i;
  EXPECT_EQ(watcher->lists(), 1) << "resuming from the last resourceVersion needs no relist";
  EXPECT_GE(watcher->watches(), 7) << "every third event ended the stream";
}

TEST_F(KubeWatcherTest, GoneAsErrorEventRelists) {
  Mirror mirror;
  auto watcher = StartWatcher(mirror);
  ASSERT_TRUE(Eventually([&] { return mirror.replaces == 1; }));
  server_->ForceGoneOnNextWatch(/*as_http_status=*/false);
  server_->DropAllWatches();
  ASSERT_TRUE(Eventually([&] { return mirror.replaces == 2; }));
  Jobs().Create("ns1", Job("after"));
  ASSERT_TRUE(Eventually([&] { return mirror.size() == 1; }));
  EXPECT_EQ(watcher->lists(), 2);
}

TEST_F(KubeWatcherTest, GoneAsHttpStatusRelists) {
  Mirror mirror;
  auto watcher = StartWatcher(mirror);
  ASSERT_TRUE(Eventually([&] { return mirror.replaces == 1; }));
  server_->ForceGoneOnNextWatch(/*as_http_status=*/true);
  server_->DropAllWatches();
  ASSERT_TRUE(Eventually([&] { return mirror.replaces == 2; }));
}

TEST_F(KubeWatcherTest, CompactedHistoryRelistsAndCatchesUp) {
  Jobs().Create("ns1", Job("a"));
  Mirror mirror;
  auto watcher = StartWatcher(mirror);
  ASSERT_TRUE(Eventually([&] { return mirror.replaces == 1; }));
  // The watch goes down and stays down (every request fails) while changes happen and
  // the history is compacted past them; the writes go straight to the store.
  testserver::FaultOptions faults;
  faults.error_fraction = 1.0;
  server_->SetFaults(faults);
  server_->DropAllWatches();
  auto& store = server_->store();
  const auto& tj = *store.Find("headroom.dev", "v1alpha1", "trainingjobs");
  store.Delete(tj, "ns1", "a", {});
  store.Create(tj, "ns1", Job("b"));
  store.Compact();
  server_->SetFaults({});
  ASSERT_TRUE(Eventually([&] { return mirror.replaces == 2; }));
  std::lock_guard<std::mutex> lock(mirror.mu);
  EXPECT_EQ(mirror.objects.size(), 1u);
  EXPECT_EQ(mirror.objects.count("ns1/b"), 1u);
  EXPECT_EQ(std::count(mirror.log.begin(), mirror.log.end(), "DELETED a"), 0)
      << "the deletion is learnt from the relist, not from compacted history";
}

TEST_F(KubeWatcherTest, BookmarksAdvanceTheResumePoint) {
  Mirror mirror;
  auto watcher = StartWatcher(mirror);
  ASSERT_TRUE(Eventually([&] { return mirror.replaces == 1; }));
  const std::string before = watcher->last_resource_version();
  ResourceClient pods(*client_, resources::kPods);
  pods.Create("ns1", {{"metadata", {{"name", "p"}}}, {"spec", {{"containers", json::array()}}}});
  const std::string now = std::to_string(server_->store().resource_version());
  ASSERT_TRUE(Eventually([&] { return watcher->last_resource_version() == now; }))
      << "before " << before << ", server at " << now << ", watcher at " << watcher->last_resource_version();
}

}  // namespace
}  // namespace headroom::kubeclient
