// The Gloo backend with 2-3 ranks as forked processes on loopback: every collective
// against the same computation done locally, and the failure modes that must end in a
// CommunicatorError on the survivors within a bounded time, never a hang.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <csignal>
#include <cstdlib>

#include "tests/worker/helpers/multirank.h"
#include "worker/comm/communicator_factory.h"

namespace headroom::worker {
namespace {

using headroom::testing::Describe;
using headroom::testing::FreePort;
using headroom::testing::RankContext;
using headroom::testing::RunRanks;
using namespace std::chrono_literals;

#ifdef HEADROOM_HAVE_GLOO

std::unique_ptr<Communicator> Connect(int rank, int world, int port, std::chrono::milliseconds timeout = 10s) {
  return MakeCommunicator("gloo", rank, world, "127.0.0.1", port, timeout);
}

// Rank r's data for a collective: deterministic, different per rank.
torch::Tensor RankData(int rank, int64_t n, torch::ScalarType dtype) {
  return (torch::arange(n, torch::kFloat64) * (rank + 1) + rank * 7 - 5).to(dtype);
}

void Expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

void CollectivesMatchLocal(int world) {
  const int port = FreePort();
  auto results = RunRanks(world, [&](const RankContext& ctx) {
    torch::set_num_threads(1);
    auto comm = Connect(ctx.rank, world, port);
    Expect(comm->rank() == ctx.rank && comm->world_size() == world && comm->backend() == "gloo", "identity");
    for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kInt64}) {
      std::vector<torch::Tensor> all;
      for (int r = 0; r < world; ++r) all.push_back(RankData(r, 3 * world * 5, dtype));
      auto stacked = torch::stack(all);
      const std::string tag = std::string(c10::toString(dtype));

      torch::Tensor sum = RankData(ctx.rank, 3 * world * 5, dtype);
      comm->all_reduce(sum, ReduceOp::kSum);
      Expect(torch::equal(sum, stacked.sum(0).to(dtype)), "all_reduce sum " + tag);
      torch::Tensor mx = RankData(ctx.rank, 3 * world * 5, dtype);
      comm->all_reduce(mx, ReduceOp::kMax);
      Expect(torch::equal(mx, std::get<0>(stacked.max(0))), "all_reduce max " + tag);
      torch::Tensor mn = RankData(ctx.rank, 3 * world * 5, dtype);
      comm->all_reduce(mn, ReduceOp::kMin);
      Expect(torch::equal(mn, std::get<0>(stacked.min(0))), "all_reduce min " + tag);

      // reduce_scatter: chunk r of the sum lands on rank r.
      torch::Tensor out = torch::zeros({15}, dtype);
      comm->reduce_scatter(RankData(ctx.rank, 15 * world, dtype), out, ReduceOp::kSum);
      Expect(torch::equal(out, stacked.sum(0).to(dtype).slice(0, 15 * ctx.rank, 15 * (ctx.rank + 1))),
             "reduce_scatter sum " + tag);
      comm->reduce_scatter(RankData(ctx.rank, 15 * world, dtype), out, ReduceOp::kMax);
      Expect(torch::equal(out, std::get<0>(stacked.max(0)).slice(0, 15 * ctx.rank, 15 * (ctx.rank + 1))),
             "reduce_scatter max " + tag);

      // all_gather: rank r's input at chunk r, on every rank.
      torch::Tensor gathered = torch::zeros({world, 4}, dtype);
      comm->all_gather(RankData(ctx.rank, 4, dtype), gathered);
      for (int r = 0; r < world; ++r) Expect(torch::equal(gathered[r], RankData(r, 4, dtype)), "all_gather " + tag);

      torch::Tensor b = RankData(ctx.rank, 9, dtype);
      comm->broadcast(b, world - 1);
      Expect(torch::equal(b, RankData(world - 1, 9, dtype)), "broadcast " + tag);
    }
    // A non-contiguous view is reduced in place all the same.
    torch::Tensor matrix = RankData(ctx.rank, 12, torch::kFloat32).view({3, 4});
    torch::Tensor column = matrix.select(1, 1);
    comm->all_reduce(column, ReduceOp::kSum);
    float expected = 0;
    for (int r = 0; r < world; ++r) expected += RankData(r, 12, torch::kFloat32)[5].item<float>();
    Expect(matrix[1][1].item<float>() == expected, "all_reduce on a strided view");
    // A large buffer crosses Gloo's segment size and the ring's chunking.
    torch::Tensor big = torch::full({(1 << 20) * world + 0}, static_cast<float>(ctx.rank + 1));
    torch::Tensor big_out = torch::zeros({1 << 20});
    comm->reduce_scatter(big, big_out, ReduceOp::kSum);
    Expect(big_out.eq(world * (world + 1) / 2.0f).all().item<bool>(), "large reduce_scatter");
    comm->barrier();
  });
  for (const auto& r : results) EXPECT_EQ(r.exit_code, 0) << Describe(results);
}

