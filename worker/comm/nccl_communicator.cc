#include <spdlog/spdlog.h>

#include "worker/comm/nccl_communicator.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

namespace headroom::worker {
namespace {

using Clock = std::chrono::steady_clock;

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

void CudaCheck(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) {
    throw CommunicatorError("nccl: " + what + ": " + cudaGetErrorString(err));
  }
}

}  // namespace

ncclDataType_t NcclDataType(c10::ScalarType dtype) {
  static constexpr std::pair<c10::ScalarType, ncclDataType_t> kTypes[] = {
      {torch::kFloat32, ncclFloat32},   {torch::kFloat64, ncclFloat64}, {torch::kFloat16, ncclFloat16},
      {torch::kBFloat16, ncclBfloat16}, {torch::kInt64, ncclInt64},     {torch::kInt32, ncclInt32},
      {torch::kUInt8, ncclUint8},
  };
  for (const auto& [torch_type, nccl_type] : kTypes) {
    if (torch_type == dtype) return nccl_type;
  }
  throw CommunicatorError("nccl: dtype " + std::string(c10::toString(dtype)) + " is not supported");
}

NcclCommunicator::NcclCommunicator(const CommunicatorOptions& options) : options_(options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    throw CommunicatorError("nccl: rank " + std::to_string(options.rank) + " out of range for world size " +
                            std::to_string(options.world_size));
  }
  int devices = 0;
  CudaCheck(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (options.local_rank >= devices) {
    throw CommunicatorError("nccl: LOCAL_RANK " + std::to_string(options.local_rank) + " but this host has " +
                            std::to_string(devices) + " CUDA device(s)");
  }
  CudaCheck(cudaSetDevice(options.local_rank), "cudaSetDevice(" + std::to_string(options.local_rank) + ")");

  store_ = ConnectRendezvousStore(options);

  ncclUniqueId id;
  if (options.rank == 0) {
    Check(ncclGetUniqueId(&id), "ncclGetUniqueId", options.rendezvous_timeout);
    store_->Set("nccl/unique_id", std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
  }
  // Every rank must reach this point; a missing one is named here, not as an NCCL hang.
  store_->Rendezvous("nccl/join");
  std::string id_bytes = store_->Get("nccl/unique_id");
  if (id_bytes.size() != sizeof(id)) {
    throw CommunicatorError("nccl: unique id from rank 0 has " + std::to_string(id_bytes.size()) + " bytes, expected " +
                            std::to_string(sizeof(id)) + " (different NCCL versions across ranks?)");
  }
  std::memcpy(&id, id_bytes.data(), sizeof(id));

  CudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  CudaCheck(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
  CudaCheck(cudaMalloc(&barrier_buffer_, sizeof(float)), "cudaMalloc(barrier)");

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that a rank that never shows up can be aborted, not waited on
  Check(ncclCommInitRankConfig(&comm_, options.world_size, id, options.rank, &config), "ncclCommInitRank",
        options.rendezvous_timeout);
  spdlog::info("nccl: rank {} of {} ready on device {}", options.rank, options.world_size, options.local_rank);
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) {
    if (broken_.empty()) {
      cudaStreamSynchronize(stream_);
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  }
  if (barrier_buffer_ != nullptr) cudaFree(barrier_buffer_);
  if (event_ != nullptr) cudaEventDestroy(event_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void NcclCommunicator::Fail(const std::string& message) {
  broken_ = message;
  if (comm_ != nullptr) {
    ncclCommAbort(comm_);  // frees the GPU from kernels waiting on dead peers
    comm_ = nullptr;
  }
  throw CommunicatorError("nccl rank " + std::to_string(options_.rank) + " of " + std::to_string(options_.world_size) +
                          ": " + message);
}

void NcclCommunicator::CheckUsable(const char* what) const {
  if (!broken_.empty()) {
    throw CommunicatorError(std::string("nccl ") + what +
                            ": communicator unusable after an earlier failure: " + broken_);
  }
}

void NcclCommunicator::Check(ncclResult_t result, const char* what, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (result == ncclInProgress) {
    if (Clock::now() >= deadline) {
      Fail(std::string(what) + " did not complete within " + std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (comm_ == nullptr) break;
    ncclCommGetAsyncError(comm_, &result);
  }
  if (result != ncclSuccess) {
    const char* last = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
    Fail(std::string(what) + " failed: " + ncclGetErrorString(result) +
         (last != nullptr && *last != '\0' ? std::string(" (") + last + ")" : std::string()));
  }
}

void NcclCommunicator::AllReduceAsync(void* buffer, size_t count, ncclDataType_t type, ReduceOp op) {
  CheckUsable("all_reduce");
  Check(ncclAllReduce(buffer, buffer, count, type, NcclOp(op), comm_, stream_), "ncclAllReduce",
        options_.collective_timeout);
}

void NcclCommunicator::ReduceScatterAsync(const void* input, void* output, size_t output_count, ncclDataType_t type,
                                          ReduceOp op) {
  CheckUsable("reduce_scatter");
  Check(ncclReduceScatter(input, output, output_count, type, NcclOp(op), comm_, stream_), "ncclReduceScatter",
        options_.collective_timeout);
}

void NcclCommunicator::AllGatherAsync(const void* input, void* output, size_t input_count, ncclDataType_t type) {
  CheckUsable("all_gather");
  Check(ncclAllGather(input, output, input_count, type, comm_, stream_), "ncclAllGather", options_.collective_timeout);
}

void NcclCommunicator::BroadcastAsync(void* buffer, size_t count, ncclDataType_t type, int root) {
  CheckUsable("broadcast");
  if (root < 0 || root >= options_.world_size) {
    throw CommunicatorError("nccl broadcast: root " + std::to_string(root) + " out of range for world size " +
                            std::to_string(options_.world_size));
  }
  Check(ncclBroadcast(buffer, buffer, count, type, root, comm_, stream_), "ncclBroadcast", options_.collective_timeout);
}

void NcclCommunicator::WaitFor(cudaStream_t producer) {
  CudaCheck(cudaEventRecord(event_, producer), "cudaEventRecord(producer)");
  CudaCheck(cudaStreamWaitEvent(stream_, event_, 0), "cudaStreamWaitEvent(comm)");
}

void NcclCommunicator::ReadyOn(cudaStream_t consumer) {
  CudaCheck(cudaEventRecord(event_, stream_), "cudaEventRecord(comm)");
  CudaCheck(cudaStreamWaitEvent(consumer, event_, 0), "cudaStreamWaitEvent(consumer)");
}

void NcclCommunicator::Synchronize() {
  CheckUsable("synchronize");
  const auto deadline = Clock::now() + options_.collective_timeout;
  while (true) {
    cudaError_t status = cudaStreamQuery(stream_);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) Fail(std::string("stream failed: ") + cudaGetErrorString(status));
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      Fail(std::string("asynchronous NCCL error (a peer died?): ") + ncclGetErrorString(async));
    }
    if (Clock::now() >= deadline) {
      Fail("collectives did not finish within " + std::to_string(options_.collective_timeout.count()) +
           " ms (HEADROOM_COLLECTIVE_TIMEOUT_SECONDS); a peer is gone or stuck");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void NcclCommunicator::CheckTensor(const torch::Tensor& t, const char* what) const {
  if (!t.is_cuda()) {
    throw CommunicatorError(std::string("nccl ") + what + ": tensor is on " + t.device().str() +
                            "; the nccl backend moves CUDA tensors");
  }
  if (t.device().index() != options_.local_rank) {
    throw CommunicatorError(std::string("nccl ") + what + ": tensor is on " + t.device().str() +
                            " but this rank's device is cuda:" + std::to_string(options_.local_rank));
  }
  if (!t.is_contiguous()) throw CommunicatorError(std::string("nccl ") + what + ": tensor must be contiguous");
}

void NcclCommunicator::CheckChunked(const torch::Tensor& whole, const char* whole_name, const torch::Tensor& chunk,
                                    const char* chunk_name, const char* what) const {
  CheckTensor(whole, what);
  CheckTensor(chunk, what);
  if (whole.numel() != chunk.numel() * options_.world_size || whole.scalar_type() != chunk.scalar_type()) {
    throw CommunicatorError(std::string("nccl ") + what + ": " + whole_name + " must have world size x " + chunk_name +
                            "'s elements, same dtype");
  }
}

// Blocking forms: order after the default stream, run, wait.
void NcclCommunicator::all_reduce(torch::Tensor& tensor, ReduceOp op) {
  CheckTensor(tensor, "all_reduce");
  WaitFor(cudaStreamLegacy);
  AllReduceAsync(tensor.data_ptr(), static_cast<size_t>(tensor.numel()), NcclDataType(tensor.scalar_type()), op);
  Synchronize();
}

void NcclCommunicator::reduce_scatter(const torch::Tensor& input, torch::Tensor& output, ReduceOp op) {
  CheckChunked(input, "input", output, "output", "reduce_scatter");
  WaitFor(cudaStreamLegacy);
  ReduceScatterAsync(input.data_ptr(), output.data_ptr(), static_cast<size_t>(output.numel()),
                     NcclDataType(output.scalar_type()), op);
  Synchronize();
}

void NcclCommunicator::all_gather(const torch::Tensor& input, torch::Tensor& output) {
  CheckChunked(output, "output", input, "input", "all_gather");
  WaitFor(cudaStreamLegacy);
  AllGatherAsync(input.data_ptr(), output.data_ptr(), static_cast<size_t>(input.numel()),
                 NcclDataType(input.scalar_type()));
  Synchronize();
}

void NcclCommunicator::broadcast(torch::Tensor& tensor, int root) {
  CheckTensor(tensor, "broadcast");
  WaitFor(cudaStreamLegacy);
  BroadcastAsync(tensor.data_ptr(), static_cast<size_t>(tensor.numel()), NcclDataType(tensor.scalar_type()), root);
  Synchronize();
}

void NcclCommunicator::barrier() {
  AllReduceAsync(barrier_buffer_, 1, ncclFloat32, ReduceOp::kSum);
  Synchronize();
}

std::unique_ptr<Communicator> MakeNcclCommunicator(const CommunicatorOptions& options) {
  return std::make_unique<NcclCommunicator>(options);
}

}  // namespace headroom::worker
