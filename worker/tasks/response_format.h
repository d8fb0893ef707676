// How a task's responses stop and are padded, in its tokenizer's ids: the character
// tokenizer's (CharTokenizer::Format, worker/tasks/tokenizer.h) for generated tasks, the
// model's own (ModelTokens, worker/model/model_tokens.h) for text tasks.
#pragma once

#include <cstdint>
#include <vector>

namespace headroom::worker {

struct ResponseFormat {
  std::vector<int64_t> stop_tokens;  // a response ends at the first of these (kept, masked in)
  int64_t pad = 0;                   // fills a row after its stop
  std::vector<int64_t> allowed;      // the only tokens a response may use; empty: any
};

}  // namespace headroom::worker
