// Reading a worker's /metrics back into a StepRecord, and the bounded HTTP GET that
// fetches it.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "operator/trainingjob/http_scrape.h"
#include "operator/trainingjob/worker_metrics_text.h"

namespace headroom::trainingjob {
namespace {

using namespace std::chrono_literals;

// What prometheus-cpp serves for a worker at step 7 (names from core/metrics/names.h).
const char* kWorkerPage = R"(# HELP headroom_worker_step Last completed step
# TYPE headroom_worker_step gauge
headroom_worker_step{job="drill",rank="0"} 7
# TYPE headroom_worker_host_memory_bytes gauge
headroom_worker_host_memory_bytes{job="drill",rank="0"} 536870912
headroom_worker_host_memory_peak_bytes{job="drill",rank="0"} 6.0e+08
headroom_worker_host_memory_limit_bytes{job="drill",rank="0"} 1073741824
headroom_worker_gpu_memory_reserved_bytes{job="drill",rank="0"} 0
headroom_worker_memory_growth_bytes_per_step{job="drill",rank="0",resource="host"} 50331648
headroom_worker_oom_forecast_steps{job="drill",rank="0",resource="host"} +Inf
headroom_worker_reward_mean{job="drill",rank="0"} 0.4375
headroom_worker_loss{job="drill",rank="0"} -0.012
headroom_worker_kl{job="drill",rank="0"} NaN
headroom_worker_step_duration_seconds_count{job="drill",rank="0"} 7
headroom_worker_step_duration_seconds_sum{job="drill",rank="0"} 3.5
headroom_worker_step_duration_seconds_bucket{job="drill",rank="0",le="+Inf"} 7
)";

TEST(WorkerMetricsText, ParsesSamplesLabelsAndSpecialValues) {
  std::vector<MetricSample> s = ParsePrometheusText(
      "# comment\n\nm{a=\"x \\\"q\\\"\",b=\"1\\n2\"} 3 1700000000\nbare 4.5\nbroken{a=\"x\" 1\ninf -Inf\r\n");
  ASSERT_EQ(s.size(), 3u) << "the malformed line is skipped, the rest kept";
  EXPECT_EQ(s[0].name, "m");
  EXPECT_EQ(s[0].labels.at("a"), "x \"q\"");
  EXPECT_EQ(s[0].labels.at("b"), "1\n2");
  EXPECT_EQ(s[0].value, 3);
  EXPECT_EQ(s[1].name, "bare");
  EXPECT_EQ(s[1].value, 4.5);
  EXPECT_TRUE(std::isinf(s[2].value) && s[2].value < 0);
}

TEST(WorkerMetricsText, BuildsTheStepRecordFromTheWorkerSeries) {
  std::optional<protocol::StepRecord> r = WorkerStepFromMetrics(ParsePrometheusText(kWorkerPage));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->step, 7);
  EXPECT_EQ(r->host_bytes, 536870912);
  EXPECT_EQ(r->host_peak_bytes, 600000000);
  EXPECT_EQ(r->host_limit_bytes, 1073741824);
  // The worker's own forecast, from the {resource="host"} series; +Inf = never.
  EXPECT_EQ(r->host_growth_bytes_per_step, 50331648);
  EXPECT_EQ(r->host_forecast_steps, -1);
  EXPECT_DOUBLE_EQ(r->reward_mean, 0.4375);
  EXPECT_DOUBLE_EQ(r->loss, -0.012);
  EXPECT_EQ(r->kl, 0) << "NaN reads as unknown";
  EXPECT_DOUBLE_EQ(r->step_seconds, 0.5);
  EXPECT_EQ(r->heldout_accuracy, -1) << "no held-out series: never measured";
}

TEST(WorkerMetricsText, TheLatestHeldOutAccuracyIsOnEveryRecord) {
  const std::string page = std::string(kWorkerPage) + "headroom_worker_heldout_accuracy{job=\"drill\",rank=\"0\"} 0.605\n";
  std::optional<protocol::StepRecord> r = WorkerStepFromMetrics(ParsePrometheusText(page));
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(r->heldout_accuracy, 0.605);
}

