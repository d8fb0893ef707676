#include "core/spec/text_task_names.h"

namespace headroom::spec {

std::vector<std::string> PromptFormatNames() { return {"chatml", "llama3", "template"}; }

std::vector<std::string> TextRewardNames() { return {"gsm8k", "math", "exact"}; }

std::optional<size_t> PositionOfName(const std::vector<std::string>& names, const std::string& name) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return i;
  }
  return std::nullopt;
}

}  // namespace headroom::spec
