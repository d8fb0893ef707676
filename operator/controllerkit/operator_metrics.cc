#include "operator/controllerkit/operator_metrics.h"

#include <prometheus/text_serializer.h>

#include "core/metrics/names.h"

namespace headroom::controllerkit {

namespace {
// The TrainingJob phases of docs/design.md: every one is exported (at 0 when empty), so a
// dashboard's sum by phase never has holes.
const char* kPhases[] = {"Pending", "Running", "Restarting", "Resharding", "Suspended", "Succeeded", "Failed"};

// A metric family registered in `registry` under its fixed name and help text.
template <typename Builder>
auto* Register(Builder builder, const char* name, const char* help, prometheus::Registry& registry) {
  return &builder.Name(name).Help(help).Register(registry);
}

}  // namespace

OperatorMetrics::OperatorMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  using prometheus::BuildCounter, prometheus::BuildGauge, prometheus::BuildHistogram;
  reconcile_total_ = Register(BuildCounter(), metrics::kOperatorReconcileTotal,
                              "TrainingJob reconciles, by result (success, error, requeue)", *registry_);
  reconcile_duration_ = Register(BuildHistogram(), metrics::kOperatorReconcileDurationSeconds,
                                 "Time one TrainingJob reconcile took", *registry_);
  guard_actions_ = Register(BuildCounter(), metrics::kOperatorGuardActionsTotal,
                            "Memory guard actions the operator applied, by action and reason", *registry_);
  jobs_ = Register(BuildGauge(), metrics::kOperatorJobs, "TrainingJobs by phase", *registry_);
  queue_depth_ =
      Register(BuildGauge(), metrics::kOperatorWorkqueueDepth, "Keys ready in the controller's work queue", *registry_);
  queue_waiting_ = Register(BuildGauge(), metrics::kOperatorWorkqueueWaiting,
                            "Keys delayed in the controller's work queue (backoff, requeue-after)", *registry_);
  queue_processing_ =
      Register(BuildGauge(), metrics::kOperatorWorkqueueProcessing, "Keys being reconciled", *registry_);
  for (const char* result : {"success", "error", "requeue"}) reconcile_total_->Add({{"result", result}});
  for (const char* phase : kPhases) jobs_->Add({{"phase", phase}}).Set(0);
}

void OperatorMetrics::ObserveReconcile(const std::string& result, double seconds) {
  reconcile_total_->Add({{"result", result}}).Increment();
  static const prometheus::Histogram::BucketBoundaries kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                                   0.25,  0.5,    1,     2.5,  5,     10};
  reconcile_duration_->Add({}, kBuckets).Observe(seconds);
}

void OperatorMetrics::CountGuardAction(const std::string& action, const std::string& reason) {
  guard_actions_->Add({{"action", action}, {"reason", reason}}).Increment();
}

void OperatorMetrics::SetJobsByPhase(const std::map<std::string, int>& jobs) {
  for (const char* phase : kPhases) {
    auto it = jobs.find(phase);
    jobs_->Add({{"phase", phase}}).Set(it == jobs.end() ? 0 : it->second);
  }
  for (const auto& [phase, n] : jobs) jobs_->Add({{"phase", phase}}).Set(n);
}

void OperatorMetrics::AddWorkQueue(const std::string& name, std::function<QueueSample()> sample) {
  std::lock_guard<std::mutex> lock(queues_mu_);
  queues_.emplace_back(name, std::move(sample));
}

std::string OperatorMetrics::Render() const {
  {
    std::lock_guard<std::mutex> lock(queues_mu_);
    for (const auto& [name, sample] : queues_) {
      const QueueSample q = sample();
      queue_depth_->Add({{"name", name}}).Set(static_cast<double>(q.depth));
      queue_waiting_->Add({{"name", name}}).Set(static_cast<double>(q.waiting));
      queue_processing_->Add({{"name", name}}).Set(static_cast<double>(q.processing));
    }
  }
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace headroom::controllerkit
