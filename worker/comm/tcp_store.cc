// TcpStore: rank 0 runs a poll() loop serving a map; clients send one framed request at
// a time and read one framed reply.
//
// Frame, request:  u8 op | u32 key length | u32 value length | key | value
// Frame, reply:    u8 found | u32 length | payload
// Integers are little-endian as on every machine we run on (x86-64, aarch64).
// Blocking waits are done by the client polling GET with a short back-off: rendezvous
// traffic is a handful of keys, and a stateless server cannot hang on a dead client.
#include "worker/comm/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

namespace headroom::worker {
namespace {

constexpr uint8_t kOpSet = 1;
constexpr uint8_t kOpGet = 2;
constexpr uint8_t kOpAdd = 3;
constexpr size_t kHeaderBytes = 9;
constexpr uint32_t kMaxFieldBytes = 64u << 20;  // keys and values are small; reject garbage

using Clock = std::chrono::steady_clock;

std::string ErrnoText() { return std::strerror(errno); }

void PutU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Writes all of `data`; false on error (the peer is gone).
bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool RecvAll(int fd, char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::recv(fd, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void SetTimeouts(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

std::string SecondsText(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

}  // namespace

// ---------------------------------------------------------------------------------------
class TcpStore::Server {
 public:
  explicit Server(int port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw CommunicatorError("rendezvous: socket(): " + ErrnoText());
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      std::string why = ErrnoText();
      ::close(listen_fd_);
      throw CommunicatorError("rendezvous: rank 0 cannot listen on port " + std::to_string(port) +
                              " (MASTER_PORT): " + why);
    }
    if (::listen(listen_fd_, 128) != 0) {
      std::string why = ErrnoText();
      ::close(listen_fd_);
      throw CommunicatorError("rendezvous: listen(): " + why);
    }
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
      ::close(listen_fd_);
      throw CommunicatorError("rendezvous: pipe(): " + ErrnoText());
    }
    thread_ = std::thread([this] { Loop(); });
  }

  ~Server() {
    stop_ = true;
    char c = 0;
    [[maybe_unused]] ssize_t ignored = ::write(wake_[1], &c, 1);
    thread_.join();
    for (auto& [fd, buf] : clients_) ::close(fd);
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

 private:
  void Loop() {
    while (!stop_) {
      std::vector<pollfd> fds;
      fds.push_back({wake_[0], POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (auto& [fd, buf] : clients_) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents) return;
      if (fds[1].revents & POLLIN) {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          // A client that stops reading must not stall the server for long.
          SetTimeouts(fd, std::chrono::seconds(10));
          clients_[fd];
        }
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        if (!Serve(fds[i].fd)) {
          ::close(fds[i].fd);
          clients_.erase(fds[i].fd);
        }
      }
    }
  }

  // Reads what is available and answers every complete request; false drops the client.
  bool Serve(int fd) {
    char chunk[65536];
    ssize_t n = ::recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    std::string& buf = clients_[fd];
    buf.append(chunk, static_cast<size_t>(n));
    while (buf.size() >= kHeaderBytes) {
      uint8_t op = static_cast<uint8_t>(buf[0]);
      uint32_t key_len = GetU32(buf.data() + 1);
      uint32_t value_len = GetU32(buf.data() + 5);
      if (key_len > kMaxFieldBytes || value_len > kMaxFieldBytes) return false;
      size_t total = kHeaderBytes + key_len + value_len;
      if (buf.size() < total) break;
      std::string key = buf.substr(kHeaderBytes, key_len);
      std::string value = buf.substr(kHeaderBytes + key_len, value_len);
      buf.erase(0, total);
      bool found = true;
      std::string reply;
      switch (op) {
        case kOpSet: data_[key] = value; break;
        case kOpGet: {
          auto it = data_.find(key);
          found = it != data_.end();
          if (found) reply = it->second;
          break;
        }
        case kOpAdd: {
          int64_t current = 0;
          auto it = data_.find(key);
          if (it != data_.end()) current = std::stoll(it->second);
          current += std::stoll(value);
          data_[key] = std::to_string(current);
          reply = data_[key];
          break;
        }
        default: return false;
      }
      std::string frame(1, static_cast<char>(found ? 1 : 0));
      PutU32(frame, static_cast<uint32_t>(reply.size()));
      frame += reply;
      if (!SendAll(fd, frame.data(), frame.size())) return false;
    }
    return true;
  }

  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::map<int, std::string> clients_;  // fd -> bytes received, not yet a full request
  std::map<std::string, std::string> data_;
};

// ---------------------------------------------------------------------------------------
TcpStore::TcpStore(const TcpStoreOptions& options) : options_(options) {}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
  server_.reset();
}

std::string TcpStore::master() const { return options_.host + ":" + std::to_string(options_.port); }

std::unique_ptr<TcpStore> TcpStore::Connect(const TcpStoreOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    throw CommunicatorError("rendezvous: rank " + std::to_string(options.rank) + " out of range for world size " +
                            std::to_string(options.world_size));
  }
  if (options.port <= 0 || options.port > 65535) {
    throw CommunicatorError("rendezvous: MASTER_PORT " + std::to_string(options.port) + " is not a TCP port");
  }
  std::unique_ptr<TcpStore> store(new TcpStore(options));
  if (options.rank == 0) store->server_ = std::make_unique<Server>(options.port);

  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  const auto deadline = Clock::now() + options.timeout;
  std::string last_error = "no attempt made";
  auto backoff = std::chrono::milliseconds(20);
  while (true) {
    addrinfo* result = nullptr;
    int rc = ::getaddrinfo(options.host.c_str(), std::to_string(options.port).c_str(), &hints, &result);
    if (rc != 0) {
      last_error = std::string("cannot resolve MASTER_ADDR: ") + ::gai_strerror(rc);
    } else {
      for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
        int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
          store->fd_ = fd;
          break;
        }
        last_error = ErrnoText();
        ::close(fd);
      }
      ::freeaddrinfo(result);
    }
    if (store->fd_ >= 0) break;
    if (Clock::now() + backoff >= deadline) {
      throw CommunicatorError("rendezvous: rank " + std::to_string(options.rank) + " could not reach rank 0 at " +
                              store->master() + " within " + SecondsText(options.timeout) + " (last error: " +
                              last_error + "); is rank 0 running and MASTER_ADDR/MASTER_PORT right?");
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  int one = 1;
  ::setsockopt(store->fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  SetTimeouts(store->fd_, options.timeout);

  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  if (::getsockname(store->fd_, reinterpret_cast<sockaddr*>(&local), &len) == 0 && local.ss_family == AF_INET) {
    char text[INET_ADDRSTRLEN] = {0};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&local)->sin_addr, text, sizeof(text));
    store->local_address_ = text;
  } else {
    store->local_address_ = "127.0.0.1";
  }
  return store;
}

std::pair<bool, std::string> TcpStore::Request(uint8_t op, const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string frame(1, static_cast<char>(op));
  PutU32(frame, static_cast<uint32_t>(key.size()));
  PutU32(frame, static_cast<uint32_t>(value.size()));
  frame += key;
  frame += value;
  char header[5];
  if (!SendAll(fd_, frame.data(), frame.size()) || !RecvAll(fd_, header, sizeof(header))) {
    throw CommunicatorError("rendezvous: lost the store at " + master() + " (rank 0 gone?) while accessing key '" +
                            key + "': " + ErrnoText());
  }
  std::string payload(GetU32(header + 1), '\0');
  if (!RecvAll(fd_, payload.data(), payload.size())) {
    throw CommunicatorError("rendezvous: lost the store at " + master() + " while reading key '" + key + "'");
  }
  return {header[0] != 0, std::move(payload)};
}

void TcpStore::Set(const std::string& key, const std::string& value) { Request(kOpSet, key, value); }

std::optional<std::string> TcpStore::TryGet(const std::string& key) {
  auto [found, value] = Request(kOpGet, key, "");
  if (!found) return std::nullopt;
  return std::move(value);
}

std::string TcpStore::Get(const std::string& key) {
  Wait({key});
  return *TryGet(key);
}

int64_t TcpStore::Add(const std::string& key, int64_t delta) {
  return std::stoll(Request(kOpAdd, key, std::to_string(delta)).second);
}

void TcpStore::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto backoff = std::chrono::milliseconds(1);
  std::vector<std::string> missing = keys;
  while (true) {
    std::vector<std::string> still;
    for (const auto& key : missing) {
      if (!TryGet(key)) still.push_back(key);
    }
    missing.swap(still);
    if (missing.empty()) return;
    if (Clock::now() >= deadline) {
      std::string names;
      for (const auto& key : missing) names += (names.empty() ? "'" : ", '") + key + "'";
      throw CommunicatorError("rendezvous: rank " + std::to_string(options_.rank) + " waited " + SecondsText(timeout) +
                              " at " + master() + " for key(s) " + names + " that no rank set");
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
}

void TcpStore::Rendezvous(const std::string& name) {
  const std::string base = "rendezvous/" + name + "/";
  Set(base + std::to_string(options_.rank), "1");
  const auto deadline = Clock::now() + options_.timeout;
  auto backoff = std::chrono::milliseconds(1);
  std::vector<int> missing;
  for (int r = 0; r < options_.world_size; ++r) missing.push_back(r);
  while (true) {
    std::vector<int> still;
    for (int r : missing) {
      if (!TryGet(base + std::to_string(r))) still.push_back(r);
    }
    missing.swap(still);
    if (missing.empty()) return;
    if (Clock::now() >= deadline) {
      std::string ranks;
      for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      throw CommunicatorError("rendezvous '" + name + "' at " + master() + " timed out after " +
                              SecondsText(options_.timeout) + " on rank " + std::to_string(options_.rank) +
                              ": rank(s) " + ranks + " of world size " + std::to_string(options_.world_size) +
                              " never arrived (HEADROOM_RENDEZVOUS_TIMEOUT_SECONDS sets the wait)");
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace headroom::worker
