#include "operator/trainingjob/status.h"

#include <optional>
#include <string>

namespace headroom::trainingjob {

using nlohmann::json;

namespace {

template <typename T>
T Get(const json& j, const char* key, T fallback) {
  if (!j.is_object() || !j.contains(key)) return fallback;
  const json& v = j[key];
  if constexpr (std::is_same_v<T, std::string>) {
    return v.is_string() ? v.get<std::string>() : fallback;
  } else {
    return v.is_number() ? v.get<T>() : fallback;
  }
}

}  // namespace

std::optional<runtime::JobPhase> JobPhaseFromName(const std::string& name) {
  using runtime::JobPhase;
  for (JobPhase p : {JobPhase::kPending, JobPhase::kRunning, JobPhase::kRestarting, JobPhase::kResharding,
                     JobPhase::kSuspended, JobPhase::kSucceeded, JobPhase::kFailed}) {
    if (name == runtime::JobPhaseName(p)) return p;
  }
  return std::nullopt;
}

json StatusJson(const runtime::JobStatus& status, int64_t observed_generation, const StatusTimes& times) {
  json j = runtime::ToJson(status);
  j["observedGeneration"] = observed_generation;
  if (!times.start_time.empty()) j["startTime"] = times.start_time;
  if (!times.completion_time.empty()) j["completionTime"] = times.completion_time;
  return j;
}

StatusTimes StatusTimesFromJson(const json& status) {
  return StatusTimes{Get<std::string>(status, "startTime", ""), Get<std::string>(status, "completionTime", "")};
}

runtime::JobStatus JobStatusFromJson(const json& j) {
  runtime::JobStatus s;
  if (!j.is_object()) return s;
  s.phase = JobPhaseFromName(Get<std::string>(j, "phase", "")).value_or(runtime::JobPhase::kPending);
  s.generation = Get<int>(j, "generation", 0);
  s.step = Get<int64_t>(j, "step", 0);
  s.workers = Get<int>(j, "workers", 0);
  s.restarts = Get<int>(j, "restarts", 0);
  s.reshards = Get<int>(j, "reshards", 0);
  s.disruptions = Get<int>(j, "disruptions", 0);
  s.oom_kills = Get<int>(j, "oomKills", 0);
  s.steps_lost = Get<int64_t>(j, "stepsLost", 0);
  s.message = Get<std::string>(j, "message", "");
  if (j.contains("heldOutAccuracy") && j["heldOutAccuracy"].is_number()) {
    s.heldout_accuracy = j["heldOutAccuracy"].get<double>();
  }
  if (j.contains("memory") && j["memory"].is_object()) {
    const json& m = j["memory"];
    s.memory.host_bytes = Get<int64_t>(m, "hostBytes", 0);
    s.memory.host_limit_bytes = Get<int64_t>(m, "hostLimitBytes", 0);
    s.memory.gpu_bytes = Get<int64_t>(m, "gpuBytes", 0);
    s.memory.gpu_limit_bytes = Get<int64_t>(m, "gpuLimitBytes", 0);
    s.memory.growth_bytes_per_step = Get<double>(m, "growthBytesPerStep", 0.0);
    if (m.contains("forecastStepsToLimit") && m["forecastStepsToLimit"].is_number()) {
      s.memory.forecast_steps_to_limit = m["forecastStepsToLimit"].get<double>();
    }
  }
  if (j.contains("lastAction") && j["lastAction"].is_object()) {
    const json& a = j["lastAction"];
    // A type this operator does not know (written by a newer one) leaves lastAction unset:
    // it is shown, never acted on, and the next action replaces it.
    if (std::optional<runtime::ActionType> type = runtime::FromWireName(Get<std::string>(a, "type", ""))) {
      s.last_action = runtime::ActionRecord{Get<int64_t>(a, "step", 0), *type, Get<std::string>(a, "reason", ""),
                                            Get<std::string>(a, "time", "")};
    }
  }
  if (j.contains("modelFetch") && j["modelFetch"].is_object()) {
    const json& f = j["modelFetch"];
    s.model_fetch = protocol::ModelFetchRecord{Get<std::string>(f, "repo", ""), Get<std::string>(f, "revision", ""),
                                               Get<std::string>(f, "file", ""), Get<int64_t>(f, "doneBytes", 0),
                                               Get<int64_t>(f, "totalBytes", 0)};
  }
  if (j.contains("conditions") && j["conditions"].is_array()) {
    for (const json& c : j["conditions"]) {
      s.conditions.push_back({Get<std::string>(c, "type", ""), Get<std::string>(c, "status", ""),
                              Get<std::string>(c, "reason", ""), Get<std::string>(c, "message", ""),
                              Get<std::string>(c, "lastTransitionTime", "")});
    }
  }
  return s;
}

}  // namespace headroom::trainingjob
