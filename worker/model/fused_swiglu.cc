#include <spdlog/spdlog.h>

#include "worker/model/fused_swiglu.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "worker/model/cpu_kernel_support.h"

namespace headroom::worker {
namespace {

// Rows [begin, end): y = gate * s * up, s = sigmoid(gate) [rows, F], stacked [rows, 2F].
HEADROOM_VECTOR_CLONES
void ForwardRows(const float* stacked, const float* s, float* y, int64_t begin, int64_t end, int64_t f) {
  for (int64_t row = begin; row < end; ++row) {
    const float* gate = stacked + row * 2 * f;
    const float* up = gate + f;
    const float* sr = s + row * f;
    float* yr = y + row * f;
    for (int64_t i = 0; i < f; ++i) yr[i] = gate[i] * sr[i] * up[i];
  }
}

// Rows [begin, end) of the stacked gradient from the output's g [rows, F]:
//   d gate = g * up * s * (1 + gate * (1 - s))   (silu' = s + gate * s * (1 - s))
//   d up   = g * gate * s
HEADROOM_VECTOR_CLONES
void BackwardRows(const float* stacked, const float* s, const float* g, float* d, int64_t begin, int64_t end,
                  int64_t f) {
  for (int64_t row = begin; row < end; ++row) {
    const float* gate = stacked + row * 2 * f;
    const float* up = gate + f;
    const float* sr = s + row * f;
    const float* gr = g + row * f;
    float* dgate = d + row * 2 * f;
    float* dup = dgate + f;
    for (int64_t i = 0; i < f; ++i) {
      dgate[i] = gr[i] * up[i] * (sr[i] * (1.0f + gate[i] * (1.0f - sr[i])));
      dup[i] = gr[i] * (gate[i] * sr[i]);
    }
  }
}

torch::Tensor Forward(const torch::Tensor& stacked, const torch::Tensor& s) {
  const int64_t f = stacked.size(-1) / 2, rows = s.numel() / std::max<int64_t>(1, f);
  auto y = torch::empty_like(s);
  const float *xp = stacked.data_ptr<float>(), *sp = s.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, rows, GrainOfItems(2 * f),
                   [&](int64_t begin, int64_t end) { ForwardRows(xp, sp, yp, begin, end, f); });
  return y;
}

torch::Tensor Sigmoid(const torch::Tensor& stacked) {
  const int64_t f = stacked.size(-1) / 2;
  return torch::sigmoid(stacked.narrow(-1, 0, f)).contiguous();
}

class FusedSwiGluFunction : public torch::autograd::Function<FusedSwiGluFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& stacked) {
    const auto s = Sigmoid(stacked);
    ctx->save_for_backward({stacked, s});
    return Forward(stacked, s);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &stacked = saved[0], &s = saved[1];
    const auto g = grads[0].contiguous();
    const int64_t f = stacked.size(-1) / 2, rows = s.numel() / std::max<int64_t>(1, f);
    auto d = torch::empty_like(stacked);
    const float *xp = stacked.data_ptr<float>(), *sp = s.data_ptr<float>(), *gp = g.data_ptr<float>();
    float* dp = d.data_ptr<float>();
    at::parallel_for(0, rows, GrainOfItems(2 * f),
                     [&](int64_t begin, int64_t end) { BackwardRows(xp, sp, gp, dp, begin, end, f); });
    return {d};
  }
};

}  // namespace

bool FusedSwiGluApplies(const torch::Tensor& stacked) {
  return stacked.device().is_cpu() && stacked.scalar_type() == torch::kFloat32 && stacked.dim() >= 1 &&
         stacked.size(-1) % 2 == 0 && stacked.is_contiguous();
}

torch::Tensor FusedSwiGlu(const torch::Tensor& stacked) {
  TORCH_CHECK(FusedSwiGluApplies(stacked), "fused SwiGLU: stacked ", stacked.toString(), " ", stacked.sizes(),
              " must be a contiguous fp32 CPU tensor [..., 2F]");
  if (torch::GradMode::is_enabled() && stacked.requires_grad()) return FusedSwiGluFunction::apply(stacked);
  // Without a backward to save, ATen's silu and product are as few passes, and faster.
  const int64_t f = stacked.size(-1) / 2;
  return torch::silu(stacked.narrow(-1, 0, f)) * stacked.narrow(-1, f, f);
}

}  // namespace headroom::worker
