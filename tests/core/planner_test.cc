// Planner: the ZeRO arithmetic per stage, placement, activations, KV cache, reference
// model, and the helpers the policy uses to pick reshard targets and micro-batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/guard/planner.h"
#include "core/hf/hf_config.h"
#include "core/memory/logits_chunk.h"
#include "core/spec/model_presets.h"

namespace headroom::guard {
namespace {

spec::TrainingJobSpec Job(const std::string& preset, int stage, int gpus = 0) {
  spec::TrainingJobSpec s;
  s.model.preset = preset;
  s.sharding.stage = stage;
  s.resources.gpus = gpus;
  return s;
}

int64_t Psi(const spec::TrainingJobSpec& s) {
  spec::ModelSpec m = s.model;
  auto p = spec::FindModelPreset(m.preset);
  m.layers = p->layers;
  m.hidden = p->hidden;
  m.heads = p->heads;
  m.ffn_hidden = p->ffn_hidden;
  m.max_seq_len = s.grpo.max_prompt_length + s.grpo.max_response_length;
  return spec::ParameterCount(m);
}

int64_t HostOf(const Plan& p, const std::string& name) { return p.Find(name) ? p.Find(name)->host_bytes : -1; }
int64_t GpuOf(const Plan& p, const std::string& name) { return p.Find(name) ? p.Find(name)->gpu_bytes : -1; }

// The example text job's model (configs/models/qwen2-tiny-addition: grouped-query heads, 2
// blocks) and its step: 32 prompts x 8 of up to 64 + 8 tokens, one worker, stage 1.
PlanOptions TextJobModel() {
  PlanOptions options;
  options.model =
      HfModelShape(hf::LoadHfConfig(std::string(HEADROOM_SOURCE_DIR) + "/configs/models/qwen2-tiny-addition"));
  return options;
}
spec::TrainingJobSpec TextJobStep(int micro_batch_size) {
  spec::TrainingJobSpec s = Job("tiny", 1);
  s.grpo.prompts_per_step = 32;
  s.grpo.group_size = 8;
  s.grpo.max_prompt_length = 64;
  s.grpo.max_response_length = 8;
  s.grpo.micro_batch_size = micro_batch_size;
  return s;
}

TEST(PlannerTest, ZeroStagesOnCpuFollowTheArithmetic) {
  const int n = 4;
  for (int stage = 0; stage <= 3; ++stage) {
    spec::TrainingJobSpec s = Job("small", stage);
    const int64_t psi = Psi(s);
    Plan p = PlanMemory(s, n);
    EXPECT_EQ(p.parameters, psi);
    // fp32 parameters (P=4), fp32 gradients (G=4), AdamW moments (K=8).
    EXPECT_EQ(HostOf(p, "parameters"), stage >= 3 ? 4 * psi / n : 4 * psi) << "stage " << stage;
    EXPECT_EQ(HostOf(p, "gradients"), stage >= 2 ? 4 * psi / n : 4 * psi) << "stage " << stage;
    EXPECT_EQ(HostOf(p, "optimizer"), stage >= 1 ? 8 * psi / n : 8 * psi) << "stage " << stage;
    EXPECT_EQ(p.gpu_total_bytes, 0) << "no GPU: everything on the host";
    EXPECT_EQ(p.Find("gathered layer") != nullptr, stage == 3);
  }
}

TEST(PlannerTest, MoreWorkersHoldLessExceptUnderDdp) {
  spec::TrainingJobSpec ddp = Job("small", 0);
  spec::TrainingJobSpec zero2 = Job("small", 2);
  EXPECT_EQ(HostOf(PlanMemory(ddp, 1), "optimizer"), HostOf(PlanMemory(ddp, 4), "optimizer"));
  EXPECT_GT(PlanMemory(zero2, 1).host_total_bytes, PlanMemory(zero2, 2).host_total_bytes);
  EXPECT_GT(PlanMemory(zero2, 2).host_total_bytes, PlanMemory(zero2, 4).host_total_bytes);
}

TEST(PlannerTest, GpuPlacementAndOffload) {
  spec::TrainingJobSpec s = Job("base", 2, /*gpus=*/1);
  const int64_t psi = Psi(s);
  Plan on_gpu = PlanMemory(s, 2);
  EXPECT_EQ(GpuOf(on_gpu, "parameters"), 4 * psi);
  EXPECT_EQ(GpuOf(on_gpu, "optimizer"), 8 * psi / 2);
  EXPECT_EQ(HostOf(on_gpu, "parameters"), 0);
  EXPECT_EQ(HostOf(on_gpu, "runtime"), kHostRuntimeBaselineBytes);  // one row, both sides
  EXPECT_EQ(GpuOf(on_gpu, "runtime"), kGpuRuntimeBaselineBytes);
  EXPECT_GT(on_gpu.gpu_total_bytes, on_gpu.host_total_bytes);

  s.sharding.offload_params = true;
  s.sharding.offload_optimizer = true;
  Plan offloaded = PlanMemory(s, 2);
  EXPECT_EQ(HostOf(offloaded, "parameters"), 4 * psi);
  EXPECT_EQ(HostOf(offloaded, "optimizer"), 8 * psi / 2);
  EXPECT_EQ(HostOf(offloaded, "gradients"), 4 * psi / 2);
  EXPECT_EQ(HostOf(offloaded, "reference model"), 2 * psi) << "a GPU job keeps its frozen reference in bf16";
  EXPECT_EQ(offloaded.host_total_bytes + offloaded.gpu_total_bytes, on_gpu.host_total_bytes + on_gpu.gpu_total_bytes)
      << "offload moves bytes, it does not create them";
  EXPECT_LT(offloaded.gpu_total_bytes, on_gpu.gpu_total_bytes);

  // bf16 storage keeps an fp32 master in the optimizer: P = G = 2, K = 12.
  PlanOptions bf16;
  bf16.bf16_params = true;
  s.sharding.offload_params = s.sharding.offload_optimizer = false;
  Plan b = PlanMemory(s, 1, bf16);
  EXPECT_EQ(GpuOf(b, "parameters"), 2 * psi);
  EXPECT_EQ(GpuOf(b, "optimizer"), 12 * psi);
}

TEST(PlannerTest, ActivationsKvCacheAndReferenceModel) {
  spec::TrainingJobSpec s = Job("tiny", 2);
  s.grpo.prompts_per_step = 32;
  s.grpo.group_size = 8;
  s.grpo.max_prompt_length = 16;
  s.grpo.max_response_length = 8;
  s.grpo.micro_batch_size = 64;
  const int layers = 2, hidden = 64, heads = 4, seq = 24, workers = 2;
  Plan p = PlanMemory(s, workers);
  // 2 * layers * heads * head_dim * seq * batch * 4 bytes, batch = 32/2 * 8 = 128.
  EXPECT_EQ(HostOf(p, "generation cache"), 2LL * layers * heads * (hidden / heads) * seq * 128 * 4);
  // Per row, as the blocks save tensors (the tiny preset: q = kv = h, ffn = 4 h): the
  // forward reads n = seq - 1 positions; per position a block keeps its input, the normed
  // input and the rotated q/k/v (5 h), and per query position the probabilities over n keys
  // per head, the attention output, the residual sum and its normed copy, and the MLP's 4
  // ffn. The last block runs its queries only at the 8 response positions, beside the
  // final norm's input and output there; backward's working set at that block is the
  // MLP's 2 ffn + h per response position.
  const int ffn = 4 * hidden;
  const double n = seq - 1, r = 8;
  const double per_key = 2.0 * hidden + 3.0 * hidden, per_query = heads * n + 3.0 * hidden + 4.0 * ffn;
  const double block = n * (per_key + per_query), backward = 2.0 * ffn + hidden;
  const double row = block + (n * per_key + r * per_query) + 2 * r * hidden + r * backward;
  ASSERT_GT(row, block + n * backward);  // the last block's backward, not the first's, is the top
  EXPECT_NEAR(static_cast<double>(HostOf(p, "activations")), 64.0 * row * 4, 1.0);
  // The presets' vocabulary fits the whole micro-batch's response tokens in one chunk.
  EXPECT_EQ(HostOf(p, "logits"), 2LL * 64 * 8 * spec::kVocabSize * 4);
  // The presets' head is its own matrix (not tied): one [vocab, hidden] fp32 gradient.
  EXPECT_EQ(HostOf(p, "head gradient"), 1LL * spec::kVocabSize * hidden * 4);
  EXPECT_EQ(HostOf(p, "reference model"), 4 * Psi(s));
  EXPECT_EQ(HostOf(p, "runtime"), kHostRuntimeBaselineBytes);
  s.grpo.kl_coef = 0;
  EXPECT_EQ(PlanMemory(s, workers).Find("reference model"), nullptr);
  // Halving the micro-batch halves the token-driven part.
  s.grpo.micro_batch_size = 32;
  EXPECT_EQ(PlanMemory(s, workers).host_activation_bytes * 2, p.host_activation_bytes);
}

// A token budget (grpo.maxTokensPerMicroBatch) bounds a micro-batch's padded tokens: it
// replaces micro x seq in the activations and caps the logits' response tokens, and a
// budget above micro x seq changes nothing (microBatchSize still caps the rows).
TEST(PlannerTest, TokenBudgetLowersThePlannedActivations) {
  spec::TrainingJobSpec s = Job("tiny", 2);
  s.grpo.max_prompt_length = 16;
  s.grpo.max_response_length = 8;
  s.grpo.micro_batch_size = 64;
  const int layers = 2, hidden = 64, heads = 4, seq = 24, workers = 2;
  const Plan rows = PlanMemory(s, workers);
  s.grpo.max_tokens_per_micro_batch = 384;  // a quarter of 64 x 24
  const Plan budget = PlanMemory(s, workers);
  // A budget of 384 tokens holds 16 rows of 24; one row as in the test above.
  const int ffn = 4 * hidden;  // the tiny preset's MLP
  const double n = seq - 1, r = 8;
  const double per_key = 5.0 * hidden, per_query = heads * n + 3.0 * hidden + 4.0 * ffn;
  const double row = (layers - 1) * n * (per_key + per_query) + n * per_key + r * per_query + 2 * r * hidden +
                     r * (2.0 * ffn + hidden);
  EXPECT_NEAR(static_cast<double>(HostOf(budget, "activations")), 16.0 * row * 4, 1.0);
  EXPECT_LT(HostOf(budget, "activations"), HostOf(rows, "activations"));
  EXPECT_NE(budget.Find("activations")->note.find("budget 384 tokens"), std::string::npos)
      << budget.Find("activations")->note;
  // At most 384 response tokens (of 64 x 8 = 512) go through the head at once.
  EXPECT_EQ(HostOf(budget, "logits"), 2LL * 384 * spec::kVocabSize * 4);
  EXPECT_LT(budget.host_total_bytes, rows.host_total_bytes);
  s.grpo.max_tokens_per_micro_batch = 64 * seq;
  EXPECT_EQ(HostOf(PlanMemory(s, workers), "activations"), HostOf(rows, "activations"));
  s.grpo.max_tokens_per_micro_batch = 1 << 20;
  EXPECT_EQ(PlanMemory(s, workers).host_total_bytes, rows.host_total_bytes);
}

// The update's last block computes its attention output and MLP only where outputs are
// scored (the response), so at one row length a longer response costs more; recomputed
// blocks run every position and do not care. With a long prompt backward's attention
// working set outgrows the last block's saved tensors, and the top is at the block before
// it, once those are freed.
TEST(PlannerTest, TheLastBlockRunsItsQueriesAtTheResponseOnly) {
  const ModelShape m =
      HfModelShape(hf::LoadHfConfig(std::string(HEADROOM_SOURCE_DIR) + "/configs/models/qwen2-deep-long"));
  EXPECT_LT(ActivationElementsPerToken(m, 72, 8, false), ActivationElementsPerToken(m, 72, 32, false));
  EXPECT_DOUBLE_EQ(ActivationElementsPerToken(m, 72, 8, true), ActivationElementsPerToken(m, 72, 32, true));
  // The drill's long step: 415 + 8 tokens; its model has 4 query and 2 key/value heads.
  const double n = 422, h = m.hidden, q = 1.0 * m.heads * m.head_dim, kv = 1.0 * m.kv_heads * m.head_dim;
  const double block = n * (2 * h + q + 2 * kv + m.heads * n + q + 2 * h + 4.0 * m.ffn_hidden);
  const double backward = 2.0 * m.heads * n + h + kv;
  ASSERT_GT(backward, 2.0 * m.ffn_hidden + h);
  EXPECT_NEAR(ActivationElementsPerToken(m, 423, 8, false) * 423, (m.layers - 1) * block + n * backward, 1e-6 * block);
}

// The data's longest prompt (PlanOptions::longest_prompt, from `headroom-worker prompts`):
// the update's rows and the prefill's prompts are that long when it is below
// maxPromptLength, never longer; the generation cache stays allocated for maxPromptLength.
TEST(PlannerTest, TheDataLongestPromptBoundsTheUpdateAndThePrefill) {
  const PlanOptions options = TextJobModel();
  const spec::TrainingJobSpec s = TextJobStep(128);
  const Plan at_max = PlanMemory(s, 1, options);
  PlanOptions data = options;
  data.longest_prompt = 51;
  const Plan at_data = PlanMemory(s, 1, data);
  spec::TrainingJobSpec shorter = s;
  shorter.grpo.max_prompt_length = 51;
  const Plan at_51 = PlanMemory(shorter, 1, options);
  // The same as a maxPromptLength of 51, but for the generation cache.
  EXPECT_EQ(HostOf(at_data, "activations"), HostOf(at_51, "activations"));
  EXPECT_EQ(HostOf(at_data, "rollout prefill"), HostOf(at_51, "rollout prefill"));
  EXPECT_LT(HostOf(at_data, "activations"), HostOf(at_max, "activations"));
  EXPECT_EQ(HostOf(at_data, "generation cache"), HostOf(at_max, "generation cache"));
  EXPECT_GT(HostOf(at_data, "generation cache"), HostOf(at_51, "generation cache"));
  // Longer than maxPromptLength (records the job leaves out) or unknown: maxPromptLength.
  data.longest_prompt = 90;
  EXPECT_EQ(PlanMemory(s, 1, data).host_total_bytes, at_max.host_total_bytes);
  data.longest_prompt = 0;
  EXPECT_EQ(PlanMemory(s, 1, data).host_total_bytes, at_max.host_total_bytes);
}

// A GPU worker keeps bf16 copies of its parameters for the rollout (worker/sharding/
// inference_weights.h): 2 bytes per parameter it holds, placed with the parameters.
// Recomputed blocks (activation checkpointing at stages 0-2; stage 3 always) keep each
// block's input and one block's activations, not every block's; and on a GPU the backward
// holds one block's bf16 weight casts, not the model's.
TEST(PlannerTest, RecomputedBlocksKeepTheBoundariesAndOneBlock) {
  spec::TrainingJobSpec s = Job("small", 2);
  const int seq = s.grpo.max_prompt_length + s.grpo.max_response_length;
  const double micro = s.grpo.micro_batch_size;
  const ModelShape shape = PresetModelShape(s);
  // The small preset: q = kv = h, no grouped-query heads. Per row over n = seq - 1
  // positions: a block's 5 h per position and its query part per query position.
  const double n = seq - 1, r = s.grpo.max_response_length, h = shape.hidden;
  const double per_query = 1.0 * shape.heads * n + 3 * h + 4.0 * shape.ffn_hidden;
  const double block = n * (5 * h + per_query);
  const double backward = std::max(2.0 * shape.ffn_hidden + h, 2.0 * shape.heads * n + 2 * h);
  const int64_t kept = HostOf(PlanMemory(s, 2), "activations");
  const double all_blocks = (shape.layers - 1) * block + n * 5 * h + r * per_query + 2 * r * h;
  EXPECT_NEAR(static_cast<double>(kept),
              micro * std::max(all_blocks + r * backward, (shape.layers - 1) * block + n * backward) * 4, 1.0);
  s.grpo.activation_checkpointing = true;
  const Plan recomputed = PlanMemory(s, 2);
  // Every block's input, and one block recomputed whole (its input is one of them) with
  // backward's working set.
  EXPECT_NEAR(static_cast<double>(HostOf(recomputed, "activations")),
              micro * (shape.layers * n * h + block - n * h + n * backward) * 4, 1.0);
  EXPECT_LT(HostOf(recomputed, "activations"), kept / 2);
  s.grpo.activation_checkpointing = false;
  s.sharding.stage = 3;  // recomputes around its gather anyway
  EXPECT_EQ(HostOf(PlanMemory(s, 2), "activations"), HostOf(recomputed, "activations"));

  spec::TrainingJobSpec g = Job("small", 2, /*gpus=*/1);
  const ModelShape gs = PresetModelShape(g);
  const int64_t all_casts = GpuOf(PlanMemory(g, 1), "autocast weights");
  g.grpo.activation_checkpointing = true;
  EXPECT_EQ(GpuOf(PlanMemory(g, 1), "autocast weights"), 2 * (gs.layer_parameters + gs.vocab * gs.hidden));
  EXPECT_LT(GpuOf(PlanMemory(g, 1), "autocast weights"), all_casts);
}

// The rollout's prefill runs every local sequence's prompt at once: where the update's
// transient is the smaller (a token budget, recomputed blocks), the prefill's sets the
// step's peak, and the plan's total is the state plus the larger of the two.
TEST(PlannerTest, TheRolloutPrefillSetsThePeakWhereTheUpdateIsSmaller) {
  const PlanOptions options = TextJobModel();
  // A micro-batch of 256 rows: the example job's 128 are already below its prefill.
  spec::TrainingJobSpec s = TextJobStep(256);
  const ModelShape& m = *options.model;
  const double per_token = RolloutPrefillElementsPerToken(m, 64);
  // At least the attention's scores and their softmax over 64 keys per head, and what the
  // block keeps beside them.
  EXPECT_GT(per_token, 2.0 * m.heads * 64 + 2 * m.hidden);
  // Quadratic in the prompt: the scores' share grows with it.
  EXPECT_GT(RolloutPrefillElementsPerToken(m, 128) - per_token, 2.0 * m.heads * 64);
  auto transient = [](const Plan& p) { return HostOf(p, "activations") + HostOf(p, "logits"); };
  for (int workers : {1, 2}) {
    SCOPED_TRACE(workers);
    const double prefill = per_token * (256.0 / workers) * 64 * 4;
    const Plan rows = PlanMemory(s, workers, options);
    ASSERT_GT(static_cast<double>(transient(rows)), prefill);  // the update's micro-batch of 256 rows is larger
    EXPECT_EQ(rows.Find("rollout prefill"), nullptr);
    spec::TrainingJobSpec budgeted = s;
    budgeted.grpo.max_tokens_per_micro_batch = 2048;
    for (bool recompute : {false, true}) {
      budgeted.grpo.activation_checkpointing = recompute;
      const Plan p = PlanMemory(budgeted, workers, options);
      ASSERT_LT(static_cast<double>(transient(p)), prefill);
      ASSERT_NE(p.Find("rollout prefill"), nullptr);
      EXPECT_NEAR(static_cast<double>(p.host_total_bytes), static_cast<double>(p.host_state_bytes) + prefill, 2.0);
      EXPECT_EQ(p.host_state_bytes + p.host_activation_bytes + HostOf(p, "rollout prefill"), p.host_total_bytes);
      EXPECT_NE(p.Find("rollout prefill")->note.find(std::to_string(256 / workers) + " sequences x prompt 64"),
                std::string::npos)
          << p.Find("rollout prefill")->note;
    }
  }
  // A GPU's prefill runs the attention without score copies, in bf16: not counted.
  s.resources.gpus = 1;
  s.grpo.max_tokens_per_micro_batch = 2048;
  EXPECT_EQ(PlanMemory(s, 1, options).Find("rollout prefill"), nullptr);
}

TEST(PlannerTest, InferenceWeightsAreTheBf16CopiesOfWhatARankHolds) {
  spec::TrainingJobSpec s = Job("base", 2, /*gpus=*/1);
  const int64_t psi = Psi(s);
  const Plan on = PlanMemory(s, 2);
  EXPECT_EQ(GpuOf(on, "inference weights"), 2 * psi);
  EXPECT_EQ(HostOf(on, "inference weights"), 0);
  PlanOptions without_copies;
  without_copies.bf16_inference_weights = false;
  const Plan off = PlanMemory(s, 2, without_copies);
  EXPECT_EQ(off.Find("inference weights"), nullptr);
  // The frozen reference model is kept in bf16 with them: 2 bytes a parameter instead of 4.
  ASSERT_GT(s.grpo.kl_coef, 0);
  EXPECT_EQ(GpuOf(on, "reference model"), 2 * psi);
  EXPECT_EQ(GpuOf(off, "reference model"), 4 * psi);
  // Without a reference model the copies are the whole difference, less half the cache:
  // the rollout that reads them keeps its KV cache in bf16.
  s.grpo.kl_coef = 0;
  const Plan on_alone = PlanMemory(s, 2), off_alone = PlanMemory(s, 2, without_copies);
  const int64_t fp32_cache = GpuOf(off_alone, "generation cache");
  EXPECT_EQ(2 * GpuOf(on_alone, "generation cache"), fp32_cache);
  EXPECT_EQ(on_alone.gpu_total_bytes - off_alone.gpu_total_bytes, 2 * psi - fp32_cache / 2);
  EXPECT_EQ(on_alone.gpu_state_bytes - off_alone.gpu_state_bytes, 2 * psi - fp32_cache / 2)
      << "the copies and the cache stay between steps";
  EXPECT_EQ(on.gpu_activation_bytes, off.gpu_activation_bytes);
  EXPECT_EQ(on.host_total_bytes, off.host_total_bytes);

  s.sharding.stage = 3;  // each rank's shard only
  EXPECT_EQ(GpuOf(PlanMemory(s, 2), "inference weights"), psi);
  s.sharding.offload_params = true;  // at the shard's home
  EXPECT_EQ(HostOf(PlanMemory(s, 2), "inference weights"), psi);
  EXPECT_EQ(GpuOf(PlanMemory(s, 2), "inference weights"), 0);

  // A CPU worker keeps none unless asked to.
  EXPECT_EQ(PlanMemory(Job("base", 2), 2).Find("inference weights"), nullptr);
  PlanOptions with_copies;
  with_copies.bf16_inference_weights = true;
  EXPECT_EQ(HostOf(PlanMemory(Job("base", 2), 2, with_copies), "inference weights"), 2 * psi);
}

// Under GPU autocast the update's backward keeps a bf16 cast of every matmul weight it
// read: the whole model but an untied input embedding, or under stage 3 (blocks recomputed
// in backward) one block and the head. None on a CPU, which does not autocast.
TEST(PlannerTest, AutocastWeightsAreTheBf16CastsTheBackwardKeeps) {
  ModelShape shape;
  shape.parameters = 1000000;
  shape.layer_parameters = 50000;
  shape.layers = 12;
  shape.hidden = 64;
  shape.heads = 4;
  shape.kv_heads = 4;
  shape.head_dim = 16;
  shape.vocab = 1000;
  shape.tied_head = true;
  PlanOptions options;
  options.model = shape;
  spec::TrainingJobSpec s = Job("tiny", 0, /*gpus=*/1);
  EXPECT_EQ(GpuOf(PlanMemory(s, 1, options), "autocast weights"), 2 * 1000000);
  EXPECT_EQ(HostOf(PlanMemory(s, 1, options), "autocast weights"), 0);
  options.model->tied_head = false;  // the input embedding is looked up, not multiplied
  EXPECT_EQ(GpuOf(PlanMemory(s, 1, options), "autocast weights"), 2 * (1000000 - 1000 * 64));
  s.sharding.stage = 3;
  EXPECT_EQ(GpuOf(PlanMemory(s, 2, options), "autocast weights"), 2 * (50000 + 1000 * 64));
  // The same every step: counted with the state, not with the token-driven part.
  s.sharding.stage = 0;
  const Plan with = PlanMemory(s, 1, options);
  EXPECT_EQ(with.gpu_activation_bytes, GpuOf(with, "activations") + GpuOf(with, "logits"));
  EXPECT_EQ(PlanMemory(Job("tiny", 0), 1, options).Find("autocast weights"), nullptr);
}

TEST(PlannerTest, TotalsAddUpAndStateExcludesActivations) {
  Plan p = PlanMemory(Job("small", 1, 1), 2, PlanOptions{80LL << 30});
  int64_t host = 0, gpu = 0;
  for (const PlanComponent& c : p.components) {
    host += c.host_bytes;
    gpu += c.gpu_bytes;
  }
  EXPECT_EQ(p.host_total_bytes, host);
  EXPECT_EQ(p.gpu_total_bytes, gpu);
  EXPECT_EQ(p.gpu_state_bytes + p.gpu_activation_bytes, gpu);
  EXPECT_EQ(p.host_state_bytes + p.host_activation_bytes, host);
  EXPECT_EQ(p.gpu_limit_bytes, 80LL << 30);
}

TEST(PlannerTest, SmallestFittingWorkersRespectsTheBatchAndBounds) {
  // small, stage 2 on CPU: ~25M params -> 4 Psi + 12 Psi / N, plus activations.
  spec::TrainingJobSpec s = Job("small", 2);
  s.grpo.prompts_per_step = 24;
  s.grpo.updates_per_step = 1;
  s.max_workers = 8;
  s.resources.memory_bytes = PlanMemory(s, 1).host_total_bytes;  // fits only with headroom from sharding
  const int w = SmallestFittingWorkers(s);
  ASSERT_GT(w, 1);
  EXPECT_TRUE(spec::WorkerCountFits(s.grpo, w));
  EXPECT_TRUE(PlanFits(PlanMemory(s, w), s.memory_guard));
  EXPECT_FALSE(PlanFits(PlanMemory(s, w - 1), s.memory_guard));
  // A worker count that does not divide the batch (5 for 24 prompts) is never chosen.
  EXPECT_NE(SmallestFittingWorkers(s, /*from=*/5), 5);
  // Nothing fits under a tiny limit.
  s.resources.memory_bytes = 64 << 20;
  EXPECT_EQ(SmallestFittingWorkers(s), 0);
}

TEST(WorkerCountTest, FindWalksEitherWayWithinTheBoundsAndTheBatch) {
  spec::TrainingJobSpec s;
  s.grpo.prompts_per_step = 12;  // divides over 1, 2, 3, 4, 6, 12
  s.grpo.updates_per_step = 1;
  s.min_workers = 2;
  s.max_workers = 8;
  EXPECT_EQ(FindWorkerCount(s, 5, 8), 6) << "5 does not divide the batch";
  EXPECT_EQ(FindWorkerCount(s, 5, 1), 4) << "downwards";
  EXPECT_EQ(FindWorkerCount(s, 1, 1), 0) << "below minWorkers is skipped, not clamped onto";
  EXPECT_EQ(FindWorkerCount(s, 9, 12), 0) << "above maxWorkers is skipped, not clamped onto";
  EXPECT_EQ(FindWorkerCount(s, 7, 7), 0);
  EXPECT_EQ(FindWorkerCount(s, 1, 8), 2) << "starts at minWorkers";
  EXPECT_EQ(FindWorkerCount(s, 12, 1), 6) << "starts at maxWorkers going down";
  std::vector<int> asked;
  EXPECT_EQ(FindWorkerCount(
                s, 2, 8,
                [&](int w) {
    asked.push_back(w);
    return w > 3;
                }),
            4);
  EXPECT_EQ(asked, (std::vector<int>{2, 3, 4})) << "only candidates are offered, in order";
  EXPECT_EQ(FindWorkerCount(s, 2, 8, [](int) { return false; }), 0);
}

TEST(WorkerCountTest, OnlyWholePodsAreCandidates) {
  spec::TrainingJobSpec s;
  s.grpo.prompts_per_step = 12;  // divides over 1, 2, 3, 4, 6, 12
  s.grpo.updates_per_step = 1;
  s.min_workers = 1;
  s.max_workers = 12;
  s.ranks_per_pod = 4;
  EXPECT_EQ(FindWorkerCount(s, 5, 12), 12) << "6 would leave a pod of 2";
  EXPECT_EQ(FindWorkerCount(s, 11, 1), 4);
  EXPECT_EQ(NearestWorkerCount(s, 6, 4), 12) << "a reshard up from one pod of 4";
  EXPECT_EQ(NearestWorkerCount(s, 2, 4), 4) << "no smaller whole pod: it stays";
}

TEST(WorkerCountTest, NearestSearchesAwayFromTheCurrentCountFirst) {
  spec::TrainingJobSpec s;
  s.grpo.prompts_per_step = 6;  // divides over 1, 2, 3, 6
  s.grpo.updates_per_step = 1;
  s.min_workers = 1;
  s.max_workers = 8;
  EXPECT_EQ(NearestWorkerCount(s, 4, 1), 6) << "up from the wanted count first";
  EXPECT_EQ(NearestWorkerCount(s, 16, 1), 6) << "clamped to maxWorkers, then down";
  s.max_workers = 5;
  EXPECT_EQ(NearestWorkerCount(s, 4, 1), 3) << "nothing above: back down towards the current count";
  EXPECT_EQ(NearestWorkerCount(s, 4, 3), 3) << "never past the current count: it stays";
  EXPECT_EQ(NearestWorkerCount(s, 5, 6), 3) << "a smaller wanted count searches downwards";
  s.max_workers = 1;
  EXPECT_EQ(NearestWorkerCount(s, 2, 1), 1);
}

TEST(PlannerTest, LargestFittingMicroBatch) {
  spec::TrainingJobSpec s = Job("small", 2);
  s.grpo.micro_batch_size = 64;
  // 8 prompts x 8: the rollout's prefill stays under the micro-batches tried here (a
  // larger one is a floor no micro-batch goes under: TheRolloutPrefillSetsThePeak...).
  s.grpo.prompts_per_step = 8;
  spec::TrainingJobSpec smallest = s;
  smallest.grpo.micro_batch_size = 14;
  ASSERT_EQ(PlanMemory(smallest, 1).Find("rollout prefill"), nullptr);
  Plan full = PlanMemory(s, 1);
  // Room for the state plus about a quarter of the activations.
  s.resources.memory_bytes = static_cast<int64_t>((full.host_state_bytes + full.host_activation_bytes / 4) / 0.9);
  const int m = LargestFittingMicroBatch(s, 1);
  EXPECT_GE(m, 14);
  EXPECT_LE(m, 16);
  s.resources.memory_bytes = full.host_state_bytes;  // not even the state fits
  EXPECT_EQ(LargestFittingMicroBatch(s, 1), 0);
}

TEST(PlannerTest, CorrectionLearnsMeasuredOverPlanned) {
  spec::TrainingJobSpec s = Job("small", 2);
  Plan p = PlanMemory(s, 1);
  PlanCorrection c;
  for (int i = 0; i < 10; ++i) c.Observe(p, p.host_total_bytes * 3 / 2, 0);
  EXPECT_NEAR(c.host_scale, 1.5, 0.01);
  EXPECT_EQ(c.gpu_scale, 1.0);  // nothing measured there
  Plan corrected = PlanMemory(s, 1, {}, c);
  EXPECT_NEAR(static_cast<double>(corrected.host_total_bytes), 1.5 * p.host_total_bytes, 0.01 * p.host_total_bytes);
  c.Observe(p, p.host_total_bytes * 100, 0);  // one absurd reading moves it, but clamped
  EXPECT_LE(c.host_scale, 4.0);
}

TEST(PlannerTest, RejectsZeroWorkers) { EXPECT_THROW(PlanMemory(Job("tiny", 2), 0), std::invalid_argument); }

// A Hugging Face model's plan comes from its config.json: Qwen2.5-0.5B's dimensions (as
// published with the model; 494,032,768 parameters per its model card's 0.49B).
TEST(PlannerTest, HuggingFaceConfigShapesThePlan) {
  const hf::HfModelConfig qwen = hf::ParseHfConfig(R"({
    "architectures": ["Qwen2ForCausalLM"], "vocab_size": 151936, "hidden_size": 896,
    "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
    "num_key_value_heads": 2, "max_position_embeddings": 32768, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})",
                                                   "config.json");
  PlanOptions options;
  options.model = HfModelShape(qwen);
  spec::TrainingJobSpec s = Job("tiny", 3, /*gpus=*/1);
  s.grpo.max_prompt_length = 256;
  s.grpo.max_response_length = 512;
  s.grpo.prompts_per_step = 8;
  s.grpo.group_size = 4;
  s.grpo.micro_batch_size = 2;
  const int n = 2;
  const Plan p = PlanMemory(s, n, options);
  const int64_t psi = 494032768;
  EXPECT_EQ(p.parameters, psi);
  EXPECT_EQ(GpuOf(p, "parameters"), 4 * psi / n);
  EXPECT_EQ(GpuOf(p, "optimizer"), 8 * psi / n);
  // One Qwen2 block: q/o 896x896, k/v 896x128 (2 kv heads of 64), biases, SwiGLU, 2 norms.
  const int64_t block = 2 * 896 * 896 + 2 * 896 * 128 + (896 + 2 * 128) + 3 * 896 * 4864 + 2 * 896;
  EXPECT_EQ(GpuOf(p, "gathered layer"), 4 * block);
  const int64_t seq = 256 + 512, local_sequences = 8 / n * 4;
  // Stage 3 recomputes blocks: the 24 blocks' inputs and one block's activations, bf16,
  // over the 767 positions the forward reads: per position 2 h + q + 2 kv (the 2
  // key/value heads, not the 14 query heads) and per query 14 x n + q + 2 h + 4 ffn; and
  // backward's working set, at 767 positions the attention's (the gradients of 14 heads'
  // probabilities and scores, 2 x 14 x n, beside h and kv), not the MLP's 2 ffn + h.
  const double read = seq - 1;
  const double one_block = read * (2 * 896 + 896 + 2 * 128 + 14.0 * read + 896 + 2 * 896 + 4 * 4864);
  const double backward = 2 * 14.0 * read + 896 + 128;
  ASSERT_GT(backward, 2 * 4864 + 896);
  EXPECT_NEAR(static_cast<double>(GpuOf(p, "activations")),
              2.0 * (24 * read * 896 + one_block - read * 896 + read * backward) * 2, 1.0);
  // The cache holds the 2 key/value heads, not the 14 query heads; bf16, as the rollout
  // allocates it where it reads the bf16 inference copies (a GPU job's default).
  EXPECT_EQ(GpuOf(p, "generation cache"), 2 * 24 * 2 * 64 * seq * local_sequences * 2);
  // The bytes per element follow the cache's dtype: fp32 without the bf16 copies.
  PlanOptions fp32_cache = options;
  fp32_cache.bf16_inference_weights = false;
  EXPECT_EQ(GpuOf(PlanMemory(s, n, fp32_cache), "generation cache"), 2 * 24 * 2 * 64 * seq * local_sequences * 4);
  // 2 x 512 response tokens are more than one chunk of a 152k vocabulary: one chunk counts.
  EXPECT_EQ(GpuOf(p, "logits"), static_cast<int64_t>(2.5 * memory::LogitsChunkTokens(151936) * 151936 * 4));
  // Qwen2.5-0.5B ties its head to the embedding: two [vocab, hidden] fp32 gradients meet.
  EXPECT_EQ(GpuOf(p, "head gradient"), 2LL * 151936 * 896 * 4);
  // The preset's plan is a different (far smaller) model.
  EXPECT_LT(PlanMemory(s, n).parameters, psi / 100);
  // Past one chunk the logits stop growing with the micro-batch (activations do not).
  s.grpo.micro_batch_size = 16;
  const Plan bigger = PlanMemory(s, n, options);
  EXPECT_EQ(GpuOf(bigger, "logits"), GpuOf(p, "logits"));
  EXPECT_EQ(GpuOf(bigger, "activations"), 8 * GpuOf(p, "activations"));
  // Below one chunk they are the micro-batch's own response tokens.
  s.grpo.micro_batch_size = 1;
  s.grpo.max_response_length = 256;
  EXPECT_EQ(GpuOf(PlanMemory(s, n, options), "logits"), static_cast<int64_t>(2.5 * 256 * 151936 * 4));
}

TEST(PlannerTest, PresetShapeMatchesTheSpecParameterCount) {
  const spec::TrainingJobSpec s = Job("small", 0);
  const ModelShape shape = PresetModelShape(s);
  EXPECT_EQ(shape.parameters, Psi(s));
  // One block, what stage 3 gathers: two RMSNorms, q/k/v/o, the SwiGLU MLP.
  const int64_t h = 512, f = 2048;
  EXPECT_EQ(shape.layer_parameters, 2 * h + 4 * h * h + 3 * h * f);
  EXPECT_EQ(shape.ffn_hidden, f);  // the MLP's width: most of a block's activations
  EXPECT_EQ(shape.source, "preset small");
  EXPECT_FALSE(shape.tied_head);
  EXPECT_EQ(shape.kv_heads, shape.heads);
  EXPECT_EQ(shape.vocab, spec::kVocabSize);
}

}  // namespace
}  // namespace headroom::guard
