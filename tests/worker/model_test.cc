// The transformer: deterministic init, the spec's exact parameter count, causality, the
// KV-cache path equal to the full forward, a cache that is never reallocated, flat
// parameter views, and weights that round-trip through a file.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/spec/model_presets.h"
#include "tests/worker/helpers/fp32_tolerance.h"
#include "worker/comm/communicator.h"
#include "worker/model/kv_cache.h"
#include "worker/model/transformer.h"
#include "worker/model/weights_io.h"
#include "worker/sharding/flat_parameter_group.h"

namespace headroom::worker {
namespace {

TransformerConfig Tiny(uint64_t seed = 1) {
  TransformerConfig c;
  c.layers = 2;
  c.hidden = 32;
  c.heads = 4;
  c.ffn_hidden = 64;
  c.max_seq_len = 12;
  c.seed = seed;
  return c;
}

TEST(Transformer, SameSeedSameWeightsOtherSeedOthers) {
  Transformer a(Tiny(3)), b(Tiny(3)), c(Tiny(4));
  auto pa = a->OrderedParameters(), pb = b->OrderedParameters(), pc = c->OrderedParameters();
  ASSERT_EQ(pa.size(), pb.size());
  bool any_differs = false;
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    EXPECT_TRUE(torch::equal(pa[i].second, pb[i].second)) << pa[i].first;
    any_differs |= !torch::equal(pa[i].second, pc[i].second);
  }
  EXPECT_TRUE(any_differs);
}

// The init scales are what lets the tiny preset learn from scratch (see InitWeights):
// PyTorch's defaults, not GPT-2's N(0, 0.02), which left reverse-tiny stuck at 0.16.
TEST(Transformer, InitUsesPyTorchDefaultScales) {
  Transformer model(Tiny());
  const TransformerConfig& c = model->config();
  for (const auto& [name, p] : model->OrderedParameters()) {
    const bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
    const double std = p.std().item<double>(), max_abs = p.abs().max().item<double>();
    if (name.find("ln") != std::string::npos) {
      EXPECT_TRUE(torch::equal(p, is_bias ? torch::zeros_like(p) : torch::ones_like(p))) << name;
    } else if (name.find("emb") != std::string::npos) {
      EXPECT_NEAR(std, 1.0, 0.1) << name;  // N(0, 1): 384 and more draws
    } else {
      const int64_t fan_in = is_bias ? (name.find(".fc2.") != std::string::npos ? c.ffn_hidden : c.hidden)
                                     : p.size(1);
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      EXPECT_LE(max_abs, bound) << name;
      if (!is_bias) {
        EXPECT_NEAR(std, bound / std::sqrt(3.0), 0.2 * bound / std::sqrt(3.0)) << name;  // U(-b, b)
      }
    }
  }
}

TEST(Transformer, ParameterCountMatchesTheSpecPresets) {
  for (const std::string preset : {"tiny", "small"}) {
    spec::TrainingJobSpec s;
    s.model.preset = preset;
    s.grpo.max_prompt_length = 16;
    s.grpo.max_response_length = 8;
    const TransformerConfig config = ConfigFromSpec(s);
    spec::ModelSpec m;
    m.layers = static_cast<int>(config.layers);
    m.hidden = static_cast<int>(config.hidden);
    m.heads = static_cast<int>(config.heads);
    m.ffn_hidden = static_cast<int>(config.ffn_hidden);
    m.max_seq_len = static_cast<int>(config.max_seq_len);
    EXPECT_EQ(config.ParameterCount(), spec::ParameterCount(m)) << preset;
    if (preset == "tiny") {
      Transformer model(config);
      EXPECT_EQ(FlatLayout(model->OrderedParameters(), 1).numel(), config.ParameterCount());
    }
  }
}

TEST(Transformer, IsCausal) {
  Transformer model(Tiny());
  model->eval();
  torch::NoGradGuard no_grad;
  auto x = torch::randint(3, 16, {2, 8}, torch::kInt64);
  auto y = x.clone();
  y.narrow(1, 5, 3).fill_(4);  // change only the future of position 4
  auto lx = model->forward(x), ly = model->forward(y);
  EXPECT_TRUE(torch::allclose(lx.narrow(1, 0, 5), ly.narrow(1, 0, 5), 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(lx.narrow(1, 5, 1), ly.narrow(1, 5, 1), 1e-5, 1e-6));
}

TEST(Transformer, CachedForwardEqualsFullForward) {
  Transformer model(Tiny());
  model->eval();
  torch::NoGradGuard no_grad;
  auto tokens = torch::randint(3, 16, {3, 10}, torch::kInt64);
  auto full = model->forward(tokens);
  KvCache cache(model->config(), 4, 12, torch::kCPU);
  cache.Reset(3);
  auto last = model->ForwardCached(tokens.narrow(1, 0, 6), cache);  // prefill 6
  // Other summation orders (cache shapes): within fp32 rounding (helpers/fp32_tolerance.h).
  EXPECT_TRUE(testing::WithinForwardRounding(model, 10, last, full.select(1, 5)));
  for (int64_t t = 6; t < 10; ++t) {
    last = model->ForwardCached(tokens.narrow(1, t, 1), cache);
    EXPECT_TRUE(testing::WithinForwardRounding(model, 10, last, full.select(1, t))) << "position " << t;
  }
  EXPECT_EQ(cache.length(), 10);
}

TEST(KvCache, AllocatedOnceAndReused) {
  Transformer model(Tiny());
  KvCache cache(model->config(), 4, 12, torch::kCPU);
  const void* storage = cache.data_ptr();
  EXPECT_EQ(cache.bytes(), 2 * 2 * 4 * 4 * 12 * 8 * 4);  // layers*kv*batch*heads*seq*head_dim*fp32
  torch::NoGradGuard no_grad;
  for (int64_t batch : {4, 2, 3}) {
    cache.Reset(batch);
    model->ForwardCached(torch::randint(3, 16, {batch, 5}, torch::kInt64), cache);
    model->ForwardCached(torch::randint(3, 16, {batch, 1}, torch::kInt64), cache);
    EXPECT_EQ(cache.data_ptr(), storage);
  }
  EXPECT_THROW(cache.Reset(5), std::out_of_range);
  cache.Reset(1);
  EXPECT_THROW(model->ForwardCached(torch::randint(3, 16, {1, 13}, torch::kInt64), cache), std::exception);
}

// The trainer's parameter group on the real model: every parameter and its .grad become
// views of one flat buffer each, values kept, so backward accumulates straight into the
// buffer the reduction and the optimizer work on.
TEST(FlatParameterGroup, ParametersAndGradientsAreViewsOfOneBuffer) {
  Transformer model(Tiny());
  auto before = model->OrderedParameters();
  std::vector<torch::Tensor> copies;
  for (auto& [n, p] : before) copies.push_back(p.detach().clone());
  auto comm = MakeLocalCommunicator();
  ShardingOptions options;
  options.stage = 0;
  FlatParameterGroup group(model->OrderedParameters(), *comm, options);
  const FlatRange all{0, group.layout().padded_numel()};
  int64_t offset = 0;
  auto after = model->OrderedParameters();
  for (size_t i = 0; i < after.size(); ++i) {
    const auto& slot = group.layout().slots()[i];
    EXPECT_EQ(slot.name, after[i].first);
    EXPECT_EQ(slot.offset, offset);
    EXPECT_TRUE(torch::equal(after[i].second, copies[i])) << slot.name;
    EXPECT_EQ(after[i].second.data_ptr<float>(), group.Parameters(all).data_ptr<float>() + offset) << slot.name;
    offset += slot.numel;
  }
  // Backward accumulates straight into the flat gradient buffer.
  auto loss = model->forward(torch::randint(3, 16, {2, 6}, torch::kInt64)).pow(2).mean();
  loss.backward();
  EXPECT_GT(group.Gradient(all).abs().sum().item<double>(), 0.0);
  EXPECT_EQ(after[0].second.grad().data_ptr<float>(), group.Gradient(all).data_ptr<float>());
  group.ZeroGrad();
  EXPECT_EQ(after[3].second.grad().abs().sum().item<double>(), 0.0);
}

TEST(WeightsIo, RoundTripAndNamedErrors) {
  const auto dir = std::filesystem::temp_directory_path() / ("headroom-weights-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Transformer a(Tiny(1)), b(Tiny(2));
  SaveWeights(a, (dir / "model.pt").string());
  LoadWeights(b, dir.string());  // a directory holding model.pt
  auto pa = a->OrderedParameters(), pb = b->OrderedParameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i].second, pb[i].second)) << pa[i].first;

  TransformerConfig wider = Tiny();
  wider.hidden = 64;
  Transformer c(wider);
  try {
    LoadWeights(c, (dir / "model.pt").string());
    FAIL() << "loaded mismatched shapes";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("tok_emb.weight has shape"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LoadWeights(c, (dir / "missing.pt").string()), std::runtime_error);
  std::filesystem::remove_all(dir);
}

TEST(ModelConfig, InvalidDimensionsAreNamed) {
  TransformerConfig c = Tiny();
  c.heads = 5;
  EXPECT_THROW(c.Validate(), std::invalid_argument);
}

}  // namespace
}  // namespace headroom::worker
