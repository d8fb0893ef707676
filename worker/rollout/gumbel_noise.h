// Gumbel noise for sampling, a pure function of (sample key, decode position, token id).
//
// Why: a sample must come out identical whichever rank rolls it out and however the batch
// is split, and the noise for a real vocabulary (batch x 152k values per decode token) must
// be made where the logits are: on a GPU by a few elementwise tensor ops, with no host loop
// and no host-to-device copy per token.
//
// The function (Mix32 is lowbias32, worker/tasks/counter_rng.h):
//   RowHash(key, t) = Mix32(lo32(key) ^ Mix32(hi32(key) ^ Mix32(t ^ kPositionSalt)))
//   TokenHash(j)    = Mix32(j ^ kTokenSalt)
//   bits(key, t, j) = Mix32(RowHash(key, t) ^ TokenHash(j))
//   u = (bits >> 9) * 2^-23 + 2^-24, noise = -log(-log(u)) in fp32.
// u keeps the top 23 bits so that it is exact in fp32 and inside (0, 1): with 24 bits the
// largest value (2^24 - 1/2) / 2^24 would round to 1.0f and give an infinite noise. The
// noise is thereby bounded to [-2.8, 16.6]; the Gumbel mass outside is ~1e-7.
//
// Tensor ops compute Mix32 on int64 holding values in [0, 2^32): each multiplier is taken
// as its residue in [-2^31, 2^31) (equal mod 2^32), so a product stays inside int64, and a
// mask to 32 bits after it leaves the uint32 product; shifts only see non-negative values.
// No step relies on signed overflow, so the bits are exact on every device. The two logs
// are fp32 library calls: CPU and GPU may differ in the last ulp, which moves a sample only
// on an exact tie between two noisy logits.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace headroom::worker {

class GumbelNoise {
 public:
  enum class Path {
    kAuto,       // the host loop for CPU tensors, tensor ops elsewhere
    kTensorOps,  // elementwise tensor ops on the device (any device)
    kHostLoop,   // one fused pass per row on the host (CPU only): a dozen int64 passes
                 // over [B, vocab] cost more than the hash itself there
  };

  // Noise for rows keyed by sample_keys over decode positions [0, positions) and tokens
  // [0, vocab), made on `device`. Computes the [B, positions] row hashes and the [vocab]
  // token hashes there once (one copy of the B keys).
  GumbelNoise(const std::vector<uint64_t>& sample_keys, int64_t positions, int64_t vocab, torch::Device device);

  // [B, vocab] float32 on the device: the noise of decode position t, 0 <= t < positions.
  // Every path gives the same values (to the last ulp of the logs, see above).
  torch::Tensor At(int64_t position, Path path = Path::kAuto) const;
  // The same for the position held by a 0-dim int64 tensor on the device, by tensor ops
  // alone (no host read, no bounds check: 0 <= *position < positions is the caller's to
  // keep), so a CUDA graph can replay it while the caller advances the position in place.
  torch::Tensor At(const torch::Tensor& position) const;
  // [B, vocab] int64 in [0, 2^32): bits(key_b, position, j), by tensor ops on the device.
  torch::Tensor Bits(int64_t position) const;
  // New keys for the same rows (as many as before), written over the row hashes in place:
  // the tensors At() reads keep their addresses.
  void Rekey(const std::vector<uint64_t>& sample_keys);

  // [B, positions] int64 in [0, 2^32): RowHash(key_b, t) (gumbel_hash.h), what the fused
  // CUDA sampling kernel reads (gumbel_sample.h). Rekey() overwrites it in place.
  const torch::Tensor& row_hashes() const { return row_hash_; }

  // The scalar definitions the tensor paths are tested against (gumbel_hash.h).
  static uint32_t ReferenceBits(uint64_t key, int64_t position, int64_t token);
  static float ReferenceUniform(uint32_t bits);

 private:
  static torch::Tensor RowHashes(const std::vector<uint64_t>& sample_keys, int64_t positions, torch::Device device);
  torch::Tensor UniformByHostLoop(int64_t position) const;
  void CheckPosition(int64_t position) const;

  torch::Device device_;
  int64_t vocab_;
  torch::Tensor row_hash_;    // [B, positions] int64 in [0, 2^32)
  torch::Tensor token_hash_;  // [vocab] int64 in [0, 2^32)
};

}  // namespace headroom::worker
