#include <spdlog/spdlog.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "worker/train/run_worker.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/guard/decision.h"
#include "core/guard/memory_guard.h"
#include "core/protocol/environment.h"
#include "core/protocol/exit_codes.h"
#include "core/protocol/termination_message.h"
#include "core/spec/training_job.h"
#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/comm/communicator.h"
#include "worker/comm/communicator_factory.h"
#include "worker/telemetry/debug_leaks.h"
#include "worker/telemetry/gpu_memory_source.h"
#include "worker/telemetry/blas_info.h"
#include "worker/telemetry/heap_trim.h"
#include "worker/telemetry/memory_monitor.h"
#include "worker/telemetry/step_log.h"
#include "worker/telemetry/worker_metrics.h"
#include "worker/train/grpo_trainer.h"
#include "worker/train/stop_agreement.h"
#include "worker/train/stop_request.h"
#include "worker/train/training_state.h"

namespace headroom::worker {
namespace {

std::optional<std::string> ReadIntEnv(const char* name, int min, int& out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const long parsed = std::strtol(v, &end, 10);
  if (*end != '\0' || parsed < min || parsed > 1 << 30) {
    return std::string(name) + ": must be an integer >= " + std::to_string(min) + ", got \"" + v + "\"";
  }
  out = static_cast<int>(parsed);
  return std::nullopt;
}

// Human logs on stderr: stdout may be the step log.
void LogToStderr() {
  static bool done = false;
  if (done) return;
  done = true;
  auto logger = spdlog::stderr_color_mt("headroom-worker");
  spdlog::set_default_logger(logger);
}

torch::Device PickDevice(const spec::TrainingJobSpec& spec, int rank) {
  if (spec.resources.gpus > 0) {
    if (torch::cuda::is_available()) return torch::Device(torch::kCUDA, rank % std::max<int>(1, torch::cuda::device_count()));
    spdlog::warn("spec.resources.gpus is {} but this LibTorch sees no CUDA device: running on CPU",
                 spec.resources.gpus);
  }
  return torch::Device(torch::kCPU);
}

protocol::StepRecord MakeRecord(const StepResult& r, const StepMemoryReading& m, double seconds,
                                int64_t next_tokens, int world_size, int rank, int64_t micro_batch) {
  protocol::StepRecord rec;
  rec.step = r.step + 1;  // finished steps: the number a checkpoint of this state carries
  rec.reward_mean = r.reward_mean;
  rec.exact_fraction = r.exact_fraction;
  rec.loss = r.loss;
  rec.kl = r.kl;
  rec.clip_fraction = r.clip_fraction;
  rec.grad_norm = r.grad_norm;
  rec.host_bytes = m.host_bytes;
  rec.host_peak_bytes = m.host_peak_bytes;
  rec.host_limit_bytes = m.host_limit_bytes;
  rec.gpu_allocated_bytes = m.gpu.allocated_bytes;
  rec.gpu_reserved_bytes = m.gpu.reserved_bytes;
  rec.gpu_peak_bytes = m.gpu.peak_bytes;
  rec.gpu_total_bytes = m.gpu.total_bytes;
  rec.gpu_alloc_retries = m.gpu.alloc_retries;
  rec.tokens = r.tokens;
  rec.next_step_tokens = next_tokens;
  rec.generated_tokens = r.generated_tokens;
  rec.step_seconds = seconds;
  rec.tokens_per_second = seconds > 0 ? static_cast<double>(r.tokens) / seconds : 0;
  rec.rollout_seconds = r.rollout_seconds;
  rec.update_seconds = r.update_seconds;
  rec.world_size = world_size;
  rec.rank = rank;
  rec.micro_batch_size = micro_batch;
  return rec;
}

// The guard's history this generation was launched with (opaque JSON; null when none),
// carried in the checkpoint so a resumed run knows what the guard already did.
nlohmann::json GuardHistoryFromEnvironment() {
  const char* v = std::getenv(protocol::kGuardHistoryEnv);
  if (!v || !*v) return nullptr;
  auto parsed = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? nlohmann::json(v) : parsed;
}

// Where Run() is, for reporting an error that unwinds out of it.
struct RunProgress {
  torch::Device device{torch::kCPU};
  int64_t step = 0;  // the step being computed, 1-based; 0 before the first
};

// HEADROOM_SIMULATE_GPU_OOM_AT_STEP=N (a test hook): raises what the CUDA caching
// allocator throws when it runs out, at the start of step N, on any device, so the
// out-of-memory path below runs without a GPU. Once per rank and checkpoint directory (a
// marker there), so a supervisor's restart resumes past it; every time without one.
class SimulatedGpuOom {
 public:
  explicit SimulatedGpuOom(const WorkerOptions& options) {
    const char* v = std::getenv(protocol::kSimulateGpuOomAtStepEnv);
    if (!v || !*v) return;
    char* end = nullptr;
    const long long step = std::strtoll(v, &end, 10);
    if (*end != '\0' || step < 1) {
      throw std::invalid_argument(std::string(protocol::kSimulateGpuOomAtStepEnv) + ": must be a step >= 1, got \"" +
                                  v + "\"");
    }
    step_ = step;
    if (!options.checkpoint_dir.empty()) {
      marker_ = std::filesystem::path(options.checkpoint_dir) /
                ("simulated-gpu-oom-step-" + std::to_string(step) + "-rank-" + std::to_string(options.rank));
    }
  }

