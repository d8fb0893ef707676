// `headroom run JOB.yaml [--workdir DIR] [--no-guard] [--summary FILE]`: the whole job on
// this machine, one process per worker in its own memory cgroup, guarded
// (local/local_run.h does the work; this file is the command line).
//
//   --workdir   default ./headroom-runs/<metadata.name>; rerunning with the same work
//               directory resumes an interrupted run from its checkpoint.
//   --no-guard  memoryGuard.enabled=false in every generation's spec, and guard stops
//               are not acted on: only the kernel's limit applies. A crash or OOM kill
//               still restarts from the checkpoint (maxRestarts applies), so the summary
//               shows what the kernel cost: OOM kills and steps lost.
//   --summary   also writes the summary JSON there (docs/design.md keys).
// The worker binary: $HEADROOM_WORKER_BIN, else headroom-worker beside this executable.
// Run from a build tree, it first checks that build is neither stale nor unfinished
// (local/build_freshness.h) and refuses to run old binaries otherwise.
// Exit: 0 all steps done; 1 failed (gave up, the build is stale, or the worker could not start); 2 a bad
// spec or usage; 130 stopped by Ctrl-C or SIGTERM (rerun to resume) — a second signal
// kills the workers at once, and the stop stands.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "core/checkpoint/durable_file.h"
#include "core/protocol/stop_signals.h"
#include "core/spec/training_job.h"
#include "cli/command_registry.h"
#include "cli/worker_binary.h"
#include "local/build_freshness.h"
#include "local/local_run.h"

namespace headroom::cli {
namespace {

std::atomic<int> g_interrupts{0};
std::atomic<int> g_first_signal{0};  // which stop signal came first, for its name
void OnInterrupt(int signal_number) {
  int none = 0;
  g_first_signal.compare_exchange_strong(none, signal_number);
  g_interrupts.fetch_add(1);
}

std::filesystem::path SelfDirectory() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : self.parent_path();
}

// False (after saying why) when this build must not run: stale or unfinished.
bool BuildIsRunnable() {
  const std::filesystem::path dir = SelfDirectory();
  if (dir.empty()) return true;
  const local::BuildFreshness freshness = local::CheckBuildFreshness(dir, {"headroom", "headroom-worker"});
  if (freshness.fresh) return true;
  const char* allow = std::getenv(local::kAllowStaleBuildEnv);
  if (allow && std::string(allow) == "1") {
    std::cerr << "headroom: warning: " << freshness.problem << " (running it anyway: " << local::kAllowStaleBuildEnv
              << "=1)\n";
    return true;
  }
  std::cerr << "headroom: " << freshness.problem << " (or set " << local::kAllowStaleBuildEnv
            << "=1 to run it as it is)\n";
  return false;
}

struct RunFlags {
  std::string job_path;
  std::string workdir;
  bool no_guard = false;
  std::string summary_path;
};

int RunRun(const RunFlags& flags) {
  spec::ParseResult parsed = spec::ParseTrainingJobFile(flags.job_path);
  if (!parsed.ok()) {
    for (const auto& e : parsed.errors) std::cerr << flags.job_path << ": " << e.ToString() << "\n";
    return 2;
  }
  const spec::TrainingJob& job = *parsed.job;
  if (!BuildIsRunnable()) return 1;
  local::LocalRunOptions options;
  options.workdir = flags.workdir.empty() ? "headroom-runs/" + job.metadata.name : flags.workdir;
  options.workdir = std::filesystem::absolute(options.workdir).lexically_normal().string();
  options.worker_binary = FindWorkerBinary();
  if (access(options.worker_binary.c_str(), X_OK) != 0) {
    std::cerr << "headroom: no worker binary at " << options.worker_binary
              << " (build headroom-worker, or set HEADROOM_WORKER_BIN)\n";
    return 1;
  }
  options.guard_enabled = !flags.no_guard;
  options.progress = &std::cout;
  options.terminal = isatty(STDOUT_FILENO) != 0;
  options.interrupts = &g_interrupts;
  options.interrupt_signal = &g_first_signal;

  protocol::HandleStopSignals(OnInterrupt);

  std::cout << "headroom: running " << job.metadata.name << " (" << job.spec.workers << " worker(s), "
            << job.spec.grpo.steps << " steps, memory limit " << job.spec.resources.memory << " per worker) in "
            << options.workdir << "\n";
  local::LocalRunResult result = local::RunJobLocally(job, options);
  result.summary.Print(std::cout);
  if (result.exit_code == 130) {
    std::cout << "  resume with: headroom run " << flags.job_path << " --workdir " << options.workdir << "\n";
  }
  if (!result.disk_full.empty()) {
    std::cerr << "headroom: " << result.disk_full << "\n";
  } else if (!result.record_error.empty()) {
    std::cerr << "headroom: " << result.record_error << "\n";
  }
  if (!flags.summary_path.empty()) {
    try {
      checkpoint::ReplaceFileAtomically(flags.summary_path, result.summary.ToJson());
    } catch (const std::exception& e) {
      std::cerr << "headroom: " << e.what() << "\n";
      return 1;
    }
  }
  return result.exit_code;
}

const bool kRegistered = RegisterCommand(
    {"run", "Run a TrainingJob on this machine: one process per worker in a memory cgroup, guarded",
     [](CLI::App& sub) -> std::function<int()> {
       auto flags = std::make_shared<RunFlags>();
       sub.add_option("JOB", flags->job_path, "TrainingJob YAML file")->required();
       sub.add_option("--workdir", flags->workdir,
                      "checkpoints, logs, memory series and chart (default ./headroom-runs/<job name>)");
       sub.add_flag("--no-guard", flags->no_guard,
                    "turn the memory guard off: only the kernel's limit applies (crashes still restart)");
       sub.add_option("--summary", flags->summary_path, "also write the summary as JSON to this file");
       return [flags] { return RunRun(*flags); };
     }});

}  // namespace
}  // namespace headroom::cli
