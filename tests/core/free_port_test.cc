// FreePort hands out a port that can be bound at once, and names the address when it
// cannot.
#include "core/net/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

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
