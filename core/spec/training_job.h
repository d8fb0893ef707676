// The TrainingJob custom resource (headroom.dev/v1alpha1), as docs/design.md fixes it.
//
// One YAML document is what `headroom run` reads locally and what `kubectl apply`
// sends to a cluster, so this file is the single C++ shape of that document.
// Field names in comments are the YAML/JSON names; C++ members use snake_case.
//
// Contract:
//   - ParseTrainingJob() never throws on bad input: every problem found is returned
//     as a SpecError{path, message}, all of them in one pass (unknown fields, wrong
//     types, malformed YAML with its line, out-of-range values, cross-field rules).
//   - A parsed job has every default applied (ApplyDefaults is idempotent).
//   - ToYaml()/ToJson() emit the full object, defaults included; parsing that output
//     gives back an equal TrainingJob (round trip).
//   - Paths name fields by their YAML names: "spec.grpo.groupSize", list items by index
//     ("spec.memoryGuard.actions[2]"), map entries by key ("metadata.labels[app]"); ""
//     is the document itself (malformed YAML, empty input, several documents).
//
// Accepted document: apiVersion, kind, metadata, spec, and a top-level status, which is
// ignored here (the operator reads status on its own). metadata takes the ObjectMeta
// fields below, and tolerates (ignores) what the API server adds: managedFields,
// ownerReferences, finalizers, generateName, selfLink, deletionGracePeriodSeconds. Any
// other unknown field, anywhere, is an error naming it (with a "did you mean" when close).
// Field types follow the CRD schema: integers, numbers, booleans, strings; quantities
// (resources.cpu/memory) take a string or a number; spec.debug byte counts take an
// integer or a quantity string ("48Mi"). null means "not set" (the default applies).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/spec/guard_actions.h"
#include "core/spec/pod_template.h"

