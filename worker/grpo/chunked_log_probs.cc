#include "worker/grpo/chunked_log_probs.h"

#include <algorithm>

namespace headroom::worker {
namespace {

struct ChunkedHead {
  torch::Tensor head;  // [V, H] in the hidden states' dtype (what autocast would multiply)
  torch::Tensor bias;  // [V] in the logits' dtype: head bias + logit bias, or undefined
  double scale = 1.0;  // 1 / temperature
  torch::ScalarType logits_dtype = torch::kFloat32;

  // z = (h . head^T + bias) * scale for rows [start, start + n), in logits_dtype.
  torch::Tensor Logits(const torch::Tensor& hidden, int64_t start, int64_t n) const {
    auto z = torch::matmul(hidden.narrow(0, start, n), head.t()).to(logits_dtype);
    if (bias.defined()) z = z + bias;
    return scale == 1.0 ? z : z * scale;
  }
};

// Empty tensors stand for "no bias" (Function::apply needs a defined tensor in every slot).
ChunkedHead MakeHead(const torch::Tensor& hidden, const torch::Tensor& head, const torch::Tensor& head_bias,
                     const torch::Tensor& bias, double scale) {
  ChunkedHead h;
  // fp32 logits for bf16/fp16 hidden states; float64 stays float64 (tests compare exactly).
  h.logits_dtype = at::promote_types(torch::kFloat32, hidden.scalar_type());
  h.head = head.to(hidden.scalar_type());
  if (head_bias.numel() > 0) h.bias = head_bias.detach().to(h.logits_dtype);
  if (bias.numel() > 0) h.bias = h.bias.defined() ? h.bias + bias.to(h.logits_dtype) : bias.to(h.logits_dtype);
  h.scale = scale;
  return h;
}

class ChunkedLogProbsFunction : public torch::autograd::Function<ChunkedLogProbsFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& head, const torch::Tensor& head_bias, const torch::Tensor& targets,
                               double scale, const torch::Tensor& bias, int64_t chunk_rows) {
    const ChunkedHead h = MakeHead(hidden, head, head_bias, bias, scale);
    const int64_t rows = hidden.size(0);
    auto out = torch::empty({rows}, hidden.options().dtype(h.logits_dtype));
    auto lse = torch::empty({rows}, out.options());
    for (int64_t start = 0; start < rows; start += chunk_rows) {
      const int64_t n = std::min(chunk_rows, rows - start);
      const auto z = h.Logits(hidden, start, n);
      const auto chunk_lse = z.logsumexp(-1);
      lse.narrow(0, start, n).copy_(chunk_lse);
      out.narrow(0, start, n).copy_(z.gather(1, targets.narrow(0, start, n).unsqueeze(1)).squeeze(1) - chunk_lse);
    }
    ctx->save_for_backward({hidden, head, head_bias, targets, lse});
    ctx->saved_data["bias"] = bias;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["chunk_rows"] = chunk_rows;
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &hidden = saved[0], &head = saved[1], &head_bias = saved[2], &targets = saved[3],
                        &lse = saved[4];
    const torch::Tensor bias = ctx->saved_data["bias"].toTensor();
    const double scale = ctx->saved_data["scale"].toDouble();
    const int64_t chunk_rows = ctx->saved_data["chunk_rows"].toInt();
    const ChunkedHead h = MakeHead(hidden, head, head_bias, bias, scale);
    const auto grad_out = grads[0].to(h.logits_dtype);
    const int64_t rows = hidden.size(0);
    auto grad_hidden = torch::empty_like(hidden);
    auto grad_head = torch::zeros(head.sizes(), head.options().dtype(h.logits_dtype));
    const bool has_head_bias = head_bias.numel() > 0;
    auto grad_head_bias = has_head_bias ? torch::zeros({head.size(0)}, grad_head.options()) : torch::Tensor();
    for (int64_t start = 0; start < rows; start += chunk_rows) {
      const int64_t n = std::min(chunk_rows, rows - start);
      const auto g = grad_out.narrow(0, start, n).unsqueeze(1);
      // d logp / d z = onehot(target) - softmax(z); then through z = (h . head^T) * scale.
      auto dz = h.Logits(hidden, start, n).sub_(lse.narrow(0, start, n).unsqueeze(1)).exp_().mul_(g).neg_();
      dz.scatter_add_(1, targets.narrow(0, start, n).unsqueeze(1), g);
      if (scale != 1.0) dz.mul_(scale);
      const auto dz_in = dz.to(hidden.scalar_type());
      grad_hidden.narrow(0, start, n).copy_(torch::matmul(dz_in, h.head));
      // Accumulated in place: a [V, H] product per chunk beside grad_head would double the
      // head's gradient memory (545 MB for Qwen2.5-0.5B's head in fp32).
      grad_head.addmm_(dz.t(), hidden.narrow(0, start, n).to(h.logits_dtype));
      if (has_head_bias) grad_head_bias.add_(dz.sum(0));
    }
    return {grad_hidden,
            grad_head.to(head.scalar_type()),
            has_head_bias ? grad_head_bias.to(head_bias.scalar_type()) : torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor ChunkedTokenLogProbs(const torch::Tensor& hidden, const torch::Tensor& head, const torch::Tensor& targets,
                                   double temperature, const torch::Tensor& logit_bias, int64_t chunk_rows,
                                   const torch::Tensor& head_bias) {
  TORCH_CHECK(hidden.dim() == 2 && head.dim() == 2 && hidden.size(1) == head.size(1), "chunked log-probs: hidden ",
              hidden.sizes(), " and head ", head.sizes(), " are not [N, H] and [V, H]");
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0), "chunked log-probs: targets ", targets.sizes(),
              " do not match ", hidden.size(0), " rows");
  TORCH_CHECK(!logit_bias.defined() || (logit_bias.dim() == 1 && logit_bias.size(0) == head.size(0)),
              "chunked log-probs: logit bias ", logit_bias.sizes(), " is not [", head.size(0), "]");
  TORCH_CHECK(!head_bias.defined() || (head_bias.dim() == 1 && head_bias.size(0) == head.size(0)),
              "chunked log-probs: head bias ", head_bias.sizes(), " is not [", head.size(0), "]");
  TORCH_CHECK(chunk_rows > 0, "chunked log-probs: chunk_rows must be positive, got ", chunk_rows);
  const double scale = temperature > 0 ? 1.0 / temperature : 1.0;
  // Function::apply needs a defined tensor in every tensor slot: no bias is an empty one.
  const auto none = torch::empty({0}, hidden.options());
  const auto bias = logit_bias.defined() ? logit_bias.detach() : none;
  return ChunkedLogProbsFunction::apply(hidden.contiguous(), head, head_bias.defined() ? head_bias : none,
                                        targets.to(torch::kLong).contiguous(), scale, bias, chunk_rows);
}

}  // namespace headroom::worker
