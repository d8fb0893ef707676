#include <spdlog/spdlog.h>

#include "worker/model/fused_attention.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <vector>

#include "worker/model/cpu_kernel_support.h"

namespace headroom::worker {
namespace {

// Element (b, h, t, d) of a head-major view lives at base + b*sb + h*sh + t*st + d.
struct HeadView {
  float* base;
  int64_t sb, sh, st;
  float* at(int64_t b, int64_t h) const { return base + b * sb + h * sh; }
};

// q, k, v of the packed projection [B, T, 3H] as head-major views.
struct PackedQkv {
  HeadView q, k, v;
};
PackedQkv ViewsOf(float* qkv, int64_t t, int64_t hidden, int64_t head_dim) {
  const int64_t sb = t * 3 * hidden, st = 3 * hidden;
  return {{qkv, sb, head_dim, st}, {qkv + hidden, sb, head_dim, st}, {qkv + 2 * hidden, sb, head_dim, st}};
}

HeadView ViewOf(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 4 && x.stride(3) == 1, "fused attention: expected [B, heads, T, D] with contiguous D");
  return {x.data_ptr<float>(), x.stride(0), x.stride(1), x.stride(2)};
}

inline void Axpy(float* y, float a, const float* x, int64_t n) {
  for (int64_t d = 0; d < n; ++d) y[d] += a * x[d];
}

// One (sequence, head): queries 0..tq-1 at positions start.., keys 0..start+tq-1.
// Writes the output rows and, when `probs` is set, the softmax rows [tq, start + tq]
// (zero past each query's position) for the backward. `scores` holds start + tq floats.
HEADROOM_VECTOR_CLONES
void ForwardHead(const float* q, int64_t qst, const float* k, int64_t kst, const float* v, int64_t vst, float* o,
                 int64_t ost, float* probs, int64_t tq, int64_t start, int64_t dim, float scale, float* scores) {
  const int64_t tk = start + tq;
  for (int64_t i = 0; i < tq; ++i) {
    const int64_t visible = start + i + 1;
    const float* qi = q + i * qst;
    float top = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < visible; ++j) {
      scores[j] = scale * Dot(qi, k + j * kst, dim);
      top = std::max(top, scores[j]);
    }
    float total = 0;
    for (int64_t j = 0; j < visible; ++j) {
      scores[j] = std::exp(scores[j] - top);
      total += scores[j];
    }
    const float inv = 1.0f / total;
    float* oi = o + i * ost;
    for (int64_t d = 0; d < dim; ++d) oi[d] = 0;
    for (int64_t j = 0; j < visible; ++j) {
      const float p = scores[j] * inv;
      Axpy(oi, p, v + j * vst, dim);
      if (probs) probs[i * tk + j] = p;
    }
    if (probs) {
      for (int64_t j = visible; j < tk; ++j) probs[i * tk + j] = 0;
    }
  }
}

// The backward of one (sequence, head): queries 0..tq-1 at positions start.. (rows
// start.. of q and dq), keys 0..start+tq-1. From the output's gradient and the saved
// softmax rows [tq, start + tq], accumulates into dq, dk, dv (zeroed by the caller).
//   dP = dO V^T;  dS = P * (dP - rowsum(P * dP));  dQ = scale dS K;  dK = scale dS^T Q;
//   dV = P^T dO.  `dp` holds start + tq floats.
HEADROOM_VECTOR_CLONES
void BackwardHead(const float* q, const float* k, const float* v, int64_t st, const float* go, int64_t gst,
                  const float* probs, float* dq, float* dk, float* dv, int64_t tq, int64_t start, int64_t dim,
                  float scale, float* dp) {
  const int64_t tk = start + tq;
  for (int64_t i = 0; i < tq; ++i) {
    const int64_t visible = start + i + 1;
    const float* goi = go + i * gst;
    const float* pi = probs + i * tk;
    float weighted = 0;
    for (int64_t j = 0; j < visible; ++j) {
      dp[j] = Dot(goi, v + j * st, dim);
      weighted += pi[j] * dp[j];
    }
    float* dqi = dq + (start + i) * st;
    const float* qi = q + (start + i) * st;
    for (int64_t j = 0; j < visible; ++j) {
      const float ds = pi[j] * (dp[j] - weighted) * scale;
      Axpy(dqi, ds, k + j * st, dim);
      Axpy(dk + j * st, ds, qi, dim);
      Axpy(dv + j * st, pi[j], goi, dim);
    }
  }
}

void CheckInput(const torch::Tensor& x, const char* what) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "fused attention: ", what,
              " must be an fp32 CPU tensor, got ", x.toString());
}

