// A GRPO step on a Hugging Face Qwen2 model of Qwen2.5-0.5B's shape (hidden 896, 24
// layers, 14 query / 2 key-value heads, intermediate 4864, vocabulary 151936, tied head)
// with random weights and 512-token responses: tokens per second of a step, and the memory
// each component really takes against what `headroom plan` says for it (guard::PlanMemory
// with the model's config.json shape, guard::JobModelShape: the same call). Baselines
// measured in the same run: a plain matmul at the model's largest shape (the update's
// achieved FLOP/s as a fraction of it), and the plan (planner error per component).
//
//   hf_grpo_bench [--device cpu|cuda] [--layers N] [--response-length N] [--batch N]
//                 [--micro-batch N] [--steps N] [--warmup N] [--stage 0..3] [--kl F]
//                 [--vocab N] [--threads N] [--activation-checkpointing 0|1]
//
// --batch is the sequences per step (promptsPerStep x groupSize 4). Defaults: the full
// shape on --device, 64 sequences, micro-batch 8, 3 timed steps after 1 warm-up.
// A CPU smoke test: --layers 2 --response-length 16 --batch 8 (well under a minute).
//
// The random model is written to a temporary directory as a Hugging Face directory
// (config.json + BF16 model.safetensors through core/hf's writer) and trained from there,
// so the real load path (mmap, BF16 -> fp32) runs. Its weights are random but arranged
// so that the toy task's rollout samples digits and never EOS (every embedding row has a
// large shared component, EOS's the opposite sign): every response is the full length,
// and digits vary within a group, so rewards differ and the update runs (a group whose
// rewards are all equal is skipped and would make the step look cheaper than it is).
//
// Memory is measured where it lives: on CUDA from the caching allocator (state = what is
// allocated between steps; the step's transient peak = allocated peak - state), on CPU
// from the process's RSS (VmRSS, sampled every 2 ms during the step). Parameters,
// gradients and optimizer state are the sharded buffers' sizes; the generation cache the
// KV cache's; the reference model what the allocator holds beyond those (CUDA only).
// One line per figure; the planner error is (plan - measured) / measured.
#include <spdlog/spdlog.h>

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/worker/bench_timing.h"
#include "core/base/human_bytes.h"
#include "core/files/remove_tree.h"
#include "core/guard/planner.h"
#include "core/hf/hf_config.h"
#include "core/memory/host_memory.h"
#include "core/memory/peak_sampler.h"
#include "worker/comm/communicator.h"
#include "worker/model/fused_attention.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/model/sdpa_attention.h"
#include "worker/rollout/decode_replay.h"
#include "worker/tasks/tokenizer.h"
#include "worker/telemetry/gpu_memory_source.h"
#include "worker/train/grpo_trainer.h"

using namespace headroom;
using namespace headroom::worker;
namespace fs = std::filesystem;
using headroom::bench::MatmulFlops;
using headroom::bench::Median;
using headroom::bench::Seconds;

namespace {

struct Args {
  std::string device = "cpu";
  int64_t layers = 24, response = 512, batch = 64, micro = 8, vocab = 151936;
  int steps = 3, warmup = 1, stage = 0, threads = 0;
  double kl = 0.001;
  bool checkpointing = false;
};

std::string Bytes(int64_t b) { return HumanBytes(static_cast<double>(b)); }

// Qwen2.5-0.5B's config.json (transformers 4.x keys), with the overridable sizes.
nlohmann::json QwenConfig(const Args& a) {
  return {{"architectures", {"Qwen2ForCausalLM"}},
          {"model_type", "qwen2"},
          {"vocab_size", a.vocab},
          {"hidden_size", 896},
          {"intermediate_size", 4864},
          {"num_hidden_layers", a.layers},
          {"num_attention_heads", 14},
          {"num_key_value_heads", 2},
          {"max_position_embeddings", 32768},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 1000000.0},
          {"tie_word_embeddings", true},
          {"hidden_act", "silu"},
          {"bos_token_id", CharTokenizer::kBos},
          {"eos_token_id", CharTokenizer::kEos},
          {"torch_dtype", "bfloat16"}};
}

