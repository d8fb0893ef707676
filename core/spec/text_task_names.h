// The choices a text task's spec offers (spec.task.prompt.format, spec.task.reward.name),
// each listed once as (enumerator, name). The enums are generated from the lists and the
// worker uses them as they are (worker/tasks/chat_prompt.h, worker/tasks/text_reward.h),
// so a new choice is one line here and its case in the worker, which the compiler asks for.
#pragma once

#include <optional>
#include <string>
#include <vector>

#define HEADROOM_PROMPT_FORMATS(X) \
  X(kChatml, "chatml")             \
  X(kLlama3, "llama3")             \
  X(kTemplate, "template")

#define HEADROOM_TEXT_REWARDS(X) \
  X(kGsm8k, "gsm8k")             \
  X(kMath, "math")               \
  X(kExact, "exact")

#define HEADROOM_TEXT_TASK_ENUMERATOR(enumerator, name) enumerator,

namespace headroom::spec {

enum class PromptFormatKind { HEADROOM_PROMPT_FORMATS(HEADROOM_TEXT_TASK_ENUMERATOR) };
enum class TextReward { HEADROOM_TEXT_REWARDS(HEADROOM_TEXT_TASK_ENUMERATOR) };

// "chatml", "llama3", "template".
std::vector<std::string> PromptFormatNames();
// "gsm8k", "math", "exact".
std::vector<std::string> TextRewardNames();
// The value named `name` (exact, case-sensitive), or nullopt.
std::optional<PromptFormatKind> PromptFormatNamed(const std::string& name);
std::optional<TextReward> TextRewardNamed(const std::string& name);

}  // namespace headroom::spec
