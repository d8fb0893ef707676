// The shape-static decode (decode_step.h, KvCache's static position) against the growing
// cache it replaces on a GPU: the same logits to fp32 rounding position by position, the same
// tokens from Generate() in every mode, buffers kept and refilled between rollouts, and no
// host read inside the step (what a CUDA graph capture needs; the capture itself is
// tests/gpu/cuda_decode_graph_test.cc).
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/worker/helpers/fp32_tolerance.h"
#include "tests/worker/helpers/preset_model.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/model/kv_cache.h"
#include "worker/rollout/decode_step.h"
#include "worker/rollout/gumbel_noise.h"
#include "worker/rollout/rollout_engine.h"
#include "worker/tasks/tokenizer.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;

// The presets (learned positions, one key/value head per query head) and a Hugging Face
// fixture with grouped-query attention and q/k norms (qwen3).
CausalLM Model(const std::string& name) {
  if (name == "preset") {
    testing::ModelDims d;
    d.layers = 2;
    d.hidden = 32;
    d.heads = 4;
    d.ffn_hidden = 64;
    d.max_seq_len = 16;
    d.seed = 7;
    return testing::PresetModel(d);
  }
  return LoadHfCausalLM((fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf" / name).string(), 16);
}

// Left-padded prompts of 3 to 5 tokens: rows 1 and 2 start with 2 and 1 pad tokens.
struct PaddedPrompts {
  torch::Tensor tokens;   // [3, 5]
  torch::Tensor padding;  // [3]
};
PaddedPrompts Prompts(int64_t vocab) {
  torch::manual_seed(11);
  auto tokens = torch::randint(3, std::min<int64_t>(vocab, 13), {3, 5}, torch::kInt64);
  tokens[1].narrow(0, 0, 2).fill_(CharTokenizer::kPad);
  tokens[2].narrow(0, 0, 1).fill_(CharTokenizer::kPad);
  return {tokens, torch::tensor({0, 2, 1}, torch::kInt64)};
}

class StaticDecode : public ::testing::TestWithParam<std::string> {};

TEST_P(StaticDecode, LogitsEqualTheGrowingCachePositionByPosition) {
  CausalLM model = Model(GetParam());
  torch::NoGradGuard no_grad;
  const auto prompts = Prompts(model->vocab_size());
  const int64_t batch = 3, p = prompts.tokens.size(1), steps = 6;
  KvCache growing(model->kv_cache_shape(), batch, p + steps, torch::kCPU);
  KvCache fixed(model->kv_cache_shape(), batch, p + steps, torch::kCPU);
  growing.Reset(batch, prompts.padding);
  fixed.Reset(batch, prompts.padding);
  auto expected = model->ForwardCached(prompts.tokens, growing);
  auto got = model->ForwardCached(prompts.tokens, fixed);  // the prompt: the growing path in both
  ASSERT_TRUE(torch::equal(got, expected));
  auto position = torch::full({}, p - 1, torch::kInt64);
  auto padding = prompts.padding.clone();
  const auto sums = testing::SumsOfForward(model, p + steps);
  torch::manual_seed(12);
  for (int64_t t = 0; t < steps; ++t) {
    const auto token = torch::randint(3, std::min<int64_t>(model->vocab_size(), 13), {batch, 1}, torch::kInt64);
    expected = model->ForwardCached(token, growing);
    position.add_(1);
    fixed.SetStaticPosition(position, padding);
    got = model->ForwardCached(token, fixed);
    fixed.ClearStaticPosition();
    const double magnitude = expected.abs().max().item<double>();
    EXPECT_TRUE(testing::WithinTolerance(got, expected, testing::SummationTolerance(magnitude, sums.terms, sums.depth)))
        << "decode position " << p + t;
  }
  EXPECT_EQ(fixed.length(), p) << "a static decode leaves the host count to its caller";
}

// Generate() in each mode from the same keys: the same tokens and masks. The tokens come
// from argmaxes over logits equal to rounding; a tie closer than the rounding could flip
// one, so the test checks it found none (the models are small and random: margins are
// orders of magnitude above fp32 rounding).
TEST_P(StaticDecode, GenerateGivesTheSameTokensInEveryMode) {
  CausalLM model = Model(GetParam());
  const auto prompts = Prompts(model->vocab_size());
  const std::vector<uint64_t> keys{101, 102, 103};
  for (double temperature : {0.0, 1.0}) {
    RolloutEngine dynamic(model->kv_cache_shape(), 3, 5, 8, torch::kCPU, CharTokenizer::Format());
    dynamic.set_decode_mode(RolloutEngine::DecodeMode::kDynamic);
    RolloutEngine fixed(model->kv_cache_shape(), 3, 5, 8, torch::kCPU, CharTokenizer::Format());
    fixed.set_decode_mode(RolloutEngine::DecodeMode::kStatic);
    RolloutEngine graph(model->kv_cache_shape(), 3, 5, 8, torch::kCPU, CharTokenizer::Format());
    graph.set_decode_mode(RolloutEngine::DecodeMode::kGraph);  // no CUDA here: replayed eagerly
    const Rollout a = dynamic.Generate(model, prompts.tokens, keys, temperature, prompts.padding);
    const Rollout b = fixed.Generate(model, prompts.tokens, keys, temperature, prompts.padding);
    const Rollout c = graph.Generate(model, prompts.tokens, keys, temperature, prompts.padding);
    EXPECT_TRUE(torch::equal(b.sequences, a.sequences)) << "temperature " << temperature << "\n"
                                                        << b.sequences << "\n"
                                                        << a.sequences;
    EXPECT_TRUE(torch::equal(b.response_mask, a.response_mask)) << "temperature " << temperature;
    EXPECT_TRUE(torch::equal(c.sequences, a.sequences)) << "temperature " << temperature;
    EXPECT_EQ(b.generated_tokens, a.generated_tokens);
    EXPECT_FALSE(graph.last_decode_graphed());
  }
}

INSTANTIATE_TEST_SUITE_P(Models, StaticDecode, ::testing::Values("preset", "qwen2", "qwen3", "llama3"));

// The kept step's buffers are refilled for every rollout: other prompts, keys and padding
// in the second call give what a fresh engine gives; a new batch size gets its own step.
TEST(StaticDecodeKept, LaterRolloutsEqualAFreshEngine) {
  CausalLM model = Model("preset");
  const auto prompts = Prompts(model->vocab_size());
  RolloutEngine kept(model->kv_cache_shape(), 3, 5, 8, torch::kCPU, CharTokenizer::Format());
  kept.set_decode_mode(RolloutEngine::DecodeMode::kStatic);
  (void)kept.Generate(model, prompts.tokens, {1, 2, 3}, 1.0, prompts.padding);
  const auto unpadded = prompts.tokens.narrow(1, 2, 3).contiguous();  // 3 tokens, no padding
  for (const auto& [tokens, padding] :
       {std::pair{unpadded, torch::Tensor()}, std::pair{prompts.tokens, prompts.padding}}) {
    RolloutEngine fresh(model->kv_cache_shape(), 3, 5, 8, torch::kCPU, CharTokenizer::Format());
    fresh.set_decode_mode(RolloutEngine::DecodeMode::kDynamic);
    const Rollout want = fresh.Generate(model, tokens, {7, 8, 9}, 1.0, padding);
    const Rollout got = kept.Generate(model, tokens, {7, 8, 9}, 1.0, padding);
    EXPECT_TRUE(torch::equal(got.sequences, want.sequences)) << got.sequences << "\n" << want.sequences;
    EXPECT_TRUE(torch::equal(got.response_mask, want.response_mask));
  }
  // Two rows of the same prompts: another batch size.
  RolloutEngine fresh(model->kv_cache_shape(), 3, 5, 8, torch::kCPU, CharTokenizer::Format());
  fresh.set_decode_mode(RolloutEngine::DecodeMode::kDynamic);
  const auto two = prompts.tokens.narrow(0, 0, 2), two_padding = prompts.padding.narrow(0, 0, 2);
  EXPECT_TRUE(torch::equal(kept.Generate(model, two, {4, 5}, 1.0, two_padding).sequences,
                           fresh.Generate(model, two, {4, 5}, 1.0, two_padding).sequences));
}

// A step after the weights changed in place (an optimizer step) sees the new weights.
TEST(StaticDecodeKept, ReadsWeightsUpdatedInPlace) {
  CausalLM model = Model("preset");
  const auto prompts = Prompts(model->vocab_size());
  RolloutEngine kept(model->kv_cache_shape(), 3, 5, 8, torch::kCPU, CharTokenizer::Format());
  kept.set_decode_mode(RolloutEngine::DecodeMode::kStatic);
  const Rollout before = kept.Generate(model, prompts.tokens, {1, 2, 3}, 0.0, prompts.padding);
  {
    torch::NoGradGuard no_grad;
    torch::manual_seed(5);
    for (auto& p : model->parameters()) p.add_(torch::randn_like(p));
  }
  RolloutEngine fresh(model->kv_cache_shape(), 3, 5, 8, torch::kCPU, CharTokenizer::Format());
  fresh.set_decode_mode(RolloutEngine::DecodeMode::kDynamic);
  const Rollout want = fresh.Generate(model, prompts.tokens, {1, 2, 3}, 0.0, prompts.padding);
  const Rollout got = kept.Generate(model, prompts.tokens, {1, 2, 3}, 0.0, prompts.padding);
  EXPECT_TRUE(torch::equal(got.sequences, want.sequences));
  EXPECT_FALSE(torch::equal(want.sequences, before.sequences)) << "the perturbation changed no greedy token";
}

TEST(StaticDecodeNoise, DevicePositionGivesTheNoiseOfThatPosition) {
  const GumbelNoise noise({5, 6, 7}, 4, 50, torch::kCPU);
  auto position = torch::zeros({}, torch::kInt64);
  for (int64_t t = 0; t < 4; ++t, position.add_(1)) {
    EXPECT_TRUE(torch::equal(noise.At(position), noise.At(t, GumbelNoise::Path::kTensorOps))) << "position " << t;
  }
}

// Under autocast on a GPU the keys arrive in bf16 and the cache may hold another dtype: the
// static write converts as the growing one does.
TEST(StaticDecodeCache, WritesConvertToTheCacheDtype) {
  testing::ModelDims d;
  const KvCacheShape shape = testing::PresetModel(d)->kv_cache_shape();
  KvCache growing(shape, 2, 4, torch::kCPU, torch::kBFloat16), fixed(shape, 2, 4, torch::kCPU, torch::kBFloat16);
  growing.Reset(2);
  fixed.Reset(2);
  const auto k = torch::randn({2, shape.heads, 1, shape.head_dim}),
             v = torch::randn({2, shape.heads, 1, shape.head_dim});
  growing.Append(0, k, v);
  growing.Advance(1);
  fixed.SetStaticPosition(torch::zeros({}, torch::kInt64), torch::zeros({2}, torch::kInt64));
  fixed.Append(0, k, v);
  EXPECT_TRUE(torch::equal(fixed.Keys(0, 1).narrow(2, 0, 1), growing.Keys(0, 1)));
  EXPECT_TRUE(torch::equal(fixed.Values(0, 1).narrow(2, 0, 1), growing.Values(0, 1)));
}

TEST(StaticDecodeCache, RefusesPositionsItCannotUse) {
  testing::ModelDims d;
  KvCache cache(testing::PresetModel(d)->kv_cache_shape(), 2, 8, torch::kCPU);
  cache.Reset(2);
  const auto padding = torch::zeros({2}, torch::kInt64);
  EXPECT_THROW(cache.SetStaticPosition(torch::zeros({1}, torch::kInt64), padding), std::invalid_argument);
  EXPECT_THROW(cache.SetStaticPosition(torch::zeros({}, torch::kInt32), padding), std::invalid_argument);
  EXPECT_THROW(cache.SetStaticPosition(torch::zeros({}, torch::kInt64), torch::zeros({3}, torch::kInt64)),
               std::invalid_argument);
  cache.SetStaticPosition(torch::zeros({}, torch::kInt64), padding);
  EXPECT_TRUE(cache.is_static());
  cache.Reset(2);
  EXPECT_FALSE(cache.is_static()) << "a new generation starts with the growing cache";
}

// kAuto takes the graph only where one is replayed: on a CUDA device, with a local forward,
// in a build with graphs compiled in. Compiled out, the static step would run eagerly over
// every key of the cache, no faster than the growing cache, so the dynamic decode serves.
TEST(DecodeModeResolution, AutoTakesTheGraphOnlyWhereOneIsReplayed) {
  using Mode = RolloutEngine::DecodeMode;
  EXPECT_EQ(RolloutEngine::ResolveDecodeMode(Mode::kAuto, true, true, true), Mode::kGraph);
  EXPECT_EQ(RolloutEngine::ResolveDecodeMode(Mode::kAuto, true, true, false), Mode::kDynamic);
  EXPECT_EQ(RolloutEngine::ResolveDecodeMode(Mode::kAuto, true, false, true), Mode::kDynamic);
  EXPECT_EQ(RolloutEngine::ResolveDecodeMode(Mode::kAuto, false, true, true), Mode::kDynamic);
  for (Mode asked : {Mode::kDynamic, Mode::kStatic, Mode::kGraph}) {
    EXPECT_EQ(RolloutEngine::ResolveDecodeMode(asked, true, true, false), asked)
        << RolloutEngine::DecodeModeName(asked);
  }
  // This build (no CUDA graphs on a CPU machine) resolves kAuto to the dynamic decode.
  EXPECT_FALSE(DecodeGraphsCompiled());
  CausalLM model = Model("preset");
  RolloutEngine engine(model->kv_cache_shape(), 2, 4, 3, torch::kCPU, CharTokenizer::Format());
  EXPECT_EQ(engine.resolved_decode_mode(model), Mode::kDynamic);
}

}  // namespace
}  // namespace headroom::worker
