// The generation KV cache: one allocation, sized once for the largest batch and sequence,
// reused by every rollout of the run.
//
// Why once: freeing and rebuilding the cache each step is what fragmented memory until
// CPU OOM on the third generation in simpleRL-reason; keeping it allocated fixed that.
// Reset() only rewinds the fill level, it never reallocates (tests check the pointer).
//
// Layout: storage [layers, 2 (k|v), max_batch, heads, max_seq, head_dim]; the live region
// is [:, :, :batch, :, :length, :]. `heads` are the key/value heads (fewer than the query
// heads under grouped-query attention).
//
// Static decode (what a CUDA graph replays, worker/rollout/decode_step.h): a decode token's
// forward must have the same shapes and tensor addresses at every position, so its
// position cannot be a host integer. While a static position is set, Append() writes one
// position at *position, a 0-dim int64 tensor on the cache's device that the caller
// advances in place; Keys/Values span all max_seq positions (attention masks those after
// *position); Advance() leaves length() alone (the caller owns the count).
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace headroom::worker {

// What a model caches per position: `layers` x (keys, values) of `heads` x `head_dim`,
// for at most `max_seq_len` positions.
struct KvCacheShape {
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t max_seq_len = 0;
};

class KvCache {
 public:
  // Throws std::invalid_argument when max_batch < 1 or max_seq is outside [1, max_seq_len].
  KvCache(const KvCacheShape& shape, int64_t max_batch, int64_t max_seq, torch::Device device,
          torch::Dtype dtype = torch::kFloat32);

  // Starts a new generation for `batch` sequences (<= max_batch). Throws std::out_of_range.
  // padding [batch] int64 (undefined: none): the pad tokens each row's prompt starts with,
  // which attention must skip for the whole generation (causal_lm.h).
  void Reset(int64_t batch, const torch::Tensor& padding = {});
  // Writes k, v [batch, heads, t, head_dim] of `layer` at positions [length, length + t).
  // Advance() moves length once every layer has appended.
  void Append(int64_t layer, const torch::Tensor& k, const torch::Tensor& v);
  void Advance(int64_t t);
  // Keys / values of `layer` for positions [0, length + pending): what attention reads
  // right after Append() in the same forward. With a static position: all max_seq.
  torch::Tensor Keys(int64_t layer, int64_t upto) const;
  torch::Tensor Values(int64_t layer, int64_t upto) const;

  // Enters static decode: position a 0-dim int64 tensor, padding [batch] int64 (both on the
  // cache's device, kept by reference: the caller updates them in place). Throws
  // std::invalid_argument on other shapes or devices. ClearStaticPosition() leaves it.
  void SetStaticPosition(const torch::Tensor& position, const torch::Tensor& padding);
  void ClearStaticPosition();
  bool is_static() const { return static_position_.defined(); }
  const torch::Tensor& static_position() const { return static_position_; }
  const torch::Tensor& static_padding() const { return static_padding_; }

  int64_t batch() const { return batch_; }
  const torch::Tensor& padding() const { return padding_; }
  int64_t length() const { return length_; }
  int64_t max_batch() const { return max_batch_; }
  int64_t max_seq() const { return max_seq_; }
  int64_t bytes() const { return storage_.numel() * storage_.element_size(); }
  const void* data_ptr() const { return storage_.data_ptr(); }

 private:
  torch::Tensor storage_;
  int64_t max_batch_;
  int64_t max_seq_;
  int64_t batch_ = 0;
  int64_t length_ = 0;
  torch::Tensor padding_;          // [batch] int64 on the cache's device, or undefined
  torch::Tensor static_position_;  // 0-dim int64, or undefined outside static decode
  torch::Tensor static_padding_;   // [batch] int64 while static_position_ is set
};

}  // namespace headroom::worker
