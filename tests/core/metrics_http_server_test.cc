// MetricsHttpServer: what Prometheus and a kubelet probe see, over real sockets — the
// text format of a registry, 404/405/400, HEAD, a stalled client that must not wedge the
// endpoint, and scrapes racing with updates (the scenario that crashed the civetweb
// transport it replaces).
#include "core/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace headroom::metrics {
namespace {

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends raw bytes, returns everything the server answered until it closed.
std::string Exchange(int port, const std::string& request) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

std::string Get(int port, const std::string& path) {
  return Exchange(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
}

TEST(MetricsHttpServer, ServesARegistryInTheTextFormat) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto& gauge = prometheus::BuildGauge().Name("headroom_test_step").Help("h").Register(*registry).Add({{"rank", "0"}});
  gauge.Set(42);
  MetricsHttpServer server("127.0.0.1", 0);
  server.HandleCollectable("/metrics", registry);
  server.Start();
  ASSERT_GT(server.port(), 0);
  const std::string r = Get(server.port(), "/metrics?x=1");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << r;
  EXPECT_NE(r.find("headroom_test_step{rank=\"0\"} 42"), std::string::npos) << r;
  const size_t body = r.find("\r\n\r\n") + 4;
  EXPECT_NE(r.find("Content-Length: " + std::to_string(r.size() - body)), std::string::npos) << r;
}

TEST(MetricsHttpServer, AnswersErrorsWithTheirCodes) {
  MetricsHttpServer server("127.0.0.1", 0);
  server.Handle("/healthz", [] { return HttpResponse{200, "text/plain", "ok\n"}; });
  server.Handle("/boom", []() -> HttpResponse { throw std::runtime_error("no data"); });
  server.Start();
  EXPECT_EQ(Get(server.port(), "/nope").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(Exchange(server.port(), "POST /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_EQ(Exchange(server.port(), "garbage\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  const std::string boom = Get(server.port(), "/boom");
  EXPECT_EQ(boom.rfind("HTTP/1.1 500", 0), 0u);
  EXPECT_NE(boom.find("no data"), std::string::npos);
  const std::string head = Exchange(server.port(), "HEAD /healthz HTTP/1.0\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(head.substr(head.find("\r\n\r\n") + 4), "") << "HEAD has no body";
  EXPECT_NE(Get(server.port(), "/healthz").find("\r\n\r\nok\n"), std::string::npos);
}

TEST(MetricsHttpServer, AStalledClientDoesNotBlockTheNextScrapeForever) {
  MetricsHttpServer server("127.0.0.1", 0);
  server.Handle("/healthz", [] { return HttpResponse{200, "text/plain", "ok\n"}; });
  server.Start();
  const int stalled = Connect(server.port());  // connects, never sends a request
  ASSERT_GE(stalled, 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NE(Get(server.port(), "/healthz").find("ok"), std::string::npos);
  EXPECT_LE(std::chrono::steady_clock::now() - start, MetricsHttpServer::kConnectionTimeout + std::chrono::seconds(2));
  ::close(stalled);
}

TEST(MetricsHttpServer, ScrapesRacingWithUpdatesAllSucceed) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto& counter = prometheus::BuildCounter().Name("headroom_test_total").Help("h").Register(*registry).Add({});
  MetricsHttpServer server("127.0.0.1", 0);
  server.HandleCollectable("/metrics", registry);
  server.Start();
  std::atomic<bool> done{false};
  std::thread updater([&] {
    while (!done) counter.Increment();
  });
  int ok = 0;
  for (int i = 0; i < 300; ++i) ok += Get(server.port(), "/metrics").find("headroom_test_total ") != std::string::npos;
  done = true;
  updater.join();
  EXPECT_EQ(ok, 300);
}

TEST(MetricsHttpServer, ABusyPortIsAClearError) {
  MetricsHttpServer first("127.0.0.1", 0);
  first.Start();
  MetricsHttpServer second("127.0.0.1", first.port());
  try {
    second.Start();
    FAIL() << "bound a port that is in use";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(first.port())), std::string::npos) << e.what();
  }
}

TEST(MetricsHttpServer, StopEndsServingAndCanBeRepeated) {
  MetricsHttpServer server("127.0.0.1", 0);
  server.Handle("/healthz", [] { return HttpResponse{}; });
  server.Start();
  const int port = server.port();
  server.Stop();
  server.Stop();
  EXPECT_LT(Connect(port), 0) << "still accepting after Stop()";
}

}  // namespace
}  // namespace headroom::metrics
