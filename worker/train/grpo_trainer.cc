#include <spdlog/spdlog.h>

#include "worker/train/grpo_trainer.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <cmath>
#include <stdexcept>

#include "core/base/utf8.h"
#include "worker/grpo/advantages.h"
#include "worker/grpo/log_probs.h"
#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/model/model_source.h"
#include "worker/model/lora.h"
#include "worker/model/model_transforms.h"
#include "worker/sharding/inference_weights.h"
#include "worker/sharding/sharded_state_checkpoint.h"
#include "worker/tasks/counter_rng.h"
#include "worker/tasks/task_factory.h"

namespace headroom::worker {
namespace {

// model.init == checkpoint: the policy's weights from a checkpoint (worker/checkpoint/),
// `path` the checkpoint directory (its `latest` step) or one step directory. Throws
// CheckpointError naming the tensor when one is missing or has another shape.
void LoadInitialWeights(CausalLM& model, const std::string& path) {
  std::optional<CheckpointReader> reader = CheckpointReader::OpenLatest(path);
  if (!reader) reader.emplace(path);
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : model->OrderedParameters()) {
    const torch::Tensor saved = reader->ReadFull(kModelTensorPrefix + name);
    if (saved.sizes() != p.sizes()) {
      throw CheckpointError(reader->dir().string() + ": tensor " + kModelTensorPrefix + name + " has shape " +
                            c10::str(saved.sizes()) + ", the model needs " + c10::str(p.sizes()));
    }
    p.copy_(saved);
  }
}

}  // namespace

namespace {

constexpr uint64_t kSampleStream = 0x5A3F1E;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Prompts of different lengths as one batch: each problem's tokens `repeat` times,
// left-padded with `pad` to the longest (causal_lm.h).
struct PromptBatch {
  torch::Tensor prompts;  // [problems * repeat, longest] int64
  torch::Tensor padding;  // [problems * repeat] int64 pad tokens per row; undefined when none
  int64_t longest = 0;
};

PromptBatch LeftPadded(const std::vector<const Problem*>& problems, int64_t repeat, int64_t pad) {
  PromptBatch out;
  for (const Problem* p : problems)
    out.longest = std::max<int64_t>(out.longest, static_cast<int64_t>(p->prompt_tokens.size()));
  const int64_t n = static_cast<int64_t>(problems.size()) * repeat;
  // Filled on the host and made a tensor once: per-row tensor copies cost a dispatch each.
  std::vector<int64_t> tokens(static_cast<size_t>(n * out.longest), pad);
  std::vector<int64_t> padding(static_cast<size_t>(n));
  bool padded = false;
  for (size_t i = 0; i < problems.size(); ++i) {
    const auto& prompt = problems[i]->prompt_tokens;
    const int64_t length = static_cast<int64_t>(prompt.size());
    for (int64_t s = 0; s < repeat; ++s) {
      const int64_t r = static_cast<int64_t>(i) * repeat + s;
      std::copy(prompt.begin(), prompt.end(), tokens.begin() + r * out.longest + (out.longest - length));
      padding[static_cast<size_t>(r)] = out.longest - length;
    }
    padded = padded || length < out.longest;
  }
  out.prompts = torch::tensor(tokens, torch::kInt64).view({n, out.longest});
  // Equal lengths pass no padding at all: the models then run exactly as without it.
  if (padded) out.padding = torch::tensor(padding, torch::kInt64);
  return out;
}

}  // namespace

uint64_t SampleKey(uint64_t seed, int64_t global_sample_index) {
  return MixKey(seed, kSampleStream, static_cast<uint64_t>(global_sample_index));
}

GrpoTrainer::GrpoTrainer(const spec::TrainingJobSpec& spec, Communicator& comm, torch::Device device)
    : GrpoTrainer(spec, ModelSource(spec), comm, device) {}

GrpoTrainer::GrpoTrainer(const spec::TrainingJobSpec& spec, const ModelSource& model, Communicator& comm,
                         torch::Device device)
    : GrpoTrainer(spec, model, comm, device, MakeTask(spec, model)) {}

GrpoTrainer::GrpoTrainer(const spec::TrainingJobSpec& spec, Communicator& comm, torch::Device device,
                         std::unique_ptr<Task> task)
    : GrpoTrainer(spec, ModelSource(spec), comm, device, std::move(task)) {}