  void BeforeStep(int64_t step) const {
    if (step != step_ || (!marker_.empty() && std::filesystem::exists(marker_))) return;
    if (!marker_.empty()) {
      std::filesystem::create_directories(marker_.parent_path());
      std::ofstream(marker_) << "raised\n";
    }
    C10_THROW_ERROR(OutOfMemoryError, "CUDA out of memory. Tried to allocate 2.00 GiB (simulated: " +
                                          std::string(protocol::kSimulateGpuOomAtStepEnv) + "=" +
                                          std::to_string(step) + ")");
  }

 private:
  int64_t step_ = -1;
  std::filesystem::path marker_;
};

int Run(const WorkerOptions& options, RunProgress& progress) {
  // 1. The job.
  const auto parsed = spec::ParseTrainingJobFile(options.job_path);
  if (!parsed.ok()) {
    for (const auto& e : parsed.errors) std::cerr << e.ToString() << "\n";
    return protocol::kExitInvalidSpec;
  }
  const spec::TrainingJob& job = *parsed.job;
  const spec::TrainingJobSpec& spec = job.spec;
  if (options.rank < 0 || options.rank >= options.world_size) {
    spdlog::error("RANK={} outside WORLD_SIZE={}", options.rank, options.world_size);
    return protocol::kExitFailure;
  }

  // 2. Process resources: threads from the CPU request (this is a 2-core machine).
  torch::set_num_threads(std::max<int64_t>(1, spec.resources.cpu_millis / 1000));
  const torch::Device device = PickDevice(spec, options.rank);
  progress.device = device;
  const SimulatedGpuOom simulated_gpu_oom(options);
  // Several ranks: Gloo over TCP for CPU tensors, NCCL for CUDA ones; timeouts from the
  // environment (communicator_factory.h), so a dead peer ends this rank instead of
  // hanging it.
  std::unique_ptr<Communicator> comm;
  if (options.world_size > 1) {
    CommunicatorOptions copts = CommunicatorOptionsFromEnv(device.is_cuda() ? "nccl" : "gloo");
    copts.rank = options.rank;
    copts.world_size = options.world_size;
    if (!options.master_addr.empty()) copts.master_addr = options.master_addr;
    if (options.master_port > 0) copts.master_port = options.master_port;
    if (device.is_cuda()) copts.local_rank = device.index();
    comm = MakeCommunicator(copts);
    spdlog::info("rank {} of {} connected ({})", comm->rank(), comm->world_size(), comm->backend());
  } else {
    comm = MakeLocalCommunicator();
  }
  InstallStopSignalHandlers();

  // 3. Telemetry.
  std::unique_ptr<WorkerMetrics> metrics;
  if (options.metrics_port >= 0) {
    metrics = std::make_unique<WorkerMetrics>(job.metadata.name, options.rank, options.metrics_port,
                                              options.metrics_bind);
    spdlog::info("metrics on port {} (/metrics, /healthz)", metrics->port());
  }
  StepLogWriter step_log(options.log_path);
  MemoryMonitor monitor(spec.resources.memory_bytes, MakeGpuMemorySource(device));
  DebugLeaks leaks(spec.debug.host_leak_bytes_per_step, spec.debug.gpu_leak_bytes_per_step, device);
  // The guard is built at the end of the first step, when the limits it guards are
  // measured (core/guard/memory_guard.h, MeasuredMemoryGuard). With memoryGuard.enabled
  // false it still forecasts, for the step log and /metrics, and never acts.
  std::optional<guard::MemoryGuard> guard;
  const guard::GuardHistory guard_history = guard::GuardHistory::FromEnvironment();  // throws when malformed

  // 4. The trainer: model, optimizer, generation cache, built once.
  std::unique_ptr<GrpoTrainer> trainer;
  try {
    trainer = std::make_unique<GrpoTrainer>(spec, *comm, device);
  } catch (const std::invalid_argument& e) {
    std::cerr << e.what() << "\n";
    return protocol::kExitInvalidSpec;
  }
  spdlog::info("job {}: {} {} digits, model {} ({} parameters) on {}, {} threads, host memory from {}",
               job.metadata.name, spec.task.name, spec.task.digits, ConfigFromSpec(spec).ToString(),
               trainer->shards().numel(), device.str(), torch::get_num_threads(), monitor.host_source());
  if (device.is_cpu()) {
    const BlasInfo blas = DetectBlas();
    if (blas.reference) {
      spdlog::warn("CPU matmuls run on {}: ~28x slower than an optimised BLAS; install one "
                   "(Debian: apt-get install libopenblas0-openmp)", blas.name);
    } else {
      spdlog::info("CPU matmuls run on {}", blas.name);
    }
  }
  {
    const ShardedBytes held = trainer->shards().ResidentBytes();
    spdlog::info("sharding: stage {} over {} rank{}{}; this rank holds {} parameter, {} gradient, {} optimizer bytes",
                 spec.sharding.stage, comm->world_size(), comm->world_size() == 1 ? "" : "s",
                 trainer->shards().per_layer() ? ", blocks gathered one at a time" : "", held.parameters,
                 held.gradients, held.optimizer);
  }

  // 5. Resume from `latest` when the checkpoint directory has one. Steps count finished
  // steps: a checkpoint of step N holds the state after N steps, and the run goes on
  // with step N + 1 (data is keyed by step, so the step is the whole data cursor).
  const std::string spec_hash = spec::RunDefinitionHash(spec);
  int64_t first_step = 0;
  std::optional<CheckpointWriter> writer;
  if (!options.checkpoint_dir.empty()) {
    auto reader = CheckpointReader::OpenLatest(options.checkpoint_dir);
    if (reader) {
      try {
        reader->RequireSpecHash(spec_hash);
      } catch (const CheckpointError& e) {
        std::cerr << e.what() << "\n";  // another run's checkpoint: retrying cannot help
        return protocol::kExitInvalidSpec;
      }
      RestoreTrainingState(*reader, *trainer);
      if (auto rng = reader->RngState(options.rank)) SetCpuRngState(*rng);
      first_step = reader->step();
      spdlog::info("resumed from {} (saved by {} ranks): continuing with step {}", reader->dir().string(),
                   reader->manifest().world_size, first_step + 1);
    }
    writer.emplace(options.checkpoint_dir, *comm, CheckpointWriterOptions{std::max(1, spec.checkpoint.keep), {}});
  }
  int64_t saved_step = first_step;  // the newest step on disk (0: none worth keeping)
  // Collective: every rank saves the same step.
  auto save = [&](int64_t done) -> std::optional<CheckpointSaveStats> {
    if (!writer || done == saved_step) return std::nullopt;
    CheckpointMetadata meta;
    meta.step = done;
    meta.spec_hash = spec_hash;
    meta.data_cursor = {{"next_step", done + 1}};
    meta.guard_history = GuardHistoryFromEnvironment();
    meta.extra = {{"world_size", comm->world_size()},
                  {"micro_batch_size", spec.grpo.micro_batch_size},
                  {"stage", spec.sharding.stage}};
    CheckpointSaveStats stats =
        writer->Save(meta, TrainingStateSlices(*trainer), CpuRngState());
    saved_step = done;
    spdlog::info("checkpoint step {}: {} bytes in {:.3f} s ({})", done, stats.total_bytes, stats.seconds,
                 stats.dir.string());
    return stats;
  };

  // 6. Steps. Every boundary: honour a stop request, then after the step ask the guard.
  const int64_t tokens_per_step = trainer->TokensPerStep();
  guard::Decision pending;  // this rank's guard decision after the last step
  int64_t host_limit_bytes = spec.resources.memory_bytes;  // as the last step read it
  for (int64_t step = first_step; step < spec.grpo.steps; ++step) {
    // Every boundary, every rank: one agreement, so all leave at the same step.
    const StopKind stop = AgreeOnStop(*comm, StopRequested(), pending.acts());
    if (stop != StopKind::kNone) save(step);  // every rank agreed on this boundary
    if (stop == StopKind::kGuard) {
      if (pending.acts()) {
        const std::string where = protocol::WriteTerminationMessage(pending.ToJson());
        spdlog::warn("memory guard: {} ({}){}", guard::DecisionActionName(pending.action), pending.reason,
                     where.empty() ? "" : "; decision written to " + where);
      } else {
        spdlog::warn("memory guard on another rank stopped the job at step boundary {}", step);
      }
      return protocol::kExitGuardStop;
    }
    if (stop == StopKind::kDrain) {
      spdlog::info("{} drained at step boundary {}",
                   StopRequested() ? "signal " + std::to_string(StopSignal()) + ":" : "another rank's stop request:",
                   step);
      return protocol::kExitDrained;
    }
    progress.step = step + 1;
    monitor.BeginStep();
    simulated_gpu_oom.BeforeStep(step + 1);
    const auto start = std::chrono::steady_clock::now();
    leaks.Step();
    const StepResult result = trainer->RunStep(step);
    // So the end-of-step reading is the level, not the peak: when what the step freed
    // matters against the limit (heap_trim.h).
    ReturnFreedHeapToSystem(HeapTrimThreshold(host_limit_bytes));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const StepMemoryReading mem = monitor.EndStep();
    host_limit_bytes = mem.host_limit_bytes;
    const bool last = step + 1 == spec.grpo.steps;
    protocol::StepRecord record = MakeRecord(result, mem, seconds, last ? 0 : tokens_per_step,
                                             comm->world_size(), options.rank, spec.grpo.micro_batch_size);
    if (!guard) {
      guard = guard::MeasuredMemoryGuard(spec, comm->world_size(), guard_history,
                                         mem.host_limit_bytes, mem.gpu.total_bytes, mem.gpu.present);
    }
    // What `headroom replay` computes from this record: the same object, fed the same way.
    const guard::Decision decision = guard->AfterStep(record.ToStepMemory(), record.next_step_tokens);
    record.guard_action = guard::DecisionActionName(decision.action);
    record.SetForecast(guard->last_forecast());
    const int64_t done = step + 1;
    const int every = spec.checkpoint.every_steps;
    if ((every > 0 && done % every == 0) || done == spec.grpo.steps) {
      if (auto saved = save(done)) {
        record.checkpoint_bytes = static_cast<int64_t>(saved->total_bytes);
        record.checkpoint_seconds = saved->seconds;
      }
    }
    step_log.Write(record);
    if (metrics) metrics->Publish(record);
    pending = decision;  // acted on at the next boundary, with every rank (none after the last step)
  }
  spdlog::info("finished {} steps", spec.grpo.steps);
  return protocol::kExitFinished;
}

}  // namespace

std::optional<std::string> ReadRendezvousEnvironment(WorkerOptions& options) {
  if (auto e = ReadIntEnv(protocol::kRankEnv, 0, options.rank)) return e;
  if (auto e = ReadIntEnv(protocol::kWorldSizeEnv, 1, options.world_size)) return e;
  if (auto e = ReadIntEnv(protocol::kMasterPortEnv, 0, options.master_port)) return e;
  if (const char* v = std::getenv(protocol::kMasterAddrEnv)) options.master_addr = v;
  if (options.rank >= options.world_size) {
    return "RANK: " + std::to_string(options.rank) + " must be below WORLD_SIZE " + std::to_string(options.world_size);
  }
  return std::nullopt;
}

namespace {

std::string FirstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

// The worker's error: one line on stderr (a supervisor shows it) and in the termination
// message, never a LibTorch stack trace.
int ExitWithError(const std::string& what) {
  const std::string line = FirstLine(what).substr(0, 1000);
  spdlog::error("{}", line);
  protocol::WriteTerminationMessage(line);
  return protocol::kExitFailure;
}

// A CUDA out-of-memory: the allocator's numbers in the termination message, exit 77.
// The failed step's tensors are freed by the time this runs, so `allocated` is the
// step's allocated peak (where it stood when the request failed); reserved memory stays
// cached, so `reserved` is read as is.
int ExitOutOfGpuMemory(const std::string& what, const RunProgress& progress) {
  protocol::GpuOomReport report;
  report.device = progress.device.str();
  report.step = progress.step;
  report.message = FirstLine(what).substr(0, 1000);
  report.requested_bytes = protocol::RequestedBytesFromOomMessage(what);
  try {
    const memory::GpuMemorySample gpu = MakeGpuMemorySource(progress.device)->Read();
    report.allocated_bytes = std::max(gpu.allocated_bytes, gpu.allocated_peak_bytes);
    report.reserved_bytes = gpu.reserved_bytes;
    report.total_bytes = gpu.total_bytes;
  } catch (const std::exception& e) {
    spdlog::warn("cannot read the GPU allocator after the out-of-memory error: {}", e.what());
  }
  spdlog::error("{}", report.Describe());
  spdlog::error("{}", report.message);
  const std::string where = protocol::WriteTerminationMessage(report.ToJson());
  if (!where.empty()) spdlog::info("GPU out-of-memory report written to {}", where);
  return protocol::kExitGpuOom;
}

// LibTorch builds whose allocator throws a plain c10::Error for an out-of-memory.
bool IsCudaOutOfMemory(const std::string& what) { return what.find("CUDA out of memory") != std::string::npos; }

}  // namespace

int RunWorker(const WorkerOptions& options) {
  LogToStderr();
  RunProgress progress;
  try {
    return Run(options, progress);
  } catch (const c10::OutOfMemoryError& e) {
    return ExitOutOfGpuMemory(e.what_without_backtrace(), progress);
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    if (IsCudaOutOfMemory(what)) return ExitOutOfGpuMemory(what, progress);
    return ExitWithError(what);
  } catch (const std::exception& e) {
    return ExitWithError(e.what());
  }
}

}  // namespace headroom::worker
