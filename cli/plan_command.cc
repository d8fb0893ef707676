// `headroom plan JOB.yaml [--workers N] [--gpu-memory QUANTITY] [--at-max-prompt-length]
// [--json]`: the planner's per-worker memory estimate (core/guard/planner.h) for the job's
// model (its preset, or the config.json of spec.model.path), sharding stage, offload
// settings and worker count, by component, with host and GPU totals against the limits the
// guard protects.
//
// Prompts: a step pads its rows to its longest prompt, so the plan counts the update and
// the rollout's prefill at the longest prompt the job's data holds, as headroom-worker's
// task makes them (`headroom-worker prompts`, worker/cli/prompts_command.h), when that is
// shorter than maxPromptLength; at maxPromptLength with --at-max-prompt-length, or when the
// worker cannot read the data here (a cluster's path, a model not fetched yet: the reason
// is printed).
//
//   exit 0: printed (whether or not it fits: the verdict is in the output)
//   exit 2: invalid spec (every problem, as `headroom validate` prints them), bad options, or
//           a spec.model.path whose config.json cannot be read or used here
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "core/base/human_bytes.h"
#include "core/hf/hf_config.h"
#include "core/guard/planner.h"
#include "core/launch/child_process.h"
#include "core/spec/quantity.h"
#include "core/spec/training_job.h"
#include "cli/command_registry.h"
#include "cli/worker_binary.h"

