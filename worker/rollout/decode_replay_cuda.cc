// The CUDA graph replay of a decode step (decode_replay.h). Needs a CUDA LibTorch.
#include <spdlog/spdlog.h>

#include "worker/rollout/decode_replay.h"

#include <memory>
#include <string>
#include <stdexcept>
#include <utility>

#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "core/base/non_copyable.h"
#include "worker/torch_version.h"

namespace headroom::worker {
namespace {

// Autocast keeps casts of the weights for the length of its region; inside a capture they
// would be cached tensors of the graph's pool, read by later eager code. Off while capturing.
class AutocastCacheOff : NonCopyable {
 public:
  AutocastCacheOff() : was_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~AutocastCacheOff() { at::autocast::set_autocast_cache_enabled(was_); }

 private:
  bool was_;
};

#if HEADROOM_TORCH_AT_LEAST(2, 3)
// A graph that says whether its capture ended: from then on it hands its memory pool back
// itself when destroyed, and a second release would be one too many.
struct DecodeGraph : at::cuda::CUDAGraph {
  bool capture_ended() const { return capture_ended_; }
};
#else
using DecodeGraph = at::cuda::CUDAGraph;
#endif

class CudaGraphDecodeReplay : public DecodeReplay {
 public:
  CudaGraphDecodeReplay(std::function<void()> step, int device_index)
      : step_(std::move(step)), device_index_(static_cast<c10::DeviceIndex>(device_index)) {}

  void Run() override {
    if (graph_) {
      graph_->replay();
      return;
    }
    if (failed_ || eager_runs_ < kWarmupRuns) {
      ++eager_runs_;
      step_();
      return;
    }
    if (Capture()) {
      graph_->replay();
    } else {
      step_();  // the failed capture executed nothing
    }
  }

  bool graphed() const override { return graph_ != nullptr; }

 private:
  // Records one step into a graph on a side stream (capture refuses the default stream).
  // Nothing runs while recording; the caller replays it for this call's step. The graph
  // allocates from a memory pool of our own naming, so that a failed capture, which the
  // graph object cannot clean up (its capture never ended), still hands that pool back.
  bool Capture() {
    c10::cuda::device_synchronize();  // the warm-ups' work is done before the side stream records
    auto graph = std::make_unique<DecodeGraph>();
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_index_);
    const auto pool = at::cuda::graph_pool_handle();
    std::string stage = "beginning the capture";
    try {
      const c10::cuda::CUDAStreamGuard on_side(side);
      const AutocastCacheOff no_cache;
#if HEADROOM_TORCH_AT_LEAST(2, 2)
      // Thread-local: a CUDA call another thread makes meanwhile (the memory monitor's
      // cudaMemGetInfo, a communicator) neither breaks this capture nor gets recorded in it.
      graph->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
#else
      graph->capture_begin(pool);
#endif
      stage = "recording the decode step (an operation that waits for the device or reads back to the host?)";
      try {
        step_();
      } catch (...) {
        try {
          graph->capture_end();  // ends the capture if it still can
        } catch (...) {
        }
        throw;
      }
      stage = "ending the capture (the step did something a graph cannot hold, or another stream joined it)";
      graph->capture_end();
    } catch (const std::exception& e) {
      AbandonCapture(side);
#if HEADROOM_TORCH_AT_LEAST(2, 3)
      const bool graph_owns_pool = graph->capture_ended();
#else
      const bool graph_owns_pool = false;
#endif
      graph.reset();  // releases the pool if the capture had ended, else leaves it to us
      const bool released = graph_owns_pool || ReleasePool(pool);
      failed_ = true;
      spdlog::warn("decode: CUDA graph capture failed while {}: {}; {}; decoding eagerly from now on", stage, e.what(),
                   released ? "its memory pool was released" : "its memory pool could not be released");
      return false;
    }
    c10::cuda::device_synchronize();
    graph_ = std::move(graph);
    spdlog::info("decode: captured one decode token as a CUDA graph; replaying it");
    return true;
  }

  // Ends a capture an exception interrupted, so the stream can run work again.
  static void AbandonCapture(const c10::cuda::CUDAStream& stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream.stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(stream.stream(), &partial) == cudaSuccess && partial != nullptr)
        cudaGraphDestroy(partial);
    }
    (void)cudaGetLastError();  // the capture's error is not sticky: clear it
  }

  // Hands a failed capture's pool back to the caching allocator: stops routing allocations
  // to it (a capture_end that threw before doing so leaves them routed), drops the capture's
  // reference, and returns its cached blocks to the device. Whether it all went through.
  bool ReleasePool(c10::cuda::MempoolId_t pool) {
#if HEADROOM_TORCH_AT_LEAST(2, 3)
    namespace allocator = c10::cuda::CUDACachingAllocator;
    try {
      allocator::endAllocateToPool(device_index_, pool);
    } catch (const std::exception&) {
      // capture_end got that far: nothing is routed to the pool any more.
    }
    try {
      allocator::releasePool(device_index_, pool);
      allocator::emptyCache();
      return true;
    } catch (const std::exception& e) {
      spdlog::warn("decode: releasing the failed capture's memory pool: {}", e.what());
      return false;
    }
#else
    (void)pool;
    return false;
#endif
  }

  std::function<void()> step_;
  c10::DeviceIndex device_index_;
  std::unique_ptr<DecodeGraph> graph_;
  int eager_runs_ = 0;
  bool failed_ = false;
};

}  // namespace

std::unique_ptr<DecodeReplay> MakeCudaGraphDecodeReplay(std::function<void()> step, int device_index) {
  return std::make_unique<CudaGraphDecodeReplay>(std::move(step), device_index);
}

}  // namespace headroom::worker
