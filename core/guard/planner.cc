#include "core/guard/planner.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/hf/hf_config.h"
#include "core/hf/hub_cache.h"
#include "core/memory/logits_chunk.h"
#include "core/spec/lora_targets.h"
#include "core/spec/model_presets.h"

namespace headroom::guard {

namespace {

int64_t Round(double v) { return static_cast<int64_t>(std::llround(v)); }

std::string StageNote(int stage, int workers) {
  return "stage " + std::to_string(stage) + ", " + std::to_string(workers) + " worker" + (workers == 1 ? "" : "s");
}

}  // namespace

ModelShape PresetModelShape(const spec::TrainingJobSpec& s) {
  // Resolved as ApplyDefaults resolves it, so a spec built in code plans like a parsed one.
  const spec::ModelSpec m = spec::ResolvedModelSpec(s);
  ModelShape shape = HfModelShape(spec::PresetModelConfig(m));
  shape.source = m.preset.empty() ? "spec.model" : "preset " + m.preset;
  return shape;
}

ModelShape HfModelShape(const hf::HfModelConfig& c) {
  ModelShape shape;
  shape.parameters = c.ParameterCount();
  hf::HfModelConfig one_layer = c;  // one block = a one-layer model less embeddings, head, final norm
  one_layer.num_hidden_layers = 0;
  shape.layer_parameters =
      (c.ParameterCount() - one_layer.ParameterCount()) / std::max<int64_t>(1, c.num_hidden_layers);
  shape.layers = c.num_hidden_layers;
  shape.hidden = c.hidden_size;
  shape.heads = c.num_attention_heads;
  shape.kv_heads = c.num_key_value_heads;
  shape.head_dim = c.head_dim;
  shape.ffn_hidden = c.intermediate_size;
  shape.vocab = c.vocab_size;
  shape.tied_head = c.tie_word_embeddings;
  shape.source = c.architecture_name + " config.json";
  return shape;
}

ModelShape JobModelShape(const spec::TrainingJobSpec& spec) {
  if (!spec.model.path.empty()) return HfModelShape(hf::LoadHfConfig(spec.model.path));
  if (!spec.model.hub.repo.empty()) {
    return HfModelShape(hf::LoadHfConfig(hf::RequireCachedHubSnapshot(spec.model.hub.repo, spec.model.hub.revision)));
  }
  return PresetModelShape(spec);
}

const PlanComponent* Plan::Find(const std::string& name) const {
  for (const PlanComponent& c : components) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

void PlanCorrection::Observe(const Plan& plan, int64_t measured_host_peak, int64_t measured_gpu_peak) {
  // Exponential average with weight 0.5: a few steps settle it, one odd step does not.
  auto fold = [](double& scale, int64_t measured, int64_t planned) {
    if (measured <= 0 || planned <= 0) return;
    double ratio = std::clamp(static_cast<double>(measured) / planned, 0.25, 4.0);
    scale = std::clamp(0.5 * scale + 0.5 * ratio, 0.25, 4.0);
  };
  fold(host_scale, measured_host_peak, plan.host_total_bytes);
  fold(gpu_scale, measured_gpu_peak, plan.gpu_total_bytes);
}

namespace {

// The plan being filled in: one row per component; a component with bytes on both sides
// (runtime) shares a row. `state`: it stays between steps (else token-driven).
class PlanRows {
 public:
  explicit PlanRows(Plan& plan) : plan_(plan) {}
  void Add(const std::string& name, double bytes, bool on_gpu, std::string note, bool state) {
    auto it = std::find_if(plan_.components.begin(), plan_.components.end(),
                           [&](const PlanComponent& c) { return c.name == name; });
    if (it == plan_.components.end()) {
      plan_.components.push_back(PlanComponent{name, 0, 0, std::move(note)});
      it = plan_.components.end() - 1;
    } else {
      it->note += "; " + note;
    }
    (on_gpu ? it->gpu_bytes : it->host_bytes) += Round(bytes);
    int64_t& total = on_gpu ? (state ? plan_.gpu_state_bytes : plan_.gpu_activation_bytes)
                            : (state ? plan_.host_state_bytes : plan_.host_activation_bytes);
    total += Round(bytes);
  }
  // A transient of another phase than the update, on the host: in the total only.
  void AddPhase(const std::string& name, double bytes, std::string note) {
    plan_.components.push_back(PlanComponent{name, Round(bytes), 0, std::move(note)});
  }
  const Plan& plan() const { return plan_; }

 private:
  Plan& plan_;
};

// The adapters' parameters of a LoRA job (core/spec/lora_targets.h) on a model of `shape`.
// ModelShape has no MLP width: a block's parameters less its attention weights and two
// norms are 3 h ffn plus the q/k/v biases and q/k norms, which together stay under 3 h, so
// the quotient is the width.
int64_t LoraParameters(const spec::LoraSpec& lora, const ModelShape& shape) {
  if (!lora.enabled() || shape.hidden < 1) return 0;
  hf::HfModelConfig c;
  c.hidden_size = shape.hidden;
  c.num_hidden_layers = shape.layers;
  c.num_attention_heads = shape.heads;
  c.num_key_value_heads = shape.kv_heads;
  c.head_dim = shape.head_dim;
  const int64_t q = shape.heads * shape.head_dim, kv = shape.kv_heads * shape.head_dim;
  const int64_t attention = shape.hidden * (q + 2 * kv) + q * shape.hidden;
  c.intermediate_size =
      std::max<int64_t>(0, (shape.layer_parameters - attention - 2 * shape.hidden) / (3 * shape.hidden));
  return spec::LoraParameterCount(c, lora);
}

// What the planned step needs to know besides the spec.
struct PlanInputs {
  const spec::TrainingJobSpec& spec;
  const ModelShape& model;
  int workers;
  int stage;                  // spec.sharding.stage clamped to [0, 3]
  bool gpu;                   // spec.resources.gpus > 0
  double p_bytes;             // bytes per parameter (see planner.h), and per gradient element
  double k_bytes;             // optimizer bytes per parameter
  bool inference_weights;     // bf16 copies kept for the passes without gradient (see header)
  double kv_bytes;            // per generation cache element
  int64_t lora = 0;           // LoRA: the adapters' parameters, the only trained ones (0: all train)
  int64_t prompt_length = 0;  // the prompts' planned length: maxPromptLength, or the data's longest if shorter
};

// Parameters, the gathered layer (stage 3), gradients and optimizer state: the ZeRO
// arithmetic of planner.h, with offload moving them to host.
void AddShardedState(PlanRows& rows, const PlanInputs& in) {
  const spec::TrainingJobSpec& s = in.spec;
  const double n = in.workers;
  if (in.lora > 0) {
    // LoRA: the frozen base, bf16 on a GPU, whole on every rank at stages 0-2; only the
    // adapters have gradients and AdamW moments, sharded as any parameters. Stage 3 shards
    // base and adapters alike (worker/sharding/model_shards.h): 1/N of each per rank, plus
    // one block gathered at a time and the embeddings, final norm and head, which stay
    // gathered through a mini-batch.
    const double base = static_cast<double>(in.model.parameters), adapters = static_cast<double>(in.lora);
    const double base_bytes = in.gpu ? 2.0 : in.p_bytes;
    const std::string sharding = StageNote(in.stage, in.workers);
    const bool offload_params = in.gpu && s.sharding.offload_params;
    const double held = in.stage >= 3 ? n : 1.0;
    rows.Add("parameters", (base_bytes * base + in.p_bytes * adapters) / held, in.gpu && !offload_params,
             "LoRA r " + std::to_string(s.model.lora.r) + ": frozen base " + (in.gpu ? "bf16" : "fp32") + " Psi + " +
                 std::to_string(in.lora) + " adapter parameters fp32" + (in.stage >= 3 ? ", /N" : "") +
                 (offload_params ? ", offloaded" : ""),
             true);
    if (in.stage >= 3) {
      const double layers = static_cast<double>(std::max<int64_t>(1, in.model.layers));
      const double block = static_cast<double>(in.model.layer_parameters);
      const double outer = std::max(0.0, base - layers * block);
      rows.Add("gathered layer", base_bytes * (block + outer) + in.p_bytes * adapters / layers, in.gpu,
               "stage 3: one block of the base and its adapters gathered at a time, beside the embeddings and head",
               true);
    }
    const bool offload_optim = in.gpu && s.sharding.offload_optimizer;
    rows.Add("gradients", in.p_bytes * adapters / (in.stage >= 2 ? n : 1.0), in.gpu && !offload_optim,
             sharding + ": the adapters' only, fp32", true);
    rows.Add("optimizer", in.k_bytes * adapters / (in.stage >= 1 ? n : 1.0), in.gpu && !offload_optim,
             sharding + ": AdamW 2 fp32 moments of the adapters", true);
    return;
  }
  const double psi = static_cast<double>(in.model.parameters);
  const double params = in.p_bytes * psi / (in.stage >= 3 ? n : 1.0);
  const double grads = in.p_bytes * psi / (in.stage >= 2 ? n : 1.0);
  const double optim = in.k_bytes * psi / (in.stage >= 1 ? n : 1.0);
  const bool offload_params = in.gpu && s.sharding.offload_params;
  const bool offload_optim = in.gpu && s.sharding.offload_optimizer;
  const std::string sharding = StageNote(in.stage, in.workers);
  rows.Add("parameters", params, in.gpu && !offload_params,
           sharding + (in.stage >= 3 ? ": fp32 Psi/N" : ": fp32 Psi") + (offload_params ? ", offloaded" : ""), true);
  if (in.stage >= 3) {
    // Stage 3 gathers one layer's full parameters at a time for forward and backward.
    rows.Add("gathered layer", in.p_bytes * static_cast<double>(in.model.layer_parameters), in.gpu,
             "stage 3: one full layer gathered at a time", true);
  }
  // With offloaded optimizer the fp32 gradient shard the optimizer steps on lives on host.
  rows.Add("gradients", grads, in.gpu && !offload_optim,
           sharding + (in.stage >= 2 ? ": fp32 Psi/N" : ": fp32 Psi") + (offload_optim ? ", offloaded" : ""), true);
  rows.Add("optimizer", optim, in.gpu && !offload_optim,
           sharding + ": AdamW 2 fp32 moments" + std::string(in.k_bytes > 8 ? " + fp32 master" : "") +
               (in.stage >= 1 ? " /N" : "") + (offload_optim ? ", offloaded" : ""),
           true);
}

}  // namespace

double ActivationElementsPerToken(const ModelShape& model, int64_t seq_length, int64_t response_length,
                                  bool recomputed) {
  const double h = static_cast<double>(model.hidden), f = static_cast<double>(model.ffn_hidden);
  const double q = static_cast<double>(model.heads) * static_cast<double>(model.head_dim);
  const double kv = static_cast<double>(model.kv_heads) * static_cast<double>(model.head_dim);
  const double layers = static_cast<double>(std::max<int64_t>(1, model.layers));
  // Positions: the update's forward reads a row's tokens but the last (log_probs.cc: the last
  // token is only a target), and its last block computes from the attention on only the
  // positions whose outputs are scored, the response's (HfCausalLMImpl::Blocks'
  // first_output).
  const double n = static_cast<double>(std::max<int64_t>(1, seq_length - 1));
  const double r = std::clamp(static_cast<double>(response_length), 1.0, n);
  const double heads = static_cast<double>(model.heads);
  // What one block's forward leaves for its backward, in elements, as
  // HfCausalLMImpl::Block allocates it. Per position it reads: the block's input (the first
  // RMSNorm saves it), the normed input (the q/k/v matmul) and the rotated queries, keys and
  // values (the attention: the packed qkv in the fused kernel, the per-head copies its
  // matmuls save otherwise): 2 h + q + 2 kv.
  const double per_key = 2 * h + q + 2 * kv;
  // Per query position: the attention probabilities over the n keys per head (saved whole,
  // not the causal half), the attention output (o_proj), the residual sum (the second
  // RMSNorm) and its normed copy (the gate/up matmul), and in the SwiGLU MLP the stacked
  // gate and up (2 f), silu(gate) (f) and their product (down_proj): heads n + q + 2 h + 4
  // f. The MLP is most of it at short lengths: at Qwen2.5-0.5B's width (f = 5.4 h) 4 f is
  // 22 h of 28 h.
  const double per_query = heads * n + q + 2 * h + 4 * f;
  const double block = n * (per_key + per_query);
  // Backward's own working set per position of the block it runs, the larger of: at the MLP,
  // the gradient of the stacked gate and up (2 f) allocated while the residual stream's
  // gradient (h) is alive; at the attention, the gradients of the probabilities and of the
  // scores (softmax's backward: heads n each) beside the residual's (h) and the values'
  // (kv). The attention's grows with the length: at 423 tokens of the long-prompt drill's
  // model it is 11 times the MLP's.
  const double backward = std::max(2 * f + h, 2 * heads * n + h + kv);
  double row = 0;
  if (recomputed) {
    // Recomputed blocks (activation checkpointing; stage 3 recomputes around its gather):
    // every block's input is kept, and the block backward runs again holds its activations
    // (the block executor runs the last block over every position too) beside the
    // backward's working set; its input is one of the kept ones.
    row = layers * n * h + block - n * h + n * backward;
  } else {
    // Every block's saved tensors, the last one's query part at the r scored positions,
    // and the final RMSNorm's input and output there (the head's matmul). Backward's peak
    // is at the last block (everything saved, its working set at r positions) or, where
    // the attention's working set outgrows the last block's saved tensors (long prompts),
    // at the block before it, once the last block's are freed.
    const double last = n * per_key + r * per_query;
    const double saved = (layers - 1) * block + last + 2 * r * h;
    row = saved + r * backward;
    if (layers > 1) row = std::max(row, (layers - 1) * block + n * backward);
  }
  return row / static_cast<double>(std::max<int64_t>(1, seq_length));
}

double RolloutPrefillElementsPerToken(const ModelShape& model, int64_t prompt_length) {
  const double h = static_cast<double>(model.hidden), f = static_cast<double>(model.ffn_hidden);
  const double q = static_cast<double>(model.heads) * static_cast<double>(model.head_dim);
  const double kv = static_cast<double>(model.kv_heads) * static_cast<double>(model.head_dim);
  const double p = static_cast<double>(prompt_length);
  const double groups = model.kv_heads > 0 ? static_cast<double>(model.heads / model.kv_heads) : 1.0;
  // Alive through every block (HfCausalLMImpl::ForwardCached, Blocks, Block): the embedded
  // prompt (ForwardCached keeps it), the block's input (another tensor from the second
  // block on), its normed copy, and the padded causal mask [B, 1, P, P].
  const double kept = (model.layers > 1 ? 3 : 2) * h + p;
  // At the attention's output (Attention, the path without the fused kernel: grouped-query
  // heads, or padded prompts): the stacked q/k/v and their rotated copy, with grouped-query
  // heads the queries folded per key/value head (a copy) and the mask repeated per group,
  // the scores and their softmax over P keys per head, and the output.
  const double attention =
      kept + 2 * (q + 2 * kv) + (groups > 1 ? q + groups * p : 0) + 2 * static_cast<double>(model.heads) * p + q;
  // At the MLP: q/k/v, the attention's output, the residual sum and its normed copy, and
  // the stacked gate and up with their SwiGLU product; at the block's end the stacked gate
  // and up are gone, the down projection and the new residual sum there.
  const double mlp = kept + (q + 2 * kv) + q + 2 * h + std::max(3 * f, f + 2 * h);
  return std::max(attention, mlp);
}

namespace {

// The token-driven part: activations of one micro-batch and one chunk of logits.
void AddActivations(PlanRows& rows, const PlanInputs& in) {
  const spec::TrainingJobSpec& s = in.spec;
  const ModelShape& model = in.model;
  // Activations: one micro-batch of full-length sequences kept for backward. Under a token
  // budget (micro_batches.h) a micro-batch holds at most that many padded tokens, whose
  // rows are at most seq long: the budget replaces micro x seq when it is the smaller.
  const double seq = static_cast<double>(in.prompt_length + s.grpo.max_response_length);
  const double micro = std::max(1, s.grpo.micro_batch_size);
  const double budget = s.grpo.max_tokens_per_micro_batch;
  const bool budgeted = budget > 0 && budget < micro * seq;
  const double tokens = budgeted ? budget : micro * seq;
  const double act_bytes = in.gpu ? 2 : 4;  // bf16 autocast on GPU, fp32 on CPU
  const bool recomputed = s.grpo.activation_checkpointing || in.stage >= 3;
  const double per_token =
      ActivationElementsPerToken(model, static_cast<int64_t>(seq), s.grpo.max_response_length, recomputed);
  const std::string shape =
      budgeted ? "budget " + std::to_string(static_cast<int64_t>(budget)) + " tokens"
               : "micro " + std::to_string(static_cast<int>(micro)) + " x seq " + std::to_string(static_cast<int>(seq));
  // n: the positions the forward reads (seq - 1); r: the response's, where the last block's
  // queries and MLP run (ActivationElementsPerToken).
  const std::string backward = " + backward's max(2 ffn + h, 2 heads n + h + kv)";
  if (recomputed) {
    rows.Add("activations", tokens * per_token * act_bytes, in.gpu,
             shape + ", per position: layers x h + one block's 4 h + 2 q + 2 kv + 4 ffn + heads n" + backward +
                 ", blocks recomputed",
             false);
  } else {
    rows.Add("activations", tokens * per_token * act_bytes, in.gpu,
             shape + ", per position: layers x (4 h + 2 q + 2 kv + 4 ffn + heads n), the last block's attention " +
                 "output and MLP at the response's " + std::to_string(s.grpo.max_response_length) + backward,
             false);
  }
  // Logits: the update's log-probs pass the response tokens through the head one chunk at
  // a time (core/memory/logits_chunk.h): one chunk's fp32 logits and their exponentials
  // (logsumexp forward; the gradient in backward), and on GPU the bf16 product they are
  // converted from. A micro-batch smaller than a chunk is one chunk of its own size.
  const double response_tokens = std::min(micro * s.grpo.max_response_length, tokens);
  const double chunk = std::min(response_tokens, static_cast<double>(memory::LogitsChunkTokens(model.vocab)));
  rows.Add("logits", (in.gpu ? 2.5 : 2.0) * chunk * model.vocab * 4, in.gpu,
           "one chunk of " + std::to_string(static_cast<int64_t>(chunk)) + " tokens x vocab " +
               std::to_string(model.vocab) + ", fp32 logits and exponentials" + (in.gpu ? " + bf16 product" : ""),
           false);
}

// The rollout's prefill on the host (see header): its transient against the update's. The
// step's peak is the larger of the two phases', so the row is what the prefill adds above
// the update's activations and logits (none when the update's is the larger). Counted in
// neither the state nor the token-driven part: it does not stay between steps, and it
// does not scale with the update's micro-batches.
void AddRolloutPrefill(PlanRows& rows, const PlanInputs& in) {
  if (in.gpu) return;
  const spec::GrpoSpec& g = in.spec.grpo;
  const double local_prompts = std::ceil(static_cast<double>(g.prompts_per_step) / in.workers);
  const int64_t sequences = static_cast<int64_t>(local_prompts) * g.group_size;
  const double prefill = RolloutPrefillElementsPerToken(in.model, in.prompt_length) * static_cast<double>(sequences) *
                         static_cast<double>(in.prompt_length) * 4;  // fp32 on the host
  const PlanComponent* act = rows.plan().Find("activations");
  const PlanComponent* logits = rows.plan().Find("logits");
  const double update = static_cast<double>((act ? act->host_bytes : 0) + (logits ? logits->host_bytes : 0));
  if (prefill <= update) return;
  rows.AddPhase("rollout prefill", prefill - update,
                std::to_string(sequences) + " sequences x prompt " + std::to_string(in.prompt_length) +
                    " at once, one block's working set: " + std::to_string(static_cast<int64_t>(prefill) >> 20) +
                    " MiB, above the update's activations and logits");
}

// The bf16 copies of the parameters the rollout and old log-probs read (see header): 2
// bytes per parameter this rank holds, where the parameters are.
void AddInferenceWeights(PlanRows& rows, const PlanInputs& in) {
  if (!in.inference_weights) return;
  if (in.lora > 0) {  // the base is bf16 itself; only the adapters are copied
    rows.Add("inference weights", 2.0 * static_cast<double>(in.lora), in.gpu, "bf16 copies of the adapters", true);
    return;
  }
  const double held = static_cast<double>(in.model.parameters) / (in.stage >= 3 ? in.workers : 1.0);
  rows.Add("inference weights", 2 * held, in.gpu && !in.spec.sharding.offload_params,
           std::string("bf16 copies for rollout and old log-probs") + (in.stage >= 3 ? ", the owned shard" : ""), true);
}

// GPU autocast casts each weight a matmul reads to bf16 in the update's forward, and the
// matmul's backward keeps that cast until it runs: at the end of a micro-batch's forward
// every matmul weight lives twice, fp32 and bf16. The embedding lookup casts nothing (an
// untied input embedding is left out). With blocks recomputed in backward (stage 3,
// activation checkpointing) the forward keeps no block's casts, so only one block's casts
// and the head are held at once.
void AddAutocastWeights(PlanRows& rows, const PlanInputs& in) {
  if (!in.gpu) return;
  if (in.lora > 0) {  // a bf16 base casts to itself: only the adapters' casts are extra
    rows.Add("autocast weights", 2.0 * static_cast<double>(in.lora), true, "bf16 casts of the adapters", true);
    return;
  }
  const ModelShape& model = in.model;
  const double head = static_cast<double>(model.vocab) * static_cast<double>(model.hidden);
  const bool recomputed = in.stage >= 3 || in.spec.grpo.activation_checkpointing;
  const double cast = recomputed ? static_cast<double>(model.layer_parameters) + head
                                 : static_cast<double>(model.parameters) - (model.tied_head ? 0.0 : head);
  rows.Add("autocast weights", 2 * cast, true,
           std::string("bf16 casts of the matmul weights the update's backward keeps") +
               (recomputed ? ": one recomputed block + head" : ""),
           true);  // the same every step, whatever its tokens, like the head gradient
}

// What else stays between steps: the head's gradient, the generation cache, the reference
// model and the process itself.
void AddResidentExtras(PlanRows& rows, const PlanInputs& in) {
  const spec::TrainingJobSpec& s = in.spec;
  const ModelShape& model = in.model;
  // The head's gradient, [vocab, hidden] fp32, exists whole in backward beside its
  // accumulated value; a tied head also receives the embedding lookup's dense gradient of
  // the same shape, and autograd sums the two before they reach the gradient buffer. On
  // hf_grpo_bench's CPU smoke shape (tied, hidden 896) the step's transient memory beyond
  // activations and logits was 2 x vocab x hidden x 4 at vocabularies of 32000 and 151936.
  const double head_matrices = model.tied_head ? 2 : 1;
  // LoRA: the head is frozen and gets no gradient.
  if (in.lora == 0)
    rows.Add("head gradient", head_matrices * model.vocab * model.hidden * 4, in.gpu,
             std::string(model.tied_head ? "2 x " : "") + "vocab " + std::to_string(model.vocab) + " x hidden " +
                 std::to_string(model.hidden) + " fp32" + (model.tied_head ? " (tied: head and embedding)" : ""),
             true);  // the same every step, whatever its tokens: counted with the state, not the token-driven part
  AddAutocastWeights(rows, in);

  // Generation KV cache: the local rollout batch, allocated once for the longest sequence.
  const double seq = s.grpo.max_prompt_length + s.grpo.max_response_length;
  const double local_prompts = std::ceil(static_cast<double>(s.grpo.prompts_per_step) / in.workers);
  const double batch = local_prompts * s.grpo.group_size;
  rows.Add("generation cache", 2.0 * model.layers * model.kv_heads * model.head_dim * seq * batch * in.kv_bytes, in.gpu,
           std::to_string(static_cast<int>(batch)) + " sequences x " + std::to_string(static_cast<int>(seq)) +
               " tokens, " +
               (in.kv_bytes == 2   ? "bf16"
                : in.kv_bytes == 4 ? "fp32"
                                   : "custom dtype"),
           true);
  AddInferenceWeights(rows, in);
  // LoRA: the reference model is the base with the adapters off; nothing is copied.
  if (s.grpo.kl_coef > 0 && in.lora == 0) {
    // Kept in bf16 where the policy keeps bf16 copies for its passes without gradient.
    rows.Add("reference model", (in.inference_weights ? 2.0 : in.p_bytes) * static_cast<double>(model.parameters),
             in.gpu && !s.sharding.offload_params,
             std::string("frozen copy, parameters only") + (in.inference_weights ? ", bf16" : ""), true);
  }
  rows.Add("runtime", static_cast<double>(kHostRuntimeBaselineBytes), false, "process baseline (LibTorch, allocator)",
           true);
  if (in.gpu) rows.Add("runtime", static_cast<double>(kGpuRuntimeBaselineBytes), true, "CUDA context per GPU", true);
}

// Measurements correct the estimate: every component scales by measured/planned. Then the
// totals per side.
void CorrectAndTotal(Plan& plan, const PlanCorrection& correction) {
  if (correction.host_scale != 1.0 || correction.gpu_scale != 1.0) {
    plan.host_state_bytes = plan.gpu_state_bytes = plan.host_activation_bytes = plan.gpu_activation_bytes = 0;
    for (PlanComponent& c : plan.components) {
      c.host_bytes = Round(c.host_bytes * correction.host_scale);
      c.gpu_bytes = Round(c.gpu_bytes * correction.gpu_scale);
      if (c.name == "rollout prefill") continue;  // neither (AddRolloutPrefill)
      const bool token_driven = c.name == "activations" || c.name == "logits";
      (token_driven ? plan.host_activation_bytes : plan.host_state_bytes) += c.host_bytes;
      (token_driven ? plan.gpu_activation_bytes : plan.gpu_state_bytes) += c.gpu_bytes;
    }
  }
  for (const PlanComponent& c : plan.components) {
    plan.host_total_bytes += c.host_bytes;
    plan.gpu_total_bytes += c.gpu_bytes;
  }
}

}  // namespace

Plan PlanMemory(const spec::TrainingJobSpec& s, int workers, const PlanOptions& options,
                const PlanCorrection& correction) {
  if (workers < 1) throw std::invalid_argument("PlanMemory: workers must be >= 1, got " + std::to_string(workers));
  const ModelShape model = options.model ? *options.model : PresetModelShape(s);
  const bool gpu = s.resources.gpus > 0;
  // Bytes per parameter (see planner.h).
  const bool bf16 = options.bf16_params && gpu;
  // The generation cache's bytes per element follow its dtype: the rollout keeps it in bf16
  // where it reads the bf16 inference copies (worker/train/grpo_trainer.cc), fp32 elsewhere.
  const bool inference_weights = options.bf16_inference_weights.value_or(gpu);
  const PlanInputs in{s,
                      model,
                      workers,
                      std::clamp(s.sharding.stage, 0, 3),
                      gpu,
                      bf16 ? 2.0 : 4.0,
                      bf16 ? 12.0 : 8.0,
                      inference_weights,
                      inference_weights ? 2.0 : 4.0,
                      LoraParameters(s.model.lora, model),
                      options.longest_prompt > 0 ? std::min<int64_t>(options.longest_prompt, s.grpo.max_prompt_length)
                                                 : int64_t{s.grpo.max_prompt_length}};

  Plan plan;
  plan.workers = workers;
  plan.parameters = model.parameters;
  plan.host_limit_bytes = s.resources.memory_bytes;
  plan.gpu_limit_bytes = gpu ? options.gpu_total_bytes : 0;
  PlanRows rows(plan);
  AddShardedState(rows, in);
  AddActivations(rows, in);
  AddResidentExtras(rows, in);
  AddRolloutPrefill(rows, in);
  CorrectAndTotal(plan, correction);
  return plan;
}

bool PlanFits(const Plan& plan, const spec::MemoryGuardSpec& guard) {
  if (plan.host_limit_bytes > 0 && plan.host_total_bytes > guard.host_threshold * plan.host_limit_bytes) {
    return false;
  }
  if (plan.gpu_limit_bytes > 0 && plan.gpu_total_bytes > guard.gpu_threshold * plan.gpu_limit_bytes) {
    return false;
  }
  return true;
}

int FindWorkerCount(const spec::TrainingJobSpec& s, int from, int to, const std::function<bool(int)>& accept) {
  const int lo = std::max(1, s.min_workers);
  const int hi = s.max_workers;
  const int step = from <= to ? 1 : -1;
  // The part of [from, to] inside [lo, hi], walked in the caller's direction.
  const int first = step > 0 ? std::max(from, lo) : std::min(from, hi);
  const int last = step > 0 ? std::min(to, hi) : std::max(to, lo);
  for (int w = first; step > 0 ? w <= last : w >= last; w += step) {
    if (!spec::WorkerCountFits(s.grpo, w)) continue;
    if (s.ranks_per_pod > 1 && w % s.ranks_per_pod != 0) continue;  // whole pods only
    if (!accept || accept(w)) return w;
  }
  return 0;
}

int NearestWorkerCount(const spec::TrainingJobSpec& s, int wanted, int current) {
  const int lo = std::max(1, s.min_workers);
  const int hi = std::max(lo, s.max_workers);
  wanted = std::clamp(wanted, lo, hi);
  int found = 0;
  if (wanted >= current) {
    found = FindWorkerCount(s, wanted, hi);
    if (found == 0 && wanted - 1 > current) found = FindWorkerCount(s, wanted - 1, current + 1);
  } else {
    found = FindWorkerCount(s, wanted, lo);
  }
  return found > 0 ? found : current;
}

int SmallestFittingWorkers(const spec::TrainingJobSpec& s, int from, const PlanOptions& options,
                           const PlanCorrection& correction) {
  return FindWorkerCount(s, std::max(1, from), s.max_workers,
                         [&](int w) { return PlanFits(PlanMemory(s, w, options, correction), s.memory_guard); });
}

int EffectiveTokenBudget(const spec::GrpoSpec& g) {
  const int64_t rows =
      static_cast<int64_t>(std::max(1, g.micro_batch_size)) * (g.max_prompt_length + g.max_response_length);
  const int64_t budget = g.max_tokens_per_micro_batch;
  return static_cast<int>(budget > 0 && budget < rows ? budget : rows);
}

int LargestFittingMicroBatch(const spec::TrainingJobSpec& s, int workers, const PlanOptions& options,
                             const PlanCorrection& correction) {
  spec::TrainingJobSpec trial = s;
  for (int m = s.grpo.micro_batch_size; m >= 1; --m) {
    trial.grpo.micro_batch_size = m;
    if (PlanFits(PlanMemory(trial, workers, options, correction), s.memory_guard)) return m;
  }
  return 0;
}

}  // namespace headroom::guard
