#include <spdlog/spdlog.h>

#include "worker/rollout/gumbel_sample.h"

#include <stdexcept>
#include <string>

#if defined(HEADROOM_WITH_CUDA)
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "worker/rollout/gumbel_sample_cuda.h"
#endif

namespace headroom::worker {

bool FusedGumbelArgmaxApplies(const torch::Tensor& logits, double temperature) {
#if defined(HEADROOM_WITH_CUDA)
  return temperature > 0 && logits.defined() && logits.is_cuda() && logits.dim() == 2 &&
         logits.scalar_type() == torch::kBFloat16;
#else
  (void)logits;
  (void)temperature;
  return false;
#endif
}

torch::Tensor FusedGumbelArgmax(const torch::Tensor& logits, const GumbelNoise& noise, const torch::Tensor& position,
                                const torch::Tensor& bias, double temperature) {
  if (!FusedGumbelArgmaxApplies(logits, temperature)) {
    throw std::invalid_argument(
        "fused sampling: needs [B, vocab] bf16 CUDA logits and temperature > 0 in a CUDA build");
  }
#if defined(HEADROOM_WITH_CUDA)
  const auto& rows = noise.row_hashes();
  const int64_t batch = logits.size(0), vocab = logits.size(1);
  if (rows.size(0) != batch || rows.device() != logits.device() || position.device() != logits.device() ||
      position.dim() != 0 || position.scalar_type() != torch::kInt64 ||
      (bias.defined() && (bias.numel() != vocab || bias.device() != logits.device()))) {
    throw std::invalid_argument("fused sampling: logits " + c10::str(logits.sizes()) + " on " + logits.device().str() +
                                " disagree with the noise's " + std::to_string(rows.size(0)) +
                                " rows, the position or the bias");
  }
  const c10::cuda::CUDAGuard on_device(logits.device());
  const auto in = logits.stride(1) == 1 ? logits : logits.contiguous();
  const auto bias32 = bias.defined() ? bias.to(torch::kFloat32).contiguous() : torch::Tensor();
  auto out = torch::empty({batch}, logits.options().dtype(torch::kInt64));
  const int err = LaunchGumbelArgmaxBf16(
      reinterpret_cast<const uint16_t*>(in.data_ptr<at::BFloat16>()), in.stride(0), batch, vocab,
      rows.data_ptr<int64_t>(), rows.stride(0), position.data_ptr<int64_t>(),
      bias32.defined() ? bias32.data_ptr<float>() : nullptr, static_cast<float>(temperature), out.data_ptr<int64_t>(),
      c10::cuda::getCurrentCUDAStream(logits.device().index()).stream());
  if (err != 0) throw std::runtime_error("fused sampling: kernel launch failed, cudaError " + std::to_string(err));
  return out;
#else
  (void)noise;
  (void)position;
  (void)bias;
  throw std::logic_error("unreachable");
#endif
}

}  // namespace headroom::worker
