#include "worker/train/step_telemetry.h"

#include <spdlog/spdlog.h>

#include "worker/telemetry/gpu_memory_source.h"
#include "worker/telemetry/heap_trim.h"

namespace headroom::worker {

StepTelemetry::StepTelemetry(const StepTelemetryOptions& options, const torch::Device& device)
    : options_(options),
      log_(options.log_path),
      monitor_(options.host_limit_bytes, MakeGpuMemorySource(device)),
      host_limit_bytes_(options.host_limit_bytes) {
  SetHostLimitForHeapTrims(host_limit_bytes_);
  if (options_.metrics_port >= 0) {
    metrics_ =
        std::make_unique<WorkerMetrics>(options_.job_name, options_.rank, options_.metrics_port, options_.metrics_bind);
    spdlog::info("metrics on port {} (/metrics, /healthz)", metrics_->port());
  }
}

void StepTelemetry::BeginStep() {
  monitor_.BeginStep();
  start_ = std::chrono::steady_clock::now();
}

StepMeasurement StepTelemetry::EndStep() {
  ReturnFreedHeapToSystem(HeapTrimThreshold(host_limit_bytes_));
  StepMeasurement measured;
  measured.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  measured.memory = monitor_.EndStep();
  host_limit_bytes_ = measured.memory.host_limit_bytes;
  SetHostLimitForHeapTrims(host_limit_bytes_);
  measured.world_size = options_.world_size;
  measured.rank = options_.rank;
  measured.micro_batch_size = options_.micro_batch_size;
  return measured;
}

void StepTelemetry::Publish(const protocol::StepRecord& record) {
  log_.Write(record);
  if (metrics_) metrics_->Publish(record);
}

}  // namespace headroom::worker
