// The operator under a failing API server: 10% of requests answered 500/429 and watches
// dropped at random (and all of them every 250 ms, once with 410 Gone). Every job still converges to its pods and its end phase, and no pod
// is ever created twice (every ADDED pod event is checked: one per name and generation).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <map>
#include <mutex>

#include "tests/operator/test_cluster.h"

namespace headroom::trainingjob::testing {
namespace {

TEST(OperatorChaos, ConvergesWithoutDuplicatePodsWhenTheApiFails) {
  REQUIRE_BINARY(BinaryPath("headroom-fake-worker"));
  Cluster::Options o;
  o.worker_env = {{"FAKE_STEP_SECONDS", "0.03"}, {"FAKE_GUARD_AT_STEP", "3"}};
  Cluster c(o);

  // Every pod creation the store ever sees, by (name, generation label).
  std::mutex mu;
  std::map<std::string, int> creations;
  const testserver::ResourceInfo* pods = c.server().store().Find("", "v1", "pods");
  ASSERT_NE(pods, nullptr);
  const int64_t watch =
      c.server().store().Subscribe(*pods, "", "", testserver::LabelSelector(), testserver::FieldSelector(),
                                   [&](const std::string& type, const json& pod) {
    if (type == "ADDED") {
      std::lock_guard<std::mutex> lock(mu);
      ++creations[pod["metadata"].value("name", "") + "@g" +
                  pod["metadata"]["labels"].value(manifests::kLabelGeneration, "?")];
    }
    return true;
      });

  const std::vector<std::string> names = {"chaos-a", "chaos-b", "chaos-c", "chaos-d", "chaos-e", "chaos-f"};
  for (const std::string& name : names) {
    JobShape shape;
    shape.name = name;
    shape.steps = 30;
    c.Create(JobObject(shape));
  }
  testserver::FaultOptions faults;
  faults.error_fraction = 0.10;
  faults.drop_watch_probability = 0.05;
  faults.seed = 7;
  c.server().SetFaults(faults);
  c.StartOperator();
  // Besides the random drops: every watch cut every 250 ms, and one 410 Gone (relist).
  std::atomic<bool> done{false};
  std::thread cutter([&] {
    for (int i = 0; !done; ++i) {
      std::this_thread::sleep_for(250ms);
      if (i == 2) c.server().ForceGoneOnNextWatch();
      c.server().DropAllWatches();
    }
  });

  for (const std::string& name : names) EXPECT_TRUE(c.WaitForPhase(name, "Succeeded", 90s)) << name;
  done = true;
  cutter.join();
  EXPECT_GE(c.server().injected_faults(), 10) << "the faults really happened";
  for (const std::string& name : names) {
    const json status = c.Status(name);
    EXPECT_EQ(status.value("generation", 0), 2) << name << ": one guard restart, no stray relaunch: " << status.dump();
  }
  c.server().store().Unsubscribe(watch);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(creations.size(), 2 * names.size()) << "one pod per job and generation (2 generations each)";
  for (const auto& [pod, n] : creations) EXPECT_EQ(n, 1) << pod << " was created " << n << " times";
}

}  // namespace
}  // namespace headroom::trainingjob::testing
