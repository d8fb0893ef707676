#include "worker/telemetry/worker_metrics.h"

#include <map>
#include <stdexcept>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "core/metrics/metrics_http_server.h"
#include "core/metrics/names.h"
#include "core/protocol/step_metrics.h"

namespace headroom::worker {
namespace {

prometheus::Gauge* AddGauge(prometheus::Registry& registry, const char* name, const char* help,
                            const prometheus::Labels& labels) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(labels);
}

}  // namespace

struct WorkerMetrics::Row {
  const protocol::StepMetric* metric;
  prometheus::Gauge* gauge;
};

WorkerMetrics::WorkerMetrics(const std::string& job, int rank, int port, const std::string& bind_host)
    : registry_(std::make_shared<prometheus::Registry>()), health_(std::make_shared<prometheus::Registry>()) {
  namespace m = headroom::metrics;
  labels_ = {{m::kLabelJob, job}, {m::kLabelRank, std::to_string(rank)}};
  auto& r = *registry_;
  // One family per series name: the host and gpu rows of a forecast share theirs.
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> families;
  for (const protocol::StepMetric& metric : protocol::StepMetrics()) {
    auto& family = families[metric.name];
    if (family == nullptr) family = &prometheus::BuildGauge().Name(metric.name).Help(metric.help).Register(r);
    prometheus::Labels labels = labels_;
    if (metric.resource != nullptr) labels[m::kLabelResource] = metric.resource;
    prometheus::Gauge* gauge = &family->Add(labels);
    gauge->Set(metric.get(protocol::StepRecord()));  // the defaults (-1 = never, before the first evaluation)
    rows_.push_back({&metric, gauge});
  }
  guard_action_family_ = &prometheus::BuildGauge()
                              .Name(m::kWorkerGuardAction)
                              .Help("What the memory guard decided after the step (1)")
                              .Register(r);
  tokens_ = &prometheus::BuildCounter().Name(m::kWorkerTokensTotal).Help("Tokens processed").Register(r).Add(labels_);
  step_seconds_ = &prometheus::BuildHistogram()
                       .Name(m::kWorkerStepDurationSeconds)
                       .Help("Wall time of one training step")
                       .Register(r)
                       .Add(labels_, prometheus::Histogram::BucketBoundaries{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
                                                                             60, 120, 300});
  AddGauge(*health_, "headroom_worker_up", "1 while the worker serves requests", labels_)->Set(1);

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

void WorkerMetrics::Publish(const protocol::StepRecord& record) {
  for (const Row& row : rows_) {
    if (!protocol::CarriesMetric(*row.metric, record)) continue;
    row.gauge->Set(row.metric->get(record));
  }
  if (guard_action_ == nullptr || guard_action_name_ != record.guard_action) {
    if (guard_action_ != nullptr) guard_action_family_->Remove(guard_action_);
    prometheus::Labels labels = labels_;
    labels[metrics::kLabelAction] = record.guard_action;
    guard_action_ = &guard_action_family_->Add(labels);
    guard_action_->Set(1);
    guard_action_name_ = record.guard_action;
  }
  tokens_->Increment(static_cast<double>(record.tokens));
  step_seconds_->Observe(record.step_seconds);
}

}  // namespace headroom::worker