GrpoTrainer::GrpoTrainer(const spec::TrainingJobSpec& spec, const ModelSource& model, Communicator& comm,
                         torch::Device device, std::unique_ptr<Task> task)
    : spec_(spec), comm_(comm), device_(device), task_(std::move(task)), model_dir_(model.dir()) {
  const auto& g = spec_.grpo;
  const int world = comm_.world_size();
  if (g.prompts_per_step % world != 0) {
    throw std::invalid_argument("spec.grpo.promptsPerStep: " + std::to_string(g.prompts_per_step) +
                                " is not divisible by the world size " + std::to_string(world));
  }
  local_prompts_ = g.prompts_per_step / world;

  if (task_->prompt_tokens() > g.max_prompt_length) {
    throw std::invalid_argument("spec.grpo.maxPromptLength: " + std::to_string(g.max_prompt_length) +
                                " is shorter than the " + task_->name() + " prompt of " +
                                std::to_string(task_->prompt_tokens()) + " tokens (BOS included)");
  }
  if (task_->answer_tokens() > g.max_response_length) {
    spdlog::warn("spec.grpo.maxResponseLength {} is shorter than a correct {} answer ({} tokens with EOS): "
                 "no sample can earn the full reward",
                 g.max_response_length, task_->name(), task_->answer_tokens());
  }

  model_ = model.LoadPolicy();
  if (spec_.model.init == "checkpoint") LoadInitialWeights(model_, spec_.model.init_checkpoint);
  model_->to(device_);
  const bool bf16_inference_weights = Bf16InferenceWeightsByDefault(device_);
  const bool lora = spec_.model.lora.enabled();
  // With LoRA the reference model is the base itself, the policy with its adapters off
  // (ReferenceIsBase): no copy is made.
  if (g.kl_coef > 0 && !lora) {
    // A frozen copy of the initial policy, made in memory; with klCoef == 0 it is never built.
    reference_ = model.CopyOf(model_);
    reference_->to(device_);
    reference_->eval();
    for (auto& p : reference_->parameters()) p.set_requires_grad(false);
    if (bf16_inference_weights) ConvertParametersToBf16(reference_);
  }
  // The one place the policy's modules are wrapped or replaced (model_transforms.h): after
  // the reference copy (which stays the untransformed initial policy), before sharding, so
  // every later reader sees the result.
  ApplyModelTransforms(*model_, ModelTransformsOf(spec_), spec_);
  // LoRA from an existing PEFT adapter: its weights replace the fresh adapters' (every
  // rank reads the same file; the sharding then starts from rank 0's anyway).
  if (HasLora(*model_) && !spec_.model.lora.from.empty()) {
    LoadPeftAdapter(static_cast<HfCausalLMImpl&>(*model_), spec_.model.lora.from, spec_.model.lora);
  }
  // A GPU keeps the frozen base in bf16, as it keeps a reference model (inference_weights.h).
  if (HasLora(*model_) && bf16_inference_weights) ConvertFrozenParametersToBf16(*model_);
  ShardingOptions sharding;
  sharding.stage = spec_.sharding.stage;
  sharding.offload_params = spec_.sharding.offload_params;
  sharding.offload_optimizer = spec_.sharding.offload_optimizer;
  sharding.bf16_inference_weights = bf16_inference_weights;
  AdamWConfig adamw;
  adamw.lr = g.learning_rate;
  shards_ = std::make_unique<ModelShards>(model_, comm_, sharding, adamw);
  // The task's response format: how responses stop, and (toy tasks) the only tokens they
  // may use, the policy's whole action space.
  const ResponseFormat format = task_->response_format();
  // The cache in bf16 where the rollout reads the bf16 copies: half the memory, and
  // attention reads it as it is (the planner counts 2 bytes an element there too).
  rollout_ = std::make_unique<RolloutEngine>(model_->kv_cache_shape(), local_prompts_ * g.group_size,
                                             g.max_prompt_length, g.max_response_length, device_, format,
                                             bf16_inference_weights ? torch::kBFloat16 : torch::kFloat32);
  // Stage 3 over several ranks: every decode step gathers the blocks, a collective, so
  // the ranks must stop generating together.
  if (shards_->per_layer() && comm_.world_size() > 1) rollout_->set_decode_communicator(&comm_);
  for (int64_t id : format.stop_tokens) {
    if (id < 0 || id >= model_->vocab_size())
      throw std::invalid_argument("task " + task_->name() + ": stop token " + std::to_string(id) +
                                  " is outside the model's vocabulary of " + std::to_string(model_->vocab_size()));
  }
  if (format.pad < 0 || format.pad >= model_->vocab_size()) {
    throw std::invalid_argument("task " + task_->name() + ": pad token " + std::to_string(format.pad) +
                                " is outside the model's vocabulary of " + std::to_string(model_->vocab_size()));
  }
  pad_token_ = format.pad;
  if (!format.allowed.empty()) {
    response_bias_ = torch::full({model_->vocab_size()}, -std::numeric_limits<float>::infinity());
    for (int64_t id : format.allowed) response_bias_[id] = 0.0f;
    response_bias_ = response_bias_.to(device_);
    rollout_->set_logit_bias(response_bias_);
  }
  PolicyUpdateConfig uc;
  uc.clip_low = g.clip_low;
  uc.clip_high = g.clip_high;
  uc.kl_coef = g.kl_coef;
  uc.aggregation = ParseLossAggregation(g.loss_aggregation);
  uc.micro_batch_size = g.micro_batch_size;
  uc.max_tokens_per_micro_batch = g.max_tokens_per_micro_batch;
  uc.updates_per_step = g.updates_per_step;
  uc.temperature = g.temperature;
  uc.logit_bias = response_bias_;
  updater_ = std::make_unique<PolicyUpdater>(model_, *shards_, uc);
}

