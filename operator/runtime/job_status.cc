#include "operator/runtime/job_status.h"

#include <nlohmann/json.hpp>

namespace headroom::runtime {

const char* JobPhaseName(JobPhase phase) {
  switch (phase) {
    case JobPhase::kPending: return "Pending";
    case JobPhase::kRunning: return "Running";
    case JobPhase::kRestarting: return "Restarting";
    case JobPhase::kResharding: return "Resharding";
    case JobPhase::kSuspended: return "Suspended";
    case JobPhase::kSucceeded: return "Succeeded";
    case JobPhase::kFailed: return "Failed";
  }
  return "Unknown";
}

bool IsTerminal(JobPhase phase) {
  return phase == JobPhase::kSuspended || phase == JobPhase::kSucceeded || phase == JobPhase::kFailed;
}

namespace {
nlohmann::json ActionJson(const ActionRecord& a) {
  return {{"step", a.step}, {"type", ToWireName(a.type)}, {"reason", a.reason}, {"time", a.time}};
}
}  // namespace

nlohmann::json ToJson(const JobStatus& s) {
  nlohmann::json memory = {
      {"hostBytes", s.memory.host_bytes},
      {"hostLimitBytes", s.memory.host_limit_bytes},
      {"gpuBytes", s.memory.gpu_bytes},
      {"gpuLimitBytes", s.memory.gpu_limit_bytes},
      {"growthBytesPerStep", s.memory.growth_bytes_per_step},
  };
  if (s.memory.forecast_steps_to_limit) {
    memory["forecastStepsToLimit"] = *s.memory.forecast_steps_to_limit;
  }
  // Whole percent of the limit, for `kubectl get tj`'s Mem% column (the CRD's printer
  // column reads .status.memory.hostPercent); derived, so readers ignore it.
  if (s.memory.host_limit_bytes > 0) {
    memory["hostPercent"] = static_cast<int64_t>(100.0 * static_cast<double>(s.memory.host_bytes) /
                                                 static_cast<double>(s.memory.host_limit_bytes));
  }
  nlohmann::json j = {
      {"phase", JobPhaseName(s.phase)}, {"generation", s.generation}, {"step", s.step},
      {"workers", s.workers},           {"restarts", s.restarts},     {"reshards", s.reshards},
      {"oomKills", s.oom_kills},        {"stepsLost", s.steps_lost},  {"memory", memory},
  };
  if (s.disruptions > 0) j["disruptions"] = s.disruptions;
  if (s.heldout_accuracy) j["heldOutAccuracy"] = *s.heldout_accuracy;
  if (s.last_action) j["lastAction"] = ActionJson(*s.last_action);
  nlohmann::json conditions = nlohmann::json::array();
  for (const Condition& c : s.conditions) {
    conditions.push_back({{"type", c.type},
                          {"status", c.status},
                          {"reason", c.reason},
                          {"message", c.message},
                          {"lastTransitionTime", c.last_transition_time}});
  }
  j["conditions"] = conditions;
  if (!s.message.empty()) j["message"] = s.message;
  if (s.model_fetch) {
    j["modelFetch"] = {{"repo", s.model_fetch->repo},
                       {"revision", s.model_fetch->revision},
                       {"file", s.model_fetch->file},
                       {"doneBytes", s.model_fetch->done_bytes},
                       {"totalBytes", s.model_fetch->total_bytes}};
  }
  return j;
}

}  // namespace headroom::runtime
