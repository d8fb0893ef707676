// The spec's field table (training_job_fields.h). One row per field, in the order the
// serializer writes them; the defaults are training_job.h's member initialisers.
#include "core/spec/training_job_fields.h"

#include "core/spec/lora_targets.h"
#include "core/spec/model_presets.h"
#include "core/spec/task_shapes.h"
#include "core/spec/text_task_names.h"

namespace headroom::spec {
namespace {

// A Kubernetes quantity greater than 0 (the API server's own pattern, less the sign).
constexpr const char* kPositiveQuantityPattern =
    R"(^\+?([0-9]*[1-9][0-9]*(\.[0-9]*)?|[0-9]*\.[0-9]*[1-9][0-9]*)(([KMGTPE]i)|[numkMGTPE]|([eE][-+]?[0-9]+))?$)";
// A quantity of 0 or more.
constexpr const char* kNonNegativeQuantityPattern =
    R"(^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|([eE][-+]?[0-9]+))?$)";

// One row, built by chained setters.
struct Row : FieldDef {
  Row& Min(double v, bool exclusive = false) {
    minimum = v;
    exclusive_minimum = exclusive;
    return *this;
  }
  Row& Max(double v, bool exclusive = false) {
    maximum = v;
    exclusive_maximum = exclusive;
    return *this;
  }
  Row& OneOf(std::vector<std::string> (*allowed)()) {
    names = allowed;
    return *this;
  }
  Row& Length(std::optional<int> min, std::optional<int> max) {
    min_length = min;
    max_length = max;
    return *this;
  }
  Row& Pattern(std::string p) {
    pattern = std::move(p);
    return *this;
  }
  // The CRD states no default: unset means "derived" (0 takes the preset's) or "none".
  Row& NoDefault() {
    crd_default = false;
    return *this;
  }
  Row& RangeInCrdOnly() {
    range_in_crd_only = true;
    return *this;
  }
  Row& Required(std::vector<std::string> names_required) {
    required = std::move(names_required);
    return *this;
  }
  Row& WrittenWhen(bool (*when)(const void*)) {
    written = when;
    return *this;
  }
  Row& ItemsDoc(std::string d) {
    items_doc = std::move(d);
    return *this;
  }
};

template <typename T>
constexpr FieldKind KindOf() {
  if constexpr (std::is_same_v<T, bool>) return FieldKind::kBool;
  else if constexpr (std::is_same_v<T, int>) return FieldKind::kInt;
  else if constexpr (std::is_same_v<T, int64_t>) return FieldKind::kInt64;
  else if constexpr (std::is_same_v<T, uint64_t>) return FieldKind::kUint64;
  else if constexpr (std::is_same_v<T, std::optional<int64_t>>) return FieldKind::kOptionalInt64;
  else if constexpr (std::is_same_v<T, double>) return FieldKind::kDouble;
  else if constexpr (std::is_same_v<T, std::string>) return FieldKind::kString;
  else if constexpr (std::is_same_v<T, std::vector<GuardAction>>) return FieldKind::kActions;
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) return FieldKind::kStrings;
  else if constexpr (std::is_same_v<T, PodTemplate>) return FieldKind::kPodTemplate;
  else return FieldKind::kObject;
}

// A leaf: its kind follows the member's C++ type.
template <auto Member>
Row F(const char* name, std::string doc) {
  Row r;
  r.name = name;
  r.kind = KindOf<typename MemberOf<Member>::ValueType>();
  r.member = &MemberOf<Member>::Get;
  r.doc = std::move(doc);
  return r;
}

// A struct member whose rows are `fields`.
template <auto Member>
Row Object(const char* name, std::string doc, std::vector<FieldDef> fields) {
  static_assert(KindOf<typename MemberOf<Member>::ValueType>() == FieldKind::kObject);
  Row r = F<Member>(name, std::move(doc));
  r.fields = std::move(fields);
  return r;
}

// A std::string holding a quantity, parsed by ApplyDefaults into `Parsed`.
template <auto Member, auto Parsed>
Row Quantity(const char* name, QuantityUnit unit, const char* parsed_name, std::string doc) {
  static_assert(std::is_same_v<typename MemberOf<Member>::ValueType, std::string>);
  static_assert(std::is_same_v<typename MemberOf<Parsed>::ValueType, int64_t>);
  Row r = F<Member>(name, std::move(doc));
  r.kind = FieldKind::kQuantity;
  r.parsed = &MemberOf<Parsed>::Get;
  r.unit = unit;
  r.parsed_name = parsed_name;
  r.Min(0, /*exclusive=*/true).Length(std::nullopt, 128).Pattern(kPositiveQuantityPattern);
  return r;
}

// An int64_t of bytes, written as an integer or a quantity string.
template <auto Member>
Row Bytes(const char* name, std::string doc) {
  static_assert(std::is_same_v<typename MemberOf<Member>::ValueType, int64_t>);
  Row r = F<Member>(name, std::move(doc));
  r.kind = FieldKind::kByteCount;
  r.Min(0).Length(std::nullopt, 128).Pattern(kNonNegativeQuantityPattern);
  return r;
}

std::vector<std::string> PresetNamesOrExplicit() {
  std::vector<std::string> names = ModelPresetNames();
  names.push_back("");  // explicit dims
  return names;
}
std::vector<std::string> InitNames() { return {"random", "checkpoint"}; }
std::vector<std::string> LossAggregationNames() {
  return {"token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"};
}

std::vector<FieldDef> ResourcesFields() {
  return {
      Quantity<&Resources::cpu, &Resources::cpu_millis>(
          "cpu", QuantityUnit::kMillis, "cpu_millis",
          "CPU request and limit per worker (rank), a Kubernetes quantity greater than 0 such as \"2\" or 500m."),
      Quantity<&Resources::memory, &Resources::memory_bytes>(
          "memory", QuantityUnit::kBytes, "memory_bytes",
          "Memory request and limit per worker (rank), a Kubernetes quantity greater than 0 such as 4Gi; a pod of "
          "ranksPerPod ranks gets ranksPerPod times it, the limit its ranks' host memory guard forecasts against."),
      F<&Resources::gpus>(
          "gpus",
          "GPUs per worker (rank), requested as nvidia.com/gpu. 0 runs on CPU; with ranksPerPod > 1 at most 1 (a "
          "rank drives cuda:LOCAL_RANK).")
          .Min(0),
  };
}

std::vector<FieldDef> HubFields() {
  return {
      F<&HubModelSpec::repo>("repo", "Repository id, \"namespace/name\".")
          .Length(1, 96)
          .Pattern(R"(^([A-Za-z0-9_.-]+/)?[A-Za-z0-9_.-]+$)")
          .NoDefault(),
      F<&HubModelSpec::revision>("revision", "Branch, tag or commit.").Length(1, 255),
      F<&HubModelSpec::endpoint>("endpoint", "The Hub's URL; defaults to HF_ENDPOINT, else https://huggingface.co.")
          .Length(std::nullopt, 2048)
          .Pattern(R"(^https?://[^/@]+(/.*)?$)")
          .NoDefault(),
  };
}

std::vector<FieldDef> LoraFields() {
  return {
      F<&LoraSpec::r>("r", "The adapters' rank; 0 trains every parameter (no adapters). At most the smaller side of "
                           "every wrapped projection.")
          .Min(0),
      F<&LoraSpec::alpha>("alpha",
                          "PEFT's lora_alpha: the update is scaled by alpha / r (alpha / sqrt(r) with rsLora); "
                          "0 means r (scale 1), PEFT's default.")
          .Min(0)
          .NoDefault(),
      F<&LoraSpec::dropout>("dropout", "Dropout on the adapters' input while training, in [0, 1); PEFT's default 0.")
          .Min(0)
          .Max(1, true),
      F<&LoraSpec::target_modules>(
          "targetModules",
          "The projections of every block that get adapters, PEFT's names; all-linear is all seven. Empty means q_proj "
          "and v_proj (PEFT's default for these families).")
          .OneOf(LoraTargetNames)
          .NoDefault()
          .ItemsDoc("q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, or all-linear."),
      F<&LoraSpec::rs_lora>("rsLora", "Rank-stabilised LoRA: scale alpha / sqrt(r) instead of alpha / r."),
      F<&LoraSpec::from>("from", "A PEFT adapter directory (adapter_config.json, adapter_model.safetensors) to start "
                                 "from instead of fresh adapters; its config must match r and targetModules.")
          .Length(std::nullopt, 4096)
          .NoDefault(),
  };
}

std::vector<FieldDef> ModelFields() {
  // Dims: 0 takes the preset's (ApplyDefaults); the validator's rule checks them after that.
  auto dim = [](Row row) { return row.Min(0).RangeInCrdOnly().NoDefault(); };
  return {
      F<&ModelSpec::preset>("preset",
                            "Model size preset: tiny, small or base; \"\" to give every dimension explicitly. "
                            "Explicit dimensions override the preset.")
          .OneOf(PresetNamesOrExplicit),
      dim(F<&ModelSpec::layers>("layers", "Transformer blocks; 0 takes the preset's.")),
      dim(F<&ModelSpec::hidden>("hidden", "Hidden (model) width; a multiple of heads; 0 takes the preset's.")),
      dim(F<&ModelSpec::heads>("heads", "Attention heads; 0 takes the preset's.")),
      dim(F<&ModelSpec::ffn_hidden>("ffnHidden", "Feed-forward width; 0 means 4 x hidden.")),
      dim(F<&ModelSpec::max_seq_len>(
          "maxSeqLen", "Longest sequence (positions); 0 means grpo.maxPromptLength + grpo.maxResponseLength.")),
      F<&ModelSpec::init>("init", "Start from random weights, or from the checkpoint in initCheckpoint.")
          .OneOf(InitNames),
      F<&ModelSpec::init_checkpoint>(
          "initCheckpoint", "Checkpoint directory to load the initial weights from; required when init is checkpoint.")
          .Length(std::nullopt, 4096)
          .NoDefault(),
      F<&ModelSpec::seed>("seed", "Weight-initialisation seed; defaults to task.seed.").Min(0).NoDefault(),
      F<&ModelSpec::path>("path",
                          "A Hugging Face model directory (config.json, safetensors, tokenizer files) to fine-tune "
                          "(Qwen2ForCausalLM, Qwen3ForCausalLM, LlamaForCausalLM); on a cluster, on a volume the pods "
                          "mount. When set, architecture and weights come from it instead of the preset.")
          .Length(std::nullopt, 4096)
          .NoDefault(),
      Object<&ModelSpec::hub>("hub",
                              "A model on a Hugging Face Hub or a mirror, fetched by each worker into the standard "
                              "Hugging Face cache before training (HF_HUB_CACHE or HF_HOME); the token comes from the "
                              "HF_TOKEN environment variable (a Secret through the pod template). Exclusive with path.",
                              HubFields())
          .Required({"repo"})
          .NoDefault()
          .WrittenWhen([](const void* hub) { return !static_cast<const HubModelSpec*>(hub)->repo.empty(); }),
      Object<&ModelSpec::lora>(
          "lora",
          "Low-rank adapters (LoRA, in PEFT's vocabulary) on a frozen base: only the adapters train, the reference "
          "model of the KL term is the base with the adapters off (no second copy), and checkpoints and the export "
          "hold the adapters alone. Unset or r 0: every parameter trains.",
          LoraFields())
          .NoDefault()
          .WrittenWhen([](const void* lora) { return !(*static_cast<const LoraSpec*>(lora) == LoraSpec{}); }),
  };
}

std::vector<FieldDef> TaskFields() {
  return {
      F<&TaskSpec::name>("name", "Task: addition (sum two numbers), reverse (reverse a digit string) or sort (sort "
                                 "digits).")
          .OneOf(TaskNames),
      F<&TaskSpec::digits>("digits", "Digits per operand, 1 to 12.").Min(1).Max(12),
      F<&TaskSpec::seed>("seed", "Seed of the prompt stream (a text task's dataset order).").Min(0),
      Object<&TaskSpec::dataset>(
          "dataset",
          "A text task's problems, one JSON object per line of a JSON Lines file. Setting path makes the job a text "
          "task (name and digits are then ignored) and requires spec.model.path or spec.model.hub.",
          {
              F<&DatasetSpec::path>("path",
                                    "The .jsonl file; on a cluster, on a volume the pods mount. Empty for a generated "
                                    "task.")
                  .Length(std::nullopt, 4096)
                  .NoDefault(),
              F<&DatasetSpec::prompt_key>("promptKey",
                                          "The field of each record holding the problem (a string or a number).")
                  .Length(1, 256),
              F<&DatasetSpec::answer_key>(
                  "answerKey", "The field of each record holding the reference answer (a string or a number).")
                  .Length(1, 256),
              F<&DatasetSpec::held_out>("heldOut",
                                        "A .jsonl file of evaluation problems with the same keys; empty for none.")
                  .Length(std::nullopt, 4096)
                  .NoDefault(),
          }),
      Object<&TaskSpec::prompt>(
          "prompt", "How a problem becomes the model's prompt.",
          {
              F<&PromptSpec::format>("format", "chatml (Qwen chat template), llama3 (Llama 3 Instruct chat template), "
                                               "or template (the template field, written out).")
                  .OneOf(PromptFormatNames),
              F<&PromptSpec::system>("system", "The system message; empty for none.")
                  .Length(std::nullopt, 65536)
                  .NoDefault(),
              F<&PromptSpec::template_text>("template",
                                            "With format template: the whole prompt, where {system} and {prompt} are "
                                            "replaced and {{ and }} stand for literal braces.")
                  .Length(std::nullopt, 65536)
                  .NoDefault(),
          }),
      Object<&TaskSpec::reward>(
          "reward", "How a response is scored.",
          {
              F<&RewardSpec::name>("name", "gsm8k (last number or \\boxed{} against the text after ####), math "
                                           "(\\boxed{} answers, normalised), or exact (trimmed text equality).")
                  .OneOf(TextRewardNames),
              F<&RewardSpec::format_weight>("formatWeight",
                                            "Reward in [0, 1] for stating an answer in the expected form, right or "
                                            "wrong; the rest rewards correctness.")
                  .Min(0)
                  .Max(1),
          }),
  };
}

std::vector<FieldDef> GrpoFields() {
  return {
      F<&GrpoSpec::steps>("steps", "Training steps (rollout batch, then updatesPerStep optimizer steps) to run.")
          .Min(1),
      F<&GrpoSpec::prompts_per_step>(
          "promptsPerStep",
          "Global rollout batch, in prompts. promptsPerStep / updatesPerStep must be a multiple of workers.")
          .Min(1),
      F<&GrpoSpec::group_size>("groupSize",
                               "Samples per prompt (G); advantages are relative to the group, so at least 2.")
          .Min(2),
      F<&GrpoSpec::max_prompt_length>("maxPromptLength", "Longest prompt, in tokens.").Min(1),
      F<&GrpoSpec::max_response_length>("maxResponseLength", "Longest response, in tokens.").Min(1),
      F<&GrpoSpec::micro_batch_size>("microBatchSize",
                                     "Sequences per forward/backward chunk, per worker. The guard may shrink it.")
          .Min(1),
      F<&GrpoSpec::max_tokens_per_micro_batch>(
          "maxTokensPerMicroBatch",
          "Padded tokens per forward/backward chunk, per worker (rows x longest prompt + longest response, rows "
          "sorted by length); 0 = off. With it, microBatchSize still caps the rows. At least maxPromptLength + "
          "maxResponseLength.")
          .Min(0),
      F<&GrpoSpec::updates_per_step>("updatesPerStep",
                                     "Optimizer steps (mini-batches) per rollout batch; must divide promptsPerStep.")
          .Min(1),
      F<&GrpoSpec::learning_rate>("learningRate", "AdamW learning rate, greater than 0.").Min(0, true),
      F<&GrpoSpec::clip_low>("clipLow", "Lower PPO clip range (ratio >= 1 - clipLow), in (0, 1).")
          .Min(0, true)
          .Max(1, true),
      F<&GrpoSpec::clip_high>("clipHigh", "Upper PPO clip range (ratio <= 1 + clipHigh), in (0, 1).")
          .Min(0, true)
          .Max(1, true),
      F<&GrpoSpec::kl_coef>("klCoef",
                            "Weight of the k3 KL penalty to a frozen reference model; 0 keeps no reference model.")
          .Min(0),
      F<&GrpoSpec::loss_aggregation>("lossAggregation", "How per-token losses become the batch loss.")
          .OneOf(LossAggregationNames),
      F<&GrpoSpec::temperature>("temperature", "Sampling temperature of rollouts, greater than 0.").Min(0, true),
      F<&GrpoSpec::activation_checkpointing>(
          "activationCheckpointing",
          "Keep only each block's input for backward and run the block again there: activations drop to one "
          "block's plus the block boundaries, for a second forward of every block. ZeRO stage 3 does this "
          "anyway. The guard may switch it on."),
  };
}

std::vector<FieldDef> MemoryGuardFields() {
  return {
      F<&MemoryGuardSpec::enabled>("enabled", "Whether the guard acts. Memory is measured and exported either way."),
      F<&MemoryGuardSpec::host_threshold>("hostThreshold",
                                          "Fraction of the memory limit, in (0, 1], the host forecast must stay under.")
          .Min(0, true)
          .Max(1),
      F<&MemoryGuardSpec::gpu_threshold>("gpuThreshold",
                                         "Fraction of GPU memory, in (0, 1], the GPU forecast must stay under.")
          .Min(0, true)
          .Max(1),
      F<&MemoryGuardSpec::horizon_steps>("horizonSteps",
                                         "Act when the forecast crosses a threshold within this many steps.")
          .Min(1),
      F<&MemoryGuardSpec::max_restarts>("maxRestarts", "Restarts allowed before the job is marked Failed.").Min(0),
      F<&MemoryGuardSpec::actions>("actions",
                                   "Actions the guard may take, in escalation order, each at most once in the list.")
          .OneOf(GuardActionNames)
          .ItemsDoc("restart (checkpoint and restart at the same size), reshard (more workers), shrinkMicroBatch "
                    "(a smaller microBatchSize), shrinkTokenBudget (a smaller maxTokensPerMicroBatch, the largest the "
                    "planner "
                    "shows fits), enableActivationCheckpointing (recompute blocks in backward, when the "
                    "planner shows it fits), disableOffload, enableOffload."),
  };
}

std::vector<FieldDef> BuildSpecFields() {
  return {
      F<&TrainingJobSpec::suspend>("suspend",
                                   "When true the workers are drained (each writes a checkpoint) and no pods run; "
                                   "setting it back to false resumes from that checkpoint."),
      F<&TrainingJobSpec::active_deadline_seconds>(
          "activeDeadlineSeconds",
          "As a Kubernetes Job's: seconds the job may be active, counted from its first launch (time suspended "
          "included, as a Job counts it); when they are up the workers drain to a checkpoint and the job ends Failed "
          "with reason DeadlineExceeded. Unset: no deadline.")
          .Min(1)
          .NoDefault(),
      F<&TrainingJobSpec::ttl_seconds_after_finished>(
          "ttlSecondsAfterFinished",
          "As a Kubernetes Job's: seconds after the job finished (Succeeded or Failed) when the operator deletes the "
          "TrainingJob, and with it its pods, Service and ConfigMap. 0 deletes it as soon as it finishes; unset "
          "keeps it.")
          .Min(0)
          .NoDefault(),
      F<&TrainingJobSpec::workers>(
          "workers", "Number of workers (ranks; ranksPerPod to a pod) the model is sharded over. The scale "
                     "subresource points here, so `kubectl scale tj/NAME --replicas=N` reshards.")
          .Min(1),
      F<&TrainingJobSpec::min_workers>("minWorkers", "Fewest workers the memory guard may reshard down to.").Min(1),
      F<&TrainingJobSpec::max_workers>("maxWorkers",
                                       "Most workers the memory guard may reshard up to when memory runs short.")
          .Min(1),
      F<&TrainingJobSpec::ranks_per_pod>(
          "ranksPerPod",
          "Ranks in each worker pod, one per GPU: pods = workers / ranksPerPod, each requesting ranksPerPod times "
          "resources (a rank's). One launcher in the pod starts them (LOCAL_RANK, device cuda:LOCAL_RANK); the "
          "host memory guard watches the pod's memory limit they share. workers must be a multiple of it.")
          .Min(1),
      F<&TrainingJobSpec::image>("image", "Container image of the headroom worker.")
          .Length(1, std::nullopt)
          .Pattern(R"(^\S+$)"),
      Object<&TrainingJobSpec::resources>(
          "resources",
          "Resources of each worker (rank); a pod of ranksPerPod ranks requests ranksPerPod times them. The memory "
          "limit is the one the guard protects.",
          ResourcesFields()),
      Object<&TrainingJobSpec::model>("model", "The transformer to train, from a preset or explicit dimensions.",
                                      ModelFields()),
      Object<&TrainingJobSpec::task>("task", "The verifiable task the model is rewarded on.", TaskFields()),
      Object<&TrainingJobSpec::grpo>("grpo", "GRPO hyper-parameters.", GrpoFields()),
      Object<&TrainingJobSpec::sharding>(
          "sharding", "How model state is split over workers.",
          {
              F<&ShardingSpec::stage>("stage", "0 replicates everything (DDP); 1 shards optimizer state, 2 also "
                                               "gradients, 3 also parameters (ZeRO).")
                  .Min(0)
                  .Max(3),
              F<&ShardingSpec::offload_params>("offloadParams",
                                               "Keep parameters in host memory between uses (stage 3 only); trades "
                                               "GPU memory for host memory."),
              F<&ShardingSpec::offload_optimizer>("offloadOptimizer", "Keep optimizer state in host memory."),
          }),
      Object<&TrainingJobSpec::checkpoint>(
          "checkpoint", "Reshardable checkpoints, the state restarts and reshards resume from.",
          {
              F<&CheckpointSpec::every_steps>("everySteps", "Write a checkpoint every this many steps (the guard also "
                                                            "writes one before it acts).")
                  .Min(1),
              F<&CheckpointSpec::keep>("keep", "Complete checkpoints to keep; older ones are deleted.").Min(1),
              F<&CheckpointSpec::volume>("volume", "PersistentVolumeClaim the checkpoints are written to; \"\" uses an "
                                                   "emptyDir (lost with the pod).")
                  .Length(std::nullopt, 253)
                  .Pattern(R"(^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)"),
          }),
      Object<&TrainingJobSpec::memory_guard>(
          "memoryGuard", "Forecasts host and GPU memory every step and acts before a threshold is crossed.",
          MemoryGuardFields()),
      Object<&TrainingJobSpec::debug>(
          "debug", "Fault drills.",
          {
              Bytes<&DebugSpec::host_leak_bytes_per_step>(
                  "hostLeakBytesPerStep",
                  "Host memory the worker leaks on purpose every step, a quantity such as 48Mi (a drill for the "
                  "guard)."),
              Bytes<&DebugSpec::gpu_leak_bytes_per_step>(
                  "gpuLeakBytesPerStep", "GPU memory the worker leaks on purpose every step, a quantity."),
              F<&DebugSpec::host_leak_decay>(
                  "hostLeakDecay",
                  "Each step leaks this fraction of what the step before leaked, in (0, 1]. 1 is a leak that never "
                  "stops; below 1 a warm-up that climbs steeply and levels off at hostLeakBytesPerStep / (1 - "
                  "hostLeakDecay) (a drill for the guard's false alarms).")
                  .Min(0, true)
                  .Max(1),
              F<&DebugSpec::host_jump_at_step>(
                  "hostJumpAtStep",
                  "From this step on (1-based, as the step log numbers steps) the worker holds hostJumpBytes more "
                  "host memory, allocated once: a level shift such as a first long batch or optimizer state, not a "
                  "leak (a drill for the guard). 0 is off.")
                  .Min(0),
              Bytes<&DebugSpec::host_jump_bytes>(
                  "hostJumpBytes",
                  "Host memory the worker allocates once at hostJumpAtStep, a quantity such as 512Mi."),
          }),
      F<&TrainingJobSpec::pod_template>(
          "template",
          "Additions to every worker pod, in the shape of a Kubernetes PodTemplateSpec (README \"Worker pods on a real "
          "cluster\"). The operator merges them with the pod it builds and refuses what would override what it owns "
          "(command, args, the rendezvous environment, the spec and checkpoint mounts, the non-root security context, "
          "its labels).")
          .NoDefault()
          .WrittenWhen([](const void* t) { return !static_cast<const PodTemplate*>(t)->empty(); }),
  };
}

}  // namespace

const std::vector<FieldDef>& SpecFields() {
  static const std::vector<FieldDef> fields = BuildSpecFields();
  return fields;
}

}  // namespace headroom::spec