int64_t GrpoTrainer::GlobalPrompt(int64_t step, int64_t local) const {
  return FirstPromptOfStep(step) + local * comm_.world_size() + comm_.rank();
}

int64_t GrpoTrainer::TokensPerStep() const {
  return local_prompts_ * spec_.grpo.group_size * (task_->prompt_tokens() + spec_.grpo.max_response_length);
}

// This rank's share of one step's prompts, each repeated groupSize times, left-padded to
// the longest of them, with one sampling key per row.
struct GrpoTrainer::StepPrompts {
  std::vector<Problem> problems;
  std::vector<uint64_t> keys;
  PromptBatch batch;
};

struct GrpoTrainer::RolloutPhase {
  Rollout rollout;
  double seconds = 0;
};

// Rewards verified against each problem's answer, one per row.
struct GrpoTrainer::RewardPhase {
  torch::Tensor rewards;  // [rows] float32
  double mean = 0;
  double exact_fraction = 0;  // rows scored 1
};

struct GrpoTrainer::UpdatePhase {
  PolicyUpdateStats stats;
  double logprob_seconds = 0;
  double seconds = 0;
};

GrpoTrainer::StepPrompts GrpoTrainer::PromptsOfStep(int64_t step) const {
  const int64_t group = spec_.grpo.group_size;
  StepPrompts out;
  for (int64_t i = 0; i < local_prompts_; ++i) {
    const int64_t global_prompt = GlobalPrompt(step, i);
    out.problems.push_back(task_->Make(static_cast<uint64_t>(global_prompt)));
    const int64_t length = static_cast<int64_t>(out.problems.back().prompt_tokens.size());
    if (length < 1 || length > task_->prompt_tokens()) {
      throw std::runtime_error("task " + task_->name() + ": prompt " + std::to_string(global_prompt) + " has " +
                               std::to_string(length) + " tokens, outside [1, " +
                               std::to_string(task_->prompt_tokens()) + "]");
    }
    for (int64_t s = 0; s < group; ++s) out.keys.push_back(SampleKey(spec_.task.seed, global_prompt * group + s));
  }
  std::vector<const Problem*> rows;
  for (const auto& p : out.problems) rows.push_back(&p);
  out.batch = LeftPadded(rows, group, pad_token_);
  return out;
}

// The rollout reads the bf16 copies where they are kept (inference_weights.h). Stage 3:
// the outer parameters stay gathered from here through the first mini-batch of the update
// (its optimizer step releases them), the copies' only until the scope ends; blocks gather
// as they run.
GrpoTrainer::RolloutPhase GrpoTrainer::RollOut(const StepPrompts& prompts) {
  const auto t0 = std::chrono::steady_clock::now();
  RolloutPhase out;
  {
    InferenceWeightsScope bf16_weights(*shards_);
    shards_->Gather();
    model_->eval();
    out.rollout = rollout_->Generate(model_, prompts.batch.prompts.to(device_), prompts.keys, spec_.grpo.temperature,
                                     prompts.batch.padding);
  }
  out.seconds = SecondsSince(t0);
  return out;
}

