// runtime_restart_bench: what a guard restart costs, with the real headroom-worker.
//
//   1. Guard restart latency (tiny job with a host leak, guard on, real cgroup): for every
//      guard stop, the time from the worker's decision (its termination message's mtime)
//      to the supervisor seeing exit 76, and from there to the first step record of the
//      resumed generation; the resumed step's own step_seconds is printed beside it so the
//      restart overhead (process start, LibTorch init, checkpoint load) can be read off.
//      Also the target: zero steps lost on every guard restart.
//   2. Checkpoint write throughput: the small preset (~19M parameters: weights and AdamW
//      state, ~217 MiB) saves a checkpoint every 2 steps; the worker logs each save's
//      {"checkpoint_bytes","checkpoint_seconds"} (slices written and fsync'd, manifest,
//      `latest` renamed) in the step's record. Throughput = bytes / median seconds.
//      Baseline, same run, same directory: a dd-like sequential write of the same bytes in
//      1 MiB blocks followed by fsync. Goal: >= 50% of it.
// Usage: runtime_restart_bench [--worker PATH] [--workdir DIR]
// The worker: --worker, else $HEADROOM_WORKER_BIN, else headroom-worker beside this binary.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/spec/training_job.h"
#include "local/local_process_backend.h"
#include "operator/runtime/job_driver.h"
#include "operator/runtime/job_reconciler.h"

namespace fs = std::filesystem;
using namespace headroom;
using Clock = std::chrono::steady_clock;

