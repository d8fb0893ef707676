// OperatorMetrics: the operator's Prometheus series, under the names fixed in
// core/metrics/names.h (design.md): reconciles by result, reconcile latency, guard
// actions by action and reason, jobs by phase. The reconciler increments them; the
// endpoints serve them at /metrics. Thread-safe (prometheus-cpp metrics are atomic).
#pragma once

#include <map>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace headroom::controller {

class OperatorMetrics {
 public:
  OperatorMetrics();

  // result: "success", "error", "requeue".
  void ObserveReconcile(const std::string& result, double seconds);
  void CountGuardAction(const std::string& action, const std::string& reason);
  // Sets headroom_operator_jobs{phase} for every phase given; phases not given go to 0.
  void SetJobsByPhase(const std::map<std::string, int>& jobs);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  // The Prometheus text exposition of everything in the registry.
  std::string Render() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* reconcile_total_;
  prometheus::Family<prometheus::Histogram>* reconcile_duration_;
  prometheus::Family<prometheus::Counter>* guard_actions_;
  prometheus::Family<prometheus::Gauge>* jobs_;
};

}  // namespace headroom::controller
