// The worker's Prometheus endpoint: /metrics with docs/design.md's names (core/metrics/names.h)
// labelled {job, rank}, and /healthz, both served by core/metrics/metrics_http_server.h
// (not prometheus-cpp's civetweb Exposer: its 100 KiB handler stacks overflowed under
// scrapes and killed the worker with SIGSEGV — see that header).
//
// /healthz answers 200 with `headroom_worker_up 1` while the process serves requests.
//
// Port 0 binds any free port; port() tells which (and the worker logs it).
//
// The step series are core/protocol/step_metrics.h's table, the one mapping the operator
// reads back with; besides them, docs/design.md's running token total and step-duration
// histogram.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/labels.h>

#include "worker/telemetry/step_log.h"

namespace headroom::metrics {
class MetricsHttpServer;
}

namespace prometheus {
class Registry;
class Gauge;
class Counter;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace headroom::worker {

class WorkerMetrics {
 public:
  // Throws std::runtime_error when the port cannot be bound.
  WorkerMetrics(const std::string& job, int rank, int port, const std::string& bind_host = "0.0.0.0");
  ~WorkerMetrics();

  int port() const { return port_; }
  // Publishes one finished step; gpu series only when a GPU is present.
  void Publish(const protocol::StepRecord& record);

 private:
  struct Row;  // one gauge per row of core/protocol/step_metrics.h's table

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Registry> health_;
  std::unique_ptr<metrics::MetricsHttpServer> server_;
  int port_ = 0;
  prometheus::Labels labels_;
  std::vector<Row> rows_;
  prometheus::Family<prometheus::Gauge>* guard_action_family_ = nullptr;
  prometheus::Gauge* guard_action_ = nullptr;
  std::string guard_action_name_;
  prometheus::Counter* tokens_;
  prometheus::Histogram* step_seconds_;
};

}  // namespace headroom::worker
