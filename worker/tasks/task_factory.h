// The task a job trains on: a text task (worker/tasks/text_task.h) when
// spec.task.dataset.path is set, with the model's tokens from `model`; else the generated
// task spec.task.name with spec.task.digits (worker/tasks/task.h), in the character
// tokenizer's ids.
#pragma once

#include <memory>

#include "core/spec/training_job.h"
#include "worker/tasks/task.h"

namespace headroom::worker {

class ModelSource;

// Throws std::invalid_argument naming the spec field (and file) it cannot use.
std::unique_ptr<Task> MakeTask(const spec::TrainingJobSpec& spec, const ModelSource& model);

}  // namespace headroom::worker
