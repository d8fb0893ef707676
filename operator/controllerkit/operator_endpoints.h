// OperatorEndpoints: the operator's own HTTP port — /metrics (Prometheus text, from the
// OperatorMetrics registry), /healthz (the process is alive and its loops turn) and
// /readyz (informers synced; leader election state reported). One cpprest listener
// serves all three on one port (--metrics-port), so the Deployment's probes and the
// ServiceMonitor point at the same place; prometheus-cpp's civetweb Exposer is not used
// because it cannot serve the probe paths beside /metrics.
//
// Checks are named functions; a failing check makes the endpoint answer 500 with
// "[-]name failed: detail" lines, the Kubernetes API server's own format:
//   [+]informers ok
//   [-]leader-election failed: following headroom-operator-7d9 (not leading)
// (leadership is reported, not required: a follower is ready to take over.)
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "operator/controllerkit/operator_metrics.h"

namespace headroom::controllerkit {

class OperatorEndpoints {
 public:
  // detail: a short explanation, filled in by the check either way.
  using Check = std::function<bool(std::string* detail)>;

  // port 0 picks a free one (see port()). address "0.0.0.0" to be reachable from the
  // kubelet, "127.0.0.1" for tests.
  OperatorEndpoints(std::string address, int port, std::shared_ptr<OperatorMetrics> metrics);
  ~OperatorEndpoints();

  void AddHealthCheck(const std::string& name, Check check);
  void AddReadinessCheck(const std::string& name, Check check);
  // Informational line on /readyz that never fails it.
  void AddReadinessInfo(const std::string& name, std::function<std::string()> info);

  void Start();  // throws std::runtime_error when the port cannot be bound
  void Stop();
  int port() const { return port_; }

  // What the endpoint would answer (code, body): for tests and for logging at startup.
  std::pair<int, std::string> Healthz() const;
  std::pair<int, std::string> Readyz() const;

 private:
  struct Impl;
  std::string address_;
  int port_;
  std::shared_ptr<OperatorMetrics> metrics_;
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, Check>> health_;
  std::vector<std::pair<std::string, Check>> ready_;
  std::vector<std::pair<std::string, std::function<std::string()>>> info_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace headroom::controllerkit
