#include <spdlog/spdlog.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "worker/train/run_worker.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <utility>
#include <vector>

#include "core/guard/decision.h"
#include "core/hf/hub_fetch.h"
#include "core/memory/micro_batch_tokens.h"
#include "core/guard/memory_guard.h"
#include "core/guard/planner.h"
#include "core/guard/step_record_memory.h"
#include "core/protocol/environment.h"
#include "core/protocol/exit_codes.h"
#include "core/protocol/termination_message.h"
#include "core/spec/training_job.h"
#include "worker/comm/communicator.h"
#include "worker/comm/communicator_factory.h"
#include "worker/model/model_source.h"
#include "worker/telemetry/debug_leaks.h"
#include "worker/telemetry/blas_info.h"
#include "worker/telemetry/gpu_memory_source.h"
#include "worker/telemetry/model_fetch_report.h"
#include "worker/train/checkpointer.h"
#include "worker/train/final_export.h"
#include "worker/train/grpo_trainer.h"
#include "worker/train/step_report.h"
#include "worker/train/step_telemetry.h"
#include "worker/train/stop_agreement.h"
#include "worker/train/stop_request.h"

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

// A rank's device is cuda:LOCAL_RANK (torchrun's contract; a pod's launcher sets it per
// rank), else its rank modulo the devices this process sees.
torch::Device PickDevice(const spec::TrainingJobSpec& spec, int rank) {
  if (spec.resources.gpus > 0) {
    if (torch::cuda::is_available()) {
      const int devices = std::max<int>(1, torch::cuda::device_count());
      const char* local = std::getenv(protocol::kLocalRankEnv);
      const int index = local && *local ? std::atoi(local) : rank;
      return torch::Device(torch::kCUDA, index % devices);
    }
    spdlog::warn("spec.resources.gpus is {} but this LibTorch sees no CUDA device: running on CPU",
                 spec.resources.gpus);
  }
  return torch::Device(torch::kCPU);
}

// The memory guard as this worker runs it: core's MemoryGuard, built after the first
// step from the limits measured there (MeasuredMemoryGuard, as `headroom replay` builds
// it from a trace). With memoryGuard.enabled false it still forecasts, for the step log
// and /metrics, and never acts.
class WorkerGuard {
 public:
  WorkerGuard(const spec::TrainingJobSpec& spec, int world_size, guard::ModelShape model)
      : spec_(spec),
        world_size_(world_size),
        model_(std::move(model)),
        history_(guard::GuardHistory::FromEnvironment()) {}

  // Judges the step `memory` describes (the memory part of its record, as `headroom
  // replay` reads it back) before a step of `next_step_tokens`.
  GuardVerdict AfterStep(const guard::StepMemory& memory, int64_t next_step_tokens) {
    if (!guard_) {
      guard_ = guard::MeasuredMemoryGuard(spec_, world_size_, history_, memory.host_limit_bytes, memory.gpu_limit_bytes,
                                          memory.gpu_limit_bytes > 0, model_);
    }
    // What `headroom replay` computes from the logged record: the same object, fed the same way.
    GuardVerdict verdict;
    verdict.decision = guard_->AfterStep(memory, next_step_tokens);
    verdict.forecast = guard_->last_forecast();
    return verdict;
  }

  const guard::ModelShape& model() const { return model_; }

 private:
  const spec::TrainingJobSpec& spec_;
  int world_size_;
  guard::ModelShape model_;      // the source's: the model is not read again to plan it
  guard::GuardHistory history_;  // read at start: a malformed one fails the worker at once
  std::optional<guard::MemoryGuard> guard_;
};

// How the worker leaves at a step boundary every rank agreed to stop at (the checkpoint
// of that boundary is written).
int ExitAtBoundary(StopKind stop, const guard::Decision& pending, int64_t step) {
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
  spdlog::info("{} drained at step boundary {}",
               StopRequested() ? "signal " + std::to_string(StopSignal()) + ":" : "another rank's stop request:", step);
  return protocol::kExitDrained;
}

// Several ranks: Gloo over TCP for CPU tensors, NCCL for CUDA ones; timeouts from the
// environment (communicator_factory.h), so a dead peer ends this rank instead of hanging
// it.
std::unique_ptr<Communicator> Connect(const WorkerOptions& options, const torch::Device& device) {
  if (options.world_size == 1) return MakeLocalCommunicator();
  CommunicatorOptions copts = CommunicatorOptionsFromEnv(device.is_cuda() ? "nccl" : "gloo");
  copts.rank = options.rank;
  copts.world_size = options.world_size;
  if (!options.master_addr.empty()) copts.master_addr = options.master_addr;
  if (options.master_port > 0) copts.master_port = options.master_port;
  if (device.is_cuda()) copts.local_rank = device.index();
  std::unique_ptr<Communicator> comm = MakeCommunicator(copts);
  spdlog::info("rank {} of {} connected ({})", comm->rank(), comm->world_size(), comm->backend());
  return comm;
}

