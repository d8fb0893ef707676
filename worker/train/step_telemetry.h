// What a worker measures about each step and where it says it: memory around the step
// (host working set and peak, the GPU allocator) and its duration, returned as a
// StepMeasurement; and the publishing of the step's record — one line of the step log
// and the /metrics gauges. The record itself is assembled by worker/train/step_report.h.
//
//   telemetry.BeginStep();
//   report.training = trainer.RunStep(step);
//   report.measured = telemetry.EndStep();
//   ... the other phases report ...
//   telemetry.Publish(AssembleStepRecord(report));
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

// What the telemetry measured about one step, and where that step ran.
struct StepMeasurement {
  MemoryReading memory;
  double seconds = 0;  // BeginStep() to EndStep()
  int world_size = 1, rank = 0;
  int64_t micro_batch_size = 0;
};

class StepTelemetry {
 public:
  // Throws std::runtime_error when the log cannot be opened or the port bound.
  StepTelemetry(const StepTelemetryOptions& options, const torch::Device& device);

  void BeginStep();
  // The step that just ran, as measured. Returns freed heap to the system first when it
  // matters against the limit, so the end-of-step reading is the level, not the peak.
  StepMeasurement EndStep();
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
