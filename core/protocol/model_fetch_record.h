// One line of a worker's step log that is not a step: how far the worker has got fetching
// its spec.model.hub model before the first step (README.md, "Models from the Hugging Face
// Hub or a mirror"). The worker writes it into the same step log as its StepRecords
// (step_record.h: --log FILE or stdout), so a supervisor that follows the step log sees the
// download too (`headroom run`'s view, the TrainingJob's status.modelFetch).
//
// JSON, one line:
//   {"model_fetch":{"repo":"Qwen/Qwen2.5-0.5B-Instruct","revision":"main",
//                   "file":"model.safetensors","done_bytes":1048576,"total_bytes":988097824}}
//   done_bytes/total_bytes count every file the fetch needs, cached ones included; the
//   fetch is complete when they are equal. `file` is the one being downloaded (or checked).
//
// Reading contract: ParseModelFetchLine() accepts exactly such an object (its "model_fetch"
// member an object; absent fields keep their defaults, unknown ones are ignored) and yields
// std::nullopt for anything else — a step record, a banner, a half-written line.
// ParseStepLogLine() in turn yields std::nullopt for a model-fetch line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace headroom::protocol {

struct ModelFetchRecord {
  std::string repo;
  std::string revision;
  std::string file;
  int64_t done_bytes = 0;
  int64_t total_bytes = 0;

  // Not in the JSON: which rank and launch of the job wrote it, set by the supervisor.
  int rank = 0;
  int generation = 0;

  bool complete() const { return total_bytes > 0 && done_bytes >= total_bytes; }
  std::string ToJson() const;  // one line, no trailing newline
};

std::optional<ModelFetchRecord> ParseModelFetchLine(const std::string& line);

}  // namespace headroom::protocol