StepTelemetryOptions TelemetryOptions(const WorkerOptions& options, const spec::TrainingJob& job, int world_size) {
  StepTelemetryOptions t;
  t.job_name = job.metadata.name;
  t.rank = options.rank;
  t.world_size = world_size;
  t.micro_batch_size = job.spec.grpo.micro_batch_size;
  t.host_limit_bytes = job.spec.resources.memory_bytes;
  t.log_path = options.log_path;
  t.metrics_port = options.metrics_port;
  t.metrics_bind = options.metrics_bind;
  return t;
}

// What this rank runs, on what, holding how much: the first lines to read in a log.
void LogSetup(const spec::TrainingJob& job, GrpoTrainer& trainer, const torch::Device& device, int world_size,
              const char* host_source) {
  const spec::TrainingJobSpec& spec = job.spec;
  const std::string task = spec.task.is_text() ? "text task " + spec.task.dataset.path
                                               : spec.task.name + " " + std::to_string(spec.task.digits) + " digits";
  spdlog::info("job {}: {}, model {} ({} parameters) on {}, {} threads, host memory from {}", job.metadata.name, task,
               trainer.model()->Describe(), trainer.shards().numel(), device.str(), torch::get_num_threads(),
               host_source);
  if (device.is_cpu()) {
    const BlasInfo blas = DetectBlas();
    if (blas.reference) {
      spdlog::warn("CPU matmuls run on {}: ~28x slower than an optimised BLAS; install one "
                   "(Debian: apt-get install libopenblas0-openmp)",
                   blas.name);
    } else {
      spdlog::info("CPU matmuls run on {}", blas.name);
    }
  }
  const ShardedBytes held = trainer.shards().ResidentBytes();
  spdlog::info("sharding: stage {} over {} rank{}{}; this rank holds {} parameter, {} gradient, {} optimizer bytes{}",
               spec.sharding.stage, world_size, world_size == 1 ? "" : "s",
               trainer.shards().per_layer() ? ", blocks gathered one at a time" : "", held.parameters, held.gradients,
               held.optimizer, held.frozen > 0 ? fmt::format(", {} bytes of the frozen base", held.frozen) : "");
}

// An input this worker refuses (exit 2): the reason, whole, on stderr and in the
// termination message, where both supervisors read it (core/protocol/termination_message.h).
int Refuse(const std::string& reason) {
  std::cerr << reason << "\n";
  protocol::WriteTerminationMessage(protocol::WorkerErrorMessage(reason));
  return protocol::kExitInvalidSpec;
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
                                          std::string(protocol::kSimulateGpuOomAtStepEnv) + "=" + std::to_string(step) +
                                          ")");
  }

 private:
  int64_t step_ = -1;
  std::filesystem::path marker_;
};

// What the step loop runs with, built once by Run().
struct StepLoop {
  const spec::TrainingJobSpec& spec;
  int rank;
  Communicator& comm;
  GrpoTrainer& trainer;
  StepTelemetry& telemetry;
  DebugLeaks& leaks;
  WorkerGuard& guard;
  Checkpointer& checkpointer;
  const SimulatedGpuOom& simulated_gpu_oom;
  RunProgress& progress;
};

