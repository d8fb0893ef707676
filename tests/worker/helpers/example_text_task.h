// The repository's example text task for tests: configs/data/addition-text, prompted in
// chatml and scored by the gsm8k reward, for the tiny Qwen2 model in
// configs/models/qwen2-tiny-addition whose tokenizer covers it.
#pragma once

#include <string>

#include "core/spec/training_job.h"

namespace headroom::testing {

inline std::string ExampleTextModel() {
  return std::string(HEADROOM_SOURCE_DIR) + "/configs/models/qwen2-tiny-addition";
}

// Sets `s`'s dataset (the example's training file and its keys), prompt format and reward;
// every other field stays as it was.
inline void UseExampleTextTask(spec::TrainingJobSpec& s) {
  s.task.dataset.path = std::string(HEADROOM_SOURCE_DIR) + "/configs/data/addition-text/train.jsonl";
  s.task.dataset.prompt_key = "question";
  s.task.dataset.answer_key = "answer";
  s.task.prompt.format = "chatml";
  s.task.reward.name = "gsm8k";
}

}  // namespace headroom::testing
