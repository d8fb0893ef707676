#include "local/local_run.h"

#include <csignal>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/checkpoint/checkpoint_layout.h"
#include "core/checkpoint/durable_file.h"
#include "core/hf/hf_export.h"
#include "local/full_disk.h"
#include "local/memory_chart.h"
#include "local/memory_series.h"
#include "local/progress_view.h"
#include "local/training_chart.h"
#include "local/workdir_lock.h"
#include "operator/runtime/job_driver.h"
#include "operator/runtime/job_reconciler.h"

namespace headroom::local {

namespace fs = std::filesystem;

namespace {

constexpr const char* kEarlierRunsDir = "earlier-runs";
constexpr int kEarlierRunsKept = 5;

// An earlier run's generation folders (each worker's whole output, its termination
// message, its step log) are kept, not deleted: moved to earlier-runs/run-N/ before this
// run writes its own gen-0001/, the newest kEarlierRunsKept runs kept. Returns "" or why
// they could not be moved (a full disk): then this run's generations overwrite them.
std::string KeepEarlierGenerations(const std::string& workdir) try {
  std::vector<fs::path> generations;
  for (const auto& entry : fs::directory_iterator(workdir)) {
    if (entry.is_directory() && entry.path().filename().string().rfind("gen-", 0) == 0) {
      generations.push_back(entry.path());
    }
  }
  if (generations.empty()) return "";
  const fs::path earlier = fs::path(workdir) / kEarlierRunsDir;
  fs::create_directories(earlier);
  std::vector<int> runs;
  for (const auto& entry : fs::directory_iterator(earlier)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("run-", 0) == 0 && name.find_first_not_of("0123456789", 4) == std::string::npos && name.size() > 4) {
      runs.push_back(std::stoi(name.substr(4)));
    }
  }
  std::sort(runs.begin(), runs.end());
  const int next = runs.empty() ? 1 : runs.back() + 1;
  const fs::path target = earlier / ("run-" + std::to_string(next));
  fs::create_directories(target);
  for (const fs::path& g : generations) fs::rename(g, target / g.filename());
  runs.push_back(next);
  for (size_t i = 0; i + kEarlierRunsKept < runs.size(); ++i) {
    fs::remove_all(earlier / ("run-" + std::to_string(runs[i])));
  }
  return "";
} catch (const std::exception& e) {
  return std::string("the earlier run's worker output could not be kept in ") + kEarlierRunsDir + "/ (" + e.what() +
         "): this run's output replaces it";
}

// The checkpoint the run starts from, as the directory says before any worker looks
// (checkpoint::FindLatestStep: a missing `latest` is a fallback, never a fresh start).
struct StartingPoint {
  std::string notice;           // said before the workers start; "" for a fresh start
  std::optional<int64_t> step;  // the newest complete step found
};

// Decides how a run continues what the workdir holds. Nothing in checkpoints/ is ever
// deleted: an interrupted run resumes, and a finished one (its checkpoint at the last step)
// resumes at that step, trains nothing, and redoes only what is missing, such as an export
// a kill interrupted. Training it again from scratch is the user's deliberate choice:
// another --workdir, or removing the checkpoints (the notice says so).
StartingPoint StartFrom(const std::string& workdir, const spec::TrainingJob& job) {
  const std::string checkpoints = workdir + "/checkpoints";
  const std::optional<checkpoint::LatestStep> latest = checkpoint::FindLatestStep(checkpoints);
  if (!latest) return {};
  const std::string fallback = latest->fallback.empty() ? "" : " (" + latest->fallback + ")";
  if (latest->step >= job.spec.grpo.steps) {
    const bool export_missing = !job.spec.model.path.empty() && !fs::exists(hf::JobExportDir(checkpoints));
    return {"the job in " + workdir + " already finished (checkpoint at step " + std::to_string(latest->step) +
                ", kept)" + fallback + (export_missing ? "; writing its missing export" : "; nothing to train") +
                ". To train it again from scratch, run with another --workdir or remove " + checkpoints,
            latest->step};
  }
  // Which step the workers resume from is theirs to say (a damaged step is set aside for
  // an older one): ResumedNotice tells it once they have.
  return {"found checkpoints up to step " + std::to_string(latest->step) + " in " + checkpoints + fallback +
              "; the workers resume from the newest intact one",
          latest->step};
}

StartingPoint PrepareWorkdir(const std::string& workdir, const spec::TrainingJob& job) {
  fs::create_directories(workdir);
  const std::string not_kept = KeepEarlierGenerations(workdir);
  StartingPoint start = StartFrom(workdir, job);
  if (!not_kept.empty()) start.notice = not_kept + (start.notice.empty() ? "" : "; " + start.notice);
  return start;
}

// What the first step of a run that found checkpoints says about where it resumed.
std::string ResumedNotice(const std::string& workdir, int64_t found, int64_t resumed) {
  const std::string checkpoints = workdir + "/checkpoints";
  std::string notice = "resuming from the checkpoint at step " + std::to_string(resumed) + " in " + checkpoints;
  if (resumed < found) {
    const fs::path aside = fs::path(checkpoints) / (checkpoint::StepDirName(found) + checkpoint::kCorruptSuffix);
    notice += " (not step " + std::to_string(found) +
              (fs::exists(aside) ? ": it failed its checks and is set aside as " + aside.string()
                                 : ": see the workers' output in " + workdir + "/gen-0001") +
              ")";
  }
  return notice;
}

// How a stop signal is named to the user.
std::string StopSignalWords(int signal_number) {
  if (signal_number == SIGTERM) return "SIGTERM";
  return "Ctrl-C (SIGINT)";
}

// memory.csv, memory.svg and summary.json, each atomically. Returns why they could not
// all be written ("" when they were): a full disk must not cost the caller the summary.
std::string WriteRunRecord(const spec::TrainingJob& job, const LocalRunOptions& options, const MemorySeries& series,
                           const LocalRunResult& result) {
  MemoryChartInput chart;
  chart.title =
      job.metadata.name + (options.guard_enabled ? " (guard on)" : " (guard off)") + ": " + result.summary.phase;
  chart.records = series.records();
  chart.actions = result.status.actions;
  chart.total_steps = job.spec.grpo.steps;
  chart.host_limit_bytes = job.spec.resources.memory_bytes;
  chart.host_threshold = job.spec.memory_guard.host_threshold;
  chart.gpu_threshold = job.spec.memory_guard.gpu_threshold;
  try {
    series.WriteCsv(result.summary.trace_csv, options.workdir + "/memory-by-rank.csv");
    checkpoint::ReplaceFileAtomically(result.summary.chart_svg, RenderMemoryChartSvg(chart));
    checkpoint::ReplaceFileAtomically(
        result.summary.training_svg,
        RenderTrainingChartSvg({chart.title, chart.records, chart.actions, chart.total_steps}));
    checkpoint::ReplaceFileAtomically(options.workdir + "/summary.json", result.summary.ToJson());
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
  return note + (result.record_error.empty()
                     ? "; memory.csv, memory.svg and summary.json are written"
                     : "; memory.csv, memory.svg and summary.json keep their previous contents");
}

}  // namespace

LocalRunResult RunJobLocally(const spec::TrainingJob& job, const LocalRunOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  std::ostringstream sink;
  std::ostream& out = options.progress ? *options.progress : sink;
  ProgressView view(out, options.terminal, job.metadata.name);

  const WorkdirLock lock(options.workdir);  // before anything in the workdir is touched
  const StartingPoint start = PrepareWorkdir(options.workdir, job);
  if (!start.notice.empty()) view.Notice(start.notice);
  bool resume_told = !start.step;

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
      if (!resume_told && !observed.new_steps.empty()) {
        // The first step record says where the workers really resumed: one before it.
        resume_told = true;
        view.Notice(ResumedNotice(options.workdir, *start.step, observed.new_steps.front().step - 1));
      }
      for (const protocol::StepRecord& r : observed.new_steps) series.Add(r);
      view.Update(reconciler.status(), observed.new_steps);
    };
    for (;;) {
      const int interrupts = options.interrupts ? options.interrupts->load() : 0;
      if (interrupts > interrupts_seen) {
        // Two signals may arrive between two polls: the stop is asked for whatever the
        // count jumped to, then the workers are killed for the second.
        const std::string by = StopSignalWords(options.interrupt_signal ? options.interrupt_signal->load() : 0);
        if (interrupts_seen == 0) {
          const std::string killed = " and a second signal: the workers were killed";
          reconciler.RequestStop("stopped by " + by + (interrupts == 1 ? "" : killed));
          if (interrupts == 1) view.Notice("draining: workers checkpoint and stop (a second " + by + " kills them)");
        }
        if (interrupts >= 2) {
          view.Notice("killing the workers");
          backend.Kill();
        }
        interrupts_seen = interrupts;
        result.interrupted = true;
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
