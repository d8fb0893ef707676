// Controller: worker threads that take keys from a WorkQueue and reconcile them, with
// controller-runtime's contract:
//   - a reconcile returns a Result: done (the key's backoff is forgotten), requeue (with
//     the rate limiter's backoff), or requeue after a set delay;
//   - a reconcile that throws is logged and retried with backoff — never crashes the
//     process, never drops the key;
//   - one key is never reconciled by two workers at once (the queue guarantees it);
//   - every reconcile is counted in headroom_operator_reconcile_total{result} and timed
//     in headroom_operator_reconcile_duration_seconds.
// Stop(deadline) shuts the queue, lets reconciles in flight finish up to the deadline,
// and joins the workers that did.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "operator/controllerkit/operator_metrics.h"
#include "operator/controllerkit/work_queue.h"

namespace headroom::controllerkit {

struct Result {
  bool requeue = false;                        // again, after the rate limiter's backoff
  std::chrono::milliseconds requeue_after{0};  // again, after this (takes precedence)
};

using ReconcileFunc = std::function<Result(const std::string& key)>;

class Controller {
 public:
  Controller(std::string name, std::shared_ptr<WorkQueue> queue, ReconcileFunc reconcile,
             std::shared_ptr<OperatorMetrics> metrics, int workers = 2);
  ~Controller();

  void Start();
  // True when every reconcile in flight finished before the deadline.
  bool Stop(std::chrono::milliseconds deadline);

  WorkQueue& queue() { return *queue_; }
  int64_t reconciles() const { return reconciles_; }

 private:
  void Work();

  std::string name_;
  std::shared_ptr<WorkQueue> queue_;
  ReconcileFunc reconcile_;
  std::shared_ptr<OperatorMetrics> metrics_;
  int workers_;
  std::vector<std::thread> threads_;
  std::atomic<int64_t> reconciles_{0};
  bool stopped_ = false;
};

}  // namespace headroom::controllerkit
