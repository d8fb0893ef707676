#include "core/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <prometheus/collectable.h>
#include <prometheus/text_serializer.h>

namespace headroom::metrics {
namespace {

constexpr size_t kMaxRequestBytes = 16 * 1024;

const char* StatusText(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 500: return "Internal Server Error";
    default: return "Status";
  }
}

// Waits for `events` until the deadline; false on timeout, error or hang-up without data.
bool WaitFor(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return (p.revents & (events | POLLHUP)) != 0;
    if (n < 0 && errno != EINTR) return false;
  }
}

bool SendAll(int fd, const std::string& data, std::chrono::steady_clock::time_point deadline) {
  size_t sent = 0;
  while (sent < data.size()) {
    if (!WaitFor(fd, POLLOUT, deadline)) return false;
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string SerializeText(prometheus::Collectable& collectable) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, collectable.Collect());
  return out.str();
}

MetricsHttpServer::MetricsHttpServer(std::string bind_host, int port) : bind_host_(std::move(bind_host)), port_(port) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Handle(const std::string& path, Handler handler) { handlers_[path] = std::move(handler); }

void MetricsHttpServer::HandleCollectable(const std::string& path, std::weak_ptr<prometheus::Collectable> collectable) {
  Handle(path, [collectable] {
    HttpResponse r;
    if (auto c = collectable.lock()) {
      r.body = SerializeText(*c);
    } else {
      r.status = 404;
      r.body = "gone\n";
    }
    return r;
  });
}

void MetricsHttpServer::Start() {
  const std::string where = bind_host_ + ":" + std::to_string(port_);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(port_);
  const int gai = ::getaddrinfo(bind_host_.empty() ? nullptr : bind_host_.c_str(), port.c_str(), &hints, &found);
  if (gai != 0) throw std::runtime_error("cannot listen on " + where + ": " + ::gai_strerror(gai));
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
      listen_fd_ = fd;
      break;
    }
    error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) throw std::runtime_error("cannot listen on " + where + ": " + error);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    throw std::runtime_error("cannot listen on " + where + ": pipe: " + std::strerror(errno));
  }
  stopping_ = false;
  thread_ = std::thread([this] { Serve(); });
}

void MetricsHttpServer::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  const char byte = 'x';
  (void)!::write(wake_pipe_[1], &byte, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
  listen_fd_ = wake_pipe_[0] = wake_pipe_[1] = -1;
}

void MetricsHttpServer::Serve() {
  while (!stopping_) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    const int n = ::poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;  // the client gave up already, or out of descriptors for a moment
    Answer(fd);
    ::close(fd);
  }
}

void MetricsHttpServer::Answer(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + kConnectionTimeout;
  std::string request;
  char buf[4096];
  while (request.find("\r\n\r\n") == std::string::npos && request.find("\n\n") == std::string::npos) {
    if (request.size() > kMaxRequestBytes || !WaitFor(fd, POLLIN, deadline)) return;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;  // a client may half-close after its request
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return;
    }
    request.append(buf, static_cast<size_t>(n));
  }
  // Request line: METHOD SP TARGET SP VERSION
  const std::string line = request.substr(0, request.find_first_of("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  HttpResponse response;
  bool head = false;
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    response = {400, "text/plain; charset=utf-8", "malformed request line\n"};
  } else {
    const std::string method = line.substr(0, sp1);
    std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
    if (const size_t q = path.find('?'); q != std::string::npos) path.resize(q);
    head = method == "HEAD";
    auto it = handlers_.find(path);
    if (method != "GET" && !head) {
      response = {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
    } else if (it == handlers_.end()) {
      response = {404, "text/plain; charset=utf-8", "not found: " + path + "\n"};
    } else {
      try {
        response = it->second();
      } catch (const std::exception& e) {
        response = {500, "text/plain; charset=utf-8", std::string("handler failed: ") + e.what() + "\n"};
      }
    }
  }
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " + StatusText(response.status) +
                    "\r\nContent-Type: " + response.content_type +
                    "\r\nContent-Length: " + std::to_string(response.body.size()) + "\r\nConnection: close\r\n\r\n";
  if (!head) out += response.body;
  SendAll(fd, out, deadline);
}

}  // namespace headroom::metrics
