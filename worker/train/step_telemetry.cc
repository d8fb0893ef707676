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
  if (options_.metrics_port >= 0) {
    metrics_ = std::make_unique<WorkerMetrics>(options_.job_name, options_.rank, options_.metrics_port,
                                               options_.metrics_bind);
    spdlog::info("metrics on port {} (/metrics, /healthz)", metrics_->port());
  }
}

void StepTelemetry::BeginStep() {
  monitor_.BeginStep();
  start_ = std::chrono::steady_clock::now();
}

protocol::StepRecord StepTelemetry::EndStep(const StepResult& r, int64_t next_step_tokens) {
  ReturnFreedHeapToSystem(HeapTrimThreshold(host_limit_bytes_));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  protocol::StepRecord rec;
  monitor_.EndStep(rec);
  host_limit_bytes_ = rec.host_limit_bytes;
  rec.step = r.step + 1;
  rec.reward_mean = r.reward_mean;
  rec.exact_fraction = r.exact_fraction;
  rec.loss = r.loss;
  rec.kl = r.kl;
  rec.clip_fraction = r.clip_fraction;
  rec.grad_norm = r.grad_norm;
  rec.tokens = r.tokens;
  rec.next_step_tokens = next_step_tokens;
  rec.generated_tokens = r.generated_tokens;
  rec.step_seconds = seconds;
  rec.tokens_per_second = seconds > 0 ? static_cast<double>(r.tokens) / seconds : 0;
  rec.rollout_seconds = r.rollout_seconds;
  rec.update_seconds = r.update_seconds;
  rec.world_size = options_.world_size;
  rec.rank = options_.rank;
  rec.micro_batch_size = options_.micro_batch_size;
  return rec;
}

void StepTelemetry::Publish(const protocol::StepRecord& record) {
  log_.Write(record);
  if (metrics_) metrics_->Publish(record);
}

}  // namespace headroom::worker
