// headroom-worker's whole life, as a library call: parse the job, build the trainer and
// its telemetry, run steps until done, drained, or stopped by the memory guard.
//
// RunWorker() returns the process exit code (core/protocol/exit_codes.h) and never throws. Human
// logs go to stderr; the step log goes to options.log_path, or stdout without one.
#pragma once

#include <optional>
#include <string>

namespace headroom::worker {

struct WorkerOptions {
  std::string job_path;        // --job
  std::string checkpoint_dir;  // --checkpoint-dir: resume from its latest, save there; "" = no checkpoints
  std::string log_path;        // --log; "" = stdout
  int metrics_port = 9400;     // --metrics-port; 0 = any free port; -1 = no endpoint
  std::string metrics_bind = "0.0.0.0";
  // torchrun's rendezvous environment.
  int rank = 0;             // RANK
  int world_size = 1;       // WORLD_SIZE
  std::string master_addr;  // MASTER_ADDR
  int master_port = 0;      // MASTER_PORT
};

// Fills rank/world size/master from RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (unset =
// defaults). Returns a message naming the variable when one is malformed.
std::optional<std::string> ReadRendezvousEnvironment(WorkerOptions& options);

int RunWorker(const WorkerOptions& options);

}  // namespace headroom::worker
