// The NCCL backend on one device: start-up through the TcpStore, every collective on
// device buffers through the raw (stream) API, the event-based ordering contract, and
// the blocking barrier. Skipped cleanly where there is no CUDA device (CI) or no NCCL.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>

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
