// headroom-worker: one rank of a GRPO training job (docs/design.md, Commands and Worker).
//   headroom-worker --job JOB.yaml [--checkpoint-dir DIR] [--metrics-port N] [--log FILE]
// with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment (torchrun's names).
// A pod's ranks: headroom-worker launch --ranks-per-pod K --first-rank R ... -- ARGS
// (core/launch/pod_launcher.h). Model inspection commands, no rendezvous: headroom-worker logits|generate ...
// (worker/cli/model_commands.h); a tokenizer on stdin: headroom-worker tokenize ...
// (worker/cli/tokenize_command.h); a job's prompt lengths: headroom-worker prompts ...
// (worker/cli/prompts_command.h).
#include <spdlog/spdlog.h>

#include <iostream>

#include <CLI/CLI.hpp>

#include "core/launch/pod_launcher.h"
#include "core/protocol/exit_codes.h"
#include "core/protocol/stop_signals.h"
#include "worker/cli/model_commands.h"
#include "worker/cli/prompts_command.h"
#include "worker/cli/tokenize_command.h"
#include "worker/telemetry/heap_trim.h"
#include "worker/train/run_worker.h"

int main(int argc, char** argv) {
  using namespace headroom::worker;
  // A pod of several ranks: this program runs them (core/launch/pod_launcher.h).
  if (argc > 1 && std::string(argv[1]) == "launch") return headroom::launch::RunLaunchCommand(argc - 1, argv + 1);
  if (argc > 1 && IsModelCommand(argv[1])) return RunModelCommand(argc - 1, argv + 1, std::cout, std::cerr);
  if (argc > 1 && IsPromptsCommand(argv[1])) return RunPromptsCommand(argc - 1, argv + 1, std::cout, std::cerr);
  if (argc > 1 && IsTokenizeCommand(argv[1])) {
    return RunTokenizeCommand(argc - 1, argv + 1, std::cin, std::cout, std::cerr);
  }
  // A rank: until it has connected to its peers it has nothing to save (a Hub download
  // resumes where it stopped), so a stop ends it at once (exit 75); Run then installs the
  // step-boundary handler.
  headroom::protocol::ExitDrainedOnStopSignals();
  WorkerOptions options;
  CLI::App app{"headroom-worker: one rank of a headroom GRPO TrainingJob"};
  app.add_option("--job", options.job_path, "TrainingJob YAML file")->required();
  app.add_option("--checkpoint-dir", options.checkpoint_dir, "checkpoint directory (resume from its `latest`)");
  app.add_option("--metrics-port", options.metrics_port, "Prometheus /metrics and /healthz port; 0 = any free port")
      ->check(CLI::Range(-1, 65535));
  app.add_option("--log", options.log_path, "step log file (JSON lines); default stdout");
  // The commands main() dispatches before this parser runs, listed so --help shows what
  // exists, one line each, as `headroom --help` does; each has its own --help.
  app.add_subcommand("logits", "a Hugging Face model's fp32 logits at every position of --ids (JSON lines)");
  app.add_subcommand("generate", "the greedy, KV-cached continuation of --ids by a Hugging Face model (JSON)");
  app.add_subcommand("launch", "a pod's ranks: --ranks-per-pod K --first-rank R [--metrics-port P] -- WORKER_ARGS");
  app.add_subcommand("prompts", "the job's prompt lengths in the model's tokens (JSON), as `headroom plan` reads them");
  app.add_subcommand("tokenize", "a model's tokenizer.json on stdin: JSON strings to id arrays, or back with --decode");
  app.footer("Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.\n"
             "Exit codes: 0 finished, 2 invalid spec, 75 drained (SIGTERM/SIGINT), 76 stopped by the memory guard, "
             "77 out of GPU memory, 1 other failure.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : headroom::protocol::kExitFailure;
  }
  if (auto error = ReadRendezvousEnvironment(options)) {
    std::cerr << *error << "\n";
    return headroom::protocol::kExitFailure;
  }
  // Freed tensors go back to the kernel, so a step's peak is what it holds, not what the
  // heap kept from earlier phases (docs/design.md, "The host heap").
  FixMmapThreshold();
  return RunWorker(options);
}
