// One GRPO step (rollout + update) of the C++ worker, timed; and the update phase's
// achieved FLOP/s against a plain matmul's at the same sizes (the machine's practical
// limit). Prints one JSON object per preset; bench/worker/run.sh compares it with
// grpo_eager.py, the same step in PyTorch eager.
//
//   grpo_step_bench [--preset tiny|small|base] [--steps N] [--warmup N] [--threads N] [--profile FILE]
//                   [--device cpu|cuda] [--prompts N] [--group N] [--response N] [--micro-batch N]
//                   [--lora R]
//
// The defaults are bench/worker/run.sh's CPU step (16 prompts x 8 samples, up to 6 response
// tokens, one micro-batch); bench/gpu/run.sh runs the base preset on a GPU with a larger batch
// and reports the step's peak GPU memory (allocated and reserved) beside the times.
// --lora R trains rank-R adapters on every projection of a frozen base (spec.model.lora,
// all-linear, alpha = R) instead of every parameter: "trainable" and "sharded_state_bytes"
// (parameters, gradients and AdamW state in the flat groups) show what LoRA saves,
// "max_rss_bytes" the process's peak, and the step times what it costs or saves. The FLOP
// figures count the full model's update either way.
// --profile writes a Chrome trace of every operator in the timed steps (LibTorch's
// legacy profiler; it slows the steps, so its timings are not the benchmark's).
#include <spdlog/spdlog.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/worker/bench_timing.h"
#include "worker/comm/communicator.h"
#include "core/spec/model_presets.h"
#include "worker/telemetry/gpu_memory_source.h"
#include "worker/telemetry/heap_trim.h"
#include "worker/train/grpo_trainer.h"

#include <torch/csrc/autograd/profiler_legacy.h>

using namespace headroom::worker;
using headroom::bench::MatmulFlops;
using headroom::bench::Median;
using headroom::bench::Seconds;

