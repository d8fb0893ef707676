// How much memory a TrainingJob needs per worker, by component, before it runs.
//
// ZeRO arithmetic (Rajbhandari et al.), adapted to the worker's dtypes. Per rank, with
// Psi parameters, N ranks, P/G bytes per parameter/gradient element and K bytes of optimizer
// state per parameter:
//   stage 0: (P + G + K) Psi            stage 1: (P + G) Psi + K Psi / N
//   stage 2: P Psi + (G + K) Psi / N    stage 3: (P + G + K) Psi / N  (+ one gathered layer)
// Our dtypes: parameters and gradients fp32 (P = G = 4; on GPU the worker uses bf16
// autocast and keeps fp32 weights, so no extra master copy), AdamW's two fp32 moments
// (K = 8). PlanOptions::bf16_params models bf16 storage with an fp32 master (P = G = 2,
// K = 12).
// Activations per micro-batch (kept for backward), counted from the tensors the worker's
// block saves (HfCausalLMImpl::Block, its fused kernels; not Korthikanti et al.'s 17 h +
// 2.5 a s, which assumes a 4 h GeLU MLP with dropout and misses a SwiGLU MLP's 4 ffn):
//   micro * seq * ActivationElementsPerToken * act_bytes
// about micro * n * (layers * (4 h + 2 q + 2 kv + 4 ffn + heads * n) + backward) with n =
// seq - 1 positions, q = heads * head_dim, kv = kv_heads * head_dim, ffn the MLP's width,
// less the last block's query part beyond the response's positions, and backward the
// backward's own working set at one block: max(2 ffn + h at the MLP, 2 heads * n + h + kv
// at the attention). Recomputed blocks (activation checkpointing, stage 3) keep layers * h
// and one block's activations instead.
// plus the logits of one chunk of response tokens (core/memory/logits_chunk.h):
// c * min(micro * maxResponseLength, LogitsChunkTokens(vocab)) * vocab * 4, c = 2 on host
// (logits and their exponentials, fp32), 2.5 on GPU (and the bf16 product).
// Generation KV cache: 2 * layers * kv_heads * head_dim * seq * batch * kv_bytes with
// batch = promptsPerStep / workers * groupSize (the local rollout sequences).
// Rollout prefill (host jobs): the rollout runs all batch local sequences' prompts
// through the model at once, without gradient, so one block's working set is alive:
// batch * maxPromptLength * RolloutPrefillElementsPerToken * 4 bytes. The step's peak is
// the larger of that phase's and the update's (activations + logits): the component
// "rollout prefill" is what the prefill adds above the update's, absent when nothing.
// Reference model (klCoef > 0): parameters only, replicated; in bf16 (2 Psi) where the
// inference weights below are kept, P Psi otherwise.
// Inference weights (GPU jobs; PlanOptions::bf16_inference_weights): the bf16 copies the
// rollout and the old log-probs read, 2 Psi (stage 3: 2 Psi / N, each rank's shard; its
// bf16 gather of a layer is smaller than the fp32 one counted as "gathered layer"), placed
// with the parameters.
// Autocast weights (GPU jobs): the bf16 casts of the matmul weights that the update's
// backward keeps, 2 Psi less an untied input embedding (stage 3: one block and the head,
// as blocks are recomputed in backward).
// Runtime baseline: the process itself (LibTorch's static state, allocator arenas, thread
// pools): about 80 MiB of anonymous host memory (kHostRuntimeBaselineBytes), plus ~512 MiB
// of CUDA context per GPU. A CPU worker also maps ~117 MiB of LibTorch's code, file pages
// that a memory cgroup is charged for only where it read them first and that the kernel
// can reclaim: left out. Both are measurements, not derived; PlanCorrection learns a
// measured/planned factor.
// Placement: gpus == 0 -> everything on host. Otherwise state is on the GPU except what
// offloadParams (parameters, reference model) and offloadOptimizer (optimizer state and
// the fp32 gradient shard it steps on) move to host.
//
// Contract: pure functions of the spec; PlanMemory requires workers >= 1 (throws
// std::invalid_argument otherwise).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/hf/hf_config.h"
#include "core/spec/training_job.h"

