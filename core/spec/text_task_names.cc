#include "core/spec/text_task_names.h"

namespace headroom::spec {

std::vector<std::string> PromptFormatNames() { return {"chatml", "llama3", "template"}; }

std::vector<std::string> TextRewardNames() { return {"gsm8k", "math", "exact"}; }

}  // namespace headroom::spec
