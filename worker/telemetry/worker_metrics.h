// The worker's Prometheus endpoint: /metrics with docs/design.md's names (core/metrics/names.h)
// labelled {job, rank}, and /healthz, both served by core/metrics/metrics_http_server.h
// (not prometheus-cpp's civetweb Exposer: its 100 KiB handler stacks overflowed under
// scrapes and killed the worker with SIGSEGV — see that header).
//
// /healthz answers 200 with `headroom_worker_up 1` while the process serves requests.
//
// Port 0 binds any free port; port() tells which (and the worker logs it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "worker/telemetry/step_log.h"

namespace headroom::metrics {
class MetricsHttpServer;
}

namespace prometheus {
class Registry;
class Gauge;
class Counter;
class Histogram;
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
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Registry> health_;
  std::unique_ptr<metrics::MetricsHttpServer> server_;
  int port_ = 0;
  prometheus::Gauge *step_, *host_, *host_peak_, *host_limit_, *gpu_alloc_, *gpu_reserved_, *gpu_peak_,
      *gpu_total_, *growth_host_, *growth_gpu_, *forecast_host_, *forecast_gpu_, *reward_, *loss_, *kl_,
      *heldout_reward_, *heldout_accuracy_;
  prometheus::Counter* tokens_;
  prometheus::Histogram* step_seconds_;
};

}  // namespace headroom::worker
