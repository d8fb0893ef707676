#include "worker/telemetry/step_log.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace headroom::worker {

std::string StepRecord::ToJson() const {
  nlohmann::ordered_json j;
  j["step"] = step;
  j["reward_mean"] = reward_mean;
  j["loss"] = loss;
  j["kl"] = kl;
  j["host_bytes"] = host_bytes;
  j["host_peak_bytes"] = host_peak_bytes;
  j["host_limit_bytes"] = host_limit_bytes;
  j["gpu_allocated_bytes"] = gpu_allocated_bytes;
  j["gpu_reserved_bytes"] = gpu_reserved_bytes;
  j["gpu_peak_bytes"] = gpu_peak_bytes;
  j["gpu_total_bytes"] = gpu_total_bytes;
  j["tokens"] = tokens;
  j["step_seconds"] = step_seconds;
  j["tokens_per_second"] = tokens_per_second;
  j["next_step_tokens"] = next_step_tokens;
  j["world_size"] = world_size;
  j["rank"] = rank;
  j["micro_batch_size"] = micro_batch_size;
  j["exact_fraction"] = exact_fraction;
  j["clip_fraction"] = clip_fraction;
  j["grad_norm"] = grad_norm;
  j["generated_tokens"] = generated_tokens;
  j["gpu_alloc_retries"] = gpu_alloc_retries;
  j["rollout_seconds"] = rollout_seconds;
  j["update_seconds"] = update_seconds;
  j["guard_action"] = guard_action;
  j["host_forecast_steps"] = host_forecast_steps;
  j["host_growth_bytes_per_step"] = host_growth_bytes_per_step;
  j["checkpoint_bytes"] = checkpoint_bytes;
  j["checkpoint_seconds"] = checkpoint_seconds;
  return j.dump();
}

StepLogWriter::StepLogWriter(const std::string& path) {
  if (path.empty() || path == "-") {
    file_ = stdout;
    owned_ = false;
    return;
  }
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw std::runtime_error("--log " + path + ": " + std::strerror(errno));
  owned_ = true;
}

StepLogWriter::~StepLogWriter() {
  if (owned_) std::fclose(file_);
}

void StepLogWriter::Write(const StepRecord& record) {
  const std::string line = record.ToJson() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace headroom::worker
