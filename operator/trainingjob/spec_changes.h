// What a user's edit of a running job's spec means: spec.suspend drains the job to a
// checkpoint (phase Suspended) and, set back to false, resumes it from there, at the
// possibly new size; spec.workers (the scale subresource, `kubectl scale`) reshards at the
// next step boundary. Applied once per metadata.generation; a job that never launched is
// simply started over with the new spec.
#pragma once

#include <nlohmann/json.hpp>

#include "core/spec/training_job.h"
#include "operator/runtime/job_reconciler.h"
#include "operator/trainingjob/job_entry.h"

namespace headroom::trainingjob {

void ApplySpecChanges(JobEntry& entry, const nlohmann::json& object, const spec::TrainingJob& job,
                      const runtime::ReconcilerOptions& options);

}  // namespace headroom::trainingjob
