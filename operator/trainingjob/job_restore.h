// JobRestorer: the controller's per-job state for a job it has not seen in this process.
//
// A job that never ran gets a fresh reconciler. A job whose .status shows an earlier
// operator ran it (status.generation > 0, and not stopped by an invalid spec) is picked
// up where it is: its reconciler restored from .status, from the spec ConfigMap (the
// spec the running generation was launched with: the guard may have changed workers,
// microBatchSize or offload) and from its pods (the newest generation label, which may be
// one ahead of .status, and that generation's HEADROOM_GUARD_HISTORY).
#pragma once

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/spec/training_job.h"
#include "operator/kubeclient/rest_client.h"
#include "operator/runtime/job_reconciler.h"
#include "operator/trainingjob/job_entry.h"
#include "operator/trainingjob/pod_backend.h"

namespace headroom::trainingjob {

class JobRestorer {
 public:
  JobRestorer(kubeclient::RestClient& client, runtime::ReconcilerOptions reconciler_options,
              PodBackendOptions pods_options)
      : client_(&client), reconciler_options_(std::move(reconciler_options)), pods_options_(std::move(pods_options)) {}

  // `pods`: the job's pods from the informer's cache. Throws std::runtime_error when the
  // spec ConfigMap cannot be read (the reconcile is retried).
  std::shared_ptr<JobEntry> NewEntry(const nlohmann::json& object, const spec::TrainingJob& job,
                                     const std::vector<nlohmann::json>& pods);

  const runtime::ReconcilerOptions& reconciler_options() const { return reconciler_options_; }

 private:
  void Restore(JobEntry& entry, const nlohmann::json& object, const spec::TrainingJob& job,
               const std::vector<nlohmann::json>& pods);

  kubeclient::RestClient* client_;
  runtime::ReconcilerOptions reconciler_options_;
  PodBackendOptions pods_options_;
};

}  // namespace headroom::trainingjob
