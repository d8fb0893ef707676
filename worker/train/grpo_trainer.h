// One GRPO step, written as the recipe it is:
//   prompts -> rollout -> rewards -> advantages -> old (and reference) log-probs -> updates
//
// Contract:
//   - Step s uses prompts with global indices [s * promptsPerStep, (s + 1) * promptsPerStep);
//     rank r of W takes every W-th of them, starting at the r-th (GlobalPrompt). Sample g
//     of prompt i has global sample index i * groupSize + g and its own sampling key, so
//     which rank ran it never matters.
//   - Why strided and not a contiguous slice per rank: each rank splits its rows into
//     updatesPerStep contiguous mini-batches, so with strided prompts mini-batch u holds
//     the same global prompts, [u P / U, (u + 1) P / U), at every world size (exactly
//     when promptsPerStep / world is divisible by updatesPerStep). A reshard then changes
//     the float summation order, not the optimisation: any world size and ZeRO stage
//     trains the same parameters as one rank, up to rounding (trainer_sharding_test).
//   - No reference model exists when klCoef == 0 (not even allocated). It is frozen, so
//     it stays replicated on every rank whatever the sharding stage.
//   - The model, its sharded state (parameters, gradients and AdamW moments, per
//     spec.sharding: stage, offload) and the generation cache are built once in the
//     constructor and live for the whole run. Every rank starts from rank 0's weights.
//   - Collective: the constructor and RunStep() are called by every rank, in step order.
//   - Prompts of one step may differ in length: they are left-padded with the task's pad
//     token to the step's longest on this rank, and the padding goes with the rows through
//     rollout, log-probs and update (causal_lm.h). Equal lengths pad nothing.
//   - Stage 3: each block's parameters are gathered only while it runs (rollout,
//     log-probs, forward and recomputed backward), the outer ones (embeddings, head) for
//     the step; between steps (and so when a checkpoint is saved) a rank holds only its
//     shards (model_shards.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/protocol/step_record.h"
#include "core/spec/training_job.h"
#include "worker/comm/communicator.h"
#include "worker/grpo/policy_update.h"
#include "worker/model/causal_lm.h"
#include "worker/model/model_source.h"
#include "worker/rollout/rollout_engine.h"
#include "worker/sharding/model_shards.h"
#include "worker/tasks/task.h"

namespace headroom::worker {

struct StepResult {
  int64_t step = 0;
  double reward_mean = 0;     // this rank's samples
  double exact_fraction = 0;  // share of samples with reward 1
  double loss = 0;
  double kl = 0;
  double clip_fraction = 0;
  double grad_norm = 0;
  int64_t sequences = 0;         // this rank's sequences
  int64_t tokens = 0;            // padded tokens processed: sequences * (longest prompt + maxResponse)
  int64_t generated_tokens = 0;  // response tokens actually sampled (EOS included)
  int64_t update_sequences = 0;  // rows the update ran forward/backward (advantage-0 rows skipped)
  int64_t update_tokens = 0;     // tokens those forwards ran over, padding included (token budget: trimmed)
  double rollout_seconds = 0;
  double logprob_seconds = 0;
  double update_seconds = 0;
};

// The policy measured on the task's held-out problems (Task::HeldOut), all ranks together.
struct HeldOutScore {
  double reward_mean = 0;     // over every held-out problem, one greedy response each
  double exact_fraction = 0;  // responses whose answer is right (Task::Correct)
  int64_t problems = 0;
  // This rank's first protocol::kHeldOutAnswers problems, in the order it scored them.
  std::vector<protocol::HeldOutAnswer> answers;
};

class GrpoTrainer {
 public:
  // Throws std::invalid_argument for a spec it cannot run (naming the field). The model
  // (policy, reference, the task's tokens) from `model`, which reads the weights once here
  // (ModelSource::LoadPolicy; the reference is copied from them in memory).
  GrpoTrainer(const spec::TrainingJobSpec& spec, const ModelSource& model, Communicator& comm, torch::Device device);
  // With the model resolved here (ModelSource(spec)).
  GrpoTrainer(const spec::TrainingJobSpec& spec, Communicator& comm, torch::Device device);
  // With `task` instead of the one spec.task names (tests: tasks no spec can name yet).
  GrpoTrainer(const spec::TrainingJobSpec& spec, Communicator& comm, torch::Device device, std::unique_ptr<Task> task);

