// Left-padded prompts (attention_mask.h): the model, pretrained or a preset's random
// weights, gives every row of a left-padded batch what it gives that row alone (fp32 on CPU,
// to rounding): a full forward's
// logits, response log-probs and their gradients, and KV-cached greedy generation, through
// the rollout engine too; nothing turns NaN, not even at pad positions. Rotary attention
// depends only on relative positions, so the shift is invisible up to rounding.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/worker/helpers/preset_model.h"
#include "tests/worker/helpers/fp32_tolerance.h"
#include "worker/grpo/log_probs.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/model/kv_cache.h"
#include "worker/rollout/rollout_engine.h"
#include "worker/tasks/tokenizer.h"

namespace headroom::worker {
namespace {
namespace fs = std::filesystem;

constexpr int64_t kPad = 0;
const std::vector<int64_t> kLengths = {5, 1, 7};  // one row all but its last token padding

CausalLM Load(const std::string& name) {
  if (name == "preset") {
    testing::ModelDims dims;
    dims.max_seq_len = 32;
    return testing::PresetModel(dims);
  }
  return LoadHfCausalLM((fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf" / name).string(), 32);
}

struct PaddedBatch {
  std::vector<torch::Tensor> rows;  // each row alone, [length]
  torch::Tensor tokens;             // [B, longest], left-padded with kPad
  torch::Tensor padding;            // [B] int64
  int64_t longest = 0;
};

PaddedBatch MakeBatch(int64_t vocab, uint64_t seed) {
  torch::manual_seed(seed);
  PaddedBatch b;
  for (int64_t n : kLengths) b.longest = std::max(b.longest, n);
  const int64_t rows = static_cast<int64_t>(kLengths.size());
  b.tokens = torch::full({rows, b.longest}, kPad, torch::kInt64);
  b.padding = torch::empty({rows}, torch::kInt64);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t n = kLengths[static_cast<size_t>(i)];
    b.rows.push_back(torch::randint(3, vocab, {n}, torch::kInt64));
    b.tokens[i].narrow(0, b.longest - n, n).copy_(b.rows.back());
    b.padding[i] = b.longest - n;
  }
  return b;
}

// Padded and alone sum in different orders (other matmul shapes): equal within fp32
// rounding of the model's forward (helpers/fp32_tolerance.h), twice over and with a
// logsumexp over the vocabulary for log-probs (z_t / T - logsumexp(z / T)); magnitude from
// the values compared (a log-prob is as large as the logit spread behind it, or larger).
void ExpectClose(CausalLM model, const torch::Tensor& got, const torch::Tensor& expected, const std::string& what) {
  ASSERT_EQ(got.sizes(), expected.sizes()) << what;
  const testing::ForwardSums sums = testing::SumsOfForward(model, kLengths.back() + 8);
  const double tol = 2 * testing::SummationTolerance(expected.abs().max().item<double>(), sums.terms, sums.depth) +
                     testing::SummationTolerance(1.0, model->vocab_size());
  EXPECT_TRUE(testing::WithinTolerance(got, expected, tol)) << what;
}

class PaddedHfModel : public ::testing::TestWithParam<std::string> {};

TEST_P(PaddedHfModel, FullForwardRowsEqualEachRowAlone) {
  CausalLM model = Load(GetParam());
  torch::NoGradGuard no_grad;
  const PaddedBatch b = MakeBatch(model->vocab_size(), 1);
  const auto logits = model->forward(b.tokens, 0, b.padding);
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>()) << "a pad position's query turned NaN";
  for (size_t i = 0; i < b.rows.size(); ++i) {
    const int64_t n = b.rows[i].size(0);
    const auto alone = model->forward(b.rows[i].unsqueeze(0)).squeeze(0);
    ExpectClose(model, logits[static_cast<int64_t>(i)].narrow(0, b.longest - n, n), alone, "row " + std::to_string(i));
  }
  // Padding of zeros is no padding, bit for bit.
  const auto unpadded = b.tokens.narrow(0, 2, 1);
  EXPECT_TRUE(torch::equal(model->forward(unpadded, 0, torch::zeros({1}, torch::kInt64)), model->forward(unpadded)));
}

TEST_P(PaddedHfModel, ResponseLogProbsAndGradientsEqualEachRowAlone) {
  CausalLM model = Load(GetParam());
  const PaddedBatch b = MakeBatch(model->vocab_size(), 2);
  const int64_t r = 4;
  const auto responses = torch::randint(3, model->vocab_size(), {b.tokens.size(0), r}, torch::kInt64);
  const auto sequences = torch::cat({b.tokens, responses}, 1);
  const double temperature = 0.8;

  const auto logp = ResponseLogProbs(model, sequences, b.longest, temperature, {}, b.padding);
  logp.sum().backward();
  std::vector<torch::Tensor> batch_grads, alone_grads;
  for (auto& [name, p] : model->OrderedParameters()) {
    EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>()) << name;
    batch_grads.push_back(p.grad().clone());
    p.mutable_grad().reset();
  }
  // The same sum row by row, each row unpadded.
  for (size_t i = 0; i < b.rows.size(); ++i) {
    const auto row = torch::cat({b.rows[i], responses[static_cast<int64_t>(i)]}).unsqueeze(0);
    const auto alone = ResponseLogProbs(model, row, b.rows[i].size(0), temperature);
    ExpectClose(model, logp.narrow(0, static_cast<int64_t>(i), 1), alone, "row " + std::to_string(i));
    alone.sum().backward();
  }
  const auto params = model->OrderedParameters();
  // fp32 rounding of different summation orders, relative to the gradient's scale.
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& g = params[i].second.grad();
    const double diff = (batch_grads[i] - g).abs().max().item<double>();
    EXPECT_LE(diff, 1e-4 * std::max(1.0, g.abs().max().item<double>())) << params[i].first;
  }
  // The no-grad path in micro-batches splits the padding with the rows.
  ExpectClose(model, ResponseLogProbsNoGrad(model, sequences, b.longest, temperature, 2, {}, b.padding), logp.detach(),
              "no-grad");
}