TEST(GlooCommunicator, CollectivesMatchLocalComputationWithTwoRanks) { CollectivesMatchLocal(2); }
TEST(GlooCommunicator, CollectivesMatchLocalComputationWithThreeRanks) { CollectivesMatchLocal(3); }

TEST(GlooCommunicator, BadShapesAndDtypesAreNamed) {
  const int port = FreePort();
  auto results = RunRanks(2, [&](const RankContext& ctx) {
    auto comm = Connect(ctx.rank, 2, port);
    torch::Tensor out = torch::zeros({3});
    try {
      comm->reduce_scatter(torch::zeros({5}), out, ReduceOp::kSum);
      ctx.Report("no error");
    } catch (const CommunicatorError& e) {
      ctx.Report(e.what());
    }
    torch::Tensor b = torch::zeros({2}, torch::kBool);
    try {
      comm->broadcast(b, 0);
    } catch (const CommunicatorError& e) {
      ctx.Report(std::string(" | ") + e.what());
    }
    // Argument errors are detected before any traffic: the communicator still works.
    torch::Tensor t = torch::ones({4});
    comm->all_reduce(t);
    Expect(t.eq(2).all().item<bool>(), "still usable");
  });
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 0) << Describe(results);
    EXPECT_NE(r.message.find("input has 5 elements, expected world size 2 x 3"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("dtype Bool is not supported"), std::string::npos) << r.message;
  }
}

TEST(GlooCommunicator, RendezvousNamesTheRankThatNeverArrived) {
  const int port = FreePort();
  // Rank 1 of 2 never starts: rank 0 must give up at its 2 s timeout, naming rank 1.
  auto results = RunRanks(
      1, [&](const RankContext&) { Connect(0, 2, port, 2s); }, 20s);
  ASSERT_EQ(results[0].exit_code, 1) << Describe(results);
  EXPECT_NE(results[0].message.find("rank(s) 1 of world size 2 never arrived"), std::string::npos)
      << results[0].message;
  EXPECT_GE(results[0].seconds, 1.9);
  EXPECT_LT(results[0].seconds, 8.0);
}

