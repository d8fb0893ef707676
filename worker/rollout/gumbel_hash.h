// The Gumbel noise function of gumbel_noise.h as scalar code that host C++ and CUDA device
// code share, and the Gumbel-max choice of one row of bf16 logits made from it.
//
// Why one header: the fused CUDA sampling kernel (gumbel_sample_cuda.cu) must hash exactly
// as the tensor ops and the host loop do, or a sample would depend on which path drew it.
// Both include these definitions; the tensor paths and the kernel are tested against them.
// Plain C++ (no LibTorch), so nvcc compiles it too.
//
// ReferenceGumbelArgmax is the decode's rule for one row (decode_step.h) at temperature > 0,
// in the order the CPU path evaluates it in fp32: s = float(logit) (+ bias); s = s / T;
// s = s + noise; the first index of the largest s (a NaN counts as largest, as argmax does).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define HEADROOM_HOST_DEVICE __host__ __device__
#else
#define HEADROOM_HOST_DEVICE
#endif

namespace headroom::worker::gumbel {

// Salts keep position 0 and token 0 from feeding Mix32 a zero (Mix32(0) = 0).
constexpr uint32_t kPositionSalt = 0x9E3779B9U;
constexpr uint32_t kTokenSalt = 0x85EBCA6CU;
constexpr int kUniformShift = 9;  // keep the top 23 bits (gumbel_noise.h says why)
constexpr float kUniformScale = 0x1p-23f;
constexpr float kUniformOffset = 0x1p-24f;

// lowbias32, as worker/tasks/counter_rng.h's Mix32 (a test checks they agree).
HEADROOM_HOST_DEVICE inline uint32_t Mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352DU;
  x ^= x >> 15;
  x *= 0x846CA68BU;
  x ^= x >> 16;
  return x;
}

HEADROOM_HOST_DEVICE inline uint32_t RowHash(uint64_t key, int64_t position) {
  return Mix32(static_cast<uint32_t>(key) ^
               Mix32(static_cast<uint32_t>(key >> 32) ^ Mix32(static_cast<uint32_t>(position) ^ kPositionSalt)));
}

HEADROOM_HOST_DEVICE inline uint32_t TokenHash(int64_t token) {
  return Mix32(static_cast<uint32_t>(token) ^ kTokenSalt);
}

HEADROOM_HOST_DEVICE inline uint32_t Bits(uint32_t row_hash, uint32_t token_hash) {
  return Mix32(row_hash ^ token_hash);
}

// In (0, 1), exact in fp32.
HEADROOM_HOST_DEVICE inline float Uniform(uint32_t bits) {
  return static_cast<float>(bits >> kUniformShift) * kUniformScale + kUniformOffset;
}

// -log(-log(u)) in fp32 (logf: the last ulp may differ between libraries, gumbel_noise.h).
HEADROOM_HOST_DEVICE inline float Noise(float u) { return -logf(-logf(u)); }

// bf16 bits to fp32: exact (the top half of the fp32 pattern).
inline float Bf16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &wide, sizeof(out));
  return out;
}

// The rule's choice for one row: logits [vocab] bf16 bits, bias [vocab] or nullptr, the
// row's hash for this decode position (RowHash), temperature > 0.
inline int64_t ReferenceGumbelArgmax(const uint16_t* logits, const float* bias, int64_t vocab, uint32_t row_hash,
                                     float temperature) {
  int64_t best = 0;
  float best_score = 0;
  for (int64_t j = 0; j < vocab; ++j) {
    float s = Bf16ToFloat(logits[j]);
    if (bias != nullptr) s = s + bias[j];
    s = s / temperature;
    s = s + Noise(Uniform(Bits(row_hash, TokenHash(j))));
    if (j == 0 || (!std::isnan(best_score) && (s > best_score || std::isnan(s)))) {
      best = j;
      best_score = s;
    }
  }
  return best;
}

}  // namespace headroom::worker::gumbel
