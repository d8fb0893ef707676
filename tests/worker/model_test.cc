// The presets' model (HfCausalLM with a preset configuration, random weights): the
// spec's exact parameter count and Hugging Face names, deterministic init at PyTorch's
// default scales, causality, the KV-cache path equal to the full forward, a cache that is
// never reallocated, flat parameter views, and unusable dimensions named.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <cmath>

#include "core/spec/model_presets.h"
#include "tests/worker/helpers/preset_model.h"
#include "tests/worker/helpers/fp32_tolerance.h"
#include "worker/comm/communicator.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/model/kv_cache.h"
#include "worker/model/model_source.h"
#include "worker/sharding/flat_parameter_group.h"

namespace headroom::worker {
namespace {

HfCausalLM Tiny(uint64_t seed = 1) {
  testing::ModelDims d;
  d.seed = seed;
  return testing::PresetModel(d);
}

TEST(PresetModel, SameSeedSameWeightsOtherSeedOthers) {
  HfCausalLM a = Tiny(3), b = Tiny(3), c = Tiny(4);
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

// The init scales are what lets the tiny preset learn from scratch (hf_causal_lm.h):
// PyTorch's defaults, not transformers' N(0, 0.02).
TEST(PresetModel, InitUsesPyTorchDefaultScales) {
  HfCausalLM model = Tiny();
  for (const auto& [name, p] : model->OrderedParameters()) {
    const double std = p.std().item<double>(), max_abs = p.abs().max().item<double>();
    if (name.find("norm") != std::string::npos) {
      EXPECT_TRUE(torch::equal(p, torch::ones_like(p))) << name;
    } else if (name.find(".embed_") != std::string::npos) {
      EXPECT_NEAR(std, 1.0, 0.1) << name;  // N(0, 1): 384 and more draws
    } else {
      const double bound = 1.0 / std::sqrt(static_cast<double>(p.size(1)));
      EXPECT_LE(max_abs, bound) << name;
      EXPECT_NEAR(std, bound / std::sqrt(3.0), 0.2 * bound / std::sqrt(3.0)) << name;  // U(-b, b)
    }
  }
}

TEST(PresetModel, IsTheSpecsArchitectureWithItsExactParameterCount) {
  for (const std::string preset : {"tiny", "small"}) {
    spec::TrainingJobSpec s;
    s.model.preset = preset;
    s.grpo.max_prompt_length = 16;
    s.grpo.max_response_length = 8;
    CausalLM model = ModelSource(s).LoadPolicy();
    EXPECT_EQ(FlatLayout(model->OrderedParameters(), 1).numel(), spec::ParameterCount(spec::ResolvedModelSpec(s)))
        << preset;
    EXPECT_EQ(model->max_seq_len(), 24);
    EXPECT_EQ(model->vocab_size(), spec::kVocabSize);
    EXPECT_NE(model->Describe().find("LlamaForCausalLM"), std::string::npos) << model->Describe();
  }
  spec::TrainingJobSpec s;
  const auto names = ModelSource(s).LoadPolicy()->OrderedParameters();
  EXPECT_EQ(names.front().first, "model.embed_tokens.weight");
  EXPECT_EQ(names[1].first, "model.embed_positions.weight");
  EXPECT_EQ(names[2].first, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(names.back().first, "lm_head.weight");
}

TEST(PresetModel, SeededFromTheSpecsModelSeedElseTheTaskSeed) {
  auto weights = [](uint64_t model_seed, uint64_t task_seed) {
    spec::TrainingJobSpec s;
    s.model.seed = model_seed;
    s.task.seed = task_seed;
    return ModelSource(s).LoadPolicy()->OrderedParameters();
  };
  const auto from_task = weights(0, 7), from_model = weights(7, 8), other = weights(0, 8);
  for (size_t i = 0; i < from_task.size(); ++i) {
    EXPECT_TRUE(torch::equal(from_task[i].second, from_model[i].second)) << from_task[i].first;
  }
  EXPECT_FALSE(torch::equal(from_task[0].second, other[0].second));
}

TEST(PresetModel, IsCausal) {
  HfCausalLM model = Tiny();
  model->eval();
  torch::NoGradGuard no_grad;
  auto x = torch::randint(3, 16, {2, 8}, torch::kInt64);
  auto y = x.clone();
  y.narrow(1, 5, 3).fill_(4);  // change only the future of position 4
  auto lx = model->forward(x), ly = model->forward(y);
  EXPECT_TRUE(torch::allclose(lx.narrow(1, 0, 5), ly.narrow(1, 0, 5), 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(lx.narrow(1, 5, 1), ly.narrow(1, 5, 1), 1e-5, 1e-6));
}

TEST(PresetModel, CachedForwardEqualsFullForward) {
  HfCausalLM model = Tiny();
  model->eval();
  torch::NoGradGuard no_grad;
  auto tokens = torch::randint(3, 16, {3, 10}, torch::kInt64);
  auto full = model->forward(tokens);
  KvCache cache(model->kv_cache_shape(), 4, 12, torch::kCPU);
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

// On the CPU a forward multiplies by q/k/v (and gate/up) stacked into one matrix where that
// pays (hf_causal_lm.cc): always with grad; without grad, for weights this large, only over
// as many rows as the stacked outputs. One sequence takes both paths: the same values.
TEST(PresetModel, StackedAndSeparateProjectionsAgree) {
  // hidden 192: q/k/v stacked are 576 x 192 and gate/up 1024 x 192, both over 2^16 elements.
  HfCausalLM model =
      testing::PresetModel({.layers = 2, .hidden = 192, .heads = 4, .ffn_hidden = 512, .max_seq_len = 8});
  model->eval();
  const auto tokens = torch::randint(3, 16, {1, 6}, torch::kInt64);
  const auto stacked = model->forward(tokens).detach();
  torch::NoGradGuard no_grad;
  const auto separate = model->forward(tokens);  // 6 rows
  EXPECT_TRUE(testing::WithinForwardRounding(model, 6, separate, stacked));
}

TEST(KvCache, AllocatedOnceAndReused) {
  HfCausalLM model = Tiny();
  KvCache cache(model->kv_cache_shape(), 4, 12, torch::kCPU);
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
  HfCausalLM model = Tiny();
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

TEST(PresetModel, UnusableDimensionsAreNamed) {
  auto refusal = [](int hidden, int heads) {
    spec::TrainingJobSpec s;
    s.model.hidden = hidden;
    s.model.heads = heads;
    try {
      ModelSource(s).LoadPolicy();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("built");
  };
  EXPECT_NE(refusal(32, 5).find("heads must divide hidden"), std::string::npos) << refusal(32, 5);
  EXPECT_NE(refusal(30, 10).find("must be even (rotary positions)"), std::string::npos) << refusal(30, 10);
  EXPECT_EQ(refusal(32, 4), "built");
}

}  // namespace
}  // namespace headroom::worker