GrpoTrainer::RewardPhase GrpoTrainer::ScoreResponses(const StepPrompts& prompts, const Rollout& rollout) const {
  const int64_t group = spec_.grpo.group_size;
  const int64_t n = static_cast<int64_t>(prompts.keys.size());
  const torch::Tensor responses = rollout.responses().cpu().contiguous();
  const int64_t* resp = responses.data_ptr<int64_t>();
  std::vector<float> scores(static_cast<size_t>(n));
  double exact = 0;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] = static_cast<float>(
        task_->Score(prompts.problems[j / group], resp + j * rollout.response_width, rollout.response_width));
    exact += scores[j] == 1.0f;
  }
  RewardPhase out;
  out.rewards = torch::tensor(scores, torch::kFloat32);
  out.mean = out.rewards.mean().item<double>();
  out.exact_fraction = exact / static_cast<double>(n);
  return out;
}

GrpoTrainer::UpdatePhase GrpoTrainer::Update(int64_t step, const Rollout& rollout, const RewardPhase& rewards) {
  const auto& g = spec_.grpo;
  UpdatePhase out;
  // Advantages, per group (a group never spans ranks: ranks own whole prompts).
  PolicyBatch batch;
  batch.sequences = rollout.sequences;
  batch.response_mask = rollout.response_mask;
  batch.prompt_length = rollout.prompt_length;
  batch.prompt_padding = rollout.prompt_padding;
  batch.advantages = GroupAdvantages(rewards.rewards, g.group_size).to(device_);

  // Old (and reference) log-probs: once, without grad, before any update. With one
  // update per rollout the policy being updated is the one that sampled, so the update's
  // own log-probs serve as the old ones (policy_update.h) and this forward is skipped.
  auto t0 = std::chrono::steady_clock::now();
  // Under a token budget these passes run in its micro-batches too (micro_batch_rows.h).
  const bool reference_is_base = g.kl_coef > 0 && HasLora(*model_);
  const bool reference = has_reference_model() || reference_is_base;
  const bool budget = g.max_tokens_per_micro_batch > 0 && (g.updates_per_step > 1 || reference);
  std::vector<memory::SequenceLength> lengths;
  MicroBatchPlan plan;
  if (budget) {
    lengths = SequenceLengths(batch.response_mask, batch.prompt_padding, batch.prompt_length);
    plan = PlanMicroBatches(lengths, g.micro_batch_size, g.max_tokens_per_micro_batch);
  }
  if (g.updates_per_step > 1) {
    InferenceWeightsScope bf16_weights(*shards_);
    shards_->Gather();
    if (budget) {
      MicroBatchPlan in_step = plan;  // stage 3: the policy's forwards are collective
      if (shards_->per_layer()) KeepRunsInStep({&in_step}, comm_);
      batch.old_logp = ResponseLogProbsNoGrad(model_, batch.sequences, batch.prompt_length, g.temperature, in_step,
                                              lengths, response_bias_, batch.prompt_padding);
    } else {
      batch.old_logp = ResponseLogProbsNoGrad(model_, batch.sequences, batch.prompt_length, g.temperature,
                                              g.micro_batch_size, response_bias_, batch.prompt_padding);
    }
  }
  if (reference) {
    // LoRA: the base is the reference, the policy with its adapters off; its frozen
    // weights are what a copy would hold, so no copy exists.
    std::optional<AdaptersOff> base;
    if (reference_is_base) {
      base.emplace(*model_);
      shards_->Gather();  // stage 3: the outer parameters (the base's embeddings and head)
    }
    CausalLM& ref = reference_is_base ? model_ : reference_;
    batch.ref_logp = budget ? ResponseLogProbsNoGrad(ref, batch.sequences, batch.prompt_length, g.temperature, plan,
                                                     lengths, response_bias_, batch.prompt_padding)
                            : ResponseLogProbsNoGrad(ref, batch.sequences, batch.prompt_length, g.temperature,
                                                     g.micro_batch_size, response_bias_, batch.prompt_padding);
  }
  out.logprob_seconds = SecondsSince(t0);

  t0 = std::chrono::steady_clock::now();
  out.stats = updater_->Update(batch);
  shards_->Release();  // stage 3: a no-op after the last optimizer step released them; the
                       // step ends with only the shards whatever the optimizer does
  out.seconds = SecondsSince(t0);
  // The weights are NaN now: stop (exit 1) before this step can be checkpointed.
  if (!std::isfinite(out.stats.loss) || !std::isfinite(out.stats.grad_norm)) {
    throw std::runtime_error("step " + std::to_string(step + 1) + ": loss " + std::to_string(out.stats.loss) +
                             ", gradient norm " + std::to_string(out.stats.grad_norm) +
                             ": not finite, the weights are no longer usable; stopped (the last checkpoint is "
                             "from before this step)");
  }
  return out;
}

