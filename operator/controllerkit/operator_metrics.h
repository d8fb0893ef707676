// OperatorMetrics: the operator's Prometheus series, under the names fixed in
// core/metrics/names.h (docs/design.md): reconciles by result, reconcile latency, guard
// actions by action and reason, jobs by phase; and each controller's work queue (keys
// ready, delayed, in processing), sampled when the metrics are rendered so a scrape sees
// the queue as it is. The reconciler increments them; the endpoints serve them at
// /metrics. Thread-safe (prometheus-cpp metrics are atomic; sources are under a mutex).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace headroom::controllerkit {

class OperatorMetrics {
 public:
  OperatorMetrics();

  // result: "success", "error", "requeue".
  void ObserveReconcile(const std::string& result, double seconds);
  void CountGuardAction(const std::string& action, const std::string& reason);
  // Sets headroom_operator_jobs{phase} for every phase given; phases not given go to 0.
  void SetJobsByPhase(const std::map<std::string, int>& jobs);

  struct QueueSample {
    size_t depth = 0;       // keys ready to hand out
    size_t waiting = 0;     // keys delayed (backoff or requeue-after)
    size_t processing = 0;  // keys handed to a worker, not done
  };
  // Registers the work queue of controller `name`; sampled on every Render().
  void AddWorkQueue(const std::string& name, std::function<QueueSample()> sample);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  // The Prometheus text exposition of everything in the registry.
  std::string Render() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* reconcile_total_;
  prometheus::Family<prometheus::Histogram>* reconcile_duration_;
  prometheus::Family<prometheus::Counter>* guard_actions_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Family<prometheus::Gauge>* queue_depth_;
  prometheus::Family<prometheus::Gauge>* queue_waiting_;
  prometheus::Family<prometheus::Gauge>* queue_processing_;
  mutable std::mutex queues_mu_;
  std::vector<std::pair<std::string, std::function<QueueSample()>>> queues_;
};

}  // namespace headroom::controllerkit
