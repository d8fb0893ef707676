#include <spdlog/spdlog.h>

#include "worker/tasks/task_factory.h"

#include "worker/model/model_source.h"
#include "worker/tasks/text_task.h"

namespace headroom::worker {

std::unique_ptr<Task> MakeTask(const spec::TrainingJobSpec& spec, const ModelSource& model) {
  if (spec.task.is_text()) return std::make_unique<TextTask>(spec, model.tokens());
  return MakeTask(spec.task.name, spec.task.digits, spec.task.seed);
}

}  // namespace headroom::worker
