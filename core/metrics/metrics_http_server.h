// MetricsHttpServer: a small HTTP/1.x server for Prometheus scrapes and probes — the
// transport half of prometheus-cpp's core/transport split, written here because the
// transport Debian ships (prometheus-cpp-pull on civetweb) runs its handlers on threads
// with a fixed 100 KiB stack (civetweb built with USE_STACK_SIZE=102400): a scrape's
// mg_printf could overflow it and kill the worker with SIGSEGV at random (seen under the
// operator's scrapes and Prometheus's, never under a quiet `headroom run`).
//
// What it serves: GET (or HEAD) of a registered path answers 200 with the handler's body;
// any other path 404, any other method 405. One request per connection
// ("Connection: close"), which is what Prometheus and the kubelet's probes cope with
// and all a per-step gauge set needs. One thread accepts and answers in turn, each
// connection bounded by a timeout so a stalled client cannot wedge the endpoint.
//
// Contract:
//   - Handlers run on the server's thread; they must be thread-safe against the code that
//     updates what they read (prometheus-cpp's metric types are).
//   - Start() binds (port 0: any free port, see port()) or throws std::runtime_error naming
//     the address; Stop() (and the destructor) closes the socket and joins the thread.
//   - Handlers are registered before Start().
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "core/base/non_copyable.h"

namespace prometheus {
class Collectable;
}

namespace headroom::metrics {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; version=0.0.4; charset=utf-8";
  std::string body;
};

class MetricsHttpServer : NonCopyable {
 public:
  using Handler = std::function<HttpResponse()>;

  MetricsHttpServer(std::string bind_host, int port);
  ~MetricsHttpServer();

  void Handle(const std::string& path, Handler handler);
  // Serves the collectable in the Prometheus text format at path.
  void HandleCollectable(const std::string& path, std::weak_ptr<prometheus::Collectable> collectable);

  void Start();
  void Stop();
  int port() const { return port_; }

  // How long one connection may take to send its request and receive the answer.
  static constexpr std::chrono::milliseconds kConnectionTimeout{5000};

 private:
  void Serve();
  void Answer(int fd);

  std::string bind_host_;
  int port_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};  // Stop() writes here to end the accept loop's poll
  std::map<std::string, Handler> handlers_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
};

// The Prometheus text format of a collectable's current values.
std::string SerializeText(prometheus::Collectable& collectable);

}  // namespace headroom::metrics
