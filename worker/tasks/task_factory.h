// The task a job trains on: a text task (worker/tasks/text_task.h) when
// spec.task.dataset.path is set, else the generated task spec.task.name with
// spec.task.digits (worker/tasks/task.h).
#pragma once

#include <memory>

#include "core/spec/training_job.h"
#include "worker/tasks/task.h"

namespace headroom::worker {

// Throws std::invalid_argument naming the spec field (and file) it cannot use.
std::unique_ptr<Task> MakeTask(const spec::TrainingJobSpec& spec);

}  // namespace headroom::worker
