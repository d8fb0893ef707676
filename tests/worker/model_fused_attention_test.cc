// The fused CPU attention against plain matmul + mask + softmax + matmul: outputs and
// gradients for several shapes (head widths that are not a multiple of the kernels'
// 8-wide lanes included), the cached path from a KV-cache-like strided buffer, the
// errors it names, and the transformer agreeing with itself across the two paths.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/worker/helpers/fp32_tolerance.h"
#include "worker/model/fused_attention.h"
#include "tests/worker/helpers/preset_model.h"
#include "worker/model/hf_causal_lm.h"

namespace headroom::worker {
namespace {

// The matmul path on q, k, v [B, heads, T, D]: queries at positions start.., causal.
torch::Tensor Reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t start) {
  const int64_t tq = q.size(2), tk = k.size(2), b = q.size(0), heads = q.size(1), dim = q.size(3);
  auto mask = torch::full({tk, tk}, -std::numeric_limits<float>::infinity()).triu(1).narrow(0, start, tq);
  auto att = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(dim)) + mask;
  return torch::matmul(torch::softmax(att, -1), v).transpose(1, 2).reshape({b, tq, heads * dim});
}

// How far the fused and the matmul paths may be apart, summing in other orders
// (helpers/fp32_tolerance.h): a score sums dim products, and its error e moves the softmax
// weights by up to 2e relative, so the output, a weighted mean of the values, by up to
// 2e max|v|, beside the output's own sum over the keys.
double OutputTolerance(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  torch::NoGradGuard no_grad;
  const int64_t dim = q.size(-1), keys = k.size(-2);
  const auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(dim));
  const double score = scores.abs().max().item<double>();
  const double value = v.abs().max().item<double>();
  return 2 * testing::SummationTolerance(score, dim) * value + testing::SummationTolerance(value, keys);
}

// The backward chains three sums (through the output, the softmax, the scores), each over
// at most the longer of dim and the keys.
double GradientTolerance(const torch::Tensor& expected, int64_t dim, int64_t keys) {
  return testing::SummationTolerance(expected.abs().max().item<double>(), std::max(dim, keys), 3);
}

// q, k, v of a packed [B, T, 3H] projection, as HfCausalLMImpl::Block packs it.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> Split(const torch::Tensor& qkv, int64_t heads) {
  const int64_t b = qkv.size(0), t = qkv.size(1), dim = qkv.size(2) / (3 * heads);
  auto parts = qkv.view({b, t, 3, heads, dim}).permute({2, 0, 3, 1, 4});
  return {parts[0], parts[1], parts[2]};
}

struct Shape {
  int64_t batch, t, heads, dim;
};

class FusedSelfAttentionTest : public ::testing::TestWithParam<Shape> {};

TEST_P(FusedSelfAttentionTest, OutputAndGradientsEqualTheMatmulPath) {
  const Shape s = GetParam();
  torch::manual_seed(7);
  auto qkv = torch::randn({s.batch, s.t, 3 * s.heads * s.dim});
  auto upstream = torch::randn({s.batch, s.t, s.heads * s.dim});

  auto fused_in = qkv.clone().requires_grad_(true);
  auto fused = FusedSelfAttention(fused_in, s.heads);
  (fused * upstream).sum().backward();

  auto ref_in = qkv.clone().requires_grad_(true);
  auto [q, k, v] = Split(ref_in, s.heads);
  auto ref = Reference(q, k, v, 0);
  (ref * upstream).sum().backward();

  ASSERT_EQ(fused.sizes(), ref.sizes());
  EXPECT_TRUE(testing::WithinTolerance(fused, ref, OutputTolerance(q, k, v)));
  EXPECT_TRUE(testing::WithinTolerance(fused_in.grad(), ref_in.grad(), GradientTolerance(ref_in.grad(), s.dim, s.t)));
  // Not a vacuous comparison: every part of q, k and v gets a gradient.
  EXPECT_GT(ref_in.grad().abs().sum().item<float>(), 0);
}