namespace headroom::spec {

inline constexpr const char* kApiGroup = "headroom.dev";
inline constexpr const char* kApiVersion = "headroom.dev/v1alpha1";
inline constexpr const char* kKind = "TrainingJob";

// One problem in a spec, named by its path: "spec.grpo.groupSize: must be >= 2, got 1".
struct SpecError {
  std::string path;     // e.g. "spec.grpo.groupSize", "metadata.name", "" for the document
  std::string message;  // e.g. "must be >= 2, got 1"
  int line = 0;         // 1-based YAML line when known, 0 otherwise
  int column = 0;       // 1-based column when known (malformed YAML), 0 otherwise
  // "path: message", then " (line L)" or " (line L, column C)" when known; the path ""
  // prints as "<document>". The format `headroom validate` prints, one per line.
  std::string ToString() const;
  bool operator==(const SpecError&) const = default;
};

struct ObjectMeta {
  std::string name;        // DNS-1123 label
  std::string namespace_;  // "namespace"; empty = default
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  // Server-populated; kept so the operator can read objects from the API server.
  std::string uid;
  std::string resource_version;  // "resourceVersion"
  int64_t generation = 0;
  std::string creation_timestamp;  // "creationTimestamp"
  std::string deletion_timestamp;  // "deletionTimestamp"
  bool operator==(const ObjectMeta&) const = default;
};

struct Resources {
  std::string cpu = "2";             // Kubernetes quantity as written
  int64_t cpu_millis = 2000;         // parsed
  std::string memory = "4Gi";        // quantity as written; the limit the guard protects
  int64_t memory_bytes = 4LL << 30;  // parsed
  int gpus = 0;
  bool operator==(const Resources&) const = default;
};

// A model named by its Hugging Face Hub repository ("hub: {repo, revision}"): its files
// are fetched into the standard Hugging Face cache before training (see core/hf/hub_*).
// The endpoint defaults to HF_ENDPOINT, else https://huggingface.co; the token comes
// only from the environment (HF_TOKEN), never from the spec.
struct HubModelSpec {
  std::string repo;               // "org/name"; empty: no hub model
  std::string revision = "main";  // a branch, tag or commit
  std::string endpoint;           // "" = HF_ENDPOINT, else https://huggingface.co
  bool operator==(const HubModelSpec&) const = default;
};

// Low-rank adapters on a frozen base, in PEFT's vocabulary (worker/model/lora*). r = 0:
// no adapters, every parameter trains.
struct LoraSpec {
  int r = 0;                                // the adapters' rank; 0 = off
  double alpha = 0;                         // scale alpha / r (alpha / sqrt(r) with rsLora); 0 = r
  double dropout = 0.0;                     // on the adapter's input, in [0, 1)
  std::vector<std::string> target_modules;  // "targetModules": q_proj, ..., or all-linear
  bool rs_lora = false;                     // "rsLora"
  std::string from;                         // a PEFT adapter directory to start from; "" = fresh
  bool enabled() const { return r > 0; }
  bool operator==(const LoraSpec&) const = default;
};

struct ModelSpec {
  std::string preset = "tiny";  // tiny | small | base | "" (explicit dims)
  // Explicit dims; 0 means "from the preset". Filled from the preset by ApplyDefaults.
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int ffn_hidden = 0;           // "ffnHidden"; default 4*hidden
  int max_seq_len = 0;          // "maxSeqLen"; default maxPromptLength+maxResponseLength
  std::string init = "random";  // random | checkpoint
  std::string init_checkpoint;  // "initCheckpoint": a checkpoint dir when init=checkpoint
  uint64_t seed = 0;            // weight-init seed; default task.seed
  // A Hugging Face model directory (config.json, safetensors, tokenizer files) to
  // fine-tune; when set, the architecture and weights come from it, not the preset.
  std::string path;
  HubModelSpec hub;  // exclusive with path
  LoraSpec lora;
  bool operator==(const ModelSpec&) const = default;
};

// A text task's problems: a JSON Lines file, one object per problem.
struct DatasetSpec {
  std::string path;                     // a .jsonl file; non-empty makes the job a text task
  std::string prompt_key = "question";  // "promptKey": the field holding the problem
  std::string answer_key = "answer";    // "answerKey": the field holding the reference answer
  std::string held_out;                 // "heldOut": a .jsonl file of evaluation problems; "" = none
  bool operator==(const DatasetSpec&) const = default;
};

// How a problem becomes the model's prompt (worker/tasks/chat_prompt.h).
struct PromptSpec {
  std::string format = "chatml";  // chatml | llama3 | template
  std::string system;             // the system message; "" = none
  std::string template_text;      // "template": the whole prompt, with {system} and {prompt}
                                  // (core/spec/prompt_template.h); only with format template
  bool operator==(const PromptSpec&) const = default;
};

// How a response is scored (worker/tasks/text_reward.h).
struct RewardSpec {
  std::string name = "gsm8k";  // gsm8k | math | exact
  double format_weight = 0.0;  // "formatWeight", in [0, 1]: the reward for stating an
                               // answer in the expected form, right or wrong
  bool operator==(const RewardSpec&) const = default;
};

// A generated arithmetic task (name, digits) or, when dataset.path is set, a text task
// (dataset, prompt, reward), for which name and digits are ignored. seed serves both:
// the generated problems, or the order the dataset is visited in.
struct TaskSpec {
  std::string name = "addition";  // addition | reverse | sort
  int digits = 3;
  uint64_t seed = 1;
  DatasetSpec dataset;
  PromptSpec prompt;
  RewardSpec reward;
  // A text task reads its problems from a dataset and needs a model path (its tokenizer).
  bool is_text() const { return !dataset.path.empty(); }
  bool operator==(const TaskSpec&) const = default;
};

struct GrpoSpec {
  int steps = 200;
  int prompts_per_step = 32;                    // "promptsPerStep": global rollout batch, in prompts
  int group_size = 8;                           // "groupSize"
  int max_prompt_length = 16;                   // "maxPromptLength", tokens
  int max_response_length = 8;                  // "maxResponseLength"
  int micro_batch_size = 64;                    // "microBatchSize": sequences per chunk, per worker
  int max_tokens_per_micro_batch = 0;           // "maxTokensPerMicroBatch": padded tokens per chunk; 0 = off
  int updates_per_step = 1;                     // "updatesPerStep"
  double learning_rate = 3.0e-4;                // "learningRate"
  double clip_low = 0.2;                        // "clipLow"
  double clip_high = 0.28;                      // "clipHigh"
  double kl_coef = 0.01;                        // "klCoef"; 0 = no reference model
  std::string loss_aggregation = "token-mean";  // token-mean | seq-mean-token-mean | seq-mean-token-sum-norm
  double temperature = 1.0;
  bool activation_checkpointing = false;  // "activationCheckpointing": recompute blocks in backward
  bool operator==(const GrpoSpec&) const = default;
};

struct ShardingSpec {
  int stage = 2;                   // 0 = DDP; 1/2/3 = ZeRO
  bool offload_params = false;     // "offloadParams"
  bool offload_optimizer = false;  // "offloadOptimizer"
  bool operator==(const ShardingSpec&) const = default;
};

struct CheckpointSpec {
  int every_steps = 50;  // "everySteps"
  int keep = 2;
  std::string volume;  // a PVC name on Kubernetes
  bool operator==(const CheckpointSpec&) const = default;
};

struct MemoryGuardSpec {
  bool enabled = true;
  double host_threshold = 0.90;  // "hostThreshold": fraction of the limit, in (0, 1]
  double gpu_threshold = 0.92;   // "gpuThreshold"
  int horizon_steps = 2;         // "horizonSteps"
  int max_restarts = 10;         // "maxRestarts"
  std::vector<GuardAction> actions = {GuardAction::kRestart,
                                      GuardAction::kReshard,
                                      GuardAction::kShrinkMicroBatch,
                                      GuardAction::kShrinkTokenBudget,
                                      GuardAction::kEnableActivationCheckpointing,
                                      GuardAction::kDisableOffload};
  bool operator==(const MemoryGuardSpec&) const = default;
};

struct DebugSpec {
  int64_t host_leak_bytes_per_step = 0;  // "hostLeakBytesPerStep": a deliberate leak (drills)
  int64_t gpu_leak_bytes_per_step = 0;   // "gpuLeakBytesPerStep"
  // "hostLeakDecay", in (0, 1]: each step leaks this fraction of what the step before
  // leaked. 1 is a leak that never stops; below 1 a warm-up that climbs steeply and levels
  // off at hostLeakBytesPerStep / (1 - decay) (caches and optimizer state filling).
  double host_leak_decay = 1.0;
  // From host_jump_at_step on (1-based, as the step log numbers steps; 0 = off) the worker
  // holds host_jump_bytes more host memory, allocated once: a level shift (a first long
  // batch, optimizer state), not a leak.
  int host_jump_at_step = 0;    // "hostJumpAtStep"
  int64_t host_jump_bytes = 0;  // "hostJumpBytes"
  bool operator==(const DebugSpec&) const = default;
};

struct TrainingJobSpec {
  bool suspend = false;
  int workers = 1;        // shards (ranks); the scale subresource points here
  int min_workers = 1;    // "minWorkers"
  int max_workers = 8;    // "maxWorkers"
  int ranks_per_pod = 1;  // "ranksPerPod": ranks (one per GPU) inside each pod; pods = workers / ranksPerPod
  // As a Kubernetes Job's: the job fails once it has been active this long; a finished
  // job's children and the TrainingJob are deleted this long after it finished. Unset: never.
  std::optional<int64_t> active_deadline_seconds;     // "activeDeadlineSeconds"
  std::optional<int64_t> ttl_seconds_after_finished;  // "ttlSecondsAfterFinished"
  std::string image = "headroom-worker:0.1.0";
  Resources resources;
  ModelSpec model;
  TaskSpec task;
  GrpoSpec grpo;
  ShardingSpec sharding;
  CheckpointSpec checkpoint;
  MemoryGuardSpec memory_guard;  // "memoryGuard"
  DebugSpec debug;
  // "template": additions to every worker pod (core/spec/pod_template.h). Not part of the
  // run-definition hash: where a pod runs and what it mounts does not change the run.
  PodTemplate pod_template;
  bool operator==(const TrainingJobSpec&) const = default;
};

struct TrainingJob {
  std::string api_version = kApiVersion;
  std::string kind = kKind;
  ObjectMeta metadata;
  TrainingJobSpec spec;
  bool operator==(const TrainingJob&) const = default;
};

struct ParseResult {
  std::optional<TrainingJob> job;  // set only when errors is empty
  std::vector<SpecError> errors;
  bool ok() const { return errors.empty(); }
};

// What Validate reads besides the job itself.
struct ValidateOptions {
  // Parse spec.model.path's config.json where it can be read here. The worker turns this
  // off: its model source (worker/model/model_source.h) reads that file right after, once
  // per process, and refuses a bad one with the same file-and-field error (exit 2); every
  // command that launches workers has checked it before.
  bool read_model_config = true;
};

// Parses one YAML (or JSON, which is YAML) document into a defaulted, validated job.
ParseResult ParseTrainingJob(const std::string& yaml_text, const ValidateOptions& options = {});
// Reads and parses a file; an unreadable file is one error at path "" naming the file.
ParseResult ParseTrainingJobFile(const std::string& path, const ValidateOptions& options = {});
// The same for an object read from the API server as JSON (no line numbers).
ParseResult ParseTrainingJobJson(const nlohmann::json& object);

// Fills every unset field from its default and the model preset. Idempotent.
void ApplyDefaults(TrainingJob& job);
// Checks ranges, enums, names and cross-field rules of an already-typed job.
std::vector<SpecError> Validate(const TrainingJob& job, const ValidateOptions& options = {});

// Whether `workers` ranks can split every optimizer mini-batch evenly: each rollout batch
// of promptsPerStep prompts is cut into updatesPerStep mini-batches, and each mini-batch's
// prompts are divided over the ranks, so promptsPerStep % updatesPerStep == 0 and
// (promptsPerStep / updatesPerStep) % workers == 0. The guard uses it to pick reshard
// targets; Validate requires it of spec.workers.
bool WorkerCountFits(const GrpoSpec& grpo, int workers);

std::string ToYaml(const TrainingJob& job);
std::string ToJson(const TrainingJob& job, int indent = 2);
// The same object as a JSON value (what the operator sends to the API server).
nlohmann::json ToJsonValue(const TrainingJob& job);

// A stable hash of everything that defines the run (model, task, seed, GRPO
// hyper-parameters) and nothing the guard may change (workers, microBatchSize,
// maxTokensPerMicroBatch, activationCheckpointing, sharding stage/offload, resources,
// checkpoint, memoryGuard, debug, suspend, template, metadata).
// Covered: every spec.model field (dims, init source, seed; a Hub model's repository and
// revision, not the cache path it resolves to), the spec.task fields the task reads (a
// generated task: name, digits, seed; a text task: seed, dataset, prompt, reward), and
// spec.grpo except its memory levers (microBatchSize, maxTokensPerMicroBatch,
// activationCheckpointing), all after defaults. 16 lowercase hex digits (FNV-1a 64 over
// the canonical JSON of those fields), stable across builds and machines.
// A checkpoint stores it; a resume with a different hash is refused.
std::string RunDefinitionHash(const TrainingJobSpec& spec);

}  // namespace headroom::spec