  StepResult RunStep(int64_t step);

  // Collective (every rank calls it at the same point). One greedy response (temperature
  // 0, the task's stop tokens and logit bias) to each held-out problem, problem i on rank
  // i % world, scored by the task; nullopt when the task has none. Leaves the parameters
  // and the optimizer as they were (stage 3: gathered for it, released after).
  std::optional<HeldOutScore> EvaluateHeldOut();
  bool has_held_out() const { return !task_->HeldOut().empty(); }

  // The most padded tokens this rank processes in a step, known before the step runs:
  // prompts counted at the task's longest possible prompt (Task::prompt_tokens()). An
  // upper bound: a step's prompts are padded only to its own longest (StepResult::tokens).
  int64_t TokensPerStep() const;
  int64_t local_prompts() const { return local_prompts_; }
  // The global index of this rank's `local`-th prompt of step `step`.
  int64_t GlobalPrompt(int64_t step, int64_t local) const;
  // The prompt window: step s reads global prompts [s P, (s + 1) P), P = promptsPerStep.
  // The first prompt of step `step`, which is also where the next unseen prompt lies
  // after `step` finished steps.
  int64_t FirstPromptOfStep(int64_t step) const { return step * spec_.grpo.prompts_per_step; }
  // Text tasks: the dataset and where the next unseen prompt lies after `done` finished
  // steps (what the step log and a checkpoint's manifest record); nullopt for generated tasks.
  std::optional<DatasetState> DatasetAfter(int64_t done) const {
    return task_->DatasetAt(static_cast<uint64_t>(FirstPromptOfStep(done)));
  }

  CausalLM& model() { return model_; }
  // The Hugging Face directory the policy was loaded from (ModelSource::dir()); empty for
  // a preset.
  const std::string& model_dir() const { return model_dir_; }
  ModelShards& shards() { return *shards_; }
  bool has_reference_model() const { return !reference_.is_empty(); }
  // The frozen copy of the initial policy (klCoef > 0); empty otherwise.
  const CausalLM& reference_model() const { return reference_; }
  const RolloutEngine& rollout_engine() const { return *rollout_; }
  const Task& task() const { return *task_; }
  Communicator& communicator() { return comm_; }
  const spec::TrainingJobSpec& spec() const { return spec_; }

 private:
  GrpoTrainer(const spec::TrainingJobSpec& spec, const ModelSource& model, Communicator& comm, torch::Device device,
              std::unique_ptr<Task> task);
  // RunStep's phases, each returning what it produced and measured (grpo_trainer.cc).
  struct StepPrompts;
  struct RolloutPhase;
  struct RewardPhase;
  struct UpdatePhase;
  StepPrompts PromptsOfStep(int64_t step) const;
  RolloutPhase RollOut(const StepPrompts& prompts);
  RewardPhase ScoreResponses(const StepPrompts& prompts, const Rollout& rollout) const;
  // Throws std::runtime_error when the update left the weights unusable (a non-finite
  // loss or gradient norm): training on would only log reward 0.
  UpdatePhase Update(int64_t step, const Rollout& rollout, const RewardPhase& rewards);

  spec::TrainingJobSpec spec_;
  Communicator& comm_;
  torch::Device device_;
  std::unique_ptr<Task> task_;
  std::string model_dir_;
  CausalLM model_{nullptr};
  CausalLM reference_{nullptr};
  std::unique_ptr<ModelShards> shards_;
  std::unique_ptr<RolloutEngine> rollout_;
  std::unique_ptr<PolicyUpdater> updater_;
  // [vocab]: 0 for the tokens a response may use, -inf for the rest; undefined when the
  // task allows any token (ResponseFormat::allowed empty, as for text tasks).
  torch::Tensor response_bias_;
  int64_t pad_token_ = 0;  // the task's pad: fills rows after a stop, and prompts on the left
  int64_t local_prompts_ = 0;
};

// The sampling key of one sample: a function of the task seed and its global index only.
uint64_t SampleKey(uint64_t seed, int64_t global_sample_index);

}  // namespace headroom::worker
