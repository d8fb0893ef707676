#include <spdlog/spdlog.h>

#include "worker/model/kv_cache.h"

#include <stdexcept>
#include <string>

namespace headroom::worker {

KvCache::KvCache(const KvCacheShape& shape, int64_t max_batch, int64_t max_seq, torch::Device device,
                 torch::Dtype dtype)
    : max_batch_(max_batch), max_seq_(max_seq) {
  if (max_batch < 1 || max_seq < 1 || max_seq > shape.max_seq_len) {
    throw std::invalid_argument("kv cache: max_batch " + std::to_string(max_batch) + " and max_seq " +
                                std::to_string(max_seq) + " must be >= 1 and max_seq <= model max_seq_len " +
                                std::to_string(shape.max_seq_len));
  }
  storage_ = torch::zeros({shape.layers, 2, max_batch, shape.heads, max_seq, shape.head_dim},
                          torch::TensorOptions().dtype(dtype).device(device));
}

void KvCache::Reset(int64_t batch, const torch::Tensor& padding) {
  if (batch < 1 || batch > max_batch_) {
    throw std::out_of_range("kv cache: batch " + std::to_string(batch) + " outside [1, " + std::to_string(max_batch_) +
                            "]");
  }
  if (padding.defined() && (padding.dim() != 1 || padding.size(0) != batch)) {
    throw std::invalid_argument("kv cache: padding of shape " + c10::str(padding.sizes()) + " for a batch of " +
                                std::to_string(batch));
  }
  batch_ = batch;
  length_ = 0;
  ClearStaticPosition();
  padding_ = padding.defined() ? padding.to(storage_.device(), torch::kInt64) : torch::Tensor();
}

void KvCache::Append(int64_t layer, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t t = k.size(2);
  if (is_static()) {
    TORCH_CHECK(t == 1, "kv cache: a static decode appends one position, got ", t);
    auto rows = storage_[layer].narrow(1, 0, batch_);  // [2, B, H, max_seq, D]
    const auto at = static_position_.view({1});
    rows[0].index_copy_(2, at, k.to(storage_.scalar_type()));  // index_copy_ does not convert (copy_ does)
    rows[1].index_copy_(2, at, v.to(storage_.scalar_type()));
    return;
  }
  if (length_ + t > max_seq_) {
    throw std::out_of_range("kv cache: " + std::to_string(length_ + t) + " positions exceed max_seq " +
                            std::to_string(max_seq_));
  }
  auto slot = storage_[layer].narrow(1, 0, batch_).narrow(3, length_, t);  // [2, B, H, t, D]
  slot[0].copy_(k);
  slot[1].copy_(v);
}

void KvCache::Advance(int64_t t) {
  if (!is_static()) length_ += t;
}

torch::Tensor KvCache::Keys(int64_t layer, int64_t upto) const {
  return storage_[layer][0].narrow(0, 0, batch_).narrow(2, 0, is_static() ? max_seq_ : upto);
}

torch::Tensor KvCache::Values(int64_t layer, int64_t upto) const {
  return storage_[layer][1].narrow(0, 0, batch_).narrow(2, 0, is_static() ? max_seq_ : upto);
}

void KvCache::SetStaticPosition(const torch::Tensor& position, const torch::Tensor& padding) {
  const auto device = storage_.device();
  if (!position.defined() || position.dim() != 0 || position.scalar_type() != torch::kInt64 ||
      position.device() != device) {
    throw std::invalid_argument("kv cache: a static position must be a 0-dim int64 tensor on " + device.str());
  }
  if (!padding.defined() || padding.dim() != 1 || padding.size(0) != batch_ || padding.scalar_type() != torch::kInt64 ||
      padding.device() != device) {
    throw std::invalid_argument("kv cache: static padding must be [" + std::to_string(batch_) + "] int64 on " +
                                device.str());
  }
  static_position_ = position;
  static_padding_ = padding;
}

void KvCache::ClearStaticPosition() {
  static_position_ = torch::Tensor();
  static_padding_ = torch::Tensor();
}

}  // namespace headroom::worker