TEST_P(PaddedHfModel, CachedGreedyGenerationEqualsEachRowAlone) {
  CausalLM model = Load(GetParam());
  torch::NoGradGuard no_grad;
  const PaddedBatch b = MakeBatch(model->vocab_size(), 3);
  const int64_t rows = b.tokens.size(0), steps = 6;

  // Prefill and decode by hand: every step's logits, row by row.
  KvCache cache(model->kv_cache_shape(), rows, b.longest + steps, torch::kCPU);
  cache.Reset(rows, b.padding);
  std::vector<torch::Tensor> batch_logits{model->ForwardCached(b.tokens, cache)};
  for (int64_t t = 1; t < steps; ++t) {
    batch_logits.push_back(model->ForwardCached(batch_logits.back().argmax(-1).unsqueeze(1), cache));
  }
  for (int64_t i = 0; i < rows; ++i) {
    KvCache alone(model->kv_cache_shape(), 1, b.longest + steps, torch::kCPU);
    alone.Reset(1);
    auto logits = model->ForwardCached(b.rows[static_cast<size_t>(i)].unsqueeze(0), alone);
    for (int64_t t = 0; t < steps; ++t) {
      if (t > 0) logits = model->ForwardCached(logits.argmax(-1).unsqueeze(1), alone);
      ExpectClose(model, batch_logits[static_cast<size_t>(t)].narrow(0, i, 1), logits,
                  "row " + std::to_string(i) + " step " + std::to_string(t));
      ASSERT_EQ(batch_logits[static_cast<size_t>(t)][i].argmax().item<int64_t>(), logits.argmax(-1).item<int64_t>());
    }
  }

  // The rollout engine, greedy: each row's response is the one it gets alone.
  RolloutEngine engine(model->kv_cache_shape(), rows, b.longest, steps, torch::kCPU, CharTokenizer::Format());
  const Rollout all = engine.Generate(model, b.tokens, {1, 2, 3}, 0.0, b.padding);
  EXPECT_TRUE(torch::equal(all.prompt_padding, b.padding));
  EXPECT_EQ(all.prompt_length, b.longest);
  for (int64_t i = 0; i < rows; ++i) {
    const Rollout alone = engine.Generate(model, b.rows[static_cast<size_t>(i)].unsqueeze(0), {1}, 0.0);
    EXPECT_TRUE(torch::equal(all.responses()[i], alone.responses()[0])) << "row " << i;
    EXPECT_TRUE(torch::equal(all.response_mask[i], alone.response_mask[0])) << "row " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PaddedHfModel, ::testing::Values("preset", "qwen2", "qwen3", "llama3"));

}  // namespace
}  // namespace headroom::worker