// The random model (see the header for why its embeddings are arranged), written to `dir`.
void WriteRandomModel(const Args& a, const fs::path& dir) {
  const nlohmann::json config = QwenConfig(a);
  std::ofstream(dir / "config.json") << config.dump(2) << "\n";
  const hf::HfModelConfig parsed = hf::ParseHfConfig(config.dump(), (dir / "config.json").string());
  torch::manual_seed(1);
  auto model = std::make_shared<HfCausalLMImpl>(parsed, a.response + 8);
  torch::NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(a.layers));  // GPT-2's scaled init
  for (const auto& [name, p] : model->OrderedParameters()) {
    if (name.find("norm") != std::string::npos) {
      p.fill_(1.0);
    } else if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0) {
      p.zero_();
    } else {
      const bool residual = name.find("o_proj") != std::string::npos || name.find("down_proj") != std::string::npos;
      p.normal_(0.0, residual ? residual_std : 0.02);
    }
    if (name == "model.embed_tokens.weight") {
      p.select(1, 0).fill_(10.0);                                  // every token pushes the residual's dim 0 up...
      p.select(0, CharTokenizer::kEos).select(0, 0).fill_(-10.0);  // ...and EOS's logit far below the digits'
    }
  }
  SaveHfSafetensors(*model, (dir / "model.safetensors").string(), "BF16");
}

// Forward matmul FLOPs of `rows` sequences of `seq` positions: the projections and MLP at
// every position, the head at every position (an upper bound: the update reads only the
// response's), attention over the causal pairs.
double ForwardFlops(const hf::HfModelConfig& c, int64_t rows, int64_t seq) {
  const double h = static_cast<double>(c.hidden_size), f = static_cast<double>(c.intermediate_size);
  const double q = static_cast<double>(c.num_attention_heads * c.head_dim);
  const double kv = static_cast<double>(c.num_key_value_heads * c.head_dim);
  const double per_token_layer = 2.0 * (h * q + 2.0 * h * kv + q * h + 3.0 * h * f);
  const double tokens = static_cast<double>(rows * seq);
  const double pairs = static_cast<double>(rows) * static_cast<double>(seq) * (seq + 1) / 2.0;
  return c.num_hidden_layers * (tokens * per_token_layer + pairs * 4.0 * q) + tokens * 2.0 * h * c.vocab_size;
}

int64_t Rss() { return memory::ReadProcMemory().working_set_bytes; }

void Figure(const char* what, int64_t measured, int64_t planned, const std::string& how) {
  if (measured <= 0) {
    std::printf("memory %-18s measured %11s  plan %11s  planner error    n/a  (%s)\n", what, "-",
                Bytes(planned).c_str(), how.c_str());
    return;
  }
  const double error = 100.0 * (static_cast<double>(planned) - measured) / static_cast<double>(measured);
  std::printf("memory %-18s measured %11s  plan %11s  planner error %+6.1f%%  (%s)\n", what, Bytes(measured).c_str(),
              Bytes(planned).c_str(), error, how.c_str());
}

