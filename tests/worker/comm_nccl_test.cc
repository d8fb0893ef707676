// The NCCL backend on one device: start-up through the TcpStore, every collective on
// device buffers through the raw (stream) API, the event-based ordering contract, and
// the blocking barrier. Skipped cleanly where there is no CUDA device (CI) or no NCCL.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "tests/worker/helpers/multirank.h"
#include "worker/comm/communicator_factory.h"

#ifdef HEADROOM_HAVE_NCCL
#include "worker/comm/nccl_communicator.h"
#endif

namespace headroom::worker {
namespace {

#ifdef HEADROOM_HAVE_NCCL

bool HaveCudaDevice() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

std::vector<float> Download(const void* device, size_t n) {
  std::vector<float> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

// A pod's ranks, one per device (LOCAL_RANK = rank, as the pod's launcher sets it): each
// on cuda:LOCAL_RANK, an all-reduce over them sums every rank's value. Needs two devices.
// First in this file: its ranks are forked, and CUDA initialised in this process by an
// earlier test would not survive a fork.
TEST(NcclCommunicator, SeveralLocalRanksEachOnItsOwnDevice) {
  // Counted in a child: CUDA initialised in this process would not survive the forks below.
  int devices = 0;
  const auto probe = headroom::testing::RunRanks(1, [](const headroom::testing::RankContext& ctx) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    ctx.Report(std::to_string(count));
  });
  if (!probe.empty() && !probe[0].message.empty()) devices = std::atoi(probe[0].message.c_str());
  if (devices < 2) GTEST_SKIP() << "needs two CUDA devices, this machine has " << devices;
  const int world = std::min(devices, 4);
  const int port = headroom::testing::FreePort();
  const auto results = headroom::testing::RunRanks(world, [&](const headroom::testing::RankContext& ctx) {
    CommunicatorOptions options;
    options.backend = "nccl";
    options.rank = ctx.rank;
    options.world_size = world;
    options.local_rank = ctx.rank;
    options.master_port = port;
    options.rendezvous_timeout = std::chrono::seconds(30);
    options.collective_timeout = std::chrono::seconds(30);
    NcclCommunicator comm(options);
    if (comm.device() != torch::Device(torch::kCUDA, static_cast<int16_t>(ctx.rank))) {
      throw std::runtime_error("rank " + std::to_string(ctx.rank) + " on " + comm.device().str());
    }
    const size_t n = 1024;
    std::vector<float> host(n, static_cast<float>(ctx.rank + 1));
    void* a = nullptr;
    if (cudaMalloc(&a, n * sizeof(float)) != cudaSuccess) throw std::runtime_error("cudaMalloc");
    cudaMemcpy(a, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    comm.AllReduceAsync(a, n, ncclFloat32, ReduceOp::kSum);
    comm.Synchronize();
    const std::vector<float> sum = Download(a, n);
    const float want = static_cast<float>(world * (world + 1) / 2);
    for (float v : sum) {
      if (v != want) throw std::runtime_error("sum " + std::to_string(v) + " != " + std::to_string(want));
    }
    cudaFree(a);
  });
  for (const auto& r : results) EXPECT_TRUE(r.exited && r.exit_code == 0) << headroom::testing::Describe(results);
}

TEST(NcclCommunicator, CollectivesOnOneDevice) {
  if (!HaveCudaDevice()) GTEST_SKIP() << "no CUDA device here";
  CommunicatorOptions options;
  options.backend = "nccl";
  options.master_port = headroom::testing::FreePort();
  options.rendezvous_timeout = std::chrono::seconds(30);
  options.collective_timeout = std::chrono::seconds(30);
  NcclCommunicator comm(options);
  EXPECT_EQ(comm.backend(), "nccl");
  EXPECT_TRUE(comm.device().is_cuda());

  const size_t n = 1 << 20;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 1000) * 0.25f;
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, n * sizeof(float)), cudaSuccess);

  // The producer stream writes the input; the collective must wait for it (WaitFor),
  // and a consumer stream must see the result (ReadyOn).
  cudaStream_t producer;
  ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(a, host.data(), n * sizeof(float), cudaMemcpyHostToDevice, producer), cudaSuccess);
  comm.WaitFor(producer);
  comm.AllReduceAsync(a, n, ncclFloat32, ReduceOp::kSum);  // world 1: identity
  comm.AllGatherAsync(a, b, n, ncclFloat32);
  comm.ReadyOn(producer);
  ASSERT_EQ(cudaStreamSynchronize(producer), cudaSuccess);
  EXPECT_EQ(Download(b, n), host);

  comm.ReduceScatterAsync(b, a, n, ncclFloat32, ReduceOp::kMax);
  comm.BroadcastAsync(a, n, ncclFloat32, 0);
  comm.Synchronize();
  EXPECT_EQ(Download(a, n), host);

  comm.barrier();
  EXPECT_THROW(comm.BroadcastAsync(a, n, ncclFloat32, 1), CommunicatorError);
  cudaStreamDestroy(producer);
  cudaFree(a);
  cudaFree(b);
}

TEST(NcclCommunicator, MissingPeerIsNamedNotAHang) {
  if (!HaveCudaDevice()) GTEST_SKIP() << "no CUDA device here";
  CommunicatorOptions options;
  options.backend = "nccl";
  options.world_size = 2;  // rank 1 never comes
  options.master_port = headroom::testing::FreePort();
  options.rendezvous_timeout = std::chrono::seconds(2);
  try {
    NcclCommunicator comm(options);
    FAIL() << "started without rank 1";
  } catch (const CommunicatorError& e) {
    EXPECT_NE(std::string(e.what()).find("rank(s) 1 of world size 2 never arrived"), std::string::npos) << e.what();
  }
}

#else

TEST(NcclCommunicator, RefusedWithoutNccl) {
  CommunicatorOptions options;
  options.backend = "nccl";
  EXPECT_THROW(MakeCommunicator(options), CommunicatorError);
}

#endif

}  // namespace
}  // namespace headroom::worker
