// What a worker says about each step: it measures memory around the step (host working
// set and peak, the GPU allocator), builds the step's protocol::StepRecord from the
// trainer's result and that reading, and publishes it — one line of the step log and
// the /metrics gauges.
//
//   telemetry.BeginStep();
//   StepResult result = trainer.RunStep(step);
//   protocol::StepRecord record = telemetry.EndStep(result, next_step_tokens);
//   ... the guard and the checkpointer add their fields ...
//   telemetry.Publish(record);
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <torch/torch.h>

#include "core/protocol/step_record.h"
#include "worker/telemetry/memory_monitor.h"
#include "worker/telemetry/step_log.h"
#include "worker/telemetry/worker_metrics.h"
#include "worker/train/grpo_trainer.h"

namespace headroom::worker {

struct StepTelemetryOptions {
  std::string job_name;
  int rank = 0;
  int world_size = 1;
  int64_t micro_batch_size = 0;
  int64_t host_limit_bytes = 0;  // spec.resources.memory: the soft limit when no cgroup sets one
  std::string log_path;          // "" = stdout
  int metrics_port = -1;         // -1 = no endpoint, 0 = any free port
  std::string metrics_bind = "0.0.0.0";
};

class StepTelemetry {
 public:
  // Throws std::runtime_error when the log cannot be opened or the port bound.
  StepTelemetry(const StepTelemetryOptions& options, const torch::Device& device);

  void BeginStep();
  // The record of the step that just ran (`result.step` is 0-based; the record's step
  // counts finished steps). Returns freed heap to the system first when it matters
  // against the limit, so the end-of-step reading is the level, not the peak.
  protocol::StepRecord EndStep(const StepResult& result, int64_t next_step_tokens);
  void Publish(const protocol::StepRecord& record);

  const char* host_source() const { return monitor_.host_source(); }

 private:
  StepTelemetryOptions options_;
  std::unique_ptr<WorkerMetrics> metrics_;
  StepLogWriter log_;
  MemoryMonitor monitor_;
  int64_t host_limit_bytes_;  // as the last step read it
  std::chrono::steady_clock::time_point start_;
};

}  // namespace headroom::worker
