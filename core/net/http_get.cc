#include "core/net/http_get.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace headroom::net {

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Waits for `events` on fd until the deadline; false on timeout or error.
bool WaitFor(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

std::optional<std::string> Fail(std::string* why, const std::string& reason) {
  if (why) *why = reason;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> HttpGet(const std::string& ipv4, int port, const std::string& path,
                                   std::chrono::milliseconds timeout, std::string* why, size_t max_bytes) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string where = ipv4 + ":" + std::to_string(port) + path;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (port <= 0 || port > 65535 || ::inet_pton(AF_INET, ipv4.c_str(), &addr.sin_addr) != 1) {
    return Fail(why, "not an IPv4 address and port: " + where);
  }
  Fd s{::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  if (s.fd < 0) return Fail(why, std::string("socket: ") + std::strerror(errno));
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) return Fail(why, "connect " + where + ": " + std::strerror(errno));
    if (!WaitFor(s.fd, POLLOUT, deadline)) return Fail(why, "connect " + where + ": timed out");
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return Fail(why, "connect " + where + ": " + std::strerror(err));
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + ipv4 + ":" + std::to_string(port) +
                              "\r\nAccept: text/plain\r\nConnection: close\r\n\r\n";
  size_t sent = 0;
  while (sent < request.size()) {
    if (!WaitFor(s.fd, POLLOUT, deadline)) return Fail(why, "send " + where + ": timed out");
    ssize_t n = ::send(s.fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return Fail(why, "send " + where + ": " + std::strerror(errno));
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string response;
  char buf[16384];
  for (;;) {
    if (!WaitFor(s.fd, POLLIN, deadline)) return Fail(why, "read " + where + ": timed out");
    ssize_t n = ::recv(s.fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return Fail(why, "read " + where + ": " + std::strerror(errno));
    }
    response.append(buf, static_cast<size_t>(n));
    if (response.size() > max_bytes) return Fail(why, "answer from " + where + " is over the size limit");
  }
  const size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos) return Fail(why, "malformed answer from " + where);
  // Status line: "HTTP/1.x 200 OK".
  const size_t sp = response.find(' ');
  if (sp == std::string::npos || response.compare(sp + 1, 3, "200") != 0) {
    return Fail(why, where + " answered " + response.substr(0, response.find("\r\n")));
  }
  std::string headers = response.substr(0, header_end);
  for (char& c : headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string body = response.substr(header_end + 4);
  if (headers.find("transfer-encoding: chunked") != std::string::npos) {
    std::string plain;
    size_t i = 0;
    while (i < body.size()) {
      size_t eol = body.find("\r\n", i);
      if (eol == std::string::npos) break;
      size_t len = std::strtoul(body.substr(i, eol - i).c_str(), nullptr, 16);
      if (len == 0) break;
      plain.append(body, eol + 2, len);
      i = eol + 2 + len + 2;
    }
    body = std::move(plain);
  }
  return body;
}

}  // namespace headroom::net
