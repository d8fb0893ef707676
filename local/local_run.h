// `headroom run`, minus the command line: one TrainingJob driven to its end on this
// machine — the shared JobReconciler deciding, a LocalProcessBackend running the workers,
// a ProgressView showing it, and the run's record written to the work directory:
//
//   WORKDIR/checkpoints/        the job's checkpoints, never deleted by a run: a rerun
//                               resumes from them; one whose checkpoint holds the last step
//                               trains nothing and only redoes a missing export
//   WORKDIR/run.lock            held (flock) while a run is under way (workdir_lock.h)
//   WORKDIR/gen-NNNN/           per generation: job.yaml, rank logs, each rank's whole
//                               output (rank-R.out), termination messages
//   WORKDIR/earlier-runs/run-N/ the gen-NNNN/ folders of earlier runs, moved there by the
//                               next run (never deleted by it), the newest 5 runs kept
//   WORKDIR/memory.csv          the per-step trace `headroom replay` reads
//   WORKDIR/memory-by-rank.csv  every rank of every generation
//   WORKDIR/memory.svg          the picture (memory_chart.h)
//   WORKDIR/summary.json        the --summary document, always written here too
//
// Ctrl-C: `interrupts` counts SIGINT/SIGTERM received by the caller. The first asks the
// workers to checkpoint and stop (drain, exit 75) and ends Suspended with a resumable
// checkpoint; the second kills them at once (the checkpoint is the last periodic one).
// Either way the stop stands: two signals between two polls (GNU timeout signals the
// process and its group) ask for it and kill, and the job ends Suspended, never restarted.
#pragma once

#include <atomic>
#include <chrono>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/spec/training_job.h"
#include "local/local_process_backend.h"
#include "local/run_summary.h"
#include "operator/runtime/job_status.h"

namespace headroom::local {

struct LocalRunOptions {
  std::string workdir;
  std::string worker_binary;
  bool guard_enabled = true;
  LocalBackendOptions::Cgroups cgroups = LocalBackendOptions::Cgroups::kAuto;
  std::vector<std::pair<std::string, std::string>> extra_env;
  std::chrono::milliseconds poll{100};
  std::chrono::milliseconds drain_grace{30000};
  std::ostream* progress = nullptr;  // null: silent
  bool terminal = false;             // redraw the progress block in place
  const std::atomic<int>* interrupts = nullptr;
  // The first stop signal's number (SIGINT or SIGTERM), for its name; null or 0: Ctrl-C.
  const std::atomic<int>* interrupt_signal = nullptr;
};

struct LocalRunResult {
  runtime::JobStatus status;
  RunSummary summary;
  bool interrupted = false;
  bool used_cgroups = false;
  // Why the run's record (memory files, summary.json) could not be written, e.g. a full
  // disk; "" when it was. The summary above is complete either way.
  std::string record_error;
  // When the disk under the workdir filled up (local/full_disk.h): one line naming
  // it and what was kept, the run's record included; "" otherwise. Shown last, in place of
  // record_error.
  std::string disk_full;
  // 0 Succeeded (or suspended by spec), 1 Failed or its record not written, 130 stopped by Ctrl-C.
  int exit_code = 0;
};

// Throws WorkdirBusyError, touching nothing, when another run holds the workdir.
LocalRunResult RunJobLocally(const spec::TrainingJob& job, const LocalRunOptions& options);

}  // namespace headroom::local