namespace {

// Matmul FLOPs of the update's forward over `rows` sequences of `seq` positions whose
// logits are read from `first` on (the positions predicting response tokens), counting
// what the worker computes (hf_causal_lm.h): every block but the last at every position;
// the last block's q, k, v projections at every position, its attention queries, output
// projection and SwiGLU MLP (gate, up, down), the final norm and head at the read
// positions only; attention over the causal pairs (query i sees keys 0..i), not the full
// square. A preset has as many key/value heads as query heads.
double ForwardFlops(const headroom::hf::HfModelConfig& c, int64_t rows, int64_t seq, int64_t first) {
  const double h = static_cast<double>(c.hidden_size), f = static_cast<double>(c.intermediate_size);
  const double all = static_cast<double>(rows * seq), read = static_cast<double>(rows * (seq - first));
  auto pairs = [](int64_t from, int64_t to) {  // sum over queries from..to-1 of visible keys
    return static_cast<double>(to * (to + 1) / 2 - from * (from + 1) / 2);
  };
  const double qkv = 2.0 * h * 3.0 * h, rest = 2.0 * (h * h + 3.0 * h * f);
  const double attention_per_pair = 4.0 * h;  // q.k and p.v over every head's dims
  const double earlier =
      static_cast<double>(c.num_hidden_layers - 1) * (all * (qkv + rest) + rows * pairs(0, seq) * attention_per_pair);
  const double last = all * qkv + read * rest + rows * pairs(first, seq) * attention_per_pair;
  return earlier + last + read * 2.0 * h * c.vocab_size;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "tiny", device_name = "cpu";
  int steps = 10, warmup = 2, threads = 2, prompts = 16, group = 8, response = 6, micro_batch = 0, lora = 0;
  std::string profile;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--preset")) preset = argv[i + 1];
    else if (!std::strcmp(argv[i], "--steps")) steps = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--warmup")) warmup = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--profile")) profile = argv[i + 1];
    else if (!std::strcmp(argv[i], "--device")) device_name = argv[i + 1];
    else if (!std::strcmp(argv[i], "--prompts")) prompts = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--group")) group = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--response")) response = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--micro-batch")) micro_batch = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--lora")) lora = std::stoi(argv[i + 1]);
  }
  if (device_name != "cpu" && device_name != "cuda") {
    std::fprintf(stderr, "grpo_step_bench: --device must be cpu or cuda\n");
    return 2;
  }
  if (device_name == "cuda" && !torch::cuda::is_available()) {
    std::fprintf(stderr, "grpo_step_bench: --device cuda: this LibTorch sees no CUDA device\n");
    return 2;
  }
  const torch::Device device = device_name == "cuda" ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  torch::set_num_threads(threads);
  // The step both implementations run: reverse 3 digits, `prompts` x `group` samples, prompt
  // 5 tokens, up to `response` response tokens, micro-batches of `micro_batch` (default: the
  // whole batch), one update, no reference model.
  const int rows_per_step = prompts * group;
  headroom::spec::TrainingJobSpec spec;
  spec.model.preset = preset;
  spec.task = {"reverse", 3, 1};
  spec.grpo.prompts_per_step = prompts;
  spec.grpo.group_size = group;
  spec.grpo.max_prompt_length = 5;
  spec.grpo.max_response_length = response;
  spec.grpo.micro_batch_size = micro_batch > 0 ? micro_batch : rows_per_step;
  spec.grpo.learning_rate = 3e-3;
  spec.grpo.kl_coef = 0.0;
  spec.resources.gpus = device.is_cuda() ? 1 : 0;
  if (lora > 0) {
    spec.model.lora.r = lora;
    spec.model.lora.alpha = lora;
    spec.model.lora.target_modules = {"all-linear"};
  }
  auto comm = MakeLocalCommunicator();
  auto gpu = MakeGpuMemorySource(device);
  GrpoTrainer trainer(spec, *comm, device);
  const headroom::hf::HfModelConfig config = headroom::spec::PresetModelConfig(headroom::spec::ResolvedModelSpec(spec));
  for (int s = 0; s < warmup; ++s) trainer.RunStep(s);
  double total = 0, rollout = 0, logprob = 0, update = 0, trim = 0;
  int trims = 0;
  int64_t tokens = 0, generated = 0, update_rows = 0, gpu_peak_allocated = 0, gpu_peak_reserved = 0;
  std::vector<double> step_seconds;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> recording;
  if (!profile.empty()) recording = std::make_unique<torch::autograd::profiler::RecordProfile>(profile);
  for (int s = 0; s < steps; ++s) {
    gpu->ResetPeak();
    auto start = std::chrono::steady_clock::now();
    StepResult r = trainer.RunStep(warmup + s);
    step_seconds.push_back(Seconds(start));  // RunStep reads its loss back: the device is done
    const auto gpu_now = gpu->Read();
    gpu_peak_allocated = std::max(gpu_peak_allocated, gpu_now.allocated_peak_bytes);
    gpu_peak_reserved = std::max(gpu_peak_reserved, gpu_now.peak_bytes);
    total += step_seconds.back();
    // What the worker does after a step (run_worker.cc) when a step frees enough to
    // matter (heap_trim.h; no limit here, so 64 MiB): timed apart, as memory policy, not
    // the GRPO step, but when it trims the next step pays the page faults.
    auto trim_start = std::chrono::steady_clock::now();
    trims += ReturnFreedHeapToSystem(HeapTrimThreshold(0)) ? 1 : 0;
    trim += Seconds(trim_start);
    rollout += r.rollout_seconds;
    logprob += r.logprob_seconds;
    update += r.update_seconds;
    tokens += r.tokens;
    generated += r.generated_tokens;
    update_rows += r.update_sequences;
  }
  recording.reset();
  const int64_t rows = spec.grpo.micro_batch_size;  // the update's matmuls are one micro-batch tall
  const int64_t seq = 5 + response - 1;             // the training forward sees P + R - 1 positions
  // Update phase = forward + backward (~3x the forward's FLOPs) over the rows it ran:
  // rows of all-equal-reward groups are skipped (policy_update.h) and do no FLOPs.
  const double update_flops = 3.0 * ForwardFlops(config, update_rows, seq, /*first=*/5 - 1);
  const double achieved = update_flops / update;
  const double matmul = MatmulFlops(rows * seq, config.hidden_size, config.intermediate_size, device);
  // tokens_per_second uses the median step (a noisy neighbour on a shared machine moves
  // the mean); every step of this fixed-shape batch has the same token count.
  const double median = Median(step_seconds);
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  const int64_t max_rss = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
  std::printf("{\"impl\":\"cpp\",\"preset\":\"%s\",\"device\":\"%s\",\"parameters\":%lld,\"threads\":%d,\"steps\":%d,"
              "\"step_seconds_median\":%.5f,\"step_seconds\":%.5f,\"rollout_seconds\":%.5f,\"logprob_seconds\":%.5f,"
              "\"update_seconds\":%.5f,"
              "\"update_rows_per_step\":%.1f,\"trim_seconds\":%.5f,\"trimmed_steps\":%d,\"tokens_per_second\":%.1f,"
              "\"generated_tokens_per_step\":%.1f,"
              "\"update_flops_per_second\":%.4g,\"matmul_flops_per_second\":%.4g,\"update_fraction_of_matmul\":%.3f,"
              "\"peak_allocated_bytes\":%lld,\"peak_reserved_bytes\":%lld,\"lora_r\":%d,\"trainable\":%lld,"
              "\"sharded_state_bytes\":%lld,\"max_rss_bytes\":%lld}\n",
              preset.c_str(), device_name.c_str(), static_cast<long long>(config.ParameterCount()), threads, steps,
              median, total / steps, rollout / steps, logprob / steps, update / steps,
              static_cast<double>(update_rows) / steps, trim / steps, trims,
              static_cast<double>(tokens) / steps / median, static_cast<double>(generated) / steps, achieved, matmul,
              achieved / matmul, static_cast<long long>(gpu_peak_allocated), static_cast<long long>(gpu_peak_reserved),
              lora, static_cast<long long>(trainer.shards().numel()),
              static_cast<long long>(trainer.shards().PeakBytes().total()), static_cast<long long>(max_rss));
  return 0;
}
