// GRPO formulas against hand-computed tensors, and the updater's gradient accumulation
// against the gradient of the whole mini-batch's loss. The updater runs on a 1-rank
// stage-0 parameter group here (gradients stay inspectable after the step); stages and
// ranks are trainer_sharding_test's.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "worker/comm/communicator.h"
#include "worker/grpo/advantages.h"
#include "worker/grpo/log_probs.h"
#include "worker/grpo/micro_batch_rows.h"
#include "worker/grpo/policy_loss.h"
#include "worker/grpo/policy_update.h"
#include "tests/worker/helpers/preset_model.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/sharding/model_shards.h"

namespace headroom::worker {
namespace {

torch::Tensor T(std::vector<float> v) { return torch::tensor(v, torch::kFloat32); }
torch::Tensor T2(std::vector<float> v, int64_t rows) { return T(v).view({rows, -1}); }

TEST(Advantages, BesselCorrectedGroupNormalisation) {
  // Group 1: rewards 1, 0, 0, 1: mean 0.5, std (n-1) = sqrt(1/3) = 0.57735.
  // Group 2: all equal -> 0.
  auto a = GroupAdvantages(T({1, 0, 0, 1, 0.5, 0.5, 0.5, 0.5}), 4);
  const float s = 0.5f / (std::sqrt(1.0f / 3.0f) + 1e-6f);
  EXPECT_TRUE(torch::allclose(a, T({s, -s, -s, s, 0, 0, 0, 0}), 1e-5, 1e-6)) << a;
  // Group of 2: rewards 1, 0: std = sqrt(0.5) = 0.7071.
  auto b = GroupAdvantages(T({1, 0}), 2);
  EXPECT_NEAR(b[0].item<float>(), 0.5 / (std::sqrt(0.5) + 1e-6), 1e-5);
  // All-equal rewards give exactly 0, not r - mean's rounding residue over eps (a
  // group of 3 x 1/3 does not sum exactly), so the update can skip those rows.
  auto c = GroupAdvantages(T({1.0f / 3, 1.0f / 3, 1.0f / 3, 0.1f, 0.1f, 0.7f}), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c[i].item<float>(), 0.0f) << c;
  EXPECT_NE(c[5].item<float>(), 0.0f);
  EXPECT_THROW(GroupAdvantages(T({1, 0, 1}), 2), std::invalid_argument);
  EXPECT_THROW(GroupAdvantages(T({1, 0}), 1), std::invalid_argument);
}

TEST(PolicyLoss, ClippedSurrogateWithClipHigher) {
  // ratios e^{0.5}=1.6487 (A>0: clipped at 1.28), e^{-0.5}=0.6065 (A>0: unclipped branch
  // is larger: -0.6065 > -0.8), e^{0.1}=1.1052 (A<0: -1*-1.1052), e^{-0.5} with A<0
  // (clamped ratio 0.8 gives 0.8 > 0.6065).
  auto logp = T2({0.5f, -0.5f, 0.1f, -0.5f}, 2);
  auto old = torch::zeros({2, 2});
  auto adv = T2({1, 1, -1, -1}, 2);
  auto t = ClippedSurrogate(logp, old, adv, 0.2, 0.28);
  auto expected = T2({-1.28f, -std::exp(-0.5f), std::exp(0.1f), 0.8f}, 2);
  EXPECT_TRUE(torch::allclose(t.loss, expected, 1e-5, 1e-6)) << t.loss;
  EXPECT_TRUE(torch::equal(t.clipped, T2({1, 0, 0, 1}, 2))) << t.clipped;
  // Per-sequence advantages broadcast over tokens.
  auto per_seq = ClippedSurrogate(logp, old, T({1, -1}), 0.2, 0.28);
  EXPECT_TRUE(torch::allclose(per_seq.loss, expected, 1e-5, 1e-6));
}

TEST(PolicyLoss, LogRatioClampedAt20) {
  auto t = ClippedSurrogate(T2({100.0f}, 1), T2({0.0f}, 1), T({-1.0f}), 0.2, 0.28);
  EXPECT_NEAR(t.ratio.item<float>(), std::exp(20.0f), std::exp(20.0f) * 1e-5);
  EXPECT_TRUE(std::isfinite(t.loss.item<float>()));
}

TEST(PolicyLoss, K3KlAndItsClamp) {
  // kl = ref - logp; k3 = e^kl - kl - 1.
  auto k = KlK3(T2({0.0f, -1.0f, 0.0f, 0.0f}, 1), T2({0.0f, 0.0f, -1.0f, 30.0f}, 1));
  const float e1 = std::exp(1.0f) - 1 - 1, em1 = std::exp(-1.0f) + 1 - 1;
  EXPECT_TRUE(torch::allclose(k, T2({0.0f, e1, em1, 10.0f}, 1), 1e-5, 1e-6)) << k;
}

TEST(PolicyLoss, AggregationModesAsVerl) {
  auto loss = T2({1, 2, 3, 4, 5, 6}, 2);
  auto mask = T2({1, 1, 0, 1, 0, 0}, 2);
  // token-mean: (1 + 2 + 4) / 3.
  EXPECT_NEAR(AggregateLoss(loss, mask, LossAggregation::kTokenMean).item<float>(), 7.0 / 3, 1e-6);
  // seq-mean-token-mean: ((1 + 2) / 2 + 4 / 1) / 2.
  EXPECT_NEAR(AggregateLoss(loss, mask, LossAggregation::kSeqMeanTokenMean).item<float>(), (1.5 + 4) / 2, 1e-6);
  // seq-mean-token-sum-norm: (1 + 2 + 4) / 3 (mask width).
  EXPECT_NEAR(AggregateLoss(loss, mask, LossAggregation::kSeqMeanTokenSumNorm).item<float>(), 7.0 / 3, 1e-6);
  auto wide = torch::cat({mask, torch::zeros({2, 1})}, 1);
  auto wide_loss = torch::cat({loss, torch::ones({2, 1})}, 1);
  EXPECT_NEAR(AggregateLoss(wide_loss, wide, LossAggregation::kSeqMeanTokenSumNorm).item<float>(), 7.0 / 4, 1e-6);
  EXPECT_THROW(ParseLossAggregation("token-sum"), std::invalid_argument);
  EXPECT_EQ(ParseLossAggregation("seq-mean-token-sum-norm"), LossAggregation::kSeqMeanTokenSumNorm);
}

TEST(PolicyLoss, MicroBatchPartsSumToTheWholeBatch) {
  auto loss = torch::rand({6, 4});
  auto mask = (torch::rand({6, 4}) > 0.3).to(torch::kFloat32);
  // Every sequence keeps its first token: the comparison below holds only when no
  // sequence is empty (a random mask left one empty in about 1 run of 15).
  mask.select(1, 0).fill_(1);
  for (auto mode :
       {LossAggregation::kTokenMean, LossAggregation::kSeqMeanTokenMean, LossAggregation::kSeqMeanTokenSumNorm}) {
    const MiniBatchTotals totals = CountTotals(mask);
    auto parts = AggregateLossPart(loss.narrow(0, 0, 2), mask.narrow(0, 0, 2), mode, totals) +
                 AggregateLossPart(loss.narrow(0, 2, 4), mask.narrow(0, 2, 4), mode, totals);
    // seq-mean counts only sequences with tokens, as AggregateLoss does when none is empty.
    EXPECT_NEAR(parts.item<float>(), AggregateLoss(loss, mask, mode).item<float>(), 1e-5) << static_cast<int>(mode);
  }
}

ShardingOptions Stage0() {
  ShardingOptions o;
  o.stage = 0;
  return o;
}

// AdamW that leaves the parameters exactly where they are (lr 0, no weight decay).
AdamWConfig Frozen() {
  AdamWConfig c;
  c.lr = 0.0;
  c.weight_decay = 0.0;
  return c;
}

testing::ModelDims TinyConfig() {
  testing::ModelDims c;
  c.layers = 1;
  c.hidden = 16;
  c.heads = 2;
  c.ffn_hidden = 32;
  c.max_seq_len = 8;
  c.seed = 9;
  return c;
}

// Runs PolicyUpdater on `batch` with micro-batches of `micro` rows, lr 0 and no clip, so the
// accumulated gradient stays on `model`'s parameters to inspect.
PolicyUpdateStats UpdateWithoutStepping(HfCausalLM& model, const PolicyBatch& batch, PolicyUpdateConfig config,
                                        int64_t micro = 2) {
  auto comm = MakeLocalCommunicator();
  ModelShards shards(model, *comm, Stage0(), Frozen());
  config.micro_batch_size = micro;
  config.max_grad_norm = 1e9;
  PolicyUpdater updater(model, shards, config);
  return updater.Update(batch);
}

// Each parameter's gradient of `got` against `expected` (in OrderedParameters order).
void ExpectSameGradients(HfCausalLM& got, const std::vector<torch::Tensor>& expected, const std::string& what) {
  auto params = got->OrderedParameters();
  ASSERT_EQ(params.size(), expected.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(params[i].second.grad(), expected[i], 1e-4, 1e-6)) << params[i].first << " " << what;
  }
}

std::vector<torch::Tensor> Gradients(HfCausalLM& model) {
  std::vector<torch::Tensor> out;
  for (auto& [n, p] : model->OrderedParameters()) out.push_back(p.grad().clone());
  return out;
}

// The updater's accumulated gradient (micro-batches of 2) equals autograd on the whole
// mini-batch's AggregateLoss, for every aggregation mode, with KL on.
TEST(PolicyUpdater, AccumulatedGradientEqualsFullBatchGradient) {
  for (auto mode :
       {LossAggregation::kTokenMean, LossAggregation::kSeqMeanTokenMean, LossAggregation::kSeqMeanTokenSumNorm}) {
    torch::manual_seed(0);
    PolicyBatch batch;
    batch.prompt_length = 3;
    batch.sequences = torch::randint(3, 16, {6, 7}, torch::kInt64);
    batch.response_mask = torch::ones({6, 4});
    batch.response_mask[1][3] = 0;
    batch.response_mask[4].narrow(0, 2, 2).fill_(0);
    batch.advantages = torch::randn({6});
    batch.old_logp = -torch::rand({6, 4}) * 3;
    batch.ref_logp = -torch::rand({6, 4}) * 3;

    // Reference: plain autograd over all six rows at once.
    HfCausalLM reference = testing::PresetModel(TinyConfig());
    auto logp = ResponseLogProbs(reference, batch.sequences, 3, 1.0);
    auto loss_mat =
        ClippedSurrogate(logp, batch.old_logp, batch.advantages, 0.2, 0.28).loss + 0.1 * KlK3(logp, batch.ref_logp);
    AggregateLoss(loss_mat, batch.response_mask, mode).backward();

    HfCausalLM model = testing::PresetModel(TinyConfig());
    PolicyUpdateConfig config;
    config.kl_coef = 0.1;
    config.aggregation = mode;
    const auto stats = UpdateWithoutStepping(model, batch, config);
    EXPECT_NEAR(stats.loss, AggregateLoss(loss_mat, batch.response_mask, mode).item<double>(), 1e-5);
    ExpectSameGradients(model, Gradients(reference), "mode " + std::to_string(static_cast<int>(mode)));
  }
}

// Without KL, rows with advantage 0 are left out of forward and backward; the loss, its
// gradient and the clip fraction over the whole mini-batch must not change, for every
// aggregation mode, and a micro-batch of only such rows still runs one row.
TEST(PolicyUpdater, RowsWithZeroAdvantageAreSkippedWithTheSameGradient) {
  for (auto mode :
       {LossAggregation::kTokenMean, LossAggregation::kSeqMeanTokenMean, LossAggregation::kSeqMeanTokenSumNorm}) {
    torch::manual_seed(5);
    PolicyBatch batch;
    batch.prompt_length = 3;
    batch.sequences = torch::randint(3, 16, {6, 7}, torch::kInt64);
    batch.response_mask = torch::ones({6, 4});
    batch.response_mask[1][3] = 0;
    batch.advantages = torch::randn({6});
    batch.advantages[1] = 0;  // micro-batch [0, 1]: one of two rows skipped
    batch.advantages[2] = 0;  // micro-batch [2, 3]: every row skipped
    batch.advantages[3] = 0;
    batch.old_logp = -torch::rand({6, 4}) * 3;  // ratios far from 1: some clipped

    HfCausalLM reference = testing::PresetModel(TinyConfig());
    auto logp = ResponseLogProbs(reference, batch.sequences, 3, 1.0);
    auto terms = ClippedSurrogate(logp, batch.old_logp, batch.advantages, 0.2, 0.28);
    AggregateLoss(terms.loss, batch.response_mask, mode).backward();

    HfCausalLM model = testing::PresetModel(TinyConfig());
    PolicyUpdateConfig config;
    config.aggregation = mode;
    const auto stats = UpdateWithoutStepping(model, batch, config);
    EXPECT_EQ(stats.sequences_run, 1 + 1 + 2);
    EXPECT_NEAR(stats.loss, AggregateLoss(terms.loss, batch.response_mask, mode).item<double>(), 1e-5);
    const double clip = MaskedMean(terms.clipped, batch.response_mask);
    EXPECT_GT(clip, 0.0);
    EXPECT_NEAR(stats.clip_fraction, clip, 1e-6);
    ExpectSameGradients(model, Gradients(reference), "mode " + std::to_string(static_cast<int>(mode)));
  }
}

// With one update per rollout the trainer skips the old-log-prob forward: the updater
// then takes its own log-probs, detached, as the old ones. The gradient must be the one
// the explicitly computed old log-probs give; and two mini-batches without them are refused.
TEST(PolicyUpdater, OnPolicyUpdateWithoutOldLogProbsMatchesComputedOnes) {
  torch::manual_seed(3);
  PolicyBatch batch;
  batch.prompt_length = 3;
  batch.sequences = torch::randint(3, 16, {6, 7}, torch::kInt64);
  batch.response_mask = torch::ones({6, 4});
  batch.response_mask[2][3] = 0;
  batch.advantages = torch::randn({6});
  auto gradients = [&](bool with_old) {
    HfCausalLM model = testing::PresetModel(TinyConfig());
    PolicyBatch b = batch;
    if (with_old) b.old_logp = ResponseLogProbsNoGrad(model, b.sequences, 3, 1.0, 2);
    auto comm = MakeLocalCommunicator();
    ModelShards shards(model, *comm, Stage0(), Frozen());
    PolicyUpdateConfig config;
    config.micro_batch_size = 2;
    config.max_grad_norm = 1e9;
    PolicyUpdater updater(model, shards, config);
    const auto stats = updater.Update(b);
    EXPECT_EQ(stats.clip_fraction, 0.0);
    FlatParameterGroup& group = *shards.parts().front().group;
    return group.Gradient({0, group.layout().padded_numel()}).clone();
  };
  const torch::Tensor computed = gradients(true), skipped = gradients(false);
  EXPECT_GT(computed.norm().item<double>(), 0.0);
  EXPECT_TRUE(torch::allclose(skipped, computed, 1e-5, 1e-7));

  HfCausalLM model = testing::PresetModel(TinyConfig());
  auto comm = MakeLocalCommunicator();
  ModelShards shards(model, *comm, Stage0(), Frozen());
  PolicyUpdateConfig two;
  two.updates_per_step = 2;
  PolicyUpdater updater(model, shards, two);
  EXPECT_THROW(updater.Update(batch), std::invalid_argument);
}

TEST(PolicyUpdater, ClipsTheGlobalGradientNormToOne) {
  torch::manual_seed(1);
  PolicyBatch batch;
  batch.prompt_length = 3;
  batch.sequences = torch::randint(3, 16, {4, 7}, torch::kInt64);
  batch.response_mask = torch::ones({4, 4});
  batch.advantages = torch::tensor({100.0f, -100.0f, 50.0f, -50.0f});
  batch.old_logp = torch::zeros({4, 4}) - 2.0;
  HfCausalLM model = testing::PresetModel(TinyConfig());
  auto comm = MakeLocalCommunicator();
  ModelShards shards(model, *comm, Stage0(), Frozen());
  PolicyUpdateConfig config;
  config.micro_batch_size = 4;
  PolicyUpdater updater(model, shards, config);
  const auto stats = updater.Update(batch);
  EXPECT_GT(stats.grad_norm, 1.0);
  // The optimizer stepped on the clipped gradient, which stage 0 leaves in place.
  FlatParameterGroup& group = *shards.parts().front().group;
  EXPECT_NEAR(group.Gradient({0, group.layout().padded_numel()}).norm().item<double>(), 1.0, 1e-4);
}

TEST(PolicyUpdater, MiniBatchesEachTakeAnOptimizerStep) {
  torch::manual_seed(2);
  PolicyBatch batch;
  batch.prompt_length = 3;
  batch.sequences = torch::randint(3, 16, {4, 7}, torch::kInt64);
  batch.response_mask = torch::ones({4, 4});
  batch.advantages = torch::tensor({1.0f, -1.0f, 1.0f, -1.0f});
  HfCausalLM model = testing::PresetModel(TinyConfig());
  batch.old_logp = ResponseLogProbsNoGrad(model, batch.sequences, 3, 1.0, 2);
  auto comm = MakeLocalCommunicator();
  AdamWConfig adamw_config;
  adamw_config.lr = 1e-2;
  ModelShards shards(model, *comm, Stage0(), adamw_config);
  PolicyUpdateConfig config;
  config.updates_per_step = 2;
  config.micro_batch_size = 1;
  PolicyUpdater updater(model, shards, config);
  FlatParameterGroup& group = *shards.parts().front().group;
  const FlatRange all{0, group.layout().padded_numel()};
  auto before = group.Parameters(all).clone();
  const auto stats = updater.Update(batch);
  EXPECT_FALSE(torch::equal(before, group.Parameters(all)));
  // The second mini-batch runs on already-updated weights: its ratios move off 1, while
  // the first mini-batch's were exactly 1 (old log-probs from the same weights).
  EXPECT_GE(stats.clip_fraction, 0.0);
  EXPECT_EQ(shards.optimizer_step(), 2);
}

// The metrics stay on the device until the step's end and are read once: they must be,
// bit for bit, what a read after every micro-batch gives (double sums of each micro-batch's
// float sums, in order), with KL on and with zero-advantage rows left out (KL off).
TEST(PolicyUpdater, MetricsReadOnceEqualAReadPerMicroBatch) {
  for (const double kl_coef : {0.1, 0.0}) {
    torch::manual_seed(8);
    PolicyBatch batch;
    batch.prompt_length = 3;
    batch.sequences = torch::randint(3, 16, {8, 7}, torch::kInt64);
    batch.response_mask = torch::ones({8, 4});
    batch.response_mask[2][3] = 0;
    batch.response_mask[5].narrow(0, 1, 3).fill_(0);
    batch.advantages = torch::randn({8});
    batch.advantages[1] = 0;
    batch.advantages[4] = 0;
    batch.advantages[5] = 0;
    batch.old_logp = -torch::rand({8, 4}) * 3;
    batch.ref_logp = -torch::rand({8, 4}) * 3;
    PolicyUpdateConfig config;
    config.kl_coef = kl_coef;
    config.updates_per_step = 2;
    config.micro_batch_size = 2;

    // The reads per micro-batch, on a model that the frozen optimizer leaves as it is.
    HfCausalLM reference = testing::PresetModel(TinyConfig());
    double loss = 0, kl = 0, clip = 0;
    for (int64_t u = 0; u < 2; ++u) {
      const int64_t begin = 4 * u;
      const auto mask = batch.response_mask.narrow(0, begin, 4);
      const MiniBatchTotals totals = CountTotals(mask);
      double loss_sum = 0, kl_sum = 0, clipped_sum = 0;
      for (int64_t start = begin; start < begin + 4; start += 2) {
        auto seq = batch.sequences.narrow(0, start, 2);
        auto mmask = batch.response_mask.narrow(0, start, 2);
        auto adv = batch.advantages.narrow(0, start, 2);
        auto old = batch.old_logp.narrow(0, start, 2);
        if (kl_coef == 0) {
          auto rows = adv.ne(0).nonzero().squeeze(1);
          if (rows.size(0) == 0) rows = torch::zeros({1}, rows.options());
          seq = seq.index_select(0, rows);
          mmask = mmask.index_select(0, rows);
          adv = adv.index_select(0, rows);
          old = old.index_select(0, rows);
        }
        auto logp = ResponseLogProbs(reference, seq, 3, 1.0);
        auto terms = ClippedSurrogate(logp, old, adv, config.clip_low, config.clip_high);
        auto loss_mat = terms.loss;
        if (kl_coef > 0) {
          auto k = KlK3(logp, batch.ref_logp.narrow(0, start, 2));
          loss_mat = loss_mat + kl_coef * k;
          kl_sum += (k * mmask).sum().item<double>();
        }
        loss_sum += AggregateLossPart(loss_mat, mmask, config.aggregation, totals).item<double>();
        clipped_sum += (terms.clipped * mmask).sum().item<double>();
      }
      loss += loss_sum / 2.0;
      kl += kl_sum / totals.tokens / 2.0;
      clip += clipped_sum / totals.tokens / 2.0;
    }

    HfCausalLM model = testing::PresetModel(TinyConfig());
    auto comm = MakeLocalCommunicator();
    ModelShards shards(model, *comm, Stage0(), Frozen());
    PolicyUpdater updater(model, shards, config);
    const auto stats = updater.Update(batch);
    EXPECT_EQ(stats.loss, loss) << "klCoef " << kl_coef;
    EXPECT_EQ(stats.kl, kl) << "klCoef " << kl_coef;
    EXPECT_EQ(stats.clip_fraction, clip) << "klCoef " << kl_coef;
    EXPECT_GT(clip, 0.0);
    if (kl_coef > 0) EXPECT_GT(kl, 0.0);
    EXPECT_EQ(stats.sequences_run, kl_coef > 0 ? 8 : 2 + 1 + 1 + 2);
  }
}

// --- token-budget micro-batches ------------------------------------------------------

// Rows of different prompt and response lengths: prompts left-padded to P = 5 (padding
// 0, 2, 1, 3, 0, 4), responses of 6, 2, 4, 1, 3, 5 tokens in a width of R = 6, pad
// token 0 wherever a row has no token.
constexpr int64_t kBudgetP = 5, kBudgetR = 6, kBudgetRows = 6;

PolicyBatch UnevenBatch(uint64_t seed) {
  torch::manual_seed(seed);
  const std::vector<int64_t> padding = {0, 2, 1, 3, 0, 4}, response = {6, 2, 4, 1, 3, 5};
  PolicyBatch batch;
  batch.prompt_length = kBudgetP;
  batch.sequences = torch::randint(3, 16, {kBudgetRows, kBudgetP + kBudgetR}, torch::kInt64);
  batch.response_mask = torch::zeros({kBudgetRows, kBudgetR});
  for (int64_t i = 0; i < kBudgetRows; ++i) {
    batch.sequences[i].narrow(0, 0, padding[i]).fill_(0);
    batch.sequences[i].narrow(0, kBudgetP + response[i], kBudgetR - response[i]).fill_(0);
    batch.response_mask[i].narrow(0, 0, response[i]).fill_(1);
  }
  batch.prompt_padding = torch::tensor(padding, torch::kInt64);
  batch.advantages = torch::randn({kBudgetRows});
  batch.old_logp = -torch::rand({kBudgetRows, kBudgetR}) * 3;  // ratios far from 1: some clipped
  batch.ref_logp = -torch::rand({kBudgetRows, kBudgetR}) * 3;
  return batch;
}

testing::ModelDims BudgetModel() {
  testing::ModelDims c = TinyConfig();
  c.max_seq_len = kBudgetP + kBudgetR;
  return c;
}

// How far two fp32 evaluations of the same sum may drift when only the grouping of rows
// (and so the shapes the kernels see) changes: each term's rounding is at most eps per
// operation along its longest chain of dependent sums, here the attention over P + R
// positions, the hidden and ffn widths and the vocabulary of each layer, then the sum
// over every token of the batch; the bound is that depth times eps times the scale.
double SummationTolerance(const testing::ModelDims& d, double scale) {
  const double eps = std::numeric_limits<float>::epsilon();
  const double depth = d.layers * (kBudgetP + kBudgetR + d.hidden + d.ffn_hidden) + spec::kVocabSize +
                       kBudgetRows * (kBudgetP + kBudgetR);
  return depth * eps * scale;
}

double MaxAbs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

// One update over rows of uneven lengths with micro-batches of 2 rows (the fixed split,
// untrimmed) and with a 30-token budget (rows sorted by length and trimmed: micro-batches
// of 2, 3 and 1 rows, two of them narrower than R): the same loss and gradient in every
// aggregation mode, with KL on and with zero-advantage rows left out. A per-micro-batch
// normalisation (each micro-batch's own mean, or sum-norm over its own width, averaged)
// would move the loss by far more than the tolerance: checked below, so the comparison
// can tell.
TEST(PolicyUpdater, TokenBudgetGivesTheFixedSplitsLossAndGradient) {
  for (const double kl_coef : {0.1, 0.0}) {
    for (auto mode :
         {LossAggregation::kTokenMean, LossAggregation::kSeqMeanTokenMean, LossAggregation::kSeqMeanTokenSumNorm}) {
      const std::string what = "mode " + std::to_string(static_cast<int>(mode)) + " klCoef " + std::to_string(kl_coef);
      PolicyBatch batch = UnevenBatch(11);
      if (kl_coef == 0) batch.advantages[4] = 0;  // left out of the budget's micro-batch {1, 4, 5}
      PolicyUpdateConfig config;
      config.kl_coef = kl_coef;
      config.aggregation = mode;

      HfCausalLM fixed = testing::PresetModel(BudgetModel());
      const auto by_rows = UpdateWithoutStepping(fixed, batch, config);
      EXPECT_EQ(by_rows.micro_batches, 3) << what;
      EXPECT_EQ(by_rows.padded_tokens, (kl_coef > 0 ? 6 : 5) * (kBudgetP + kBudgetR)) << what;

      HfCausalLM budget = testing::PresetModel(BudgetModel());
      config.max_tokens_per_micro_batch = 30;
      const auto by_tokens = UpdateWithoutStepping(budget, batch, config, /*micro=*/64);
      // With KL: {0, 2} 2 x 11, {1, 4, 5} 3 x (5 + 5), {3} 1 x 3. Without, row 4 is left
      // out: {0, 2} 22, {1, 3, 5} 3 x (3 + 5) = 24.
      EXPECT_EQ(by_tokens.micro_batches, kl_coef > 0 ? 3 : 2) << what;
      EXPECT_EQ(by_tokens.padded_tokens, kl_coef > 0 ? 22 + 30 + 3 : 22 + 24) << what;
      EXPECT_EQ(by_tokens.sequences_run, kl_coef > 0 ? 6 : 5) << what;

      const testing::ModelDims d = BudgetModel();
      const double loss_tol = SummationTolerance(d, std::max(1.0, std::abs(by_rows.loss)));
      EXPECT_NEAR(by_tokens.loss, by_rows.loss, loss_tol) << what;
      EXPECT_NEAR(by_tokens.clip_fraction, by_rows.clip_fraction, loss_tol) << what;
      EXPECT_NEAR(by_tokens.kl, by_rows.kl, loss_tol) << what;
      EXPECT_GT(by_rows.clip_fraction, 0.0) << what;
      auto a = fixed->OrderedParameters(), b = budget->OrderedParameters();
      ASSERT_EQ(a.size(), b.size());
      double largest = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        const torch::Tensor ga = a[i].second.grad(), gb = b[i].second.grad();
        const double tol = SummationTolerance(d, MaxAbs(ga));
        largest = std::max(largest, MaxAbs(ga));
        EXPECT_LE(MaxAbs(gb - ga), tol) << a[i].first << " " << what;
      }
      EXPECT_GT(largest, 0.0) << what;

      // What per-micro-batch normalisation would have reported: each micro-batch's own
      // AggregateLoss over its trimmed rows, averaged over the micro-batches.
      HfCausalLM probe = testing::PresetModel(BudgetModel());
      const auto lengths = SequenceLengths(batch.response_mask, batch.prompt_padding, kBudgetP);
      std::vector<int64_t> kept;
      for (int64_t r = 0; r < kBudgetRows; ++r) {
        if (kl_coef > 0 || batch.advantages[r].item<float>() != 0) kept.push_back(r);
      }
      const MicroBatchPlan plan = PlanMicroBatches(lengths, 64, 30, kept);
      double per_micro = 0;
      for (const auto& g : plan.groups) {
        const TrimmedRows t = TrimRows(batch.sequences, batch.prompt_padding, kBudgetP, lengths, g);
        auto logp = ResponseLogProbs(probe, t.sequences, t.prompt_length, 1.0, {}, t.prompt_padding).detach();
        auto cols = [&](const torch::Tensor& x) { return x.index_select(0, t.index).narrow(1, 0, t.response_width); };
        auto loss_mat = ClippedSurrogate(logp, cols(batch.old_logp), batch.advantages.index_select(0, t.index),
                                         config.clip_low, config.clip_high)
                            .loss;
        if (kl_coef > 0) loss_mat = loss_mat + kl_coef * KlK3(logp, cols(batch.ref_logp));
        per_micro += AggregateLoss(loss_mat, cols(batch.response_mask), mode).item<double>() /
                     static_cast<double>(plan.groups.size());
      }
      EXPECT_GT(std::abs(per_micro - by_rows.loss), 10 * loss_tol) << what;
    }
  }
}

