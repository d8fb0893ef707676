// The GPU backend: NCCL over device memory, on a stream of its own.
//
// Only built where NCCL is found (files named nccl_*); needs nccl.h, libnccl and the CUDA
// runtime, not a CUDA LibTorch. Include this header only under HEADROOM_HAVE_NCCL.
//
// Start-up: rank 0 creates the NCCL unique id and publishes it through the TcpStore at
// MASTER_ADDR:MASTER_PORT; every rank then calls ncclCommInitRankConfig on device
// `local_rank`, non-blocking, polled until done or the rendezvous timeout (then aborted).
//
// Two ways to call it:
//   - The Communicator methods take CUDA tensors (which need a CUDA LibTorch to exist).
//     They are blocking: the collective waits for work already queued on the CUDA legacy
//     default stream (LibTorch's default), runs on stream(), and returns when it is done.
//   - The *Async methods take raw device pointers and only enqueue on stream(), so
//     training can overlap communication with compute. Synchronisation contract:
//       WaitFor(producer)  before a collective: stream() waits (event record + wait) for
//                          work queued so far on `producer` (e.g. the backward that wrote
//                          the gradients);
//       ReadyOn(consumer)  after: `consumer` waits for the collectives queued so far, so
//                          the optimizer never reads a half-reduced buffer;
//       Synchronize()      the host waits, at most collective_timeout.
//     A buffer handed to an *Async call must stay alive and unwritten until then.
//
// Failure: a collective that does not finish within collective_timeout, or an
// asynchronous NCCL error (a peer died), aborts the NCCL communicator (ncclCommAbort,
// which unblocks the GPU) and throws CommunicatorError; every later call throws too.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "core/base/non_copyable.h"
#include "worker/comm/communicator_factory.h"
#include "worker/comm/tcp_store.h"

namespace headroom::worker {

class NcclCommunicator final : public Communicator, NonCopyable {
 public:
  explicit NcclCommunicator(const CommunicatorOptions& options);
  ~NcclCommunicator() override;

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  std::string backend() const override { return "nccl"; }
  torch::Device device() const override { return torch::Device(torch::kCUDA, options_.local_rank); }

  void all_reduce(torch::Tensor& tensor, ReduceOp op = ReduceOp::kSum) override;
  void reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op = ReduceOp::kSum) override;
  void all_gather(const torch::Tensor& input, torch::Tensor& output) override;
  void broadcast(torch::Tensor& tensor, int root) override;
  void barrier() override;

  // Raw device-pointer collectives, enqueued on stream(); counts are in elements.
  void AllReduceAsync(void* buffer, size_t count, ncclDataType_t type, ReduceOp op);
  // `input` holds world_size() * output_count elements; chunk r lands on rank r.
  void ReduceScatterAsync(const void* input, void* output, size_t output_count, ncclDataType_t type, ReduceOp op);
  // `output` holds world_size() * input_count elements.
  void AllGatherAsync(const void* input, void* output, size_t input_count, ncclDataType_t type);
  void BroadcastAsync(void* buffer, size_t count, ncclDataType_t type, int root);

  cudaStream_t stream() const { return stream_; }
  void WaitFor(cudaStream_t producer);
  void ReadyOn(cudaStream_t consumer);
  void Synchronize();

 private:
  // Throws on a NCCL error; for ncclInProgress (non-blocking communicator), polls until
  // the call completes or the deadline passes.
  void Check(ncclResult_t result, const char* what, std::chrono::milliseconds timeout);
  [[noreturn]] void Fail(const std::string& message);
  void CheckUsable(const char* what) const;
  void CheckTensor(const torch::Tensor& t, const char* what) const;
  // Both tensors pass CheckTensor, and `whole` holds world_size() chunks of `chunk`'s size
  // and dtype (reduce_scatter's input, all_gather's output).
  void CheckChunked(const torch::Tensor& whole, const char* whole_name, const torch::Tensor& chunk,
                    const char* chunk_name, const char* what) const;

  CommunicatorOptions options_;
  std::unique_ptr<TcpStore> store_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t event_ = nullptr;
  void* barrier_buffer_ = nullptr;  // one float on the device
  std::string broken_;
};

// The NCCL element type of a torch dtype; throws CommunicatorError for others.
ncclDataType_t NcclDataType(c10::ScalarType dtype);

}  // namespace headroom::worker
