// ResponseLogProbs passes the model's final hidden states through its output head a chunk
// of tokens at a time; it must equal log_softmax over forward()'s logits, values and every
// parameter's gradient, whatever the chunk size: for a preset-architecture model (random
// weights, untied head) and the Hugging Face fixtures (Qwen2/Qwen3 tied, Llama 3 untied),
// with temperature and a response-token restriction.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <string>

#include "tests/worker/helpers/fp32_tolerance.h"
#include "worker/grpo/log_probs.h"
#include "worker/model/hf_causal_lm.h"
#include "tests/worker/helpers/preset_model.h"
#include "worker/model/hf_causal_lm.h"

namespace headroom::worker {
namespace {
namespace fs = std::filesystem;

constexpr int64_t kPrompt = 4, kTotal = 9;

CausalLM MakeModel(const std::string& name) {
  if (name == "preset") {
    testing::ModelDims c;
    c.layers = 2;
    c.hidden = 16;
    c.heads = 2;
    c.ffn_hidden = 32;
    c.max_seq_len = 16;
    c.seed = 4;
    return testing::PresetModel(c);
  }
  return LoadHfCausalLM((fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf" / name).string(), 32);
}

// The computation the chunked one replaces: every logit of the batch at once.
torch::Tensor FullLogitsLogProbs(CausalLM model, const torch::Tensor& sequences, double temperature,
                                 const torch::Tensor& bias) {
  auto logits = model->forward(sequences.narrow(1, 0, kTotal - 1), kPrompt - 1).to(torch::kFloat32);
  logits = (logits + bias) / temperature;
  auto targets = sequences.narrow(1, kPrompt, kTotal - kPrompt);
  targets = torch::where(bias.index({targets}).isinf(), bias.argmax().expand_as(targets), targets);
  return torch::log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1);
}

// How far a log-prob computed in another summation order may be from the full-logits one
// (helpers/fp32_tolerance.h). log p = z_t / T - logsumexp(z / T): both terms carry the
// rounding of the logits z (testing::SumsOfForward); logsumexp adds
// a sum over the vocabulary of positive terms (relative error vocab * eps, so that much
// absolute error after the log).
double LogProbTolerance(CausalLM model, const torch::Tensor& sequences, double temperature) {
  const testing::ForwardSums sums = testing::SumsOfForward(model, kTotal);
  torch::NoGradGuard no_grad;
  const auto logits = model->forward(sequences.narrow(1, 0, kTotal - 1), kPrompt - 1) / temperature;
  const double magnitude = logits.abs().max().item<double>();
  return 2 * testing::SummationTolerance(magnitude, sums.terms, sums.depth) +
         testing::SummationTolerance(1.0, model->vocab_size());
}

std::vector<torch::Tensor> TakeGradients(CausalLM model) {
  std::vector<torch::Tensor> out;
  for (auto& [name, p] : model->OrderedParameters()) {
    out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    p.mutable_grad().reset();
  }
  return out;
}

class ChunkedResponseLogProbs : public ::testing::TestWithParam<std::string> {};

TEST_P(ChunkedResponseLogProbs, EqualFullLogitsValuesAndGradients) {
  CausalLM model = MakeModel(GetParam());
  const int64_t vocab = model->vocab_size();
  torch::manual_seed(11);
  const auto sequences = torch::randint(3, vocab, {3, kTotal}, torch::kInt64);
  // Tokens from vocab - 5 on are excluded (some sampled targets among them).
  auto bias = torch::zeros({vocab});
  bias.narrow(0, vocab - 5, 5).fill_(-std::numeric_limits<float>::infinity());
  const auto weights = torch::randn({3, kTotal - kPrompt});
  const double temperature = 0.7;

  const double tol = LogProbTolerance(model, sequences, temperature);
  const auto expected = FullLogitsLogProbs(model, sequences, temperature, bias);
  (expected * weights).sum().backward();
  const auto expected_grads = TakeGradients(model);
  // 15 response tokens: one per chunk, uneven chunks, exactly one, the default.
  for (int64_t chunk : {1, 4, 15, 0}) {
    SCOPED_TRACE(GetParam() + " chunk " + std::to_string(chunk));
    const auto got = ResponseLogProbs(model, sequences, kPrompt, temperature, bias, {}, chunk);
    ASSERT_EQ(got.sizes(), expected.sizes());
    EXPECT_LE((got - expected).abs().max().item<double>(), tol);
    (got * weights).sum().backward();
    const auto grads = TakeGradients(model);
    const auto params = model->OrderedParameters();
    // fp32 rounding of a different summation order, relative to the gradient's scale (a key
    // bias's true gradient is 0: what either path computes for it is rounding noise).
    for (size_t i = 0; i < grads.size(); ++i) {
      const double diff = (grads[i] - expected_grads[i]).abs().max().item<double>();
      const double scale = std::max(1.0, expected_grads[i].abs().max().item<double>());
      EXPECT_LE(diff, 1e-4 * scale) << params[i].first;
    }
  }
  const auto no_grad = ResponseLogProbsNoGrad(model, sequences, kPrompt, temperature, 2, bias);
  EXPECT_FALSE(no_grad.requires_grad());
  EXPECT_LE((no_grad - expected).abs().max().item<double>(), tol) << "micro-batches of 2 rows";
}

INSTANTIATE_TEST_SUITE_P(Models, ChunkedResponseLogProbs, ::testing::Values("preset", "qwen2", "qwen3", "llama3"));

}  // namespace
}  // namespace headroom::worker