// The passes without gradient (old and reference log-probs) in the budget's micro-batches:
// every response token's log-prob is the fixed split's, positions past a micro-batch's
// longest response hold 0, and extra runs that keep ranks in step change nothing.
TEST(PolicyUpdater, TokenBudgetLogProbsWithoutGradientMatchTheFixedSplit) {
  const PolicyBatch batch = UnevenBatch(12);
  HfCausalLM model = testing::PresetModel(BudgetModel());
  const auto fixed = ResponseLogProbsNoGrad(model, batch.sequences, kBudgetP, 1.0, 2, {}, batch.prompt_padding);
  const auto lengths = SequenceLengths(batch.response_mask, batch.prompt_padding, kBudgetP);
  ASSERT_EQ(lengths.size(), static_cast<size_t>(kBudgetRows));
  EXPECT_EQ(lengths[1].prompt, 3);
  EXPECT_EQ(lengths[1].response, 2);
  MicroBatchPlan plan = PlanMicroBatches(lengths, 64, 30);
  EXPECT_EQ(plan.groups, (std::vector<std::vector<int64_t>>{{0, 2}, {1, 4, 5}, {3}}));
  EXPECT_EQ(plan.filler, 3);
  const auto budget =
      ResponseLogProbsNoGrad(model, batch.sequences, kBudgetP, 1.0, plan, lengths, {}, batch.prompt_padding);
  ASSERT_EQ(budget.sizes(), fixed.sizes());
  const double tol = SummationTolerance(BudgetModel(), MaxAbs(fixed * batch.response_mask));
  EXPECT_LE(MaxAbs((budget - fixed) * batch.response_mask), tol);
  // Row 3 ran alone, one response token wide; rows 1, 4 and 5 five wide.
  EXPECT_EQ(MaxAbs(budget[3].narrow(0, 1, kBudgetR - 1)), 0.0);
  EXPECT_EQ(budget[4][5].item<float>(), 0.0f);
  EXPECT_NE(budget[0][5].item<float>(), 0.0f);
  plan.runs += 2;
  EXPECT_TRUE(torch::equal(
      ResponseLogProbsNoGrad(model, batch.sequences, kBudgetP, 1.0, plan, lengths, {}, batch.prompt_padding), budget));
}

}  // namespace
}  // namespace headroom::worker
