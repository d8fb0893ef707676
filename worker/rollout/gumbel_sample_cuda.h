// The fused sampling kernel's launcher (gumbel_sample_cuda.cu): plain C++, no CUDA or
// LibTorch headers, so the code that calls it and the kernel build apart.
#pragma once

#include <cstdint>

namespace headroom::worker {

// out[b] = the Gumbel-max choice of row b (gumbel_hash.h, ReferenceGumbelArgmax) over
// logits[b * logits_row_stride + j], j < vocab, bf16 bits, with the noise of decode
// position *position (a device int64 the kernel reads, so a CUDA graph can replay the launch
// while the caller advances it): the row hash is row_hashes[b * row_hash_stride + *position]
// (GumbelNoise's [B, positions] table). bias: [vocab] fp32 or nullptr; temperature > 0.
// One block per row, on `stream` (a cudaStream_t). Returns the launch's cudaError_t (0: none).
int LaunchGumbelArgmaxBf16(const uint16_t* logits, int64_t logits_row_stride, int64_t batch, int64_t vocab,
                           const int64_t* row_hashes, int64_t row_hash_stride, const int64_t* position,
                           const float* bias, float temperature, int64_t* out, void* stream);

}  // namespace headroom::worker
