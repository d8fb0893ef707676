// The rendezvous store on its own: set/get/add/wait, a barrier between two clients, and
// every timeout naming what it waited for. (No fork here: threads are fine.)
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>

#include <thread>

#include "tests/worker/helpers/multirank.h"
#include "worker/comm/tcp_store.h"

namespace headroom::worker {
namespace {

using namespace std::chrono_literals;

TcpStoreOptions Options(int rank, int world, int port, std::chrono::milliseconds timeout = 5s) {
  TcpStoreOptions options;
  options.port = port;
  options.rank = rank;
  options.world_size = world;
  options.timeout = timeout;
  return options;
}

TEST(TcpStore, SetGetAddAcrossClients) {
  const int port = headroom::testing::FreePort();
  auto rank0 = TcpStore::Connect(Options(0, 2, port));
  auto rank1 = TcpStore::Connect(Options(1, 2, port));
  std::string binary("a\0b\xff", 4);
  rank0->Set("blob", binary);
  EXPECT_EQ(rank1->Get("blob"), binary);
  EXPECT_FALSE(rank1->TryGet("absent").has_value());
  EXPECT_EQ(rank0->Add("counter", 5), 5);
  EXPECT_EQ(rank1->Add("counter", -2), 3);
  EXPECT_EQ(rank0->local_address(), "127.0.0.1");
  EXPECT_EQ(rank1->master(), "127.0.0.1:" + std::to_string(port));
  // A large value crosses many TCP segments.
  std::string big(3 << 20, 'x');
  rank1->Set("big", big);
  EXPECT_EQ(rank0->Get("big").size(), big.size());
}

TEST(TcpStore, GetWaitsForALaterSet) {
  const int port = headroom::testing::FreePort();
  auto rank0 = TcpStore::Connect(Options(0, 2, port));
  std::thread setter([port] {
    auto rank1 = TcpStore::Connect(Options(1, 2, port));
    std::this_thread::sleep_for(200ms);
    rank1->Set("late", "value");
  });
  EXPECT_EQ(rank0->Get("late"), "value");
  setter.join();
}

TEST(TcpStore, RendezvousMeetsAndNamesMissingRanks) {
  const int port = headroom::testing::FreePort();
  auto rank0 = TcpStore::Connect(Options(0, 3, port, 1500ms));
  std::thread other([port] {
    auto rank2 = TcpStore::Connect(Options(2, 3, port, 1500ms));
    EXPECT_THROW(rank2->Rendezvous("start"), CommunicatorError);
  });
  const auto begin = std::chrono::steady_clock::now();
  try {
    rank0->Rendezvous("start");
    FAIL() << "rendezvous passed without rank 1";
  } catch (const CommunicatorError& e) {
    EXPECT_NE(std::string(e.what()).find("rank(s) 1 of world size 3 never arrived"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 5s);
  other.join();
}

TEST(TcpStore, WaitTimeoutNamesTheKeys) {
  const int port = headroom::testing::FreePort();
  auto store = TcpStore::Connect(Options(0, 1, port));
  store->Set("here", "1");
  try {
    store->Wait({"here", "missing"}, 300ms);
    FAIL();
  } catch (const CommunicatorError& e) {
    EXPECT_NE(std::string(e.what()).find("key(s) 'missing'"), std::string::npos) << e.what();
  }
}

TEST(TcpStore, PortInUseAndBadRanksAreNamed) {
  const int port = headroom::testing::FreePort();
  auto first = TcpStore::Connect(Options(0, 1, port));
  try {
    TcpStore::Connect(Options(0, 1, port));
    FAIL();
  } catch (const CommunicatorError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen on port " + std::to_string(port)), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(TcpStore::Connect(Options(2, 2, port)), CommunicatorError);
}

TEST(TcpStore, LosingRankZeroIsAnErrorNotAHang) {
  const int port = headroom::testing::FreePort();
  auto rank0 = TcpStore::Connect(Options(0, 2, port));
  auto rank1 = TcpStore::Connect(Options(1, 2, port, 2s));
  rank0.reset();
  EXPECT_THROW(rank1->Get("anything"), CommunicatorError);
}

}  // namespace
}  // namespace headroom::worker
