#include "worker/telemetry/worker_metrics.h"

#include <stdexcept>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "core/metrics/metrics_http_server.h"
#include "core/metrics/names.h"

namespace headroom::worker {
namespace {

prometheus::Gauge* AddGauge(prometheus::Registry& registry, const char* name, const char* help,
                            const prometheus::Labels& labels) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(labels);
}

}  // namespace

WorkerMetrics::WorkerMetrics(const std::string& job, int rank, int port, const std::string& bind_host)
    : registry_(std::make_shared<prometheus::Registry>()), health_(std::make_shared<prometheus::Registry>()) {
  namespace m = headroom::metrics;
  const prometheus::Labels labels{{m::kLabelJob, job}, {m::kLabelRank, std::to_string(rank)}};
  auto& r = *registry_;
  step_ = AddGauge(r, m::kWorkerStep, "Last finished training step", labels);
  host_ = AddGauge(r, m::kWorkerHostMemoryBytes, "Host working set at the end of the step", labels);
  host_peak_ = AddGauge(r, m::kWorkerHostMemoryPeakBytes, "Host working set peak during the step", labels);
  host_limit_ = AddGauge(r, m::kWorkerHostMemoryLimitBytes, "Host memory limit guarded", labels);
  gpu_alloc_ = AddGauge(r, m::kWorkerGpuMemoryAllocatedBytes, "CUDA caching allocator: allocated", labels);
  gpu_reserved_ = AddGauge(r, m::kWorkerGpuMemoryReservedBytes, "CUDA caching allocator: reserved", labels);
  gpu_peak_ = AddGauge(r, m::kWorkerGpuMemoryPeakBytes, "CUDA caching allocator: reserved peak in the step", labels);
  gpu_total_ = AddGauge(r, m::kWorkerGpuMemoryTotalBytes, "Device memory (cudaMemGetInfo total)", labels);
  auto& growth = prometheus::BuildGauge()
                     .Name(m::kWorkerMemoryGrowthBytesPerStep)
                     .Help("Forecast memory growth per step")
                     .Register(r);
  prometheus::Labels host_labels = labels, gpu_labels = labels;
  host_labels[m::kLabelResource] = m::kResourceHost;
  gpu_labels[m::kLabelResource] = m::kResourceGpu;
  growth_host_ = &growth.Add(host_labels);
  growth_gpu_ = &growth.Add(gpu_labels);
  auto& forecast = prometheus::BuildGauge()
                       .Name(m::kWorkerOomForecastSteps)
                       .Help("Forecast steps until the memory limit (-1 = not within reach)")
                       .Register(r);
  forecast_host_ = &forecast.Add(host_labels);
  forecast_gpu_ = &forecast.Add(gpu_labels);
  reward_ = AddGauge(r, m::kWorkerRewardMean, "Mean reward of the step's samples", labels);
  loss_ = AddGauge(r, m::kWorkerLoss, "GRPO loss of the step", labels);
  kl_ = AddGauge(r, m::kWorkerKl, "k3 KL to the reference model (0 without one)", labels);
  heldout_reward_ = AddGauge(r, m::kWorkerHeldoutReward,
                             "Mean reward of greedy responses to the held-out problems at the latest evaluation "
                             "(-1 before the first)",
                             labels);
  heldout_reward_->Set(-1);
  heldout_accuracy_ = AddGauge(r, m::kWorkerHeldoutAccuracy,
                               "Fraction of held-out problems answered exactly right at the latest evaluation, the "
                               "one before the first step included (-1 before any)",
                               labels);
  heldout_accuracy_->Set(-1);
  tokens_ = &prometheus::BuildCounter().Name(m::kWorkerTokensTotal).Help("Tokens processed").Register(r).Add(labels);
  step_seconds_ = &prometheus::BuildHistogram()
                       .Name(m::kWorkerStepDurationSeconds)
                       .Help("Wall time of one training step")
                       .Register(r)
                       .Add(labels, prometheus::Histogram::BucketBoundaries{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
                                                                            30, 60, 120, 300});
  AddGauge(*health_, "headroom_worker_up", "1 while the worker serves requests", labels)->Set(1);

  server_ = std::make_unique<metrics::MetricsHttpServer>(bind_host, port);
  server_->HandleCollectable("/metrics", registry_);
  server_->HandleCollectable("/healthz", health_);
  try {
    server_->Start();
  } catch (const std::exception& e) {
    throw std::runtime_error("--metrics-port " + std::to_string(port) + ": " + e.what());
  }
  port_ = server_->port();
}

WorkerMetrics::~WorkerMetrics() = default;

void WorkerMetrics::Publish(const protocol::StepRecord& r) {
  step_->Set(static_cast<double>(r.step));
  host_->Set(static_cast<double>(r.host_bytes));
  host_peak_->Set(static_cast<double>(r.host_peak_bytes));
  host_limit_->Set(static_cast<double>(r.host_limit_bytes));
  gpu_alloc_->Set(static_cast<double>(r.gpu_allocated_bytes));
  gpu_reserved_->Set(static_cast<double>(r.gpu_reserved_bytes));
  gpu_peak_->Set(static_cast<double>(r.gpu_peak_bytes));
  gpu_total_->Set(static_cast<double>(r.gpu_total_bytes));
  growth_host_->Set(r.host_growth_bytes_per_step);
  growth_gpu_->Set(r.gpu_growth_bytes_per_step);
  forecast_host_->Set(r.host_forecast_steps);
  forecast_gpu_->Set(r.gpu_forecast_steps);
  reward_->Set(r.reward_mean);
  loss_->Set(r.loss);
  kl_->Set(r.kl);
  if (r.heldout_problems > 0) heldout_reward_->Set(r.heldout_reward);
  if (r.heldout_accuracy >= 0) {
    heldout_accuracy_->Set(r.heldout_accuracy);
  } else if (r.heldout_accuracy_before >= 0) {
    heldout_accuracy_->Set(r.heldout_accuracy_before);
  }
  tokens_->Increment(static_cast<double>(r.tokens));
  step_seconds_->Observe(r.step_seconds);
}

}  // namespace headroom::worker
