// The choices a text task's spec offers (spec.task.prompt.format, spec.task.reward.name):
// the one list of each. The validator accepts these names; the worker parses them from
// here into its enums, numbered in list order (worker/tasks/chat_prompt.h,
// worker/tasks/text_reward.h), so a new name is added here and as the enum's next value.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace headroom::spec {

// "chatml", "llama3", "template".
std::vector<std::string> PromptFormatNames();
// "gsm8k", "math", "exact".
std::vector<std::string> TextRewardNames();
// The position of `name` in `names` (the enum value a list's order gives it), or nullopt.
std::optional<size_t> PositionOfName(const std::vector<std::string>& names, const std::string& name);
// The enum value of `name`: its position in `names`, or nullopt when it is not there.
template <typename Enum>
std::optional<Enum> ValueNamed(const std::vector<std::string>& names, const std::string& name) {
  const std::optional<size_t> at = PositionOfName(names, name);
  if (!at) return std::nullopt;
  return static_cast<Enum>(*at);
}

}  // namespace headroom::spec
