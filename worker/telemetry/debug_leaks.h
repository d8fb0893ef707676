// The drills' deliberate leaks (spec.debug), so the guard can be exercised for real.
//
// hostLeakBytesPerStep: each step allocates that many bytes of host memory, writes every
// page (so it counts in RSS and the cgroup's working set, not just address space) and
// holds it until the process exits — like the rollout engines that leaked in the reports.
// hostLeakDecay: each step's host leak is this fraction of the step before's, so below 1
// the leak is a warm-up that levels off (what a healthy job's caches do in their first
// steps) instead of a leak that never stops.
// hostJumpAtStep / hostJumpBytes: at the step numbered hostJumpAtStep (1-based), or the
// first step this process runs after it (a resumed worker), allocates and touches
// hostJumpBytes once and holds them until the process exits: a level shift, like optimizer
// state or a cache sized once, which a restarted worker allocates again at the same point.
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
  DebugLeaks(int64_t host_bytes_per_step, int64_t gpu_bytes_per_step, torch::Device device, double host_decay = 1.0,
             int host_jump_at_step = 0, int64_t host_jump_bytes = 0);
  // Leaks one step's worth; `step` is the step about to run, 1-based.
  void Step(int64_t step);
  int64_t host_leaked_bytes() const { return host_leaked_; }
  int64_t gpu_leaked_bytes() const { return gpu_leaked_; }

 private:
  double host_next_;  // what the next step leaks on the host
  double host_decay_;
  int host_jump_at_step_;
  int64_t host_jump_bytes_;
  bool host_jumped_ = false;
  int64_t gpu_per_step_;
  torch::Device device_;
  std::vector<std::unique_ptr<char[]>> host_blocks_;
  std::vector<torch::Tensor> gpu_blocks_;
  int64_t host_leaked_ = 0;
  int64_t gpu_leaked_ = 0;
};

}  // namespace headroom::worker
