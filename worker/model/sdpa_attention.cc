#include <spdlog/spdlog.h>

#include "worker/model/sdpa_attention.h"

#include <optional>
#include <stdexcept>
#include <string>

#include "worker/torch_version.h"

namespace headroom::worker {

bool SdpaAttentionApplies(const torch::Tensor& q) {
#if HEADROOM_TORCH_AT_LEAST(2, 0)
  return q.is_cuda();
#else
  (void)q;
  return false;
#endif
}

torch::Tensor SdpaAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& mask) {
#if HEADROOM_TORCH_AT_LEAST(2, 0)
  // The kernels take the mask in the queries' dtype (bf16 holds 0 and -inf exactly).
  if (!mask.defined()) return at::scaled_dot_product_attention(q, k, v);
  return at::scaled_dot_product_attention(q, k, v, mask.to(q.scalar_type()));
#else
  (void)q;
  (void)k;
  (void)v;
  (void)mask;
  throw std::logic_error("SdpaAttention needs LibTorch >= 2.0 (check SdpaAttentionApplies first)");
#endif
}

std::string SdpaBackendName(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& mask) {
  if (!SdpaAttentionApplies(q)) return "none";
#if HEADROOM_TORCH_AT_LEAST(2, 5)
  // LibTorch's own dispatch (sdp::SDPBackend): what scaled_dot_product_attention would run.
  const int64_t choice = at::_fused_sdp_choice(
      q, k, v, mask.defined() ? std::optional<at::Tensor>(mask.to(q.scalar_type())) : std::optional<at::Tensor>());
  switch (choice) {
    case 0: return "math";
    case 1: return "flash";
    case 2: return "efficient";
    case 3: return "cudnn";
    default: return "backend " + std::to_string(choice);
  }
#else
  (void)k;
  (void)v;
  (void)mask;
  return "unknown";
#endif
}

}  // namespace headroom::worker