StepResult GrpoTrainer::RunStep(int64_t step) {
  const StepPrompts prompts = PromptsOfStep(step);
  const RolloutPhase rollout = RollOut(prompts);
  const RewardPhase rewards = ScoreResponses(prompts, rollout.rollout);
  const UpdatePhase update = Update(step, rollout.rollout, rewards);

  StepResult result;
  result.step = step;
  result.reward_mean = rewards.mean;
  result.exact_fraction = rewards.exact_fraction;
  result.loss = update.stats.loss;
  result.kl = update.stats.kl;
  result.clip_fraction = update.stats.clip_fraction;
  result.grad_norm = update.stats.grad_norm;
  result.sequences = static_cast<int64_t>(prompts.keys.size());
  result.tokens = result.sequences * (prompts.batch.longest + spec_.grpo.max_response_length);
  result.generated_tokens = rollout.rollout.generated_tokens;
  result.update_sequences = update.stats.sequences_run;
  result.update_tokens = update.stats.padded_tokens;
  result.rollout_seconds = rollout.seconds;
  result.logprob_seconds = update.logprob_seconds;
  result.update_seconds = update.seconds;
  return result;
}

std::optional<HeldOutScore> GrpoTrainer::EvaluateHeldOut() {
  const std::vector<Problem>& held = task_->HeldOut();
  if (held.empty()) return std::nullopt;
  const int64_t world = comm_.world_size(), rank = comm_.rank();
  const int64_t total = static_cast<int64_t>(held.size());
  // Every rank runs the same batches (a stage-3 forward is a collective): ceil(total /
  // world) rows each, rows past the end repeat problem 0 and are not scored.
  const int64_t per_rank = (total + world - 1) / world;
  const int64_t max_batch = local_prompts_ * spec_.grpo.group_size;  // what the generation cache holds
  double sum = 0, exact = 0, scored = 0;
  std::vector<protocol::HeldOutAnswer> answers;
  InferenceWeightsScope bf16_weights(*shards_);
  shards_->Gather();
  model_->eval();
  for (int64_t first = 0; first < per_rank; first += max_batch) {
    const int64_t rows = std::min(max_batch, per_rank - first);
    std::vector<const Problem*> problems;
    std::vector<bool> real;
    for (int64_t k = 0; k < rows; ++k) {
      const int64_t index = (first + k) * world + rank;
      real.push_back(index < total);
      problems.push_back(&held[static_cast<size_t>(index < total ? index : 0)]);
    }
    const PromptBatch batch = LeftPadded(problems, 1, pad_token_);
    const std::vector<uint64_t> unused_keys(static_cast<size_t>(rows), 0);  // greedy draws no noise
    Rollout rollout =
        rollout_->Generate(model_, batch.prompts.to(device_), unused_keys, /*temperature=*/0.0, batch.padding);
    const torch::Tensor responses = rollout.responses().cpu().contiguous();
    const int64_t* resp = responses.data_ptr<int64_t>();
    for (int64_t k = 0; k < rows; ++k) {
      if (!real[static_cast<size_t>(k)]) continue;
      const Problem& problem = *problems[static_cast<size_t>(k)];
      const int64_t* response = resp + k * rollout.response_width;
      sum += task_->Score(problem, response, rollout.response_width);
      const bool correct = task_->Correct(problem, response, rollout.response_width);
      exact += correct ? 1 : 0;
      scored += 1;
      if (static_cast<int>(answers.size()) < protocol::kHeldOutAnswers) {
        answers.push_back(
            {problem.prompt, utf8::Lossy(task_->ResponseText(response, rollout.response_width)), correct});
      }
    }
  }
  shards_->Release();
  torch::Tensor totals = torch::tensor({sum, exact, scored}, torch::kFloat64).to(comm_.device());
  comm_.all_reduce(totals);
  totals = totals.cpu();
  HeldOutScore out;
  out.problems = static_cast<int64_t>(totals[2].item<double>());
  out.reward_mean = totals[0].item<double>() / static_cast<double>(out.problems);
  out.exact_fraction = totals[1].item<double>() / static_cast<double>(out.problems);
  out.answers = std::move(answers);
  return out;
}

}  // namespace headroom::worker
