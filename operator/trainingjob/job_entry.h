// What the TrainingJob controller keeps per job between reconciles: the job's
// reconciler and pod backend, and what it last applied, wrote and reported.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "operator/runtime/job_reconciler.h"
#include "operator/trainingjob/pod_backend.h"
#include "operator/trainingjob/status.h"

namespace headroom::trainingjob {

struct JobEntry {
  std::mutex mu;  // the reconcile of this key vs pod events routed to its backend
  std::string uid;
  std::unique_ptr<PodBackend> backend;
  std::unique_ptr<runtime::JobReconciler> reconciler;
  int64_t observed_generation = 0;
  bool suspend = false;                   // spec.suspend as last applied
  int workers = 0;                        // spec.workers as last applied
  size_t actions_reported = 0;            // of reconciler->status().actions
  std::string phase_reported;             // the phase the last phase Event was for
  std::optional<nlohmann::json> written;  // the status this operator last wrote
  StatusTimes times;                      // startTime / completionTime
};

}  // namespace headroom::trainingjob
