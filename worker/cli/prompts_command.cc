#include "worker/cli/prompts_command.h"

#include <algorithm>
#include <memory>
#include <ostream>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/hf/hf_config.h"
#include "core/protocol/exit_codes.h"
#include "core/spec/training_job.h"
#include "worker/cli/log_to_stream.h"
#include "worker/cli/parse_arguments.h"
#include "worker/model/model_source.h"
#include "worker/tasks/task_factory.h"
#include "worker/tasks/text_task.h"

namespace headroom::worker {

bool IsPromptsCommand(const std::string& command) { return command == "prompts"; }

int RunPromptsCommand(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  std::string job_path;
  CLI::App app{"headroom-worker prompts: the job's prompt lengths in the model's tokens, as JSON"};
  app.name("headroom-worker prompts");
  app.add_option("--job", job_path, "TrainingJob YAML file")->required();
  if (const auto exit_code = ParseArguments(app, argc, argv, out, err)) return *exit_code;
  const LogToStream log_to_err(err);  // stdout holds only the result
  const auto parsed = spec::ParseTrainingJobFile(job_path, {.read_model_config = false});
  if (!parsed.ok()) {
    for (const auto& e : parsed.errors) err << e.ToString() << "\n";
    return protocol::kExitInvalidSpec;
  }
  const spec::TrainingJobSpec& spec = parsed.job->spec;
  try {
    const ModelSource model(spec);
    const std::unique_ptr<Task> task = MakeTask(spec, model);
    // Held-out problems go through the rollout in batches as large as a step's (the
    // generation cache's), so their prompts bound the prefill as the training ones do.
    int64_t held_out_longest = 0;
    for (const Problem& p : task->HeldOut()) {
      held_out_longest = std::max<int64_t>(held_out_longest, static_cast<int64_t>(p.prompt_tokens.size()));
    }
    nlohmann::ordered_json j;
    j["task"] = task->name();
    j["longest"] = std::max(task->prompt_tokens(), held_out_longest);
    j["shortest"] = task->prompt_tokens();
    j["max_prompt_length"] = spec.grpo.max_prompt_length;
    j["kept"] = 1;
    j["skipped"] = 0;
    j["held_out_longest"] = held_out_longest;
    if (const auto* text = dynamic_cast<const TextTask*>(task.get())) {
      j["shortest"] = text->min_prompt_tokens();
      j["kept"] = text->size();
      j["skipped"] = text->prompts_filtered();
    }
    out << j.dump() << "\n";
    out.flush();
    return protocol::kExitFinished;
  } catch (const hf::HfConfigError& e) {
    err << (spec.model.path.empty() ? "spec.model.hub: " : "spec.model.path: ") << e.what() << "\n";
    return protocol::kExitInvalidSpec;
  } catch (const std::invalid_argument& e) {
    err << e.what() << "\n";
    return protocol::kExitInvalidSpec;
  } catch (const std::exception& e) {
    err << "headroom-worker prompts: " << e.what() << "\n";
    return protocol::kExitFailure;
  }
}

}  // namespace headroom::worker
