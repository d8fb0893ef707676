#include "operator/controllerkit/controller.h"

#include <spdlog/spdlog.h>

namespace headroom::controllerkit {

Controller::Controller(std::string name, std::shared_ptr<WorkQueue> queue, ReconcileFunc reconcile,
                       std::shared_ptr<OperatorMetrics> metrics, int workers)
    : name_(std::move(name)),
      queue_(std::move(queue)),
      reconcile_(std::move(reconcile)),
      metrics_(std::move(metrics)),
      workers_(workers) {
  if (metrics_) {
    // Weak: the metrics may outlive this controller (a queue gone reads as empty).
    metrics_->AddWorkQueue(name_, [weak = std::weak_ptr<WorkQueue>(queue_)] {
      OperatorMetrics::QueueSample s;
      if (auto q = weak.lock()) s = {q->Len(), q->Waiting(), q->Processing()};
      return s;
    });
  }
}

Controller::~Controller() { Stop(std::chrono::seconds(30)); }

void Controller::Start() {
  for (int i = 0; i < workers_; ++i) threads_.emplace_back([this] { Work(); });
}

void Controller::Work() {
  while (auto key = queue_->Get()) {
    const auto start = std::chrono::steady_clock::now();
    std::string result = "success";
    try {
      Result r = reconcile_(*key);
      if (r.requeue_after.count() > 0) {
        queue_->Forget(*key);
        queue_->AddAfter(*key, r.requeue_after);
        result = "requeue";
      } else if (r.requeue) {
        queue_->AddRateLimited(*key);
        result = "requeue";
      } else {
        queue_->Forget(*key);
      }
    } catch (const std::exception& e) {
      result = "error";
      spdlog::warn("{}: reconcile {} failed (retry {}): {}", name_, *key, queue_->NumRequeues(*key) + 1, e.what());
      queue_->AddRateLimited(*key);
    }
    ++reconciles_;
    if (metrics_) {
      metrics_->ObserveReconcile(result,
                                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    queue_->Done(*key);
  }
}

bool Controller::Stop(std::chrono::milliseconds deadline) {
  if (stopped_) return true;
  stopped_ = true;
  const bool drained = queue_->ShutDownWithDrain(deadline);
  if (drained) {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  } else {
    // A reconcile is stuck past the deadline: leave its thread behind rather than hang
    // the shutdown (the process is about to exit).
    spdlog::warn("{}: reconciles still running after {} ms; not waiting for them", name_, deadline.count());
    for (auto& t : threads_) {
      if (t.joinable()) t.detach();
    }
  }
  threads_.clear();
  return drained;
}

}  // namespace headroom::controllerkit
