// Rollout: a sample depends only on its key (not on its batch or position), stops at EOS
// with the right mask, and the generation cache is the same allocation every time.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include "tests/worker/helpers/preset_model.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/rollout/rollout_engine.h"
#include "worker/tasks/tokenizer.h"

namespace headroom::worker {
namespace {

testing::ModelDims Config(int64_t max_seq_len = 12) {
  testing::ModelDims c;
  c.layers = 1;
  c.hidden = 32;
  c.heads = 2;
  c.ffn_hidden = 64;
  c.max_seq_len = max_seq_len;
  c.seed = 5;
  return c;
}

torch::Tensor Prompts(int64_t n) {
  auto p = torch::randint(3, 13, {n, 4}, torch::kInt64);
  p.select(1, 0).fill_(CharTokenizer::kBos);
  return p;
}

// A logit bias making EOS overwhelmingly likely at every step (the head has no bias).
torch::Tensor EosBias(float bias) {
  auto b = torch::zeros({CharTokenizer::kVocabSize});
  b[CharTokenizer::kEos] = bias;
  return b;
}

TEST(Rollout, SampleDependsOnlyOnItsKey) {
  HfCausalLM model = testing::PresetModel(Config());
  model->eval();
  RolloutEngine engine(model->kv_cache_shape(), 8, 4, 6, torch::kCPU, CharTokenizer::Format());
  torch::manual_seed(3);
  auto prompts = Prompts(8);
  std::vector<uint64_t> keys{11, 12, 13, 14, 15, 16, 17, 18};
  auto all = engine.Generate(model, prompts, keys, 1.0);
  // The same samples in another order and batch size (as another rank would see them).
  auto idx = torch::tensor({5, 2, 7}, torch::kInt64);
  auto some = engine.Generate(model, prompts.index_select(0, idx), {16, 13, 18}, 1.0);
  EXPECT_TRUE(torch::equal(some.sequences, all.sequences.index_select(0, idx)));
  EXPECT_TRUE(torch::equal(some.response_mask, all.response_mask.index_select(0, idx)));
  // Other keys give other samples.
  auto other = engine.Generate(model, prompts, {21, 22, 23, 24, 25, 26, 27, 28}, 1.0);
  EXPECT_FALSE(torch::equal(other.sequences, all.sequences));
}

TEST(Rollout, MaskCoversTokensUpToEosAndPadsAfter) {
  HfCausalLM model = testing::PresetModel(Config());
  RolloutEngine engine(model->kv_cache_shape(), 16, 4, 6, torch::kCPU, CharTokenizer::Format());
  // Make EOS overwhelmingly likely at every step: a logit bias (the head has none).
  auto bias = torch::zeros({CharTokenizer::kVocabSize});
  bias[CharTokenizer::kEos] = 4.0;
  engine.set_logit_bias(bias);
  std::vector<uint64_t> keys;
  for (uint64_t i = 0; i < 16; ++i) keys.push_back(100 + i);
  auto r = engine.Generate(model, Prompts(16), keys, 1.0);
  auto resp = r.responses();
  int64_t total = 0;
  for (int64_t i = 0; i < 16; ++i) {
    int64_t eos_at = -1;
    for (int64_t t = 0; t < 6; ++t) {
      const int64_t tok = resp[i][t].item<int64_t>();
      const float m = r.response_mask[i][t].item<float>();
      if (eos_at >= 0) {
        EXPECT_EQ(tok, CharTokenizer::kPad);
        EXPECT_EQ(m, 0.0f);
      } else {
        EXPECT_EQ(m, 1.0f);
        total += 1;
        if (tok == CharTokenizer::kEos) eos_at = t;
      }
    }
  }
  EXPECT_EQ(r.generated_tokens, total);
  EXPECT_LT(total, 16 * 6);  // some rows stopped early
}

TEST(Rollout, GreedyIsDeterministicAndCacheIsReused) {
  HfCausalLM model = testing::PresetModel(Config());
  RolloutEngine engine(model->kv_cache_shape(), 8, 4, 6, torch::kCPU, CharTokenizer::Format());
  const void* cache = engine.cache().data_ptr();
  auto prompts = Prompts(8);
  std::vector<uint64_t> keys(8, 1), other(8, 2);
  auto a = engine.Generate(model, prompts, keys, 0.0);
  auto b = engine.Generate(model, prompts.narrow(0, 0, 5), std::vector<uint64_t>(5, 3), 0.0);
  auto c = engine.Generate(model, prompts, other, 0.0);
  EXPECT_TRUE(torch::equal(a.sequences, c.sequences));  // greedy ignores keys
  EXPECT_TRUE(torch::equal(a.sequences.narrow(0, 0, 5), b.sequences));
  EXPECT_EQ(engine.cache().data_ptr(), cache);
  EXPECT_THROW(engine.Generate(model, Prompts(9), std::vector<uint64_t>(9, 1), 1.0), std::out_of_range);
  EXPECT_THROW(engine.Generate(model, prompts, std::vector<uint64_t>(3, 1), 1.0), std::invalid_argument);
}

// Checking for the stop every 8 tokens (or 5, not dividing the response) instead of every
// token changes nothing but when the loop ends: stopped rows are padded and masked alike.
TEST(Rollout, StopCheckIntervalDoesNotChangeOutputs) {
  const int64_t response = 24;
  HfCausalLM model = testing::PresetModel(Config(4 + response));
  model->eval();
  torch::manual_seed(9);
  const auto prompts = Prompts(16);
  std::vector<uint64_t> keys;
  for (uint64_t i = 0; i < 16; ++i) keys.push_back(300 + i);
  for (double temperature : {1.0, 0.0}) {
    RolloutEngine every_token(model->kv_cache_shape(), 16, 4, response, torch::kCPU, CharTokenizer::Format());
    every_token.set_logit_bias(EosBias(4.0));
    every_token.set_stop_check_interval(1);
    const auto reference = every_token.Generate(model, prompts, keys, temperature);
    if (temperature > 0) {
      // The comparison means something only if every row stopped before the end.
      EXPECT_TRUE(torch::equal(reference.responses().select(1, response - 1),
                               torch::full({16}, CharTokenizer::kPad, torch::kInt64)));
    }
    for (int64_t interval : {5, 8}) {
      RolloutEngine engine(model->kv_cache_shape(), 16, 4, response, torch::kCPU, CharTokenizer::Format());
      engine.set_logit_bias(EosBias(4.0));
      engine.set_stop_check_interval(interval);
      const auto r = engine.Generate(model, prompts, keys, temperature);
      EXPECT_TRUE(torch::equal(r.sequences, reference.sequences)) << "interval " << interval;
      EXPECT_TRUE(torch::equal(r.response_mask, reference.response_mask)) << "interval " << interval;
      EXPECT_EQ(r.generated_tokens, reference.generated_tokens);
    }
  }
  RolloutEngine engine(model->kv_cache_shape(), 2, 4, 6, torch::kCPU, CharTokenizer::Format());
  EXPECT_THROW(engine.set_stop_check_interval(0), std::invalid_argument);
}

// Temperature 0 takes the most likely token at every step: each response token's logit
// (from a full forward over the finished sequence) is the row's maximum. The tolerance
// covers the cached and uncached forwards summing in another order: fp32 rounding of
// logits of magnitude ~1 over a 32-wide hidden, far below 1e-4.
TEST(Rollout, TemperatureZeroIsGreedy) {
  HfCausalLM model = testing::PresetModel(Config());
  model->eval();
  RolloutEngine engine(model->kv_cache_shape(), 8, 4, 6, torch::kCPU, CharTokenizer::Format());
  torch::manual_seed(4);
  const auto r = engine.Generate(model, Prompts(8), std::vector<uint64_t>(8, 7), 0.0);
  torch::NoGradGuard no_grad;
  const auto logits = model->forward(r.sequences.narrow(1, 0, 4 + 6 - 1));  // [B, 9, vocab]
  const auto at_response = logits.narrow(1, 3, 6);                          // predicts columns 4..9
  const auto chosen = at_response.gather(2, r.responses().unsqueeze(2)).squeeze(2);
  const auto best = std::get<0>(at_response.max(2));
  const auto valid = r.response_mask > 0;
  EXPECT_TRUE(((best - chosen).masked_select(valid) < 1e-4).all().item<bool>());
}

TEST(Rollout, OutputsCanBeUsedByAutograd) {
  HfCausalLM model = testing::PresetModel(Config());
  RolloutEngine engine(model->kv_cache_shape(), 2, 4, 6, torch::kCPU, CharTokenizer::Format());
  auto r = engine.Generate(model, Prompts(2), {1, 2}, 1.0);
  auto loss = model->forward(r.sequences.narrow(1, 0, 9)).sum();
  EXPECT_NO_THROW(loss.backward());
}

}  // namespace
}  // namespace headroom::worker
