// Work queue and rate limiters: de-duplication, dirty re-queue, delays, backoff math,
// the token bucket, shutdown draining. Time is a FakeClock wherever timing matters.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "operator/controllerkit/controller.h"
#include "operator/controllerkit/work_queue.h"

namespace headroom::controllerkit {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<FakeClock> MakeClock() { return std::make_shared<FakeClock>(); }

TEST(WorkQueueTest, AddingAQueuedKeyAgainQueuesItOnce) {
  WorkQueue q(MakeClock());
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(q.Get(), "a");
  EXPECT_EQ(q.Get(), "b");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, KeyAddedWhileProcessingIsRequeuedAfterDone) {
  WorkQueue q(MakeClock());
  q.Add("a");
  ASSERT_EQ(q.Get(), "a");
  q.Add("a");  // changed again while a worker holds it
  q.Add("a");
  EXPECT_EQ(q.Len(), 0u) << "not handed to a second worker while the first has it";
  EXPECT_FALSE(q.TryGet().has_value());
  q.Done("a");
  EXPECT_EQ(q.Len(), 1u) << "dirty: queued once more";
  EXPECT_EQ(q.Get(), "a");
  q.Done("a");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, AddAfterWaitsForTheClockAndEarliestWins) {
  auto clock = MakeClock();
  WorkQueue q(clock);
  q.AddAfter("a", 10s);
  q.AddAfter("a", 3s);   // earlier: replaces
  q.AddAfter("a", 20s);  // later: ignored
  q.AddAfter("b", 5s);
  EXPECT_EQ(q.Waiting(), 2u);
  EXPECT_FALSE(q.TryGet().has_value());
  clock->Advance(3s);
  EXPECT_EQ(q.TryGet(), "a");
  EXPECT_FALSE(q.TryGet().has_value());
  clock->Advance(2s);
  EXPECT_EQ(q.TryGet(), "b");
  EXPECT_EQ(q.Waiting(), 0u);
}

TEST(WorkQueueTest, DelayedKeysComeDueInTimeOrderAndAReplacedTimeLeavesNothingBehind) {
  auto clock = MakeClock();
  WorkQueue q(clock);
  // Added in the reverse of their due order, and not in key order either.
  for (int i = 0; i < 50; ++i) q.AddAfter("k" + std::to_string(i), std::chrono::seconds(100 - i));
  q.AddAfter("k0", 1s);  // the last to fall due moves to the front
  clock->Advance(1s);
  EXPECT_EQ(q.TryGet(), "k0");
  q.Done("k0");
  clock->Advance(50s);  // t=51: k49 (due 51) only
  EXPECT_EQ(q.TryGet(), "k49");
  q.Done("k49");
  EXPECT_FALSE(q.TryGet().has_value());
  clock->Advance(48s);  // t=99: k48 .. k1, earliest first
  for (int i = 48; i >= 1; --i) {
    ASSERT_EQ(q.TryGet(), "k" + std::to_string(i));
    q.Done("k" + std::to_string(i));
  }
  clock->Advance(10s);  // past k0's replaced time (100): nothing of it was left behind
  EXPECT_FALSE(q.TryGet().has_value());
  EXPECT_EQ(q.Waiting(), 0u);
}

TEST(WorkQueueTest, BlockingGetWakesWhenADelayedKeyFallsDue) {
  auto clock = MakeClock();
  WorkQueue q(clock);
  q.AddAfter("a", 1h);
  std::atomic<bool> got{false};
  std::thread worker([&] {
    EXPECT_EQ(q.Get(), "a");
    got = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(got);
  clock->Advance(1h);
  worker.join();
  EXPECT_TRUE(got);
}

TEST(RateLimiterTest, ItemBackoffDoublesFrom5msTo1000s) {
  ItemExponentialFailureRateLimiter l(5ms, 1000s);
  EXPECT_EQ(l.When("a"), Clock::Duration(5ms));
  EXPECT_EQ(l.When("a"), Clock::Duration(10ms));
  EXPECT_EQ(l.When("a"), Clock::Duration(20ms));
  EXPECT_EQ(l.When("b"), Clock::Duration(5ms)) << "per item";
  EXPECT_EQ(l.NumRequeues("a"), 3);
  for (int i = 0; i < 100; ++i) l.When("a");
  EXPECT_EQ(l.When("a"), Clock::Duration(1000s)) << "capped, and no overflow after 100 failures";
  l.Forget("a");
  EXPECT_EQ(l.NumRequeues("a"), 0);
  EXPECT_EQ(l.When("a"), Clock::Duration(5ms));
  // 5 ms * 2^17 = 655.36 s; 2^18 would be 1310.72 s > cap.
  ItemExponentialFailureRateLimiter m(5ms, 1000s);
  for (int i = 0; i < 17; ++i) m.When("x");
  EXPECT_EQ(m.When("x"), Clock::Duration(655360ms));
  EXPECT_EQ(m.When("x"), Clock::Duration(1000s));
}

TEST(RateLimiterTest, BucketAllowsBurstOf100ThenTenPerSecond) {
  auto clock = MakeClock();
  BucketRateLimiter l(10, 100, clock);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(l.When("k" + std::to_string(i)), Clock::Duration::zero()) << i;
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(l.When("x")), 100ms);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(l.When("y")), 200ms) << "reservations queue up";
  clock->Advance(1s);  // 10 tokens back; 2 were owed
  for (int i = 0; i < 8; ++i) EXPECT_EQ(l.When("z"), Clock::Duration::zero());
  EXPECT_GT(l.When("z"), Clock::Duration::zero());
}

TEST(RateLimiterTest, DefaultControllerLimiterTakesTheLongerDelay) {
  auto clock = MakeClock();
  auto l = DefaultControllerRateLimiter(clock);
  EXPECT_EQ(l->When("a"), Clock::Duration(5ms));
  EXPECT_EQ(l->When("a"), Clock::Duration(10ms));
  for (int i = 0; i < 98; ++i) l->When("k" + std::to_string(i));  // bucket now empty
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(l->When("fresh")), 100ms)
      << "a fresh item's 5 ms is overruled by the bucket";
  EXPECT_EQ(l->NumRequeues("a"), 2);
}

