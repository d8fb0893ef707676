// What the fused CPU kernels (fused_attention, fused_rms_norm, fused_rotary, fused_swiglu)
// share: the multi-target build of their loops, a float dot product the compiler can
// vectorise, and how many elements a thread's task should hold.
#pragma once

#include <algorithm>
#include <cstdint>

namespace headroom::worker {

// GCC builds a kernel marked so for AVX-512, AVX2 and baseline x86-64 and picks one at load
// time (the binary stays portable; the inner loops vectorise in each clone). Those files
// build with -O3 (worker/CMakeLists.txt): RelWithDebInfo's -O2 leaves the loops scalar.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define HEADROOM_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HEADROOM_VECTOR_CLONES
#endif

// sum a[i] * b[i] with eight independent partial sums, so the compiler vectorises the loop
// without reassociating floats on its own.
inline float Dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Items of `item_size` elements per parallel task: about ATen's grain of 32768 elements, so
// a thread's share outweighs waking it, as for the elementwise operators the kernels replace.
inline int64_t GrainOfItems(int64_t item_size) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, item_size)); }

}  // namespace headroom::worker
