// informer_bench: what the client and controller machinery cost, against the in-process
// test API server, printed as ratios against baselines measured in the same run.
//   1. Initial sync of N objects through an Informer (paginated list, JSON parse, cache,
//      indexes, handler dispatch) vs one raw List call of the same objects: the
//      machinery's overhead over the bare HTTP + JSON round trip.
//   2. Watch delivery: writes made straight to the store vs the rate at which they reach
//      the informer's handlers over the chunked watch stream.
//   3. Work-queue round trip (Add, Get, Done) per key vs a mutex-protected std::deque.
//   4. Resident memory of the informer cache per object (the goal: the operator
//      under 64 MiB with 500 jobs and their pods).
// Usage: informer_bench [objects=2000]
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "operator/controllerkit/informer.h"
#include "operator/controllerkit/work_queue.h"
#include "tests/operator/testserver/api_server.h"

using namespace headroom;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Resident set after handing freed heap back to the kernel, so transient parse buffers
// do not count as cache. (The in-process server's own objects were created before the
// first reading and are not part of the difference.)
long RssKiB() {
  malloc_trim(0);
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

json Pod(int i) {
  const std::string job = "job-" + std::to_string(i / 4);
  return {
      {"metadata",
       {{"name", job + "-worker-" + std::to_string(i % 4)},
        {"labels", {{"headroom.dev/job-name", job}, {"headroom.dev/rank", std::to_string(i % 4)}}},
        {"ownerReferences",
         {{{"apiVersion", "headroom.dev/v1alpha1"},
           {"kind", "TrainingJob"},
           {"name", job},
           {"uid", "uid-" + job},
           {"controller", true}}}}}},
      {"spec",
       {{"containers",
         {{{"name", "worker"},
           {"image", "headroom-worker:0.1.0"},
           {"command", {"headroom-worker", "--job", "/etc/headroom/job.yaml"}},
           {"env", {{{"name", "RANK"}, {"value", std::to_string(i % 4)}}, {{"name", "WORLD_SIZE"}, {"value", "4"}}}},
           {"resources", {{"limits", {{"memory", "4Gi"}, {"cpu", "2"}}}}}}}}}}};
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2000;
  testserver::TestApiServer server;
  server.Start();
  auto& store = server.store();
  const auto& pods = *store.Find("", "v1", "pods");
  for (int i = 0; i < n; ++i) store.Create(pods, "bench", Pod(i));
  kubeclient::RestClient client(server.ClientConfig("bench"));
  kubeclient::ResourceClient pod_client(client, kubeclient::resources::kPods);

  // 1. Sync vs raw list.
  auto t0 = Clock::now();
  json raw = pod_client.List("bench");
  const double raw_list = Seconds(Clock::now() - t0);
  const long rss_before = RssKiB();
  controllerkit::Informer::Options options;
  options.watch.ns = "bench";
  options.watch.page_size = 500;
  controllerkit::Informer informer(pod_client, options);
  informer.AddIndex("owner", controllerkit::ControllerUidIndex());
  std::atomic<int64_t> delivered{0};
  informer.AddEventHandlers({[&](const json&) { ++delivered; }, [&](const json&, const json&) { ++delivered; },
                             [&](const json&) { ++delivered; }});
  t0 = Clock::now();
  informer.Start();
  informer.WaitForSync(std::chrono::minutes(2));
  const double sync = Seconds(Clock::now() - t0);
  const long rss_after = RssKiB();
  std::printf("objects                      %d (raw list %zu items)\n", n, raw["items"].size());
  std::printf("raw list                     %.3f s\n", raw_list);
  std::printf("informer initial sync        %.3f s  ratio %.2fx of raw list\n", sync, sync / raw_list);
  std::printf("informer cache RSS           %.1f KiB per object (%.1f MiB total)\n",
              static_cast<double>(rss_after - rss_before) / n, (rss_after - rss_before) / 1024.0);

  // 2. Watch delivery vs store write rate.
  const int updates = n;
  const int64_t before = delivered.load();
  t0 = Clock::now();
  for (int i = 0; i < updates; ++i) {
    store.Patch(pods, "bench", kubeclient::Name(Pod(i)),
                {{"metadata", {{"annotations", {{"tick", std::to_string(i)}}}}}}, "application/merge-patch+json", "");
  }
  const double write_time = Seconds(Clock::now() - t0);
  while (delivered.load() - before < updates && Seconds(Clock::now() - t0) < 120) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double deliver_time = Seconds(Clock::now() - t0);
  std::printf("store writes                 %.0f /s\n", updates / write_time);
  std::printf("watch events to handlers     %.0f /s  ratio %.2fx of the write rate\n", updates / deliver_time,
              write_time / deliver_time);

  // 3. Work queue vs a locked deque.
  const int keys = 200000;
  controllerkit::WorkQueue queue;
  t0 = Clock::now();
  for (int i = 0; i < keys; ++i) {
    const std::string key = "bench/job-" + std::to_string(i % 1000);
    queue.Add(key);
    auto got = queue.Get();
    queue.Done(*got);
  }
  const double wq = Seconds(Clock::now() - t0);
  std::mutex mu;
  std::deque<std::string> dq;
  t0 = Clock::now();
  for (int i = 0; i < keys; ++i) {
    std::lock_guard<std::mutex> lock(mu);
    dq.push_back("bench/job-" + std::to_string(i % 1000));
    std::string s = std::move(dq.front());
    dq.pop_front();
  }
  const double baseline = Seconds(Clock::now() - t0);
  std::printf("work queue add/get/done      %.2f us per key  ratio %.2fx of a locked deque\n", wq / keys * 1e6,
              wq / baseline);
  informer.Stop();
  server.Stop();
  return 0;
}
