#include "operator/local/local_run.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/hf/hf_export.h"
#include "operator/local/atomic_file.h"
#include "operator/local/full_disk.h"
#include "operator/local/memory_chart.h"
#include "operator/local/memory_series.h"
#include "operator/local/progress_view.h"
#include "operator/local/training_chart.h"
#include "operator/local/workdir_lock.h"
#include "operator/runtime/job_driver.h"
#include "operator/runtime/job_reconciler.h"

namespace headroom::local {

namespace fs = std::filesystem;

namespace {

// Decides how a run continues what the workdir holds. Nothing in checkpoints/ is ever
// deleted: an interrupted run resumes, and a finished one (its checkpoint at the last step)
// resumes at that step, trains nothing, and redoes only what is missing, such as an export
// a kill interrupted. Training it again from scratch is the user's deliberate choice:
// another --workdir, or removing the checkpoints (the notice says so).
std::string PrepareWorkdir(const std::string& workdir, const spec::TrainingJob& job) {
  fs::create_directories(workdir);
  for (const auto& entry : fs::directory_iterator(workdir)) {
    if (entry.is_directory() && entry.path().filename().string().rfind("gen-", 0) == 0) fs::remove_all(entry.path());
  }
  const std::string checkpoints = workdir + "/checkpoints";
  std::optional<int64_t> latest = ReadLatestCheckpointStep(checkpoints);
  if (!latest) return "";
  if (*latest >= job.spec.grpo.steps) {
    const bool export_missing = !job.spec.model.path.empty() && !fs::exists(hf::JobExportDir(checkpoints));
    return "the job in " + workdir + " already finished (checkpoint at step " + std::to_string(*latest) +
           ", kept)" + (export_missing ? "; writing its missing export" : "; nothing to train") +
           ". To train it again from scratch, run with another --workdir or remove " + checkpoints;
  }
  return "resuming from the checkpoint at step " + std::to_string(*latest) + " in " + checkpoints;
}

// memory.csv, memory.svg and summary.json, each atomically. Returns why they could not
// all be written ("" when they were): a full disk must not cost the caller the summary.
std::string WriteRunRecord(const spec::TrainingJob& job, const LocalRunOptions& options, const MemorySeries& series,
                           const LocalRunResult& result) {
  MemoryChartInput chart;
  chart.title = job.metadata.name + (options.guard_enabled ? " (guard on)" : " (guard off)") + ": " +
                result.summary.phase;
  chart.records = series.records();
  chart.actions = result.status.actions;
  chart.total_steps = job.spec.grpo.steps;
  chart.host_limit_bytes = job.spec.resources.memory_bytes;
  chart.host_threshold = job.spec.memory_guard.host_threshold;
  chart.gpu_threshold = job.spec.memory_guard.gpu_threshold;
  try {
    series.WriteCsv(result.summary.trace_csv, options.workdir + "/memory-by-rank.csv");
    WriteFileAtomically(result.summary.chart_svg, RenderMemoryChartSvg(chart));
    WriteFileAtomically(result.summary.training_svg,
                        RenderTrainingChartSvg({chart.title, chart.records, chart.actions, chart.total_steps}));
    WriteFileAtomically(options.workdir + "/summary.json", result.summary.ToJson());
  } catch (const std::exception& e) {
    return std::string(e.what()) + " (disk full? the checkpoints are kept; the previous files are intact)";
  }
  return "";
}

// The run's last line when its disk filled up, with what became of its record; "" when not.
std::string DiskFullLine(const std::string& workdir, const LocalRunResult& result) {
  const std::string note = FullDiskNote(workdir, {result.status.message, result.record_error},
                                        result.status.phase == runtime::JobPhase::kFailed);
  if (note.empty()) return "";
  return note + (result.record_error.empty() ? "; memory.csv, memory.svg and summary.json are written"
                                             : "; memory.csv, memory.svg and summary.json keep their previous contents");
}

}  // namespace

LocalRunResult RunJobLocally(const spec::TrainingJob& job, const LocalRunOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  std::ostringstream sink;
  std::ostream& out = options.progress ? *options.progress : sink;
  ProgressView view(out, options.terminal, job.metadata.name);

  const WorkdirLock lock(options.workdir);  // before anything in the workdir is touched
  const std::string resume_note = PrepareWorkdir(options.workdir, job);
  if (!resume_note.empty()) view.Notice(resume_note);

  LocalBackendOptions backend_options;
  backend_options.workdir = options.workdir;
  backend_options.worker_binary = options.worker_binary;
  backend_options.cgroups = options.cgroups;
  backend_options.extra_env = options.extra_env;
  backend_options.notice = [&view](const std::string& m) { view.Notice(m); };

  runtime::ReconcilerOptions reconciler_options;
  reconciler_options.guard_enabled = options.guard_enabled;
  reconciler_options.drain_grace = options.drain_grace;
  runtime::JobReconciler reconciler(job, reconciler_options);
  MemorySeries series;
  LocalRunResult result;
  int interrupts_seen = 0;
  {
    LocalProcessBackend backend(backend_options);  // its destructor always cleans up
    result.used_cgroups = backend.using_cgroups();
    if (!options.guard_enabled) view.Notice("memory guard off (--no-guard): only the kernel's limit applies");
    runtime::DriveOptions drive;
    drive.on_step = [&](const runtime::Observation& observed, const runtime::NextStep&) {
      for (const protocol::StepRecord& r : observed.new_steps) series.Add(r);
      view.Update(reconciler.status(), observed.new_steps);
    };
    for (;;) {
      const int interrupts = options.interrupts ? options.interrupts->load() : 0;
      if (interrupts > interrupts_seen) {
        interrupts_seen = interrupts;
        result.interrupted = true;
        if (interrupts == 1) {
          reconciler.RequestStop("interrupted (Ctrl-C): drained to a checkpoint");
          view.Notice("draining: workers checkpoint and stop (Ctrl-C again kills them)");
        } else {
          view.Notice("killing the workers");
          backend.Kill();
        }
      }
      if (runtime::DriveJob(reconciler, backend, drive).kind == runtime::NextStep::Kind::kFinished) break;
      std::this_thread::sleep_for(options.poll);
    }
    view.Finish(reconciler.status());
  }

  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  result.status = reconciler.status();
  result.summary = RunSummary::From(result.status, job.metadata.name, wall);
  result.summary.workdir = options.workdir;
  result.summary.trace_csv = options.workdir + "/memory.csv";
  result.summary.chart_svg = options.workdir + "/memory.svg";
  result.summary.training_svg = options.workdir + "/training.svg";
  result.summary.AddHeldOut(series.records());
  // The worker exits 0 only once its export is in place, so a success means this run's.
  if (!job.spec.model.path.empty()) {
    const std::string exported = hf::JobExportDir(options.workdir + "/checkpoints");
    const bool written = result.status.phase == runtime::JobPhase::kSucceeded && fs::exists(exported);
    result.summary.export_dir = written ? exported : "";
  }
  result.record_error = WriteRunRecord(job, options, series, result);
  result.disk_full = DiskFullLine(options.workdir, result);

  switch (result.status.phase) {
    case runtime::JobPhase::kSucceeded: result.exit_code = 0; break;
    case runtime::JobPhase::kSuspended: result.exit_code = result.interrupted ? 130 : 0; break;
    default: result.exit_code = 1; break;
  }
  if (!result.record_error.empty() && result.exit_code == 0) result.exit_code = 1;
  return result;
}

}  // namespace headroom::local