// Held-out problems are scored when a checkpoint is due (and after the last step): a
// number beside each saved model, at the cost of one greedy pass. Collective.
std::optional<HeldOutScore> EvaluateHeldOutIfDue(StepLoop& loop, int64_t done) {
  if (!loop.trainer.has_held_out() || !loop.checkpointer.ShouldSave(done)) return std::nullopt;
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<HeldOutScore> held = loop.trainer.EvaluateHeldOut();
  if (held && loop.rank == 0) {
    spdlog::info("step {}: held-out reward {:.4f} ({:.1f}% exact) over {} problems, {:.2f} s", done, held->reward_mean,
                 100.0 * held->exact_fraction, held->problems,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return held;
}

// The starting model's score: measured before a fresh run's first step (and kept in its
// checkpoints), read from the checkpoint by a resumed run, so every run's first record
// says where the job began. Collective.
std::optional<HeldOutScore> EvaluateHeldOutBefore(StepLoop& loop, int64_t first_step) {
  if (!loop.trainer.has_held_out()) return std::nullopt;
  if (first_step != 0) return loop.checkpointer.starting_held_out();
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<HeldOutScore> held = loop.trainer.EvaluateHeldOut();
  if (held && loop.rank == 0) {
    spdlog::info("before step 1: held-out accuracy {:.1f}% (reward {:.4f}) over {} problems, {:.2f} s",
                 100.0 * held->exact_fraction, held->reward_mean, held->problems,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (held) loop.checkpointer.RememberStartingHeldOut(*held);
  return held;
}

// The largest micro-batch step `step`'s update runs on this rank, from its prompts'
// lengths, before it runs (core/memory/micro_batch_tokens.h), in full-length-token
// equivalents at the planner's per-token activation cost: what the guard forecasts the
// step's activations with, so a batch with a long prompt is known the step before it, at
// what its attention weighs (a token budget keeps it at the budget's micro-batches).
int64_t MicroBatchTokensOfStep(const GrpoTrainer& trainer, const guard::ModelShape& model, int64_t step) {
  const spec::GrpoSpec& g = trainer.spec().grpo;
  std::vector<int64_t> prompts;
  for (int64_t i = 0; i < trainer.local_prompts(); ++i) {
    prompts.push_back(static_cast<int64_t>(
        trainer.task().Make(static_cast<uint64_t>(trainer.GlobalPrompt(step, i))).prompt_tokens.size()));
  }
  const bool recomputed = g.activation_checkpointing || trainer.spec().sharding.stage >= 3;
  const memory::TokenCost cost = [&model, recomputed, response = int64_t{g.max_response_length}](int64_t length) {
    return guard::ActivationElementsPerToken(model, length, response, recomputed);
  };
  return memory::LargestMicroBatchTokens(prompts, g.group_size, g.max_response_length, g.micro_batch_size,
                                         g.max_tokens_per_micro_batch, g.updates_per_step, cost,
                                         int64_t{g.max_prompt_length} + g.max_response_length);
}

// Step `step` (0-based), phase by phase; each phase's value goes into the report the
// step's record is assembled from.
StepReport RunOneStep(StepLoop& loop, int64_t step) {
  const int64_t done = step + 1;
  loop.progress.step = done;
  loop.simulated_gpu_oom.BeforeStep(done);
  loop.telemetry.BeginStep();
  loop.leaks.Step(done);
  StepReport report;
  report.micro_batch_tokens = MicroBatchTokensOfStep(loop.trainer, loop.guard.model(), step);
  report.training = loop.trainer.RunStep(step);
  report.measured = loop.telemetry.EndStep();
  report.next_step_tokens =
      done < loop.spec.grpo.steps ? MicroBatchTokensOfStep(loop.trainer, loop.guard.model(), done) : 0;
  report.dataset = loop.trainer.DatasetAfter(done);
  report.held_out = EvaluateHeldOutIfDue(loop, done);
  report.guard = loop.guard.AfterStep(guard::StepMemoryOf(AssembleStepRecord(report)), report.next_step_tokens);
  report.checkpoint = loop.checkpointer.AfterStep(done);
  return report;
}

// The steps from `first_step` on. At every boundary the ranks agree whether to stop (a
// signal, or any rank's guard); a stop saves that boundary and returns the exit code.
// Returns nullopt when every step ran.
std::optional<int> RunSteps(StepLoop& loop, int64_t first_step) {
  guard::Decision pending;  // this rank's guard decision after the last step
  std::optional<HeldOutScore> before = EvaluateHeldOutBefore(loop, first_step);
  for (int64_t step = first_step; step < loop.spec.grpo.steps; ++step) {
    const StopKind stop = AgreeOnStop(loop.comm, StopRequested(), pending.acts());
    if (stop != StopKind::kNone) {
      loop.checkpointer.Save(step);  // every rank agreed on this boundary
      return ExitAtBoundary(stop, pending, step);
    }
    StepReport report = RunOneStep(loop, step);
    report.held_out_before = std::exchange(before, std::nullopt);  // on the first record only
    pending = report.guard->decision;                              // acted on at the next boundary, with every rank
    loop.telemetry.Publish(AssembleStepRecord(report));
    if (step == first_step) protocol::WriteTerminationMessage("");  // past the "loaded" phase
  }
  return std::nullopt;
}

// The hub model's snapshot directory, fetched into the Hugging Face cache unless it is
// complete there; every rank calls this and one downloads while the others wait (see
// core/hf/hub_fetch.h). Progress goes where the supervisors look
// (worker/telemetry/model_fetch_report.h).
std::string FetchHubModel(const spec::TrainingJob& job, const WorkerOptions& options) {
  const spec::HubModelSpec& hub = job.spec.model.hub;
  ModelFetchReport report({job.metadata.name, options.rank, options.log_path, options.metrics_port,
                           options.metrics_bind, hub.repo, hub.revision});
  return hf::ResolveHubModel(hub.repo, hub.revision, hub.endpoint, [&](const hf::HubFetchProgress& p) {
    report.Progress(p.file, p.done_bytes, p.total_bytes);
  });
}

// The model, resolved once into `model` (model_source.h), and the trainer built on it:
// model, optimizer, generation cache, built once. nullptr after printing why when the spec
// cannot be run (the worker exits 2).
std::unique_ptr<GrpoTrainer> BuildTrainer(const spec::TrainingJobSpec& spec, std::optional<ModelSource>& model,
                                          Communicator& comm, const torch::Device& device) {
  try {
    model.emplace(spec);
    return std::make_unique<GrpoTrainer>(spec, *model, comm, device);
  } catch (const std::invalid_argument& e) {
    Refuse(e.what());
    return nullptr;
  }
}

int Run(const WorkerOptions& options, RunProgress& progress) {
  // 1. The job.
  // config.json is left to the model source, which reads it once (ValidateOptions).
  const auto parsed = spec::ParseTrainingJobFile(options.job_path, {.read_model_config = false});
  if (!parsed.ok()) {
    std::string all;
    for (const auto& e : parsed.errors) all += (all.empty() ? "" : "\n") + e.ToString();
    return Refuse(all);
  }
  spec::TrainingJob job = *parsed.job;
  if (!job.spec.model.hub.repo.empty()) {
    // A hub model becomes its snapshot directory here, once; everything after reads model.path.
    try {
      job.spec.model.path = FetchHubModel(job, options);
    } catch (const hf::HubUnavailableError&) {
      throw;  // the hub's trouble, not the spec's: exit 1, and a restart tries again
    } catch (const hf::HubFetchError& e) {
      return Refuse(std::string("spec.model.hub: ") + e.what());
    }
  }
  const spec::TrainingJobSpec& spec = job.spec;
  if (options.rank < 0 || options.rank >= options.world_size) {
    spdlog::error("RANK={} outside WORLD_SIZE={}", options.rank, options.world_size);
    return protocol::kExitFailure;
  }

  // 2. Process resources: threads from the CPU request (more would only contend for the
  // cores the pod may use), the device, the other ranks.
  torch::set_num_threads(std::max<int64_t>(1, spec.resources.cpu_millis / 1000));
  const torch::Device device = PickDevice(spec, options.rank);
  progress.device = device;
  const SimulatedGpuOom simulated_gpu_oom(options);
  std::unique_ptr<Communicator> comm = Connect(options, device);
  InstallStopSignalHandlers();

  // 3. Telemetry, the drills' leaks.
  StepTelemetry telemetry(TelemetryOptions(options, job, comm->world_size()), device);
  DebugLeaks leaks(spec.debug.host_leak_bytes_per_step, spec.debug.gpu_leak_bytes_per_step, device,
                   spec.debug.host_leak_decay, spec.debug.host_jump_at_step, spec.debug.host_jump_bytes);

  // 4. The model, resolved once, and the trainer on it; the guard plans the same model.
  std::optional<ModelSource> model;
  const std::unique_ptr<GrpoTrainer> trainer = BuildTrainer(spec, model, *comm, device);
  if (!trainer) return protocol::kExitInvalidSpec;
  WorkerGuard guard(spec, comm->world_size(), model->plan_shape());
  LogSetup(job, *trainer, device, comm->world_size(), telemetry.host_source());

  // 5. Resume from the checkpoint directory's `latest` when it has one.
  Checkpointer checkpointer(options.checkpoint_dir, spec, *comm, options.rank, *trainer);
  int64_t first_step = 0;
  try {
    first_step = checkpointer.Resume();
  } catch (const CheckpointUnusable& e) {
    return Refuse(e.what());  // another run's checkpoint, or none intact: retrying cannot help
  }
  // Loaded: an out-of-memory kill from here on is a step's, not the inputs'.
  protocol::WriteTerminationMessage(protocol::LoadedPhaseMessage(first_step + 1));

  // 6. Steps.
  StepLoop loop{spec,  options.rank, *comm,        *trainer,          telemetry,
                leaks, guard,        checkpointer, simulated_gpu_oom, progress};
  try {
    if (const std::optional<int> stopped = RunSteps(loop, first_step)) return *stopped;
  } catch (const CheckpointStorageRefused& e) {
    return Refuse(e.what());  // the storage refused a save twice: a restart would retrain for nothing
  }
  spdlog::info("finished {} steps", spec.grpo.steps);
  // After the final checkpoint (a resume at the last step lands here too, so a restart
  // after a failed export retries it).
  ExportFinishedModel(options.checkpoint_dir, *model, *comm, spec.grpo.steps);
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

// The worker's error, whole (what_without_backtrace: never a LibTorch stack trace), on
// stderr and in the termination message, where a supervisor reads it.
int ExitWithError(const std::string& what) {
  spdlog::error("{}", what);
  protocol::WriteTerminationMessage(protocol::WorkerErrorMessage(what));
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
