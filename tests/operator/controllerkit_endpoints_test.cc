// The operator's HTTP endpoints over real HTTP: /metrics with the docs/design.md names,
// /healthz, and /readyz that turns ready once informers have synced.
#include <gtest/gtest.h>

#include <atomic>

#include "operator/controllerkit/operator_endpoints.h"
#include "operator/kubeclient/rest_client.h"

namespace headroom::controllerkit {
namespace {

// GETs a path and returns (status, body), reading the body through the client's line
// stream (it accepts any content type).
std::pair<int, std::string> Fetch(int port, const std::string& path) {
  kubeclient::KubeConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(port);
  config.source = "endpoints test";
  kubeclient::RestClient client(config);
  std::string body;
  kubeclient::StreamCanceller cancel;
  try {
    client.Stream(
        path, [&](const std::string& line) { body += line + "\n"; }, cancel);
    return {200, body};
  } catch (const kubeclient::ApiError& e) {
    return {e.code(), e.message()};
  }
}

TEST(OperatorEndpointsTest, ServesMetricsHealthAndReadiness) {
  auto metrics = std::make_shared<OperatorMetrics>();
  OperatorEndpoints endpoints("127.0.0.1", 0, metrics);
  std::atomic<bool> synced{false};
  std::atomic<bool> leading{false};
  endpoints.AddHealthCheck("ping", [](std::string*) { return true; });
  endpoints.AddReadinessCheck("informers", [&](std::string* detail) {
    *detail = synced ? "trainingjobs, pods synced" : "waiting for trainingjobs, pods";
    return synced.load();
  });
  endpoints.AddReadinessInfo("leader-election", [&] { return leading ? std::string("leading") : "following"; });
  endpoints.Start();
  ASSERT_GT(endpoints.port(), 0);

  metrics->ObserveReconcile("success", 0.003);
  metrics->ObserveReconcile("error", 0.2);
  metrics->CountGuardAction("restart", "host memory forecast");
  metrics->SetJobsByPhase({{"Running", 3}, {"Failed", 1}});
  auto [code, text] = Fetch(endpoints.port(), "/metrics");
  EXPECT_EQ(code, 200);
  for (const char* needle :
       {"headroom_operator_reconcile_total{result=\"success\"} 1",
        "headroom_operator_reconcile_total{result=\"error\"} 1",
        "headroom_operator_reconcile_total{result=\"requeue\"} 0",
        "headroom_operator_reconcile_duration_seconds_count 2",
        "headroom_operator_guard_actions_total{action=\"restart\",reason=\"host memory forecast\"} 1",
        "headroom_operator_jobs{phase=\"Running\"} 3", "headroom_operator_jobs{phase=\"Pending\"} 0",
        "# TYPE headroom_operator_reconcile_duration_seconds histogram"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle << "\n" << text;
  }

  EXPECT_EQ(Fetch(endpoints.port(), "/healthz").first, 200);
  auto [not_ready, why] = Fetch(endpoints.port(), "/readyz");
  EXPECT_EQ(not_ready, 500);
  EXPECT_NE(why.find("[-]informers failed: waiting for trainingjobs, pods"), std::string::npos) << why;
  synced = true;
  leading = true;
  auto [ready, body] = Fetch(endpoints.port(), "/readyz");
  EXPECT_EQ(ready, 200);
  EXPECT_NE(body.find("[+]informers ok"), std::string::npos) << body;
  EXPECT_NE(body.find("[i]leader-election: leading"), std::string::npos) << body;
  EXPECT_EQ(Fetch(endpoints.port(), "/nope").first, 404);
  endpoints.Stop();
}

}  // namespace
}  // namespace headroom::controllerkit
