// Counter-based random numbers: a value is a pure function of (seed, stream, index).
//
// Why: a prompt or a sample must come out identical whichever rank produces it and
// however the batch is split, so nothing may depend on a generator's running state.
// SplitMix64 (Steele et al.) mixes the key into 64 well-distributed bits; it is not
// cryptographic and needs no state beyond the key.
#pragma once

#include <cstdint>

namespace headroom::worker {

// One SplitMix64 finalisation step.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// lowbias32 (C. Wellons' hash prospector): a bijection on 32 bits with low avalanche
// bias. Its 32-bit state suits a hash that tensor ops must also compute: every step
// stays exact in int64 arithmetic (see rollout/gumbel_noise.h).
constexpr uint32_t kMix32Multiplier1 = 0x7FEB352DU;
constexpr uint32_t kMix32Multiplier2 = 0x846CA68BU;
constexpr int kMix32Shift1 = 16, kMix32Shift2 = 15, kMix32Shift3 = 16;
inline uint32_t Mix32(uint32_t x) {
  x ^= x >> kMix32Shift1;
  x *= kMix32Multiplier1;
  x ^= x >> kMix32Shift2;
  x *= kMix32Multiplier2;
  x ^= x >> kMix32Shift3;
  return x;
}

// Mixes several 64-bit words into one key (order matters).
inline uint64_t MixKey(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  return SplitMix64(SplitMix64(SplitMix64(SplitMix64(a) ^ b) ^ c) ^ d);
}

// A tiny stream of numbers for one key: Next() is SplitMix64 of key + counter.
class CounterRng {
 public:
  explicit CounterRng(uint64_t key) : key_(key) {}
  uint64_t Next() { return SplitMix64(key_ + 0x632BE59BD9B4E019ULL * ++counter_); }
  // Uniform in [0, n); the modulo bias is < n / 2^64, irrelevant here.
  uint64_t Below(uint64_t n) { return Next() % n; }
  // Uniform in the open interval (0, 1): never exactly 0 or 1, so log() is safe.
  double Uniform() { return (static_cast<double>(Next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

}  // namespace headroom::worker
