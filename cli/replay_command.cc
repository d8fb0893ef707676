// `headroom replay TRACE.csv [--host-limit BYTES] [--gpu-limit BYTES] [--host-threshold F]
// [--gpu-threshold F] [--horizon N] [--job JOB.yaml] [--workers N]`: runs the memory guard
// over a recorded trace (core/guard/replay.h) and prints one JSON object per step:
//   {"step","action","resource","forecast_peak_bytes","steps_to_limit","reason"}
// (plus target_* keys when the action has targets). Limits are byte counts or Kubernetes
// quantities (1Gi); without them the trace's limit columns are used. --job supplies the
// job the guard protects (actions, maxWorkers, microBatchSize, offload, model for the
// planner); without it the spec defaults are used.
// TRACE may also be a worker's step log (JSON lines, core/protocol/step_record.h): its
// memory columns are what the worker's own guard read, so with the worker's --job the
// replay gives the decisions the worker took.
//
//   exit 0: replayed;  exit 2: bad options, unreadable or malformed trace (line and column
//   named), invalid job.
#include <fstream>
#include <iostream>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include "core/guard/replay.h"
#include "core/guard/step_record_memory.h"
#include "core/guard/trace.h"
#include "core/hf/hf_config.h"
#include "core/protocol/step_record.h"
#include "core/spec/quantity.h"
#include "core/spec/training_job.h"
#include "cli/command_registry.h"

namespace headroom::cli {
namespace {

struct ReplayArgs {
  std::string trace;
  std::string host_limit, gpu_limit;
  double host_threshold = 0, gpu_threshold = 0;
  int horizon = 0;
  std::string job;
  int workers = 0;
};

bool ParseLimit(const std::string& flag, const std::string& text, int64_t* out) {
  if (text.empty()) return true;
  std::string error;
  auto bytes = spec::ParseQuantityBytes(text, &error);
  if (!bytes || *bytes <= 0) {
    std::cerr << "headroom replay: " << flag << ": " << (error.empty() ? "must be > 0 bytes, got " + text : error)
              << "\n";
    return false;
  }
  *out = *bytes;
  return true;
}

std::vector<guard::StepMemory> ReadTraceOrStepLog(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  if (!protocol::LooksLikeStepLog(text.str())) return guard::ParseTrace(text.str(), path);
  std::vector<guard::StepMemory> trace;
  for (const protocol::StepRecord& r : protocol::ParseStepLog(text.str(), path))
    trace.push_back(guard::StepMemoryOf(r));
  return trace;
}

int RunReplay(const ReplayArgs& args) {
  guard::ReplayOptions options;
  if (!ParseLimit("--host-limit", args.host_limit, &options.host_limit_bytes) ||
      !ParseLimit("--gpu-limit", args.gpu_limit, &options.gpu_limit_bytes)) {
    return 2;
  }
  if (!args.job.empty()) {
    spec::ParseResult parsed = spec::ParseTrainingJobFile(args.job);
    if (!parsed.ok()) {
      for (const spec::SpecError& e : parsed.errors) std::cerr << args.job << ": " << e.ToString() << "\n";
      return 2;
    }
    options.spec = parsed.job->spec;
  }
  if (args.host_threshold > 0) options.host_threshold = args.host_threshold;
  if (args.gpu_threshold > 0) options.gpu_threshold = args.gpu_threshold;
  if (args.horizon > 0) options.horizon = args.horizon;
  options.workers = args.workers;
  std::vector<guard::StepMemory> trace;
  try {
    trace = ReadTraceOrStepLog(args.trace);
  } catch (const std::runtime_error& e) {
    std::cerr << "headroom replay: " << e.what() << "\n";
    return 2;
  }
  std::vector<guard::ReplayStep> steps;
  try {
    steps = guard::Replay(trace, options);
  } catch (const hf::HfConfigError& e) {
    // The guard plans a spec.model.path job with its config.json, as the worker did.
    std::cerr << "headroom replay: spec.model.path: " << e.what()
              << " (the guard plans with the model's config.json)\n";
    return 2;
  }
  for (const guard::ReplayStep& step : steps) std::cout << guard::ReplayLineJson(step) << "\n";
  return 0;
}

const bool kRegistered = RegisterCommand(
    {"replay", "Run the memory guard over a recorded trace CSV; one JSON decision per step",
     [](CLI::App& sub) -> std::function<int()> {
       auto args = std::make_shared<ReplayArgs>();
       sub.add_option("TRACE", args->trace,
                      "trace CSV (step,host_bytes,gpu_bytes[,host_peak_bytes,...]) or a worker's step log")
           ->required();
       sub.add_option("--host-limit", args->host_limit, "host limit in bytes or a quantity (default: the trace's)");
       sub.add_option("--gpu-limit", args->gpu_limit, "GPU limit in bytes or a quantity (default: the trace's)");
       sub.add_option("--host-threshold", args->host_threshold, "fraction of the host limit, in (0, 1]")
           ->check(CLI::Range(0.0, 1.0).description("in (0, 1]"))
           ->check([](const std::string& v) { return std::stod(v) > 0 ? "" : "must be > 0"; });
       sub.add_option("--gpu-threshold", args->gpu_threshold, "fraction of the GPU limit, in (0, 1]")
           ->check(CLI::Range(0.0, 1.0).description("in (0, 1]"))
           ->check([](const std::string& v) { return std::stod(v) > 0 ? "" : "must be > 0"; });
       sub.add_option("--horizon", args->horizon, "act when the forecast crosses within this many steps")
           ->check(CLI::PositiveNumber);
       sub.add_option("--job", args->job, "the TrainingJob the trace came from (actions, workers, model)");
       sub.add_option("--workers", args->workers, "current worker count (default: the job's)")
           ->check(CLI::PositiveNumber);
       return [args] { return RunReplay(*args); };
     }});

}  // namespace
}  // namespace headroom::cli
