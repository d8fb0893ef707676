#include <spdlog/spdlog.h>

#include "worker/rollout/gumbel_noise.h"

#include <stdexcept>
#include <string>

#include <ATen/Parallel.h>

#include "worker/rollout/gumbel_hash.h"
#include "worker/tasks/counter_rng.h"

namespace headroom::worker {
namespace {

constexpr int64_t kLow32 = 0xFFFFFFFFLL;
// One definition of the constants, shared with the fused CUDA kernel (gumbel_hash.h).
using gumbel::kPositionSalt;
using gumbel::kTokenSalt;
using gumbel::kUniformOffset;
using gumbel::kUniformScale;
using gumbel::kUniformShift;

// c mod 2^32 as a residue in [-2^31, 2^31): its product with a value in [0, 2^32) fits int64.
constexpr int64_t SignedResidue(uint32_t c) {
  return c >= 0x80000000U ? static_cast<int64_t>(c) - (int64_t{1} << 32) : static_cast<int64_t>(c);
}

// Mix32 of every element of an int64 tensor holding values in [0, 2^32), in place.
void Mix32InPlace(torch::Tensor& x) {
  x.bitwise_xor_(x.bitwise_right_shift(kMix32Shift1));
  x.mul_(SignedResidue(kMix32Multiplier1)).bitwise_and_(kLow32);
  x.bitwise_xor_(x.bitwise_right_shift(kMix32Shift2));
  x.mul_(SignedResidue(kMix32Multiplier2)).bitwise_and_(kLow32);
  x.bitwise_xor_(x.bitwise_right_shift(kMix32Shift3));
}

torch::Tensor GumbelFromUniform(torch::Tensor u) { return u.log_().neg_().log_().neg_(); }

// The noise of hash bits [.., vocab] int64 (consumed).
torch::Tensor UniformToGumbel(torch::Tensor bits) {
  auto uniform = bits.bitwise_right_shift_(kUniformShift).to(torch::kFloat32);
  return GumbelFromUniform(uniform.mul_(kUniformScale).add_(kUniformOffset));
}

}  // namespace

GumbelNoise::GumbelNoise(const std::vector<uint64_t>& sample_keys, int64_t positions, int64_t vocab,
                         torch::Device device)
    : device_(device), vocab_(vocab) {
  if (positions < 1 || vocab < 1 || vocab > kLow32) {
    throw std::invalid_argument("gumbel noise: needs positions >= 1 and 1 <= vocab < 2^32, got " +
                                std::to_string(positions) + " positions, vocab " + std::to_string(vocab));
  }
  row_hash_ = RowHashes(sample_keys, positions, device);
  const auto int64_on = torch::TensorOptions().dtype(torch::kInt64).device(device);
  token_hash_ = torch::arange(vocab, int64_on).bitwise_xor_(static_cast<int64_t>(kTokenSalt));
  Mix32InPlace(token_hash_);
}

void GumbelNoise::Rekey(const std::vector<uint64_t>& sample_keys) {
  if (static_cast<int64_t>(sample_keys.size()) != row_hash_.size(0)) {
    throw std::invalid_argument("gumbel noise: " + std::to_string(sample_keys.size()) + " keys for " +
                                std::to_string(row_hash_.size(0)) + " rows");
  }
  row_hash_.copy_(RowHashes(sample_keys, row_hash_.size(1), device_));
}

torch::Tensor GumbelNoise::RowHashes(const std::vector<uint64_t>& sample_keys, int64_t positions,
                                     torch::Device device) {
  const int64_t b = static_cast<int64_t>(sample_keys.size());
  std::vector<int64_t> halves;  // [B, 2]: lo32, hi32
  halves.reserve(2 * b);
  for (uint64_t key : sample_keys) {
    halves.push_back(static_cast<int64_t>(key & 0xFFFFFFFFULL));
    halves.push_back(static_cast<int64_t>(key >> 32));
  }
  const auto int64_on = torch::TensorOptions().dtype(torch::kInt64).device(device);
  auto key_halves = torch::tensor(halves, torch::kInt64).reshape({b, 2}).to(device);
  auto rows = torch::arange(positions, int64_on).bitwise_xor_(static_cast<int64_t>(kPositionSalt)).unsqueeze(0);
  Mix32InPlace(rows);                                   // [1, positions]
  rows = rows.bitwise_xor(key_halves.narrow(1, 1, 1));  // [B, positions]
  Mix32InPlace(rows);
  rows.bitwise_xor_(key_halves.narrow(1, 0, 1));
  Mix32InPlace(rows);
  return rows.contiguous();
}

void GumbelNoise::CheckPosition(int64_t position) const {
  if (position < 0 || position >= row_hash_.size(1)) {
    throw std::out_of_range("gumbel noise: position " + std::to_string(position) + " outside [0, " +
                            std::to_string(row_hash_.size(1)) + ")");
  }
}

torch::Tensor GumbelNoise::Bits(int64_t position) const {
  CheckPosition(position);
  auto bits = row_hash_.select(1, position).unsqueeze(1).bitwise_xor(token_hash_.unsqueeze(0));  // [B, vocab]
  Mix32InPlace(bits);
  return bits;
}

torch::Tensor GumbelNoise::UniformByHostLoop(int64_t position) const {
  if (!device_.is_cpu()) throw std::invalid_argument("gumbel noise: the host loop needs a CPU device");
  CheckPosition(position);
  const int64_t b = row_hash_.size(0);
  auto uniform = torch::empty({b, vocab_}, torch::kFloat32);
  const auto rows = row_hash_.accessor<int64_t, 2>();
  const int64_t* tokens = token_hash_.data_ptr<int64_t>();
  float* out = uniform.data_ptr<float>();
  at::parallel_for(0, b, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto row = static_cast<uint32_t>(rows[i][position]);
      float* row_out = out + i * vocab_;
      for (int64_t j = 0; j < vocab_; ++j) row_out[j] = ReferenceUniform(Mix32(row ^ static_cast<uint32_t>(tokens[j])));
    }
  });
  return uniform;
}

torch::Tensor GumbelNoise::At(int64_t position, Path path) const {
  if (path == Path::kAuto) path = device_.is_cpu() ? Path::kHostLoop : Path::kTensorOps;
  if (path == Path::kHostLoop) return GumbelFromUniform(UniformByHostLoop(position));
  return UniformToGumbel(Bits(position));
}

torch::Tensor GumbelNoise::At(const torch::Tensor& position) const {
  auto bits = row_hash_.index_select(1, position.view({1})).bitwise_xor(token_hash_.unsqueeze(0));  // [B, vocab]
  Mix32InPlace(bits);
  return UniformToGumbel(bits);
}

uint32_t GumbelNoise::ReferenceBits(uint64_t key, int64_t position, int64_t token) {
  return gumbel::Bits(gumbel::RowHash(key, position), gumbel::TokenHash(token));
}

float GumbelNoise::ReferenceUniform(uint32_t bits) { return gumbel::Uniform(bits); }

}  // namespace headroom::worker
