#include "core/net/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

namespace headroom::net {
namespace {

// Ports below this are left alone (well-known services, and the range where admins put
// fixed ones).
constexpr int kLowestPort = 10000;
constexpr int kTries = 200;

sockaddr_in Address(const std::string& address) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    throw std::runtime_error("no free port on \"" + address + "\": not an IPv4 address");
  }
  return addr;
}

// Binds `port` (0: the kernel's choice) on `addr`; the port bound, or -1 with errno set.
int TryBind(sockaddr_in addr, int port) {
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// The first port of the kernel's ephemeral range; 32768 (its default) when unreadable.
int EphemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  if (in >> low && low > 0) return low;
  return 32768;
}

}  // namespace

int FreePorts(int count, const std::string& address) {
  const sockaddr_in addr = Address(address);
  if (count < 1) throw std::runtime_error("FreePorts: count " + std::to_string(count) + " < 1");
  // A socket at all? Names the system's reason when not (a bad address, no sockets left).
  if (TryBind(addr, 0) < 0) throw std::runtime_error("no free port on " + address + ": " + std::strerror(errno));
  const int last_first = EphemeralLow() - count;
  if (last_first >= kLowestPort) {
    std::mt19937 random(std::random_device{}());
    std::uniform_int_distribution<int> pick(kLowestPort, last_first);
    for (int attempt = 0; attempt < kTries; ++attempt) {
      const int first = pick(random);
      int n = 0;
      while (n < count && TryBind(addr, first + n) == first + n) ++n;
      if (n == count) return first;
    }
  }
  // Nothing below the ephemeral range (a machine that starts it low): the kernel's choice.
  for (int attempt = 0; attempt < kTries; ++attempt) {
    const int first = TryBind(addr, 0);
    if (first < 0) break;
    int n = 1;
    while (n < count && first + n < 65536 && TryBind(addr, first + n) == first + n) ++n;
    if (n == count) return first;
  }
  throw std::runtime_error("no " + std::to_string(count) + " consecutive free ports on " + address);
}

int FreePort(const std::string& address) { return FreePorts(1, address); }

}  // namespace headroom::net
