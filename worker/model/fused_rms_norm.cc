#include <spdlog/spdlog.h>

#include "worker/model/fused_rms_norm.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "worker/model/cpu_kernel_support.h"

namespace headroom::worker {
namespace {

// Rows [begin, end) of x [rows, width]: y = w * (x * r), r = 1 / sqrt(mean(x^2) + eps),
// kept per row in inv when set.
HEADROOM_VECTOR_CLONES
void ForwardRows(const float* x, const float* w, float* y, float* inv, int64_t begin, int64_t end, int64_t width,
                 float eps) {
  for (int64_t row = begin; row < end; ++row) {
    const float* xr = x + row * width;
    float* yr = y + row * width;
    const float r = 1.0f / std::sqrt(Dot(xr, xr, width) / static_cast<float>(width) + eps);
    for (int64_t i = 0; i < width; ++i) yr[i] = w[i] * (xr[i] * r);
    if (inv) inv[row] = r;
  }
}

// The backward of rows [begin, end): with gw = g * w and dot = sum(gw * x),
//   dx = r * gw - x * r^3 * dot / width;   dw += g * x * r (summed into dw_part).
HEADROOM_VECTOR_CLONES
void BackwardRows(const float* x, const float* w, const float* inv, const float* g, float* dx, float* dw_part,
                  int64_t begin, int64_t end, int64_t width, float* gw) {
  for (int64_t row = begin; row < end; ++row) {
    const float* xr = x + row * width;
    const float* gr = g + row * width;
    float* dxr = dx + row * width;
    const float r = inv[row];
    for (int64_t i = 0; i < width; ++i) gw[i] = gr[i] * w[i];
    const float c = r * r * r * Dot(gw, xr, width) / static_cast<float>(width);
    for (int64_t i = 0; i < width; ++i) {
      dxr[i] = r * gw[i] - xr[i] * c;
      dw_part[i] += gr[i] * (xr[i] * r);
    }
  }
}

torch::Tensor Forward(const torch::Tensor& x, const torch::Tensor& weight, double eps, torch::Tensor* inv_out) {
  const int64_t width = x.size(-1), rows = x.numel() / std::max<int64_t>(1, width);
  auto y = torch::empty_like(x);
  float* inv = nullptr;
  if (inv_out) {
    *inv_out = torch::empty({rows}, x.options());
    inv = inv_out->data_ptr<float>();
  }
  const float* xp = x.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, rows, GrainOfItems(width), [&](int64_t begin, int64_t end) {
    ForwardRows(xp, wp, yp, inv, begin, end, width, static_cast<float>(eps));
  });
  return y;
}

class FusedRmsNormFunction : public torch::autograd::Function<FusedRmsNormFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, double eps) {
    torch::Tensor inv;
    auto y = Forward(x, weight, eps, &inv);
    ctx->save_for_backward({x, weight, inv});
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1], &inv = saved[2];
    const auto g = grads[0].contiguous();
    const int64_t width = x.size(-1), rows = inv.size(0);
    auto dx = torch::empty_like(x);
    // One partial weight gradient per task, summed after: no two threads add to one row.
    const int64_t grain = GrainOfItems(width);
    const int64_t tasks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), (rows + grain - 1) / grain));
    auto dw_parts = torch::zeros({tasks, width}, x.options());
    const float *xp = x.data_ptr<float>(), *wp = weight.data_ptr<float>(), *ip = inv.data_ptr<float>();
    const float* gp = g.data_ptr<float>();
    float* dxp = dx.data_ptr<float>();
    float* parts = dw_parts.data_ptr<float>();
    at::parallel_for(0, tasks, 1, [&](int64_t first, int64_t last) {
      std::vector<float> gw(static_cast<size_t>(width));
      for (int64_t task = first; task < last; ++task) {
        BackwardRows(xp, wp, ip, gp, dxp, parts + task * width, rows * task / tasks, rows * (task + 1) / tasks, width,
                     gw.data());
      }
    });
    return {dx, tasks == 1 ? dw_parts.view({width}) : dw_parts.sum(0), torch::Tensor()};
  }
};

}  // namespace

bool FusedRmsNormApplies(const torch::Tensor& x, const torch::Tensor& weight) {
  return x.device().is_cpu() && weight.device().is_cpu() && x.scalar_type() == torch::kFloat32 &&
         weight.scalar_type() == torch::kFloat32 && x.dim() >= 1 && weight.dim() == 1 && x.size(-1) == weight.size(0) &&
         x.is_contiguous() && weight.is_contiguous();
}

torch::Tensor FusedRmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  TORCH_CHECK(FusedRmsNormApplies(x, weight), "fused RMSNorm: x ", x.toString(), " ", x.sizes(), " and weight ",
              weight.toString(), " ", weight.sizes(), " must be contiguous fp32 CPU tensors, x [..., H], weight [H]");
  if (torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad())) {
    return FusedRmsNormFunction::apply(x, weight, eps);
  }
  return Forward(x, weight, eps, nullptr);
}

}  // namespace headroom::worker
