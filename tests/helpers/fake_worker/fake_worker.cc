// headroom-fake-worker: a test double with headroom-worker's outside contract
// (docs/design.md, Worker) and none of its training, so the local runtime's tests run in
// seconds and can make a worker leak, crash or stop for the guard on demand.
//
//   headroom-fake-worker --job JOB.yaml [--checkpoint-dir DIR] [--metrics-port N] [--log FILE]
//   headroom-fake-worker launch ... -- ARGS   (a pod's ranks, as headroom-worker launch)
//   env: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, HEADROOM_TERMINATION_LOG,
//        HEADROOM_MEMORY_LIMIT_BYTES (soft limit when no cgroup limit is visible),
//        HEADROOM_SIMULATE_GPU_OOM_AT_STEP (core/protocol/environment.h)
//
// What it does, like the real worker:
//   - resumes from DIR/latest ("step-000012" names DIR/step-000012/; read by
//     checkpoint::FindLatestStep, as the real worker's reader does); writes a checkpoint
//     every spec.checkpoint.everySteps, at a guard stop, at a drain and at the end (rank 0
//     writes it; the directory first, `latest` last by atomic rename);
//   - one JSON step-log line per step (step, reward_mean, loss, kl, host_* from the real
//     cgroup or /proc, tokens, step_seconds, ...);
//   - --metrics-port: /metrics with the step and host memory gauges (docs/design.md names,
//     labelled {job, rank}) and /healthz, as the operator scrapes them;
//   - spec.debug.hostLeakBytesPerStep really allocates and touches that much per step;
//   - with spec.memoryGuard.enabled, stops before the limit: when end-of-step memory plus
//     horizonSteps more steps of measured growth would cross hostThreshold * limit, it
//     checkpoints, writes a restart decision as JSON to the termination log and exits 76;
//   - SIGTERM/SIGINT: checkpoint at the next step boundary, exit 75;
//   - HEADROOM_SIMULATE_GPU_OOM_AT_STEP=N: a CUDA out-of-memory in step N, as the real
//     worker reports one: the GpuOomReport JSON in the termination log, exit 77 (once per
//     FAKE_ONCE_DIR marker);
//   - exit 0 after spec.grpo.steps; 2 for a spec it cannot parse.
// Test knobs (environment):
//   FAKE_STEP_SECONDS        sleep per step (default 0.02)
//   FAKE_LOAD_SECONDS        sleep before the stop handler is installed (a worker loading)
//   FAKE_REFUSE=TEXT         refuse to start as the worker refuses a bad input: TEXT on
//                            stderr among other lines, no termination message, exit 2;
//                            with FAKE_REFUSE_STATED=1 also TEXT as the worker states it
//                            (protocol::WorkerErrorMessage) in the termination message
//   FAKE_DAMAGED_STEP=N      the checkpoint of step N fails its checks on resume: set
//                            aside as step-N.corrupt, resumed from the one before
//   FAKE_CRASH_AT_STEP=N     exit 1 (FAKE_CRASH_SIGNAL=9: raise SIGKILL) instead of
//                            finishing step N, once per FAKE_ONCE_DIR marker
//   FAKE_CRASH_RANK=R        only rank R crashes (default 0)
//   FAKE_GUARD_AT_STEP=N     after step N, stop for the guard with FAKE_GUARD_DECISION
//                            (JSON; its "step" is set to N), once per FAKE_ONCE_DIR marker
//   FAKE_ONCE_DIR            where the "already happened" markers go (default the checkpoint dir)
//   FAKE_BASE_BYTES          bytes allocated and touched at start (a baseline)
//   FAKE_ECHO_ENV=NAME       each step line carries "env_echo": NAME's value ("" unset)
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "core/checkpoint/checkpoint_layout.h"
#include "core/launch/pod_launcher.h"
#include "core/memory/host_memory.h"
#include "core/metrics/metrics_http_server.h"
#include "core/metrics/names.h"
#include "core/protocol/environment.h"
#include "core/protocol/exit_codes.h"
#include "core/protocol/step_record.h"
#include "core/protocol/stop_signals.h"
#include "core/protocol/termination_message.h"
#include "core/spec/training_job.h"