namespace headroom::guard {

inline constexpr int64_t kHostRuntimeBaselineBytes = 80LL << 20;
inline constexpr int64_t kGpuRuntimeBaselineBytes = 512LL << 20;

// The model dimensions the plan depends on, from a Hugging Face config: a preset's (or
// spec.model's own layers/hidden/...) built-in one (spec::PresetModelConfig), or a
// pretrained model's config.json (spec.model.path) with its grouped-query heads, explicit
// head_dim, vocabulary and tied head.
struct ModelShape {
  int64_t parameters = 0;        // Psi, the head counted once when tied
  int64_t layer_parameters = 0;  // one block's (what stage 3 gathers at a time)
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;     // query heads
  int64_t kv_heads = 0;  // key/value heads (the generation cache holds these)
  int64_t head_dim = 0;
  int64_t ffn_hidden = 0;  // the MLP's width (intermediate_size): most of a block's activations
  int64_t vocab = 0;
  bool tied_head = false;  // the output head is the embedding matrix (tie_word_embeddings)
  std::string source;      // for notes: "preset tiny", "Qwen2ForCausalLM config.json"
};

// The shape of spec.model's preset or explicit dimensions: HfModelShape of
// spec::PresetModelConfig, with source "preset <name>" or "spec.model".
ModelShape PresetModelShape(const spec::TrainingJobSpec& spec);
// The shape of a Hugging Face model (read its config with hf::LoadHfConfig).
ModelShape HfModelShape(const hf::HfModelConfig& config);
// The one source of the shape a job is planned with, for everything that plans it
// (`headroom plan`, the worker's guard, `headroom replay`, the supervisors' crash
// escalation): spec.model.path's config.json (HfModelShape), else PresetModelShape.
// Reads the file: call once per job and keep the result in PlanOptions::model. Throws
// hf::HfConfigError naming the file and the field when the config cannot be read or used.
ModelShape JobModelShape(const spec::TrainingJobSpec& spec);

// The elements one padded token of a micro-batch of rows `seq_length` long, the last
// `response_length` of them the response, holds at the update's peak (fp32 on the host,
// bf16 on the GPU), as the worker's blocks allocate them. The forward reads n = seq_length
// - 1 positions (the last token is only a target); per position every block saves 4 h + 2
// q + 2 kv + 4 ffn + heads x n, except that the last block computes its attention output,
// residual and MLP only at the response's positions (the ones scored). Backward adds its
// working set at one block, max(2 ffn + h, 2 heads x n + h + kv) per position, at the
// last block or, once its tensors are freed, at the one before (long prompts). With
// `recomputed` blocks (activation checkpointing, stage 3): the blocks' inputs (layers x h
// per position), one whole block's tensors and backward's working set. planner.cc names
// each tensor. The one count of a token's activation cost: the plan's activations, and
// the worker's micro_batch_tokens (a micro-batch's tokens weighted by their length's cost)
// that the guard forecasts with.
double ActivationElementsPerToken(const ModelShape& model, int64_t seq_length, int64_t response_length,
                                  bool recomputed);

// The elements per prompt token the rollout's prefill holds at its largest moment, on the
// host: every local rollout sequence's prompt goes through the model at once, without
// gradient, so one block's working set is alive, not every block's saved tensors; with
// the attention's scores over all P keys per head (two copies: scores and their softmax)
// it can be larger than the update's micro-batches under a token budget or with blocks
// recomputed. max(the attention's output, the MLP's) of what HfCausalLMImpl::Block holds
// (planner.cc names each tensor). Host only: on a GPU the attention has no score copies.
double RolloutPrefillElementsPerToken(const ModelShape& model, int64_t prompt_length);

struct PlanOptions {
  int64_t gpu_total_bytes = 0;  // device memory per GPU; 0 = unknown (no GPU limit check)
  bool bf16_params = false;     // store bf16 weights + fp32 master (see header)
  // Whether the worker keeps bf16 copies for its passes without gradient; unset: for GPU
  // jobs, as the worker decides (worker/sharding/inference_weights.h).
  std::optional<bool> bf16_inference_weights;
  // The model's shape: JobModelShape(spec), read once by whoever plans. Unset:
  // PresetModelShape(spec), which is right only for jobs without spec.model.path.
  std::optional<ModelShape> model;
  // The longest prompt the job's data holds, in the model's tokens (`headroom-worker
  // prompts`: the kept records, or a generated task's prompt); 0: unknown. The update's
  // activations and the rollout's prefill are planned at the smaller of it and
  // maxPromptLength (a batch pads its rows to its longest prompt, never beyond the data's),
  // the generation cache at maxPromptLength (the rollout allocates it so).
  int64_t longest_prompt = 0;
};

struct PlanComponent {
  std::string name;  // "parameters", "gradients", "optimizer", "activations",
                     // "logits", "generation cache", "reference model",
                     // "gathered layer", "head gradient", "inference weights",
                     // "autocast weights", "runtime", "rollout prefill"
  int64_t host_bytes = 0;
  int64_t gpu_bytes = 0;
  std::string note;  // how it was computed, e.g. "stage 2: fp32 Psi"
};

struct Plan {
  int workers = 1;
  int64_t parameters = 0;  // Psi
  std::vector<PlanComponent> components;
  int64_t host_total_bytes = 0;
  int64_t gpu_total_bytes = 0;
  int64_t host_limit_bytes = 0;  // spec.resources.memory
  int64_t gpu_limit_bytes = 0;   // PlanOptions::gpu_total_bytes
  // The steady state (everything but activations/logits: what stays between steps) and
  // the token-driven part (activations + logits), per side.
  int64_t host_state_bytes = 0, gpu_state_bytes = 0;
  int64_t host_activation_bytes = 0, gpu_activation_bytes = 0;
  const PlanComponent* Find(const std::string& name) const;
};

// Learned from measurements: measured / planned totals per side (1 = plan is right).
struct PlanCorrection {
  double host_scale = 1.0;
  double gpu_scale = 1.0;
  // Folds one measurement in (exponential average, factor clamped to [0.25, 4]).
  void Observe(const Plan& plan, int64_t measured_host_peak, int64_t measured_gpu_peak);
};

Plan PlanMemory(const spec::TrainingJobSpec& spec, int workers, const PlanOptions& options = {},
                const PlanCorrection& correction = {});

// Whether a plan fits below the guard thresholds (host: hostThreshold * limit, GPU:
// gpuThreshold * limit when known).
bool PlanFits(const Plan& plan, const spec::MemoryGuardSpec& guard);

// The one search for a worker count, used by everything that picks one (the policy's
// reshard and crash escalation, SmallestFittingWorkers, the decision applied to the next
// spec, a scale request): a count is a candidate when it lies within
// [max(1, minWorkers), maxWorkers], the GRPO batch divides over it
// (spec::WorkerCountFits), because the worker refuses any other, and it fills whole pods
// (a multiple of ranksPerPod).
// Walks from `from` towards `to` (either direction, both inclusive; counts outside the
// bounds are skipped, never clamped onto) and returns the first candidate `accept` takes
// (the first candidate when `accept` is empty); 0 when none.
int FindWorkerCount(const spec::TrainingJobSpec& spec, int from, int to,
                    const std::function<bool(int workers)>& accept = {});

// The candidate nearest to `wanted` (clamped to the bounds), searching away from `current`
// first: upwards from `wanted` when it is >= `current`, then back down towards (not to)
// `current`; downwards from `wanted` otherwise. `current` when there is none.
int NearestWorkerCount(const spec::TrainingJobSpec& spec, int wanted, int current);

// Smallest worker count in [max(min_workers, from), maxWorkers] that fits and that the
// worker can run (spec::WorkerCountFits); 0 when none.
int SmallestFittingWorkers(const spec::TrainingJobSpec& spec, int from = 1, const PlanOptions& options = {},
                           const PlanCorrection& correction = {});
// The padded tokens one micro-batch may hold: maxTokensPerMicroBatch when it is set and
// smaller than what microBatchSize full-length rows take, else microBatchSize x
// (maxPromptLength + maxResponseLength) (core/memory/micro_batches.h: both limits hold).
int EffectiveTokenBudget(const spec::GrpoSpec& grpo);

// Largest microBatchSize in [1, spec micro] that fits with `workers`; 0 when none.
int LargestFittingMicroBatch(const spec::TrainingJobSpec& spec, int workers, const PlanOptions& options = {},
                             const PlanCorrection& correction = {});

}  // namespace headroom::guard