namespace headroom::cli {
namespace {

struct PlanArgs {
  std::string path;
  int workers = 0;
  std::string gpu_memory;
  bool at_max_prompt_length = false;
  bool json = false;
};

// How long the plan takes the prompts to be, and why.
struct PromptLength {
  int64_t tokens = 0;        // what the plan counts
  int64_t data_longest = 0;  // the data's longest prompt; 0 when not asked or not known
  int64_t skipped = 0;       // the dataset's records longer than maxPromptLength, left out by the job
  std::string not_known;     // why the data's prompts were not measured (empty when they were, or not asked)
};

// The longest prompt of the job's data, from `headroom-worker prompts --job PATH`; or why
// not (the last line the worker wrote to stderr, which names the problem).
PromptLength MeasurePrompts(const std::string& job_path, const spec::GrpoSpec& grpo) {
  PromptLength p;
  p.tokens = grpo.max_prompt_length;
  const std::string worker = FindWorkerBinary();
  launch::CompletedProcess done;
  try {
    done = launch::RunToCompletion({worker, "prompts", "--job", job_path});
  } catch (const std::exception& e) {
    p.not_known = std::string("cannot run ") + worker + ": " + e.what();
    return p;
  }
  if (done.exit_code == 0) {
    const auto j = nlohmann::json::parse(done.out, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("longest") && j["longest"].is_number_integer() && j["longest"].get<int64_t>() > 0) {
      p.data_longest = j["longest"].get<int64_t>();
      if (j.contains("skipped") && j["skipped"].is_number_integer()) p.skipped = j["skipped"].get<int64_t>();
      p.tokens = std::min<int64_t>(p.data_longest, grpo.max_prompt_length);
      return p;
    }
    p.not_known = worker + " prompts printed no prompt length";
    return p;
  }
  std::string reason = done.err;
  // The last line names the problem; log lines come before it.
  while (!reason.empty() && reason.back() == '\n') reason.pop_back();
  if (const size_t nl = reason.rfind('\n'); nl != std::string::npos) reason = reason.substr(nl + 1);
  p.not_known = reason.empty() ? worker + " prompts exited " + std::to_string(done.exit_code) : reason;
  return p;
}

std::string DescribePrompts(const PromptLength& p, const spec::GrpoSpec& grpo) {
  const std::string max = "maxPromptLength " + std::to_string(grpo.max_prompt_length) +
                          (p.skipped > 0 ? ", which leaves out " + std::to_string(p.skipped) + " longer records" : "");
  if (p.data_longest > 0 && p.data_longest < grpo.max_prompt_length) {
    return "at " + std::to_string(p.tokens) + " tokens, the longest the job's data holds (" + max +
           "; the generation cache at it)";
  }
  if (p.data_longest > 0) return "at " + max + " (the data's longest is " + std::to_string(p.data_longest) + ")";
  if (!p.not_known.empty()) return "at " + max + " (the data's prompts are not known here: " + p.not_known + ")";
  return "at " + max;
}

std::string Cell(int64_t bytes) { return bytes == 0 ? "-" : HumanBytes(static_cast<double>(bytes)); }

// The pods the workers run in (docs/design.md, "Ranks per pod"): workers / ranksPerPod
// pods of ranksPerPod ranks, each requesting ranksPerPod times a rank's resources; 0 pods
// when the count does not divide.
int Pods(const spec::TrainingJobSpec& s, int workers) {
  return workers % s.ranks_per_pod == 0 ? workers / s.ranks_per_pod : 0;
}

std::string PodLayout(const spec::TrainingJobSpec& s, int workers) {
  const int k = s.ranks_per_pod;
  const int pods = Pods(s, workers);
  if (pods == 0) {
    return std::to_string(workers) + " workers are not a multiple of ranksPerPod (" + std::to_string(k) + ")";
  }
  std::string line = std::to_string(pods) + " pod" + (pods == 1 ? "" : "s") + " x " + std::to_string(k) + " rank" +
                     (k == 1 ? "" : "s") + "; each pod requests " +
                     HumanBytes(static_cast<double>(s.resources.memory_bytes) * k) + " of memory";
  if (s.resources.gpus > 0) line += " and " + std::to_string(s.resources.gpus * k) + " GPU(s)";
  if (k > 1) line += ", one limit its ranks share (the plan below is per rank)";
  return line;
}

// `--json`: the plan as one object (components, totals, limits, thresholds, verdicts).
void PrintPlanJson(const spec::TrainingJob& job, int workers, const guard::ModelShape& shape, const guard::Plan& plan,
                   bool fits, bool worker_count_ok, const PromptLength& prompts) {
  const spec::MemoryGuardSpec& g = job.spec.memory_guard;
  nlohmann::ordered_json j;
  j["job"] = job.metadata.name;
  j["workers"] = workers;
  j["ranks_per_pod"] = job.spec.ranks_per_pod;
  j["pods"] = Pods(job.spec, workers);
  j["model"] = shape.source;
  j["parameters"] = plan.parameters;
  j["stage"] = job.spec.sharding.stage;
  j["gpus_per_worker"] = job.spec.resources.gpus;
  j["prompt_length"] = prompts.tokens;  // what the update and the prefill are planned at
  j["max_prompt_length"] = job.spec.grpo.max_prompt_length;
  j["data_longest_prompt"] = prompts.data_longest;  // 0: not known
  j["data_prompts_skipped"] = prompts.skipped;
  if (!prompts.not_known.empty()) j["data_prompts_not_known"] = prompts.not_known;
  nlohmann::ordered_json comps = nlohmann::ordered_json::array();
  for (const guard::PlanComponent& c : plan.components) {
    comps.push_back({{"name", c.name}, {"host_bytes", c.host_bytes}, {"gpu_bytes", c.gpu_bytes}, {"note", c.note}});
  }
  j["components"] = comps;
  j["host_total_bytes"] = plan.host_total_bytes;
  j["gpu_total_bytes"] = plan.gpu_total_bytes;
  j["host_limit_bytes"] = plan.host_limit_bytes;
  j["gpu_limit_bytes"] = plan.gpu_limit_bytes;
  j["host_fraction_of_limit"] =
      plan.host_limit_bytes > 0 ? static_cast<double>(plan.host_total_bytes) / plan.host_limit_bytes : 0.0;
  j["gpu_fraction_of_limit"] =
      plan.gpu_limit_bytes > 0 ? static_cast<double>(plan.gpu_total_bytes) / plan.gpu_limit_bytes : 0.0;
  j["host_threshold"] = g.host_threshold;
  j["gpu_threshold"] = g.gpu_threshold;
  j["fits"] = fits;
  j["worker_count_divides_batch"] = worker_count_ok;
  std::cout << j.dump(2) << "\n";
}

// The plan as a table a person reads, with a verdict and, when it does not fit, the
// smallest worker count that would.
void PrintPlanTable(const spec::TrainingJob& job, int workers, const guard::ModelShape& shape, const guard::Plan& plan,
                    bool fits, bool worker_count_ok, const guard::PlanOptions& options, const PromptLength& prompts) {
  const spec::MemoryGuardSpec& g = job.spec.memory_guard;
  std::printf("%s: %s, %d worker%s, stage %d, offload params %s / optimizer %s, %d GPU%s per worker, %s parameters\n",
              job.metadata.name.c_str(), shape.source.c_str(), workers, workers == 1 ? "" : "s",
              job.spec.sharding.stage, job.spec.sharding.offload_params ? "on" : "off",
              job.spec.sharding.offload_optimizer ? "on" : "off", job.spec.resources.gpus,
              job.spec.resources.gpus == 1 ? "" : "s", std::to_string(plan.parameters).c_str());
  std::printf("layout: %s\n", PodLayout(job.spec, workers).c_str());
  std::printf("prompts: %s\n", DescribePrompts(prompts, job.spec.grpo).c_str());
  std::printf("%-18s %14s %14s  %s\n", "component", "host", "GPU", "how");
  for (const guard::PlanComponent& c : plan.components) {
    std::printf("%-18s %14s %14s  %s\n", c.name.c_str(), Cell(c.host_bytes).c_str(), Cell(c.gpu_bytes).c_str(),
                c.note.c_str());
  }
  std::printf("%-18s %14s %14s\n", "total per worker", Cell(plan.host_total_bytes).c_str(),
              Cell(plan.gpu_total_bytes).c_str());
  std::printf("host: %s of the %s limit (%s; threshold %s)\n", HumanBytes(plan.host_total_bytes).c_str(),
              HumanBytes(plan.host_limit_bytes).c_str(), Percent(plan.host_total_bytes, plan.host_limit_bytes).c_str(),
              Percent(g.host_threshold, 1).c_str());
  if (job.spec.resources.gpus > 0) {
    if (plan.gpu_limit_bytes > 0) {
      std::printf("gpu:  %s of %s (%s; threshold %s)\n", HumanBytes(plan.gpu_total_bytes).c_str(),
                  HumanBytes(plan.gpu_limit_bytes).c_str(), Percent(plan.gpu_total_bytes, plan.gpu_limit_bytes).c_str(),
                  Percent(g.gpu_threshold, 1).c_str());
    } else {
      std::printf("gpu:  %s (device size unknown: pass --gpu-memory 80Gi to compare)\n",
                  HumanBytes(plan.gpu_total_bytes).c_str());
    }
  }
  std::printf("verdict: %s", fits ? "fits below the guard thresholds" : "does NOT fit below the guard thresholds");
  if (!fits) {
    int w = guard::SmallestFittingWorkers(job.spec, 1, options);
    if (w > 0) std::printf("; %d worker%s would", w, w == 1 ? "" : "s");
  }
  if (!worker_count_ok) std::printf("; %d workers do not divide the batch evenly", workers);
  std::printf("\n");
}

int RunPlan(const PlanArgs& args) {
  spec::ParseResult parsed = spec::ParseTrainingJobFile(args.path);
  if (!parsed.ok()) {
    for (const spec::SpecError& e : parsed.errors) std::cerr << e.ToString() << "\n";
    return 2;
  }
  const spec::TrainingJob& job = *parsed.job;
  const int workers = args.workers > 0 ? args.workers : job.spec.workers;
  guard::PlanOptions options;
  if (!args.gpu_memory.empty()) {
    std::string error;
    auto bytes = spec::ParseQuantityBytes(args.gpu_memory, &error);
    if (!bytes || *bytes <= 0) {
      std::cerr << "--gpu-memory: " << (error.empty() ? "must be > 0" : error) << "\n";
      return 2;
    }
    options.gpu_total_bytes = *bytes;
  }
  try {
    options.model = guard::JobModelShape(job.spec);
  } catch (const hf::HfConfigError& e) {
    std::cerr << (job.spec.model.path.empty() ? "spec.model.hub: " : "spec.model.path: ") << e.what()
              << " (the plan needs the model's config.json)\n";
    return 2;
  }
  const guard::ModelShape& shape = *options.model;
  PromptLength prompts;
  prompts.tokens = job.spec.grpo.max_prompt_length;
  if (!args.at_max_prompt_length) prompts = MeasurePrompts(args.path, job.spec.grpo);
  options.longest_prompt = prompts.data_longest;
  const guard::Plan plan = guard::PlanMemory(job.spec, workers, options);
  const bool fits = guard::PlanFits(plan, job.spec.memory_guard);
  const bool worker_count_ok = spec::WorkerCountFits(job.spec.grpo, workers);

  if (args.json) {
    PrintPlanJson(job, workers, shape, plan, fits, worker_count_ok, prompts);
  } else {
    PrintPlanTable(job, workers, shape, plan, fits, worker_count_ok, options, prompts);
  }
  return 0;
}

const bool kRegistered =
    RegisterCommand({"plan", "Estimate per-worker host and GPU memory by component for a TrainingJob",
                     [](CLI::App& sub) -> std::function<int()> {
                       auto args = std::make_shared<PlanArgs>();
                       sub.add_option("JOB", args->path, "TrainingJob YAML file")->required();
                       sub.add_option("--workers", args->workers, "plan for this many workers instead of spec.workers")
                           ->check(CLI::PositiveNumber);
                       sub.add_option("--gpu-memory", args->gpu_memory, "device memory per GPU (quantity, e.g. 80Gi)");
                       sub.add_flag("--at-max-prompt-length", args->at_max_prompt_length,
                                    "plan every prompt at maxPromptLength, without measuring the data's prompts");
                       sub.add_flag("--json", args->json, "print the plan as JSON");
                       return [args] { return RunPlan(*args); };
                     }});

}  // namespace
}  // namespace headroom::cli