namespace {

volatile sig_atomic_t g_stop_requested = 0;
void OnStopSignal(int) { g_stop_requested = 1; }

std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}
long long EnvInt(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

// Where the real worker resumes from: the step checkpoint::FindLatestStep finds (a missing
// `latest` falls back to the newest complete step). FAKE_DAMAGED_STEP=N: step N fails
// its checks as the real worker would find, and is set aside for the step before it.
int ResumeStep(const std::string& dir) {
  if (dir.empty()) return 0;
  std::optional<headroom::checkpoint::LatestStep> latest = headroom::checkpoint::FindLatestStep(dir);
  const long long damaged = std::atoll(Env("FAKE_DAMAGED_STEP", "-1").c_str());
  if (latest && latest->step == damaged) {
    headroom::checkpoint::SetAsideCorruptStep(dir, damaged);
    std::cerr << "fake-worker: step " << damaged << " fails its checks; set aside\n";
    latest = headroom::checkpoint::FindLatestStep(dir);
    if (latest) headroom::checkpoint::WriteLatest(dir, latest->step);
  }
  return latest ? static_cast<int>(latest->step) : 0;
}

void WriteCheckpoint(const std::string& dir, int step, int world_size) {
  if (dir.empty()) return;
  char name[32];
  std::snprintf(name, sizeof name, "step-%06d", step);
  const std::string step_dir = dir + "/" + name;
  mkdir(dir.c_str(), 0755);
  mkdir(step_dir.c_str(), 0755);
  {
    std::ofstream m(step_dir + "/manifest.json");
    m << nlohmann::json{{"step", step}, {"world_size", world_size}}.dump() << "\n";
  }
  const std::string tmp = dir + "/latest.tmp";
  {
    std::ofstream l(tmp);
    l << name << "\n";
  }
  std::rename(tmp.c_str(), (dir + "/latest").c_str());
}

// Happens once per marker: true the first time, false ever after.
bool FirstTime(const std::string& once_dir, const std::string& what) {
  if (once_dir.empty()) return true;
  mkdir(once_dir.c_str(), 0755);
  const std::string path = once_dir + "/fake-once-" + what;
  int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
  if (fd < 0) return false;
  close(fd);
  return true;
}

void WriteTermination(const std::string& text) { headroom::protocol::WriteTerminationMessage(text); }

}  // namespace

