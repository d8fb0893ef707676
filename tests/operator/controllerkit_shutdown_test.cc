// Graceful shutdown as the operator does it: SIGTERM -> the queue stops taking keys,
// reconciles in flight finish within a deadline, the lease is released so a standby
// takes over at once. A second signal exits immediately.
#include <gtest/gtest.h>

#include <csignal>
#include <thread>

#include "operator/controllerkit/controller.h"
#include "operator/controllerkit/leader_election.h"
#include "operator/controllerkit/shutdown_signal.h"
#include "tests/operator/testserver/api_server.h"

namespace headroom::controllerkit {
namespace {

using namespace std::chrono_literals;

TEST(ShutdownTest, SigtermDrainsInFlightWorkAndReleasesTheLease) {
  testserver::TestApiServer server;
  server.Start();
  kubeclient::RestClient client(server.ClientConfig("ns1"));
  kubeclient::ResourceClient leases(client, kubeclient::resources::kLeases);

  LeaderElectionConfig le;
  le.ns = "ns1";
  le.lease_name = "headroom-operator";
  le.identity = "op-1";
  le.lease_duration = 1500ms;
  le.renew_deadline = 1000ms;
  le.retry_period = 200ms;
  std::atomic<bool> leading{false};
  le.on_started_leading = [&] { leading = true; };
  LeaderElector elector(leases, le);
  std::thread election([&] { elector.Run(); });
  for (int i = 0; i < 300 && !leading; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(leading);

  auto queue = std::make_shared<WorkQueue>();
  std::atomic<int> started{0}, finished{0};
  Controller controller(
      "jobs", queue,
      [&](const std::string&) {
    ++started;
    std::this_thread::sleep_for(300ms);  // a reconcile in the middle of its API calls
    ++finished;
    return Result{};
      },
      nullptr, 2);
  controller.Start();
  queue->Add("ns1/a");
  queue->Add("ns1/b");
  for (int i = 0; i < 100 && started < 2; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(started, 2);

  // What the operator's main does: on the signal, stop the controller with a deadline.
  ShutdownSignal& signal = ShutdownSignal::Install();
  std::atomic<bool> drained{false};
  std::thread stopper([&] {
    signal.Wait();
    drained = controller.Stop(5s);
  });
  std::raise(SIGTERM);
  ASSERT_TRUE(signal.WaitFor(2s));
  EXPECT_EQ(signal.signals_received(), 1);
  for (int i = 0; i < 200 && !queue->shutting_down(); ++i) std::this_thread::sleep_for(5ms);
  queue->Add("ns1/late");  // refused: shutting down
  stopper.join();
  EXPECT_TRUE(drained) << "in-flight reconciles finish within the deadline";
  EXPECT_EQ(finished, 2);
  EXPECT_EQ(started, 2) << "nothing new started after the signal";
  elector.Stop();
  election.join();
  auto lease = leases.Get("ns1", "headroom-operator");
  EXPECT_FALSE(lease["spec"].contains("holderIdentity")) << "released: " << lease.dump();
}

TEST(ShutdownDeathTest, SecondSignalExitsAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ShutdownSignal::Install();
        std::raise(SIGTERM);
        std::raise(SIGTERM);
        std::this_thread::sleep_for(5s);
        std::exit(0);
      },
      ::testing::ExitedWithCode(1), "");
}

}  // namespace
}  // namespace headroom::controllerkit
