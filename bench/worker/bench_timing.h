// Timing pieces the worker benchmarks share: wall seconds, the median step, and the
// machine's practical matmul FLOP/s (the baseline an update's FLOP/s is a fraction of).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace headroom::bench {

inline double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The median of the steps' times: a noisy neighbour on a shared machine moves the mean.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// FLOP/s of a plain [m, k] x [k, n] matmul on `device`, in the dtype the worker computes
// in there (bf16 on CUDA, fp32 on CPU), timed over at least a second after 3 warm-ups.
inline double MatmulFlops(int64_t m, int64_t k, int64_t n, const torch::Device& device = torch::kCPU) {
  auto options = torch::TensorOptions().device(device).dtype(device.is_cuda() ? torch::kBFloat16 : torch::kFloat32);
  auto a = torch::randn({m, k}, options), b = torch::randn({k, n}, options);
  auto sync = [&] {
    if (device.is_cuda()) (void)a.sum().item<float>();  // waits for the queue
  };
  for (int i = 0; i < 3; ++i) (void)torch::mm(a, b);
  sync();
  int reps = 0;
  const auto start = std::chrono::steady_clock::now();
  while (Seconds(start) < 1.0 || reps < 5) {
    for (int i = 0; i < 10; ++i) (void)torch::mm(a, b);
    reps += 10;
    sync();
  }
  return 2.0 * static_cast<double>(m) * k * n * reps / Seconds(start);
}

}  // namespace headroom::bench
