// The TrainingJob's .status as the operator writes and reads it back: runtime::JobStatus
// (operator/runtime/job_status.h, docs/design.md's status block) plus observedGeneration.
//
// Contract:
//   - StatusJson() is a pure function: the same JobStatus gives byte-identical JSON, so
//     the controller can compare what it would write with what is there and write only
//     when something changed.
//   - JobStatusFromJson() reads back what StatusJson() wrote (for JobReconciler::Restore
//     after an operator restart); missing or mistyped fields keep their defaults (a
//     status edited by hand must not stop the operator). The action ledger is not in
//     .status (only lastAction), so it comes back empty.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "operator/runtime/job_status.h"

namespace headroom::trainingjob {

// startTime (the first launch) and completionTime (Succeeded or Failed), RFC 3339; an
// empty string leaves the field out.
struct StatusTimes {
  std::string start_time;
  std::string completion_time;
};

nlohmann::json StatusJson(const runtime::JobStatus& status, int64_t observed_generation, const StatusTimes& times = {});
// The times a status written by StatusJson carries.
StatusTimes StatusTimesFromJson(const nlohmann::json& status);

runtime::JobStatus JobStatusFromJson(const nlohmann::json& status);

// Parses a phase name ("Running"); nullopt for anything else.
std::optional<runtime::JobPhase> JobPhaseFromName(const std::string& name);

}  // namespace headroom::trainingjob