TEST(GlooCommunicator, RankWithoutRankZeroNamesTheAddress) {
  const int port = FreePort();
  auto results = RunRanks(
      1, [&](const RankContext&) { Connect(1, 2, port, 2s); }, 20s);
  ASSERT_EQ(results[0].exit_code, 1) << Describe(results);
  EXPECT_NE(results[0].message.find("could not reach rank 0 at 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << results[0].message;
  EXPECT_LT(results[0].seconds, 8.0);
}

// Both ranks all-reduce in a loop; rank 1 dies by SIGKILL, or freezes (sleeps with its
// sockets open), mid-loop. Rank 0 must throw CommunicatorError, and later calls too.
enum class PeerFault { kKilled, kFrozen };

void SurvivorThrows(PeerFault fault, std::chrono::milliseconds timeout, double max_seconds) {
  const int port = FreePort();
  auto results = RunRanks(
      2,
      [&](const RankContext& ctx) {
    torch::set_num_threads(1);
    auto comm = Connect(ctx.rank, 2, port, timeout);
    torch::Tensor t = torch::ones({1 << 16});
    for (int i = 0;; ++i) {
      if (ctx.rank == 1 && i == 50) {
        if (fault == PeerFault::kKilled) ::raise(SIGKILL);
        std::this_thread::sleep_for(timeout + 3s);
        ::_exit(3);
      }
      const auto start = std::chrono::steady_clock::now();
      try {
        comm->all_reduce(t);
      } catch (const CommunicatorError& e) {
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        ctx.Report("first error after " + std::to_string(waited) + " s: " + e.what());
        try {
          comm->barrier();
        } catch (const CommunicatorError& again) {
          ctx.Report(std::string(" | then: ") + again.what());
        }
        throw std::runtime_error("done");
      }
      t.fill_(1);
    }
      },
      std::chrono::milliseconds(static_cast<int64_t>(max_seconds * 1000) + 5000));
  const auto& survivor = results[0];
  EXPECT_EQ(survivor.exit_code, 1) << Describe(results);
  EXPECT_NE(survivor.message.find("gloo all_reduce failed on rank 0 of 2"), std::string::npos) << survivor.message;
  EXPECT_NE(survivor.message.find("then: gloo barrier on rank 0: communicator unusable"), std::string::npos)
      << survivor.message;
  EXPECT_LT(survivor.seconds, max_seconds) << Describe(results);
  if (fault == PeerFault::kKilled) {
    EXPECT_EQ(results[1].signal, SIGKILL);
  }
}

TEST(GlooCommunicator, PeerKilledMidLoopMakesSurvivorThrow) { SurvivorThrows(PeerFault::kKilled, 10s, 8.0); }

TEST(GlooCommunicator, FrozenPeerMakesSurvivorThrowAtTheTimeout) { SurvivorThrows(PeerFault::kFrozen, 2s, 8.0); }

#endif  // HEADROOM_HAVE_GLOO

TEST(CommunicatorFactory, ReadsTorchrunEnvironment) {
  ::setenv("RANK", "2", 1);
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("MASTER_ADDR", "10.0.0.7", 1);
  ::setenv("MASTER_PORT", "29511", 1);
  ::setenv("HEADROOM_RENDEZVOUS_TIMEOUT_SECONDS", "7", 1);
  auto options = CommunicatorOptionsFromEnv("gloo");
  EXPECT_EQ(options.rank, 2);
  EXPECT_EQ(options.world_size, 4);
  EXPECT_EQ(options.master_addr, "10.0.0.7");
  EXPECT_EQ(options.master_port, 29511);
  EXPECT_EQ(options.rendezvous_timeout, std::chrono::seconds(7));
  EXPECT_EQ(options.collective_timeout, std::chrono::seconds(300));

  ::setenv("MASTER_PORT", "70000", 1);
  try {
    CommunicatorOptionsFromEnv("gloo");
    ADD_FAILURE() << "port 70000 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_PORT='70000'"), std::string::npos) << e.what();
  }
  ::setenv("MASTER_PORT", "29511", 1);
  ::setenv("RANK", "4", 1);
  EXPECT_THROW(CommunicatorOptionsFromEnv("gloo"), std::invalid_argument);
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "HEADROOM_RENDEZVOUS_TIMEOUT_SECONDS"}) {
    ::unsetenv(name);
  }
  EXPECT_EQ(CommunicatorOptionsFromEnv("local").world_size, 1);
}

TEST(CommunicatorFactory, UnknownBackendAndLocalWithManyRanksAreRefused) {
  EXPECT_THROW(MakeCommunicator("mpi", 0, 1, "127.0.0.1", 1, 1s), CommunicatorError);
  EXPECT_THROW(MakeCommunicator("local", 0, 2, "127.0.0.1", 1, 1s), CommunicatorError);
  EXPECT_EQ(MakeCommunicator("local", 0, 1, "127.0.0.1", 1, 1s)->backend(), "local");
}

}  // namespace
}  // namespace headroom::worker