int Usage(const char* why) {
  std::fprintf(stderr, "hf_grpo_bench: %s\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage(("missing the value of " + flag).c_str());
    const char* v = argv[++i];
    if (flag == "--device") a.device = v;
    else if (flag == "--layers") a.layers = std::stoll(v);
    else if (flag == "--response-length") a.response = std::stoll(v);
    else if (flag == "--batch") a.batch = std::stoll(v);
    else if (flag == "--micro-batch") a.micro = std::stoll(v);
    else if (flag == "--vocab") a.vocab = std::stoll(v);
    else if (flag == "--steps") a.steps = std::stoi(v);
    else if (flag == "--warmup") a.warmup = std::stoi(v);
    else if (flag == "--stage") a.stage = std::stoi(v);
    else if (flag == "--kl") a.kl = std::stod(v);
    else if (flag == "--threads") a.threads = std::stoi(v);
    else if (flag == "--activation-checkpointing") a.checkpointing = std::stoi(v) != 0;
    else return Usage(("unknown option " + flag).c_str());
  }
  constexpr int64_t kGroup = 4;
  if (a.batch < kGroup || a.batch % kGroup != 0) return Usage("--batch must be a multiple of 4 (groups of 4 samples)");
  if (a.layers < 1 || a.response < 1 || a.micro < 1 || a.steps < 1 || a.vocab < CharTokenizer::kVocabSize) {
    return Usage("--layers, --response-length, --micro-batch, --steps must be >= 1 and --vocab >= 32");
  }
  if (a.device != "cpu" && a.device != "cuda") return Usage("--device must be cpu or cuda");
  if (a.device == "cuda" && !torch::cuda::is_available()) {
    return Usage(
        "--device cuda: this LibTorch sees no CUDA device (build with -DHEADROOM_WITH_CUDA=ON on a GPU machine)");
  }
  const torch::Device device = a.device == "cuda" ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (a.threads > 0) torch::set_num_threads(a.threads);

  std::string pattern = (fs::temp_directory_path() / "headroom-hf-bench-XXXXXX").string();
  if (!mkdtemp(pattern.data())) return Usage("cannot create a temporary directory");
  const fs::path dir = pattern;
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ignored;
      files::RemoveTree(dir, ignored);  // not remove_all: see core/files/remove_tree.h
    }
  } cleanup{dir};

  auto started = std::chrono::steady_clock::now();
  WriteRandomModel(a, dir);
  const double write_seconds = Seconds(started);

  // The job: reverse 3 digits (prompt 5 tokens), `batch` sequences of `response` tokens.
  spec::TrainingJobSpec spec;
  spec.model.path = dir.string();
  spec.task.name = "reverse";
  spec.task.digits = 3;
  spec.task.seed = 1;
  spec.grpo.prompts_per_step = static_cast<int>(a.batch / kGroup);
  spec.grpo.group_size = static_cast<int>(kGroup);
  spec.grpo.max_prompt_length = 5;
  spec.grpo.max_response_length = static_cast<int>(a.response);
  spec.grpo.micro_batch_size = static_cast<int>(std::min(a.micro, a.batch));
  spec.grpo.learning_rate = 1e-6;
  spec.grpo.kl_coef = a.kl;
  spec.sharding.stage = a.stage;
  spec.grpo.activation_checkpointing = a.checkpointing;
  spec.resources.gpus = device.is_cuda() ? 1 : 0;
  spec.resources.memory_bytes = 128LL << 30;

  auto gpu = MakeGpuMemorySource(device);
  const int64_t rss_before = Rss();
  started = std::chrono::steady_clock::now();
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(spec, *comm, device);
  const double load_seconds = Seconds(started);
  const hf::HfModelConfig config = hf::LoadHfConfig(dir.string());

  for (int s = 0; s < a.warmup; ++s) trainer.RunStep(s);

  // Between steps: the state every step keeps.
  const int64_t gpu_state = gpu->Read().allocated_bytes;
  const int64_t rss_state = Rss();
  memory::PeakSampler rss_sampler(Rss, std::chrono::milliseconds(2));
  rss_sampler.Start();

  std::vector<double> step_seconds;
  double rollout = 0, logprob = 0, update = 0;
  int64_t tokens = 0, generated = 0, update_rows = 0, sequences = 0, gpu_step_peak = 0, rss_step_peak = 0;
  int64_t gpu_reserved_peak = 0;
  for (int s = 0; s < a.steps; ++s) {
    gpu->ResetPeak();
    rss_sampler.Reset();
    const auto start = std::chrono::steady_clock::now();
    const StepResult r = trainer.RunStep(a.warmup + s);
    step_seconds.push_back(Seconds(start));  // RunStep reads its loss back: the device is done
    const memory::GpuMemorySample after = gpu->Read();
    gpu_step_peak = std::max(gpu_step_peak, after.allocated_peak_bytes);
    gpu_reserved_peak = std::max(gpu_reserved_peak, after.peak_bytes);
    rss_step_peak = std::max(rss_step_peak, rss_sampler.TakePeak());
    rollout += r.rollout_seconds;
    logprob += r.logprob_seconds;
    update += r.update_seconds;
    tokens += r.tokens;
    generated += r.generated_tokens;
    update_rows += r.update_sequences;
    sequences += r.sequences;
  }
  rss_sampler.Stop();

  // The plan, as `headroom plan` makes it for this job on this device.
  guard::PlanOptions plan_options;
  plan_options.model = guard::JobModelShape(spec);
  plan_options.gpu_total_bytes = gpu->Read().total_bytes;
  const guard::Plan plan = guard::PlanMemory(spec, 1, plan_options);
  auto planned = [&](const char* name) {
    const guard::PlanComponent* c = plan.Find(name);
    return c ? (device.is_cuda() ? c->gpu_bytes : c->host_bytes) : 0;
  };

  const double median = Median(step_seconds);
  const double per_step_tokens = static_cast<double>(tokens) / a.steps;
  const int64_t seq = spec.grpo.max_prompt_length + a.response - 1;
  const double update_flops = 3.0 * ForwardFlops(config, update_rows, seq) / a.steps;
  const double matmul =
      MatmulFlops(spec.grpo.micro_batch_size * seq, config.hidden_size, config.intermediate_size, device);
  const double achieved = update > 0 ? update_flops / (update / a.steps) : 0;

  std::printf(
      "hf_grpo_bench: %s, %lld parameters, on %s, stage %d, %lld sequences x (%d prompt + %lld response) "
      "tokens, micro-batch %d, klCoef %g, activation checkpointing %s; model written in %.1f s, loaded in %.1f s\n",
      trainer.model()->Describe().c_str(), static_cast<long long>(config.ParameterCount()), device.str().c_str(),
      a.stage, static_cast<long long>(a.batch), spec.grpo.max_prompt_length, static_cast<long long>(a.response),
      spec.grpo.micro_batch_size, a.kl, a.checkpointing ? "on" : "off", write_seconds, load_seconds);
  std::printf("step tokens/s          %.1f  (median step %.3f s over %d: rollout %.3f, log-probs %.3f, update %.3f; "
              "%.0f tokens per step)\n",
              per_step_tokens / median, median, a.steps, rollout / a.steps, logprob / a.steps, update / a.steps,
              per_step_tokens);
  std::printf("generated per sequence %.1f of %lld tokens  (update ran %.1f of %lld rows per step)\n",
              static_cast<double>(generated) / std::max<int64_t>(1, sequences), static_cast<long long>(a.response),
              static_cast<double>(update_rows) / a.steps, static_cast<long long>(a.batch));
  std::printf("update FLOP/s          %.4g = %.3f of a %s matmul [%lld x %d] x [%d x %d] in this run (%.4g FLOP/s)\n",
              achieved, matmul > 0 ? achieved / matmul : 0.0, device.is_cuda() ? "bf16" : "fp32",
              static_cast<long long>(spec.grpo.micro_batch_size * seq), static_cast<int>(config.hidden_size),
              static_cast<int>(config.hidden_size), static_cast<int>(config.intermediate_size), matmul);

  // What ran: the decode path, the cache's dtype, and the attention kernel a decode token
  // takes (the folded queries of one token over the whole cache, with a padding mask).
  const RolloutEngine& engine = trainer.rollout_engine();
  const KvCache& kv = engine.cache();
  const int64_t heads = config.num_attention_heads, kv_heads = config.num_key_value_heads;
  const int64_t head_dim = config.head_dim > 0 ? config.head_dim : config.hidden_size / heads;
  const auto like = torch::TensorOptions().dtype(kv.Keys(0, 0).scalar_type()).device(device);
  const auto q = torch::zeros({kv.max_batch(), kv_heads, heads / kv_heads, head_dim}, like);
  const auto k = torch::zeros({kv.max_batch(), kv_heads, kv.max_seq(), head_dim}, like);
  const auto mask = torch::zeros({kv.max_batch(), 1, heads / kv_heads, kv.max_seq()}, like);
  const std::string attention =
      SdpaAttentionApplies(q) ? "sdpa, " + SdpaBackendName(q, k, k, mask) + " kernel"
      : heads == kv_heads && kv.Keys(0, 0).scalar_type() == torch::kFloat32 && FusedAttentionApplies(q, kv.max_seq())
          ? "fused CPU kernel"
          : "matmul";
  std::printf("decode                 %s (mode %s%s), KV cache %s [%lld x %lld positions], attention %s\n",
              engine.last_decode_graphed() ? "graphed" : "not graphed",
              RolloutEngine::DecodeModeName(engine.resolved_decode_mode(trainer.model())),
              DecodeGraphsCompiled() ? "" : "; CUDA graphs not compiled in", c10::toString(kv.Keys(0, 0).scalar_type()),
              static_cast<long long>(kv.max_batch()), static_cast<long long>(kv.max_seq()), attention.c_str());

  const ShardedBytes held = trainer.shards().ResidentBytes();
  const int64_t cache = trainer.rollout_engine().cache().bytes();
  Figure("parameters", held.parameters, planned("parameters"), "sharded fp32 buffers");
  Figure("gradients", held.gradients, planned("gradients"), "sharded fp32 buffers");
  Figure("optimizer", held.optimizer, planned("optimizer"), "AdamW moments");
  Figure("generation cache", cache, planned("generation cache"), "the rollout's KV cache");
  const int64_t plan_transient =
      planned("activations") + planned("logits") + planned("head gradient") + planned("autocast weights");
  if (device.is_cuda()) {
    const int64_t reference = gpu_state - held.total() - cache;
    Figure("reference model", trainer.has_reference_model() ? reference : 0, planned("reference model"),
           "allocated between steps beyond the trainer's buffers and the cache");
    Figure("activations+logits", gpu_step_peak - gpu_state, plan_transient,
           "allocator peak in a step - allocated between steps; plan activations " + Bytes(planned("activations")) +
               " + logits " + Bytes(planned("logits")) + " + head gradient " + Bytes(planned("head gradient")) +
               " + autocast weights " + Bytes(planned("autocast weights")));
    Figure("GPU step peak", gpu_step_peak, plan.gpu_total_bytes - planned("runtime"),
           "allocator peak; plan total less its " + Bytes(planned("runtime")) + " CUDA-context estimate");
    // What other trainers report (torch.cuda.max_memory_reserved): the plan has no row for
    // the allocator's caching slack, so no comparison.
    std::printf("memory GPU reserved peak %11s  (the caching allocator's reserved peak in a step)\n",
                Bytes(gpu_reserved_peak).c_str());
  } else {
    Figure("reference model", 0, planned("reference model"), "not separable in host RSS");
    Figure("activations+logits", rss_step_peak - rss_state, plan_transient,
           "RSS peak in a step - RSS between steps; plan activations " + Bytes(planned("activations")) + " + logits " +
               Bytes(planned("logits")) + " + head gradient " + Bytes(planned("head gradient")));
    Figure("host step peak", rss_step_peak - rss_before, plan.host_total_bytes - planned("runtime"),
           "RSS peak less the RSS before the trainer; plan total less its runtime estimate");
  }
  std::fflush(stdout);
  return 0;
}
