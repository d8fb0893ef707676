// The bounded HTTP GET that fetches a worker's /metrics (read by
// core/protocol/step_metrics.h).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "operator/trainingjob/http_scrape.h"

namespace headroom::trainingjob {
namespace {

using namespace std::chrono_literals;

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
