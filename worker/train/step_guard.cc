#include "worker/train/step_guard.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>

#include "core/guard/planner.h"
#include "core/guard/policy.h"

namespace headroom::worker {

StepGuard::StepGuard(const spec::TrainingJobSpec& spec, int world_size)
    : spec_(spec),
      world_size_(world_size),
      forecaster_(guard::ForecasterOptionsFromSpec(spec.memory_guard)),
      history_(guard::GuardHistory::FromEnvironment()) {}

guard::Decision StepGuard::Check(const guard::StepMemory& memory, int64_t next_step_tokens) {
  forecaster_.Observe(memory);
  forecast_ = forecaster_.ForecastNext(next_step_tokens);
  guard::PlanOptions plan_options;
  plan_options.gpu_total_bytes = memory.gpu_limit_bytes;
  const guard::Plan plan = guard::PlanMemory(spec_, world_size_, plan_options);
  return guard::Decide(forecast_, spec_, history_, &plan, world_size_, plan_options);
}

std::string WriteTerminationMessage(const std::string& message) {
  std::string path;
  if (std::filesystem::exists("/dev/termination-log")) {
    path = "/dev/termination-log";
  } else if (const char* env = std::getenv("HEADROOM_TERMINATION_LOG"); env && *env) {
    path = env;
  } else {
    return "";
  }
  std::ofstream out(path, std::ios::trunc);
  out << message << "\n";
  if (!out) {
    spdlog::error("cannot write the termination message to {}", path);
    return "";
  }
  return path;
}

}  // namespace headroom::worker