TEST(WorkQueueTest, AddRateLimitedBacksOffAndForgetResets) {
  auto clock = MakeClock();
  WorkQueue q(clock);
  q.AddRateLimited("a");  // 5 ms
  EXPECT_FALSE(q.TryGet().has_value());
  clock->Advance(5ms);
  ASSERT_EQ(q.TryGet(), "a");
  q.Done("a");
  q.AddRateLimited("a");  // 10 ms
  clock->Advance(9ms);
  EXPECT_FALSE(q.TryGet().has_value());
  clock->Advance(1ms);
  ASSERT_EQ(q.TryGet(), "a");
  q.Done("a");
  EXPECT_EQ(q.NumRequeues("a"), 2);
  q.Forget("a");
  EXPECT_EQ(q.NumRequeues("a"), 0);
}

TEST(WorkQueueTest, ShutDownHandsOutWhatIsQueuedThenEnds) {
  WorkQueue q(MakeClock());
  q.Add("a");
  q.AddAfter("later", 1h);
  q.ShutDown();
  q.Add("b");  // refused after shutdown
  EXPECT_EQ(q.Get(), "a");
  EXPECT_EQ(q.Get(), std::nullopt);
}

TEST(WorkQueueTest, ShutDownWithDrainWaitsForInFlightWork) {
  WorkQueue q;
  q.Add("a");
  ASSERT_EQ(q.Get(), "a");
  std::thread finisher([&] {
    std::this_thread::sleep_for(100ms);
    q.Done("a");
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(q.ShutDownWithDrain(5s));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 90ms);
  finisher.join();

  WorkQueue stuck;
  stuck.Add("x");
  ASSERT_EQ(stuck.Get(), "x");
  EXPECT_FALSE(stuck.ShutDownWithDrain(50ms)) << "the deadline bounds the wait";
}

TEST(ControllerTest, ReconcilesRetriesFailuresAndNeverRunsAKeyTwiceAtOnce) {
  auto queue = std::make_shared<WorkQueue>();
  auto metrics = std::make_shared<OperatorMetrics>();
  std::mutex mu;
  std::map<std::string, int> calls;
  std::set<std::string> running;
  std::atomic<bool> overlap{false};
  Controller c(
      "test", queue,
      [&](const std::string& key) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!running.insert(key).second) overlap = true;
      ++calls[key];
    }
    std::this_thread::sleep_for(2ms);
    int n;
    {
      std::lock_guard<std::mutex> lock(mu);
      running.erase(key);
      n = calls[key];
    }
    if (key == "flaky" && n < 3) throw std::runtime_error("transient");
    return Result{};
      },
      metrics, 4);
  c.Start();
  for (int round = 0; round < 20; ++round) {
    for (const char* key : {"a", "b", "c", "flaky"}) queue->Add(key);
    std::this_thread::sleep_for(1ms);
  }
  for (int i = 0; i < 500; ++i) {
    std::lock_guard<std::mutex> lock(mu);
    if (calls["flaky"] >= 3) break;
  }
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(c.Stop(5s));
  EXPECT_FALSE(overlap) << "a key must never be reconciled by two workers at once";
  EXPECT_GE(calls["flaky"], 3) << "failures are retried";
  EXPECT_EQ(queue->NumRequeues("flaky"), 0) << "forgotten after it succeeded";
  const std::string text = metrics->Render();
  EXPECT_NE(text.find("headroom_operator_reconcile_total{result=\"error\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("headroom_operator_reconcile_duration_seconds_count"), std::string::npos);
}

// The operator dashboard's queue panel reads these gauges: they must say what the queue
// holds at the moment of the scrape.
TEST(ControllerTest, ExportsItsQueueDepthWhenMetricsAreRendered) {
  auto metrics = std::make_shared<OperatorMetrics>();
  auto queue = std::make_shared<WorkQueue>(MakeClock());
  Controller c(
      "trainingjob", queue, [](const std::string&) { return Result{}; }, metrics, 1);
  queue->Add("ns/a");
  queue->Add("ns/b");
  queue->AddAfter("ns/c", 10s);
  std::string text = metrics->Render();
  EXPECT_NE(text.find(R"(headroom_operator_workqueue_depth{name="trainingjob"} 2)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(headroom_operator_workqueue_waiting{name="trainingjob"} 1)"), std::string::npos) << text;
  ASSERT_EQ(queue->Get(), "ns/a");  // handed out, not done
  text = metrics->Render();
  EXPECT_NE(text.find(R"(headroom_operator_workqueue_depth{name="trainingjob"} 1)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(headroom_operator_workqueue_processing{name="trainingjob"} 1)"), std::string::npos) << text;
  queue->Done("ns/a");
  ASSERT_EQ(queue->Get(), "ns/b");  // leave the queue empty: the controller's Stop drains it
  queue->Done("ns/b");
}

}  // namespace
}  // namespace headroom::controllerkit