TEST(WorkerMetricsText, NoStepYetIsNoRecord) {
  EXPECT_FALSE(WorkerStepFromMetrics(ParsePrometheusText("headroom_worker_step{rank=\"0\"} 0\n")));
  EXPECT_FALSE(WorkerStepFromMetrics(ParsePrometheusText("process_cpu_seconds_total 3\n")));
}

TEST(WorkerMetricsText, AModelDownloadBeforeTheFirstStepIsItsFetchRecord) {
  const std::vector<MetricSample> page = ParsePrometheusText(
      "# TYPE headroom_worker_model_fetch_done_bytes gauge\n"
      "headroom_worker_model_fetch_done_bytes{file=\"model.safetensors\",job=\"j\",rank=\"1\",repo=\"org/name\","
      "revision=\"main\"} 1048576\n"
      "headroom_worker_model_fetch_total_bytes{file=\"model.safetensors\",job=\"j\",rank=\"1\",repo=\"org/name\","
      "revision=\"main\"} 988097824\n");
  EXPECT_FALSE(WorkerStepFromMetrics(page)) << "no step yet";
  const std::optional<protocol::ModelFetchRecord> f = WorkerModelFetchFromMetrics(page);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->repo, "org/name");
  EXPECT_EQ(f->revision, "main");
  EXPECT_EQ(f->file, "model.safetensors");
  EXPECT_EQ(f->done_bytes, 1048576);
  EXPECT_EQ(f->total_bytes, 988097824);
  EXPECT_FALSE(WorkerModelFetchFromMetrics(ParsePrometheusText(kWorkerPage))) << "a training worker fetches nothing";
  EXPECT_FALSE(WorkerModelFetchFromMetrics(
      ParsePrometheusText("headroom_worker_model_fetch_done_bytes 0\nheadroom_worker_model_fetch_total_bytes 0\n")));
}

// A one-shot server on a free loopback port: answers with `reply` (or never, when empty).
class OneShotServer {
 public:
  explicit OneShotServer(std::string reply) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 4);
    thread_ = std::thread([this] {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      (void)::recv(c, buf, sizeof buf, 0);
      if (reply_.empty()) {
        std::this_thread::sleep_for(500ms);  // a worker that accepts and hangs
      } else {
        (void)::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
      }
      ::close(c);
    });
  }
  ~OneShotServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  std::string reply_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

TEST(HttpGet, ReadsPlainAndChunkedBodies) {
  OneShotServer plain("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nheadroom_worker_step 3\n");
  std::string why;
  std::optional<std::string> body = HttpGet("127.0.0.1", plain.port(), "/metrics", 1s, &why);
  ASSERT_TRUE(body) << why;
  EXPECT_EQ(*body, "headroom_worker_step 3\n");

  OneShotServer chunked("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  body = HttpGet("127.0.0.1", chunked.port(), "/metrics", 1s, &why);
  ASSERT_TRUE(body) << why;
  EXPECT_EQ(*body, "hello world");
}

TEST(HttpGet, FailsFastAndSaysWhy) {
  OneShotServer not_found("HTTP/1.1 404 Not Found\r\n\r\n");
  std::string why;
  EXPECT_FALSE(HttpGet("127.0.0.1", not_found.port(), "/metrics", 1s, &why));
  EXPECT_NE(why.find("404"), std::string::npos) << why;

  OneShotServer hangs("");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(HttpGet("127.0.0.1", hangs.port(), "/metrics", 200ms, &why));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "bounded by the deadline, not by the server";
  EXPECT_NE(why.find("timed out"), std::string::npos) << why;

  EXPECT_FALSE(HttpGet("pod.example", 9400, "/metrics", 200ms, &why));
  EXPECT_NE(why.find("not an IPv4"), std::string::npos) << why;
}

}  // namespace
}  // namespace headroom::trainingjob
