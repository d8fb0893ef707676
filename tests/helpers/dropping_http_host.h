// Test support: a minimal HTTP/1.1 host on a raw loopback socket that serves fixed files
// (GET, with "Range: bytes=N-" answered 206) and can drop the connection in the middle of
// a body: it sends the full Content-Length, then only N bytes, then closes the socket —
// what a reset connection or a crashed proxy does to a client, which an HTTP framework's
// own listener cannot be made to do. One connection at a time, "Connection: close".
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdint>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace headroom::testing {

class DroppingHttpHost {
 public:
  // `files`: URL path ("/lfs/<sha>/<name>") -> bytes.
  explicit DroppingHttpHost(std::map<std::string, std::string> files) : files_(std::move(files)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 8) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("dropping HTTP host: cannot listen on loopback");
    }
    url_ = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    thread_ = std::thread([this] { Serve(); });
  }
  ~DroppingHttpHost() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    thread_.join();
    ::close(listen_fd_);
  }
  DroppingHttpHost(const DroppingHttpHost&) = delete;
  DroppingHttpHost& operator=(const DroppingHttpHost&) = delete;

  std::string url() const { return url_; }
  // The next GET sends only `bytes` of its body, then closes the connection.
  void DropNextBodyAfter(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    drop_after_ = bytes;
  }
  // The Range header of every GET served, in order ("" for none).
  std::vector<std::string> ranges() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ranges_;
  }
  int drops() const {
    std::lock_guard<std::mutex> lock(mu_);
    return drops_;
  }

 private:
  void Serve() {
    while (!stopping_) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      Answer(fd);
      ::close(fd);
    }
  }

  static void SendAll(int fd, const char* data, size_t size) {
    while (size > 0) {
      const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
      if (n <= 0) return;
      data += n;
      size -= static_cast<size_t>(n);
    }
  }

  void Answer(int fd) {
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos && ::recv(fd, &c, 1, 0) == 1) head.push_back(c);
    std::istringstream in(head);
    std::string method, path, line, range;
    in >> method >> path;
    while (std::getline(in, line)) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (name != "range") continue;
      const size_t from = line.find_first_not_of(' ', colon + 1);
      range = from == std::string::npos ? "" : line.substr(from, line.find('\r', from) - from);
    }
    const auto file = files_.find(path);
    if (method != "GET" || file == files_.end()) {
      const std::string r = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      SendAll(fd, r.data(), r.size());
      return;
    }
    const std::string& bytes = file->second;
    const size_t from = range.rfind("bytes=", 0) == 0 ? std::stoull(range.substr(6)) : 0;
    const std::string body = from < bytes.size() ? bytes.substr(from) : std::string();
    std::string r = from > 0 ? "HTTP/1.1 206 Partial Content\r\n" : "HTTP/1.1 200 OK\r\n";
    if (from > 0) {
      r += "Content-Range: bytes " + std::to_string(from) + "-" + std::to_string(bytes.size() - 1) + "/" +
           std::to_string(bytes.size()) + "\r\n";
    }
    r += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
    size_t send = body.size();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ranges_.push_back(range);
      if (drop_after_ >= 0 && static_cast<size_t>(drop_after_) < body.size()) {
        send = static_cast<size_t>(drop_after_);
        ++drops_;
      }
      drop_after_ = -1;
    }
    SendAll(fd, r.data(), r.size());
    SendAll(fd, body.data(), send);
    if (send < body.size()) ::shutdown(fd, SHUT_RDWR);  // the connection drops mid-body
  }

  std::map<std::string, std::string> files_;
  int listen_fd_ = -1;
  std::string url_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  int64_t drop_after_ = -1;
  int drops_ = 0;
  std::vector<std::string> ranges_;
};

}  // namespace headroom::testing
