// The choices a text task's spec offers (spec.task.prompt.format, spec.task.reward.name).
// The worker implements each (worker/tasks/chat_prompt.h, worker/tasks/text_reward.h);
// core keeps its own list because it links no worker code, and
// tests/worker/text_task_names_test.cc fails when the two lists differ.
#pragma once

#include <string>
#include <vector>

namespace headroom::spec {

// "chatml", "llama3", "template".
std::vector<std::string> PromptFormatNames();
// "gsm8k", "math", "exact".
std::vector<std::string> TextRewardNames();

}  // namespace headroom::spec