// Queries at positions first..t-1 over keys 0..t-1, all from the packed projection.
torch::Tensor SelfAttentionForward(const torch::Tensor& qkv, int64_t heads, int64_t first, torch::Tensor* probs_out) {
  const int64_t b = qkv.size(0), t = qkv.size(1), hidden = qkv.size(2) / 3, dim = hidden / heads;
  const int64_t tq = t - first;
  auto out = torch::empty({b, tq, hidden}, qkv.options());
  float* probs = nullptr;
  if (probs_out) {
    *probs_out = torch::empty({b, heads, tq, t}, qkv.options());
    probs = probs_out->data_ptr<float>();
  }
  const PackedQkv in = ViewsOf(qkv.data_ptr<float>(), t, hidden, dim);
  const HeadView o{out.data_ptr<float>(), tq * hidden, dim, hidden};
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  at::parallel_for(0, b * heads, GrainOfItems(tq * t * dim), [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(t));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t s = bh / heads, h = bh % heads;
      ForwardHead(in.q.at(s, h) + first * in.q.st, in.q.st, in.k.at(s, h), in.k.st, in.v.at(s, h), in.v.st, o.at(s, h),
                  o.st, probs ? probs + bh * tq * t : nullptr, tq, first, dim, scale, scores.data());
    }
  });
  return out;
}

class FusedSelfAttentionFunction : public torch::autograd::Function<FusedSelfAttentionFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& qkv, int64_t heads,
                               int64_t first) {
    torch::Tensor probs;
    auto out = SelfAttentionForward(qkv, heads, first, &probs);
    ctx->save_for_backward({qkv, probs});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["first"] = first;
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& qkv = saved[0];
    const torch::Tensor& probs = saved[1];
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const int64_t first = ctx->saved_data["first"].toInt();
    const int64_t b = qkv.size(0), t = qkv.size(1), hidden = qkv.size(2) / 3, dim = hidden / heads;
    const int64_t tq = t - first;
    auto grad_out = grads[0].contiguous();
    auto grad_qkv = torch::zeros_like(qkv);
    const PackedQkv in = ViewsOf(qkv.data_ptr<float>(), t, hidden, dim);
    const PackedQkv g = ViewsOf(grad_qkv.data_ptr<float>(), t, hidden, dim);
    const HeadView go{grad_out.data_ptr<float>(), tq * hidden, dim, hidden};
    const float* p = probs.data_ptr<float>();
    const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
    at::parallel_for(0, b * heads, GrainOfItems(tq * t * dim), [&](int64_t begin, int64_t end) {
      std::vector<float> dp(static_cast<size_t>(t));
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t s = bh / heads, h = bh % heads;
        BackwardHead(in.q.at(s, h), in.k.at(s, h), in.v.at(s, h), in.q.st, go.at(s, h), go.st, p + bh * tq * t,
                     g.q.at(s, h), g.k.at(s, h), g.v.at(s, h), tq, first, dim, scale, dp.data());
      }
    });
    return {grad_qkv, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool FusedAttentionApplies(const torch::Tensor& like, int64_t keys) {
  return like.device().is_cpu() && like.scalar_type() == torch::kFloat32 && keys <= kFusedAttentionMaxKeys;
}

torch::Tensor FusedSelfAttention(const torch::Tensor& qkv, int64_t heads, int64_t first_query) {
  CheckInput(qkv, "qkv");
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % (3 * heads) == 0, "fused attention: qkv ", qkv.sizes(),
              " is not [B, T, 3 * heads * head_dim] for ", heads, " heads");
  TORCH_CHECK(first_query >= 0 && first_query < qkv.size(1), "fused attention: first query ", first_query,
              " outside the ", qkv.size(1), " positions");
  auto packed = qkv.contiguous();
  if (torch::GradMode::is_enabled() && packed.requires_grad()) {
    return FusedSelfAttentionFunction::apply(packed, heads, first_query);
  }
  return SelfAttentionForward(packed, heads, first_query, nullptr);
}

torch::Tensor FusedCachedAttention(const torch::Tensor& q, const torch::Tensor& keys, const torch::Tensor& values,
                                   int64_t start) {
  CheckInput(q, "q");
  CheckInput(keys, "keys");
  CheckInput(values, "values");
  const int64_t b = q.size(0), heads = q.size(1), tq = q.size(2), dim = q.size(3);
  TORCH_CHECK(keys.size(2) == start + tq && values.sizes() == keys.sizes(), "fused attention: ", tq,
              " queries from position ", start, " need ", start + tq, " keys, got ", keys.sizes());
  TORCH_CHECK(!(torch::GradMode::is_enabled() && (q.requires_grad() || keys.requires_grad())),
              "fused attention: the cached path has no backward (generation runs without grad)");
  auto out = torch::empty({b, tq, heads * dim}, q.options());
  const HeadView qv = ViewOf(q), kv = ViewOf(keys), vv = ViewOf(values);
  const HeadView o{out.data_ptr<float>(), tq * heads * dim, dim, heads * dim};
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  at::parallel_for(0, b * heads, GrainOfItems(tq * (start + tq) * dim), [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(start + tq));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t s = bh / heads, h = bh % heads;
      ForwardHead(qv.at(s, h), qv.st, kv.at(s, h), kv.st, vv.at(s, h), vv.st, o.at(s, h), o.st, nullptr, tq, start, dim,
                  scale, scores.data());
    }
  });
  return out;
}

}  // namespace headroom::worker
