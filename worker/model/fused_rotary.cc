#include <spdlog/spdlog.h>

#include "worker/model/fused_rotary.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "worker/model/cpu_kernel_support.h"

namespace headroom::worker {
namespace {

// Heads [begin, end) of x, each of d values; head h reads table head h % table_heads.
//   forward:  y[i] = x[i] c[i] + x[p(i)] s[i]
//   backward: y[i] = x[i] c[i] + x[p(i)] s[p(i)]   (x the gradient; the transpose)
// where p(i) = i + d/2 in the first half and i - d/2 in the second: roll by d/2.
template <bool kTranspose>
inline void RotateHeads(const float* x, const float* c, const float* s, float* y, int64_t begin, int64_t end,
                        int64_t table_heads, int64_t d) {
  const int64_t half = d / 2;
  for (int64_t h = begin; h < end; ++h) {
    const float* xh = x + h * d;
    const float* ch = c + (h % table_heads) * d;
    const float* sh = s + (h % table_heads) * d;
    float* yh = y + h * d;
    for (int64_t i = 0; i < half; ++i) yh[i] = xh[i] * ch[i] + xh[i + half] * sh[kTranspose ? i + half : i];
    for (int64_t i = half; i < d; ++i) yh[i] = xh[i] * ch[i] + xh[i - half] * sh[kTranspose ? i - half : i];
  }
}

// The two directions as plain functions: GCC clones those, not templates.
HEADROOM_VECTOR_CLONES
void ForwardHeads(const float* x, const float* c, const float* s, float* y, int64_t begin, int64_t end,
                  int64_t table_heads, int64_t d) {
  RotateHeads<false>(x, c, s, y, begin, end, table_heads, d);
}
HEADROOM_VECTOR_CLONES
void BackwardHeads(const float* x, const float* c, const float* s, float* y, int64_t begin, int64_t end,
                   int64_t table_heads, int64_t d) {
  RotateHeads<true>(x, c, s, y, begin, end, table_heads, d);
}

template <bool kTranspose>
torch::Tensor Rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& signed_sin) {
  const int64_t d = x.size(-1), heads = x.numel() / std::max<int64_t>(1, d), table_heads = cos.numel() / d;
  auto y = torch::empty_like(x);
  const float *xp = x.data_ptr<float>(), *cp = cos.data_ptr<float>(), *sp = signed_sin.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, heads, GrainOfItems(d), [&](int64_t begin, int64_t end) {
    (kTranspose ? BackwardHeads : ForwardHeads)(xp, cp, sp, yp, begin, end, table_heads, d);
  });
  return y;
}

class FusedRotaryFunction : public torch::autograd::Function<FusedRotaryFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos,
                               const torch::Tensor& signed_sin) {
    ctx->save_for_backward({cos, signed_sin});
    return Rotate<false>(x, cos, signed_sin);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {Rotate<true>(grads[0].contiguous(), saved[0], saved[1]), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool FusedRotaryApplies(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& signed_sin) {
  auto fp32_cpu = [](const torch::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous();
  };
  return fp32_cpu(x) && fp32_cpu(cos) && fp32_cpu(signed_sin) && x.dim() == 4 && x.size(-1) % 2 == 0 &&
         cos.dim() == 3 && cos.sizes() == signed_sin.sizes() && cos.sizes() == x.sizes().slice(1) &&
         !cos.requires_grad() && !signed_sin.requires_grad();
}

torch::Tensor FusedRotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& signed_sin) {
  TORCH_CHECK(FusedRotaryApplies(x, cos, signed_sin), "fused rotary: x ", x.toString(), " ", x.sizes(), ", cos ",
              cos.sizes(), " and signed sin ", signed_sin.sizes(),
              " must be contiguous fp32 CPU tensors [B, t, n, d] and [t, n, d] (constants), d even");
  if (torch::GradMode::is_enabled() && x.requires_grad()) return FusedRotaryFunction::apply(x, cos, signed_sin);
  return Rotate<false>(x, cos, signed_sin);
}

}  // namespace headroom::worker
