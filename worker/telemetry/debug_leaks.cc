#include <spdlog/spdlog.h>

#include "worker/telemetry/debug_leaks.h"

#include <cstring>

namespace headroom::worker {

DebugLeaks::DebugLeaks(int64_t host_bytes_per_step, int64_t gpu_bytes_per_step, torch::Device device, double host_decay,
                       int host_jump_at_step, int64_t host_jump_bytes)
    : host_next_(static_cast<double>(host_bytes_per_step)),
      host_decay_(host_decay),
      host_jump_at_step_(host_jump_at_step),
      host_jump_bytes_(host_jump_bytes),
      gpu_per_step_(gpu_bytes_per_step),
      device_(device) {
  if (gpu_per_step_ > 0 && !device_.is_cuda()) {
    spdlog::warn("spec.debug.gpuLeakBytesPerStep {} ignored: this worker runs on {}, not a CUDA device", gpu_per_step_,
                 device_.str());
    gpu_per_step_ = 0;
  }
}

void DebugLeaks::Step(int64_t step) {
  auto host_bytes = static_cast<size_t>(host_next_);
  host_next_ *= host_decay_;
  if (!host_jumped_ && host_jump_at_step_ > 0 && host_jump_bytes_ > 0 && step >= host_jump_at_step_) {
    host_jumped_ = true;
    host_bytes += static_cast<size_t>(host_jump_bytes_);
  }
  if (host_bytes > 0) {
    std::unique_ptr<char[]> block(new char[host_bytes]);
    // Touch every byte: untouched pages would cost address space only, not RSS.
    std::memset(block.get(), 0xA5, host_bytes);
    host_blocks_.push_back(std::move(block));
    host_leaked_ += static_cast<int64_t>(host_bytes);
  }
  if (gpu_per_step_ > 0) {
    gpu_blocks_.push_back(torch::ones({gpu_per_step_}, torch::TensorOptions().dtype(torch::kUInt8).device(device_)));
    gpu_leaked_ += gpu_per_step_;
  }
}

}  // namespace headroom::worker