namespace {

spec::TrainingJob Job(const std::string& yaml) {
  spec::ParseResult parsed = spec::ParseTrainingJob(yaml);
  if (!parsed.ok()) {
    for (const auto& e : parsed.errors) std::cerr << "bench job: " << e.ToString() << "\n";
    std::exit(2);
  }
  return *parsed.job;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds between a file's mtime and now (wall clock), so a steady timestamp can be
// placed on the wall clock's axis.
double SecondsSinceMtime(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return -1;
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return (now.tv_sec - st.st_mtim.tv_sec) + (now.tv_nsec - st.st_mtim.tv_nsec) / 1e9;
}

// dd if=/dev/zero of=FILE bs=1M count=N conv=fsync, timed.
double SequentialWriteBytesPerSecond(const std::string& path, int64_t bytes) {
  std::vector<char> block(1 << 20, 'x');
  const auto t0 = Clock::now();
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 0;
  for (int64_t left = bytes; left > 0;) {
    const ssize_t n = write(fd, block.data(), static_cast<size_t>(std::min<int64_t>(left, block.size())));
    if (n <= 0) break;
    left -= n;
  }
  fsync(fd);
  close(fd);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  fs::remove(path);
  return bytes / secs;
}

void GuardRestartLatency(const std::string& worker, const std::string& workdir) {
  fs::remove_all(workdir);
  local::LocalBackendOptions o;
  o.workdir = workdir;
  o.worker_binary = worker;
  o.notice = [](const std::string& m) { std::cout << "  note: " << m << "\n"; };
  local::LocalProcessBackend backend(o);
  runtime::JobReconciler reconciler(Job(R"(apiVersion: headroom.dev/v1alpha1
kind: TrainingJob
metadata: {name: bench-restart}
spec:
  workers: 1
  resources: {cpu: "1", memory: 1Gi}
  model: {preset: tiny}
  task: {name: reverse, digits: 3, seed: 1}
  grpo: {steps: 40, promptsPerStep: 8, groupSize: 4, maxPromptLength: 8, maxResponseLength: 6, microBatchSize: 32, klCoef: 0.0}
  sharding: {stage: 1}
  checkpoint: {everySteps: 1000, keep: 2}
  memoryGuard: {enabled: true, hostThreshold: 0.85, horizonSteps: 2, maxRestarts: 10}
  debug: {hostLeakBytesPerStep: 64Mi}
)"),
                                    {});
  std::vector<double> decision_to_exit, exit_to_first_step, first_step_seconds;
  std::optional<Clock::time_point> exit_seen;
  int waiting_generation = 0;
  const auto deadline = Clock::now() + std::chrono::minutes(8);
  runtime::DriveOptions drive;
  drive.on_step = [&](const runtime::Observation& obs, const runtime::NextStep& next) {
    for (const auto& r : obs.new_steps) {
      if (exit_seen && r.generation == waiting_generation) {
        exit_to_first_step.push_back(std::chrono::duration<double>(obs.now - *exit_seen).count());
        first_step_seconds.push_back(r.step_seconds);
        exit_seen.reset();
      }
    }
    const std::optional<runtime::ActionRecord>& last = reconciler.status().last_action;
    if (next.kind == runtime::NextStep::Kind::kLaunch && obs.generation > 0 && last &&
        last->type == runtime::ActionType::kRestart) {
      const std::string term = backend.generation_dir(obs.generation) + "/rank-0.termination";
      decision_to_exit.push_back(SecondsSinceMtime(term));
      exit_seen = obs.now;
      waiting_generation = next.launch.generation;
    }
  };
  while (Clock::now() < deadline) {
    if (runtime::DriveJob(reconciler, backend, drive).kind == runtime::NextStep::Kind::kFinished) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const runtime::JobStatus& s = reconciler.status();
  std::printf("guard restart (tiny job, 64 MiB/step leak, 1 GiB cgroup): %s, %lld steps, %d guard restart(s), "
              "%d OOM kill(s), %lld step(s) lost  [target: 0 lost]\n",
              runtime::JobPhaseName(s.phase), static_cast<long long>(s.step), s.restarts, s.oom_kills,
              static_cast<long long>(s.steps_lost));
  std::printf("  decision -> exit 76 seen (checkpoint + shutdown): median %.3f s over %zu\n", Median(decision_to_exit),
              decision_to_exit.size());
  std::printf("  exit 76 -> first resumed step logged:             median %.3f s (that step itself: %.3f s; "
              "restart overhead %.3f s)\n",
              Median(exit_to_first_step), Median(first_step_seconds),
              Median(exit_to_first_step) - Median(first_step_seconds));
  std::printf("  decision -> first resumed step:                   median %.3f s\n",
              Median(decision_to_exit) + Median(exit_to_first_step));
}

void CheckpointThroughput(const std::string& worker, const std::string& workdir) {
  fs::remove_all(workdir);
  local::LocalBackendOptions o;
  o.workdir = workdir;
  o.worker_binary = worker;
  o.cgroups = local::LocalBackendOptions::Cgroups::kOff;  // measuring disk, not memory
  local::LocalProcessBackend backend(o);
  runtime::LaunchRequest launch;
  launch.generation = 1;
  launch.job = Job(R"(apiVersion: headroom.dev/v1alpha1
kind: TrainingJob
metadata: {name: bench-checkpoint}
spec:
  workers: 1
  resources: {cpu: "1", memory: 8Gi}
  model: {preset: small}
  task: {name: reverse, digits: 3, seed: 1}
  grpo: {steps: 6, promptsPerStep: 4, groupSize: 2, maxPromptLength: 8, maxResponseLength: 4, microBatchSize: 8, klCoef: 0.0}
  sharding: {stage: 0}
  checkpoint: {everySteps: 2, keep: 1}
  memoryGuard: {enabled: false}
)");
  backend.Launch(launch);
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  while (Clock::now() < deadline) {
    runtime::Observation obs = backend.Observe();
    if (!obs.ranks.empty() && obs.ranks[0].exit) {
      if (obs.ranks[0].exit->exit_code != protocol::kExitFinished) {
        std::printf("checkpoint: the worker ended with %s (exit %d); no measurement\n",
                    obs.ranks[0].exit->reason.c_str(), obs.ranks[0].exit->exit_code);
        return;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The worker's own numbers: every step record that saved a checkpoint.
  std::vector<double> save_seconds;
  int64_t bytes = 0;
  std::ifstream log(backend.generation_dir(1) + "/rank-0.log");
  for (std::string line; std::getline(log, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("checkpoint_bytes", int64_t{0}) > 0) {
      bytes = j["checkpoint_bytes"].get<int64_t>();
      save_seconds.push_back(j["checkpoint_seconds"].get<double>());
    }
  }
  if (save_seconds.empty()) {
    std::printf("checkpoint: no step record carries checkpoint_bytes; no measurement\n");
    return;
  }
  const double write_seconds = std::max(1e-6, Median(save_seconds));
  const double worker_bps = bytes / write_seconds;
  const double disk_bps = SequentialWriteBytesPerSecond(workdir + "/dd-baseline.bin", bytes);
  std::printf("checkpoint write (small preset, %.1f MiB): median of %zu saves %.3f s -> %.1f MiB/s\n",
              bytes / 1048576.0, save_seconds.size(), write_seconds, worker_bps / 1048576.0);
  std::printf("  disk sequential write + fsync, same bytes, same directory: %.1f MiB/s\n", disk_bps / 1048576.0);
  std::printf("  checkpoint / disk = %.2f  [goal >= 0.50]\n", disk_bps > 0 ? worker_bps / disk_bps : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string worker, workdir = (fs::temp_directory_path() / "headroom-restart-bench").string();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--worker") == 0) worker = argv[i + 1];
    else if (std::strcmp(argv[i], "--workdir") == 0) workdir = argv[i + 1];
  }
  if (worker.empty()) {
    if (const char* env = std::getenv("HEADROOM_WORKER_BIN")) worker = env;
    else worker = (fs::read_symlink("/proc/self/exe").parent_path() / "headroom-worker").string();
  }
  if (access(worker.c_str(), X_OK) != 0) {
    std::printf("runtime_restart_bench: skipped: no worker binary at %s (build headroom-worker)\n", worker.c_str());
    return 0;
  }
  GuardRestartLatency(worker, workdir + "/restart");
  CheckpointThroughput(worker, workdir + "/checkpoint");
  fs::remove_all(workdir);
  return 0;
}
