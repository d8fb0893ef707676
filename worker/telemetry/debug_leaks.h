// The drills' deliberate leaks (spec.debug), so the guard can be exercised for real.
//
// hostLeakBytesPerStep: each step allocates that many bytes of host memory, writes every
// page (so it counts in RSS and the cgroup's working set, not just address space) and
// holds it until the process exits — like the rollout engines that leaked in the reports.
// gpuLeakBytesPerStep: holds that many bytes of device memory per step, in CUDA builds on
// a CUDA device; elsewhere it is ignored, said once in the log.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

namespace headroom::worker {

class DebugLeaks {
 public:
  DebugLeaks(int64_t host_bytes_per_step, int64_t gpu_bytes_per_step, torch::Device device);
  // Leaks one step's worth.
  void Step();
  int64_t host_leaked_bytes() const { return host_leaked_; }
  int64_t gpu_leaked_bytes() const { return gpu_leaked_; }

 private:
  int64_t host_per_step_;
  int64_t gpu_per_step_;
  torch::Device device_;
  std::vector<std::unique_ptr<char[]>> host_blocks_;
  std::vector<torch::Tensor> gpu_blocks_;
  int64_t host_leaked_ = 0;
  int64_t gpu_leaked_ = 0;
};

}  // namespace headroom::worker