int main(int argc, char** argv) {
  // A pod of several ranks, as headroom-worker runs one (core/launch/pod_launcher.h).
  if (argc > 1 && std::string(argv[1]) == "launch") return headroom::launch::RunLaunchCommand(argc - 1, argv + 1);
  // As the real worker's libraries take to load: a stop sent meanwhile is held (the
  // supervisor starts us with the stop signals blocked) until the handler below.
  if (const double load = std::atof(Env("FAKE_LOAD_SECONDS", "0").c_str()); load > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(load));
  }
  // A supervisor may send SIGTERM as soon as the process exists (the pod reports Running
  // at exec), and the default action would kill us without a drain.
  headroom::protocol::HandleStopSignals(OnStopSignal);
  std::string job_path, checkpoint_dir, log_path, metrics_port;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) {
        std::cerr << "fake-worker: " << a << " needs a value\n";
        std::exit(2);
      }
      out = argv[++i];
    };
    if (a == "--job") value(job_path);
    else if (a == "--checkpoint-dir") value(checkpoint_dir);
    else if (a == "--log") value(log_path);
    else if (a == "--metrics-port") value(metrics_port);
    else {
      std::cerr << "fake-worker: unknown argument " << a << "\n";
      return 2;
    }
  }
  headroom::spec::ParseResult parsed = headroom::spec::ParseTrainingJobFile(job_path);
  if (!parsed.ok()) {
    std::string all;
    for (const auto& e : parsed.errors) all += e.ToString() + "\n";
    std::cerr << all;
    WriteTermination(all);
    return headroom::protocol::kExitInvalidSpec;
  }
  namespace protocol = headroom::protocol;
  const headroom::spec::TrainingJobSpec& spec = parsed.job->spec;
  const int rank = static_cast<int>(EnvInt(protocol::kRankEnv, 0));
  const int world = static_cast<int>(EnvInt(protocol::kWorldSizeEnv, 1));
  if (world != spec.workers) {
    std::cerr << "fake-worker: WORLD_SIZE " << world << " != spec.workers " << spec.workers << "\n";
    return 2;
  }
  namespace names = headroom::metrics;
  auto registry = std::make_shared<prometheus::Registry>();
  const prometheus::Labels labels{{names::kLabelJob, parsed.job->metadata.name},
                                  {names::kLabelRank, std::to_string(rank)}};
  auto gauge = [&](const char* name) -> prometheus::Gauge& {
    return prometheus::BuildGauge().Name(name).Help(name).Register(*registry).Add(labels);
  };
  prometheus::Gauge& step_gauge = gauge(names::kWorkerStep);
  prometheus::Gauge& host_gauge = gauge(names::kWorkerHostMemoryBytes);
  prometheus::Gauge& limit_gauge = gauge(names::kWorkerHostMemoryLimitBytes);
  std::unique_ptr<headroom::metrics::MetricsHttpServer> server;
  if (!metrics_port.empty()) {
    server = std::make_unique<headroom::metrics::MetricsHttpServer>("127.0.0.1", std::atoi(metrics_port.c_str()));
    server->HandleCollectable("/metrics", registry);
    server->Handle("/healthz", [] { return headroom::metrics::HttpResponse{200, "text/plain", "ok\n"}; });
    try {
      server->Start();
    } catch (const std::exception& e) {
      std::cerr << "fake-worker: --metrics-port: " << e.what() << "\n";
      return 1;
    }
  }
  std::unique_ptr<std::ostream> log_file;
  if (!log_path.empty()) log_file = std::make_unique<std::ofstream>(log_path, std::ios::app);
  std::ostream& log = log_file ? *log_file : std::cout;

  // As the real worker refuses a model or dataset it cannot use: the reason on stderr after
  // some log lines, no termination message, exit 2.
  if (const std::string refusal = Env("FAKE_REFUSE", ""); !refusal.empty()) {
    std::cerr << "[info] loading the model\n" << refusal << "\n[W init.cpp:1] Warning: noise after the reason\n";
    if (Env("FAKE_REFUSE_STATED", "") == "1") WriteTermination(headroom::protocol::WorkerErrorMessage(refusal));
    return headroom::protocol::kExitInvalidSpec;
  }
  const double step_seconds = std::atof(Env("FAKE_STEP_SECONDS", "0.02").c_str());
  const std::string once_dir = Env("FAKE_ONCE_DIR", checkpoint_dir);
  const long long crash_at = EnvInt("FAKE_CRASH_AT_STEP", -1);
  const long long crash_rank = EnvInt("FAKE_CRASH_RANK", 0);
  const long long guard_at = EnvInt("FAKE_GUARD_AT_STEP", -1);
  const long long gpu_oom_at = EnvInt(protocol::kSimulateGpuOomAtStepEnv, -1);

  std::vector<std::unique_ptr<char[]>> held;  // the leak and the baseline, touched
  auto hold = [&](long long bytes) {
    if (bytes <= 0) return;
    held.emplace_back(new char[bytes]);
    std::memset(held.back().get(), 1, bytes);
  };
  hold(EnvInt("FAKE_BASE_BYTES", 0));

  headroom::memory::HostMemoryProbe probe;
  const long long soft_limit = EnvInt(protocol::kMemoryLimitEnv, 0);
  int64_t previous_bytes = -1;
  double growth = 0;

  int step = ResumeStep(checkpoint_dir);
  auto checkpoint = [&] {
    if (rank == 0) WriteCheckpoint(checkpoint_dir, step, world);
  };
  while (step < spec.grpo.steps) {
    if (g_stop_requested) {
      checkpoint();
      return protocol::kExitDrained;
    }
    const int next = step + 1;
    auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(step_seconds));
    hold(spec.debug.host_leak_bytes_per_step);
    if (next == crash_at && rank == crash_rank && FirstTime(once_dir, "crash")) {
      if (EnvInt("FAKE_CRASH_SIGNAL", 0) == 9) raise(SIGKILL);
      std::cerr << "fake-worker: crashing on demand at step " << next << "\n";
      WriteTermination("crashed on demand at step " + std::to_string(next));
      return protocol::kExitFailure;
    }
    if (next == gpu_oom_at && FirstTime(once_dir, "gpu-oom")) {
      protocol::GpuOomReport oom;
      oom.device = "cuda:" + std::to_string(rank);
      oom.step = next;
      oom.allocated_bytes = 70LL << 30;
      oom.reserved_bytes = 74LL << 30;
      oom.requested_bytes = 2LL << 30;
      oom.total_bytes = 80LL << 30;
      oom.message = "CUDA out of memory. Tried to allocate 2.00 GiB (simulated)";
      WriteTermination(oom.ToJson());
      return protocol::kExitGpuOom;
    }
    step = next;
    headroom::memory::HostMemorySample m = probe.Read();
    int64_t limit = m.limit_bytes;
    if (m.source == "proc" && soft_limit > 0) limit = soft_limit;
    if (previous_bytes >= 0) growth = static_cast<double>(m.working_set_bytes - previous_bytes);
    previous_bytes = m.working_set_bytes;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int64_t tokens = int64_t{spec.grpo.prompts_per_step} * spec.grpo.group_size *
                           (spec.grpo.max_prompt_length + spec.grpo.max_response_length) / world;
    protocol::StepRecord record;
    record.step = step;
    record.reward_mean = 1.0 - std::exp(-step / 10.0);
    record.loss = 1.0 / step;
    record.host_bytes = m.working_set_bytes;
    record.host_peak_bytes = std::max(m.peak_bytes, m.working_set_bytes);
    record.host_limit_bytes = limit;
    record.tokens = tokens;
    record.next_step_tokens = tokens;
    record.step_seconds = secs;
    record.tokens_per_second = secs > 0 ? tokens / secs : 0;
    record.world_size = world;
    record.rank = rank;
    record.micro_batch_size = spec.grpo.micro_batch_size;
    record.host_growth_bytes_per_step = growth;
    // What the tests check it was launched with.
    nlohmann::json line = nlohmann::json::parse(record.ToJson());
    line["env_rank"] = rank;
    line["env_master_addr"] = Env(protocol::kMasterAddrEnv);
    line["env_master_port"] = EnvInt(protocol::kMasterPortEnv, 0);
    line["env_memory_limit"] = soft_limit;
    if (const std::string echo = Env("FAKE_ECHO_ENV", ""); !echo.empty()) line["env_echo"] = Env(echo.c_str(), "");
    log << line.dump() << std::endl;
    step_gauge.Set(step);
    host_gauge.Set(static_cast<double>(m.working_set_bytes));
    limit_gauge.Set(static_cast<double>(limit));

    if (step == guard_at && FirstTime(once_dir, "guard")) {
      nlohmann::json d = nlohmann::json::parse(Env("FAKE_GUARD_DECISION", R"({"action":"restart"})"));
      d["step"] = step;
      checkpoint();
      WriteTermination(d.dump());
      return protocol::kExitGuardStop;
    }
    const double threshold = spec.memory_guard.host_threshold * static_cast<double>(limit);
    if (spec.memory_guard.enabled && limit > 0 && growth > 0 && step < spec.grpo.steps &&
        m.working_set_bytes + growth * spec.memory_guard.horizon_steps >= threshold) {
      nlohmann::json d = {
          {"action", "restart"},
          {"resource", "host"},
          {"reason", "fake guard: host " + std::to_string(m.working_set_bytes >> 20) + " MiB growing " +
                         std::to_string(static_cast<int64_t>(growth) >> 20) + " MiB/step would cross the threshold"},
          {"step", step}};
      checkpoint();
      WriteTermination(d.dump());
      return protocol::kExitGuardStop;
    }
    if (spec.checkpoint.every_steps > 0 && step % spec.checkpoint.every_steps == 0) checkpoint();
  }
  checkpoint();
  return 0;
}
