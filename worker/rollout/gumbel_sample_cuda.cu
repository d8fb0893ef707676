// One kernel per decode token for sampling: bf16 logits in, one token per row out. The
// noise is made in registers from the hash (gumbel_hash.h), never stored: the tensor ops it
// replaces write and read about twenty int64 [batch, vocab] tensors per token.
#include "worker/rollout/gumbel_sample_cuda.h"

#include <cuda_runtime.h>

#include "worker/rollout/gumbel_hash.h"

namespace headroom::worker {
namespace {

constexpr int kThreads = 256;

// Whether (score a, index ia) wins over (b, ib) under argmax's rule: the largest score, a
// NaN above every number, and the first index among equals. A total order, so the block
// reduction's result does not depend on how the threads pair up.
__device__ inline bool Wins(float a, int64_t ia, float b, int64_t ib) {
  const bool nan_a = isnan(a), nan_b = isnan(b);
  if (nan_a || nan_b) return nan_a && (!nan_b || ia < ib);
  if (a != b) return a > b;
  return ia < ib;
}

__global__ void GumbelArgmaxBf16Kernel(const uint16_t* __restrict__ logits, int64_t logits_row_stride, int64_t vocab,
                                       const int64_t* __restrict__ row_hashes, int64_t row_hash_stride,
                                       const int64_t* __restrict__ position, const float* __restrict__ bias,
                                       float temperature, int64_t* __restrict__ out) {
  __shared__ float best_score[kThreads];
  __shared__ int64_t best_index[kThreads];
  const int64_t row = blockIdx.x;
  const uint32_t row_hash = static_cast<uint32_t>(row_hashes[row * row_hash_stride + *position]);
  const uint16_t* row_logits = logits + row * logits_row_stride;
  float score = 0;
  int64_t index = -1;
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
    float s = __uint_as_float(static_cast<uint32_t>(row_logits[j]) << 16);
    if (bias != nullptr) s = s + bias[j];
    s = s / temperature;
    s = s + gumbel::Noise(gumbel::Uniform(gumbel::Bits(row_hash, gumbel::TokenHash(j))));
    if (index < 0 || Wins(s, j, score, index)) {
      score = s;
      index = j;
    }
  }
  best_score[threadIdx.x] = score;
  best_index[threadIdx.x] = index;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const int other = threadIdx.x + half;
      const int64_t io = best_index[other];
      if (io >= 0 && (best_index[threadIdx.x] < 0 ||
                      Wins(best_score[other], io, best_score[threadIdx.x], best_index[threadIdx.x]))) {
        best_score[threadIdx.x] = best_score[other];
        best_index[threadIdx.x] = io;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[row] = best_index[0];
}

}  // namespace

int LaunchGumbelArgmaxBf16(const uint16_t* logits, int64_t logits_row_stride, int64_t batch, int64_t vocab,
                           const int64_t* row_hashes, int64_t row_hash_stride, const int64_t* position,
                           const float* bias, float temperature, int64_t* out, void* stream) {
  if (batch < 1 || vocab < 1) return static_cast<int>(cudaErrorInvalidValue);
  GumbelArgmaxBf16Kernel<<<static_cast<unsigned>(batch), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, logits_row_stride, vocab, row_hashes, row_hash_stride, position, bias, temperature, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace headroom::worker
