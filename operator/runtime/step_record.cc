#include "operator/runtime/step_record.h"

#include <nlohmann/json.hpp>

namespace headroom::runtime {

namespace {

template <typename T>
void Read(const nlohmann::json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it != j.end() && it->is_number()) out = it->get<T>();
}

}  // namespace

std::optional<StepRecord> ParseStepLogLine(const std::string& line, std::string* why) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    if (why) *why = "not JSON";
    return std::nullopt;
  }
  if (!j.is_object()) {
    if (why) *why = "not a JSON object";
    return std::nullopt;
  }
  auto step = j.find("step");
  if (step == j.end() || !step->is_number_integer()) {
    if (why) *why = "no integer \"step\"";
    return std::nullopt;
  }
  StepRecord r;
  r.step = step->get<int64_t>();
  Read(j, "reward_mean", r.reward_mean);
  Read(j, "loss", r.loss);
  Read(j, "kl", r.kl);
  Read(j, "host_bytes", r.host_bytes);
  Read(j, "host_peak_bytes", r.host_peak_bytes);
  Read(j, "host_limit_bytes", r.host_limit_bytes);
  Read(j, "gpu_allocated_bytes", r.gpu_allocated_bytes);
  Read(j, "gpu_reserved_bytes", r.gpu_reserved_bytes);
  Read(j, "gpu_peak_bytes", r.gpu_peak_bytes);
  Read(j, "gpu_total_bytes", r.gpu_total_bytes);
  Read(j, "tokens", r.tokens);
  Read(j, "next_step_tokens", r.next_step_tokens);
  Read(j, "step_seconds", r.step_seconds);
  Read(j, "tokens_per_second", r.tokens_per_second);
  return r;
}

std::string StepRecordToJsonLine(const StepRecord& r) {
  nlohmann::json j = {
      {"step", r.step},
      {"reward_mean", r.reward_mean},
      {"loss", r.loss},
      {"kl", r.kl},
      {"host_bytes", r.host_bytes},
      {"host_peak_bytes", r.host_peak_bytes},
      {"host_limit_bytes", r.host_limit_bytes},
      {"gpu_allocated_bytes", r.gpu_allocated_bytes},
      {"gpu_reserved_bytes", r.gpu_reserved_bytes},
      {"gpu_peak_bytes", r.gpu_peak_bytes},
      {"gpu_total_bytes", r.gpu_total_bytes},
      {"tokens", r.tokens},
      {"next_step_tokens", r.next_step_tokens},
      {"step_seconds", r.step_seconds},
      {"tokens_per_second", r.tokens_per_second},
  };
  return j.dump();
}

}  // namespace headroom::runtime