TEST_P(FusedSelfAttentionTest, QueriesFromALaterPositionEqualTheMatmulPathRows) {
  const Shape s = GetParam();
  const int64_t first = s.t / 2;
  torch::manual_seed(8);
  auto qkv = torch::randn({s.batch, s.t, 3 * s.heads * s.dim});
  auto upstream = torch::randn({s.batch, s.t - first, s.heads * s.dim});

  auto fused_in = qkv.clone().requires_grad_(true);
  auto fused = FusedSelfAttention(fused_in, s.heads, first);
  (fused * upstream).sum().backward();

  auto ref_in = qkv.clone().requires_grad_(true);
  auto [q, k, v] = Split(ref_in, s.heads);
  auto ref = Reference(q, k, v, 0).narrow(1, first, s.t - first);
  (ref * upstream).sum().backward();

  ASSERT_EQ(fused.sizes(), ref.sizes());
  EXPECT_TRUE(testing::WithinTolerance(fused, ref, OutputTolerance(q, k, v)));
  EXPECT_TRUE(testing::WithinTolerance(fused_in.grad(), ref_in.grad(), GradientTolerance(ref_in.grad(), s.dim, s.t)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedSelfAttentionTest,
                         ::testing::Values(Shape{1, 1, 1, 8},     // one position attends to itself
                                           Shape{3, 7, 2, 12},    // head width with a 4-wide tail
                                           Shape{16, 10, 4, 16},  // the tiny preset's shape
                                           Shape{2, 10, 8, 64},   // the small preset's heads
                                           Shape{2, kFusedAttentionMaxKeys, 2, 5}));

TEST(FusedSelfAttention, WithoutGradItKeepsNothingForBackward) {
  torch::manual_seed(3);
  auto qkv = torch::randn({2, 6, 3 * 2 * 8});
  torch::Tensor out;
  {
    torch::NoGradGuard no_grad;
    out = FusedSelfAttention(qkv.clone().requires_grad_(true), 2);
  }
  EXPECT_FALSE(out.requires_grad());
  auto [q, k, v] = Split(qkv, 2);
  EXPECT_TRUE(testing::WithinTolerance(out, Reference(q, k, v, 0), OutputTolerance(q, k, v)));
}

TEST(FusedCachedAttention, QueriesAfterCachedPositionsEqualTheMatmulPath) {
  torch::manual_seed(11);
  const int64_t b = 3, heads = 4, dim = 12, max_seq = 20;
  // A KV-cache-like buffer [B, heads, max_seq, D] read through its first start + t rows.
  auto storage = torch::randn({2, b, heads, max_seq, dim});
  auto q_all = torch::randn({b, heads, max_seq, dim});
  torch::NoGradGuard no_grad;
  for (int64_t start : {0, 1, 9}) {
    for (int64_t t : {1, 3}) {
      auto keys = storage[0].narrow(2, 0, start + t);
      auto values = storage[1].narrow(2, 0, start + t);
      auto q = q_all.narrow(2, start, t);
      auto fused = FusedCachedAttention(q, keys, values, start);
      auto ref = Reference(q, keys, values, start);
      EXPECT_TRUE(testing::WithinTolerance(fused, ref, OutputTolerance(q, keys, values)))
          << "start " << start << " t " << t;
    }
  }
}

TEST(FusedAttention, AppliesToShortFp32CpuAttentionOnly) {
  auto f = torch::zeros({1, 1, 3});
  EXPECT_TRUE(FusedAttentionApplies(f, 1));
  EXPECT_TRUE(FusedAttentionApplies(f, kFusedAttentionMaxKeys));
  EXPECT_FALSE(FusedAttentionApplies(f, kFusedAttentionMaxKeys + 1));
  EXPECT_FALSE(FusedAttentionApplies(f.to(torch::kFloat64), 1));
}

TEST(FusedAttention, NamesWhatIsWrong) {
  auto expect_error = [](const std::function<void()>& call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "no error; wanted one naming " << needle;
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([] { FusedSelfAttention(torch::zeros({2, 3, 10}), 2); }, "is not [B, T, 3 * heads * head_dim]");
  expect_error([] { FusedSelfAttention(torch::zeros({2, 3, 12}, torch::kFloat64), 2); }, "fp32 CPU tensor");
  expect_error([] { FusedSelfAttention(torch::zeros({2, 3, 12}), 2, 3); }, "first query 3 outside the 3 positions");
  auto kv = torch::zeros({1, 1, 4, 8});
  expect_error([&] { FusedCachedAttention(torch::zeros({1, 1, 2, 8}), kv, kv, 1); }, "need 3 keys");
  expect_error(
      [&] {
    FusedCachedAttention(torch::zeros({1, 1, 1, 8}).requires_grad_(true), kv, kv, 3);
      },
      "no backward");
}

// A model whose sequences can run past the fused limit, onto the matmul path.
testing::ModelDims SmallModel() {
  testing::ModelDims c;
  c.layers = 2;
  c.hidden = 32;
  c.heads = 4;
  c.ffn_hidden = 64;
  c.max_seq_len = kFusedAttentionMaxKeys + 8;
  return c;
}

// forward(tokens, first) is the full forward's tail, values and gradients, on both
// attention paths (short: fused; longer than the fused limit: matmul).
TEST(FusedAttention, ModelTailForwardEqualsTheFullForwardsTail) {
  for (int64_t t : {int64_t{10}, kFusedAttentionMaxKeys + 6}) {
    const testing::ModelDims c = SmallModel();
    const int64_t first = t - 5;
    torch::manual_seed(6);
    auto tokens = torch::randint(3, spec::kVocabSize, {3, t}, torch::kInt64);
    auto upstream = torch::randn({3, t - first, spec::kVocabSize});
    auto grads = [&](HfCausalLM& model) {
      std::vector<torch::Tensor> out;
      for (auto& [n, p] : model->OrderedParameters()) out.push_back(p.grad().clone());
      return out;
    };
    HfCausalLM full = testing::PresetModel(c), tail = testing::PresetModel(c);
    auto full_logits = full->forward(tokens).narrow(1, first, t - first);
    (full_logits * upstream).sum().backward();
    auto tail_logits = tail->forward(tokens, first);
    (tail_logits * upstream).sum().backward();
    ASSERT_EQ(tail_logits.sizes(), full_logits.sizes());
    EXPECT_TRUE(testing::WithinForwardRounding(full, t, tail_logits, full_logits)) << "T " << t;
    auto g_full = grads(full), g_tail = grads(tail);
    for (size_t i = 0; i < g_full.size(); ++i) {
      EXPECT_TRUE(torch::allclose(g_tail[i], g_full[i], 1e-4, 1e-5)) << "T " << t << " parameter " << i;
    }
  }
}

TEST(FusedAttention, ModelAgreesAcrossThePaths) {
  // The first positions of a sequence longer than the fused limit (matmul path) must see
  // exactly what a short forward over those positions (fused path) sees: causality.
  const testing::ModelDims c = SmallModel();
  HfCausalLM model = testing::PresetModel(c);
  torch::manual_seed(5);
  auto tokens = torch::randint(3, spec::kVocabSize, {2, kFusedAttentionMaxKeys + 4}, torch::kInt64);
  torch::NoGradGuard no_grad;
  auto long_logits = model->forward(tokens).narrow(1, 0, 10);
  auto short_logits = model->forward(tokens.narrow(1, 0, 10));
  EXPECT_TRUE(testing::WithinForwardRounding(model, tokens.size(1), long_logits, short_logits));
}

}  // namespace
}  // namespace headroom::worker
