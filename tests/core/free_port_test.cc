// FreePort hands out a port that can be bound at once, below the kernel's ephemeral range
// (no connection's source port takes it before its owner binds it), and names the address
// when it cannot; FreePorts a run of them.
#include "core/net/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>
#include <string>

namespace headroom::net {
namespace {

bool CanListenOn(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(fd, 1) == 0;
  ::close(fd);
  return ok;
}

TEST(FreePort, IsALoopbackPortThatCanBeBound) {
  const int port = FreePort();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  EXPECT_TRUE(CanListenOn(port)) << port;
}

int EphemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768;
  in >> low;
  return low;
}

TEST(FreePort, IsBelowTheEphemeralRange) {
  if (EphemeralLow() <= 10000 + 8) GTEST_SKIP() << "this machine's ephemeral range starts at " << EphemeralLow();
  for (int i = 0; i < 20; ++i) {
    const int port = FreePort();
    EXPECT_GE(port, 10000);
    EXPECT_LT(port, EphemeralLow());
  }
}

TEST(FreePort, ARunOfPortsCanAllBeBound) {
  const int first = FreePorts(4);
  for (int port = first; port < first + 4; ++port) EXPECT_TRUE(CanListenOn(port)) << port;
  if (EphemeralLow() > 10000 + 8) EXPECT_LT(first + 3, EphemeralLow());
  EXPECT_THROW(FreePorts(0), std::runtime_error);
}

TEST(FreePort, ABadAddressIsNamed) {
  try {
    FreePort("not-an-address");
    FAIL() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not-an-address"), std::string::npos) << e.what();
  }
  // An address this machine does not have cannot be bound.
  EXPECT_THROW(FreePort("192.0.2.1"), std::runtime_error);
}

}  // namespace
}  // namespace headroom::net
