// A Hugging Face model's own tokens, as a ModelSource reads them (model_source.h): what a
// text task encodes its prompts with and where its responses stop.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/tokenizer/hf_tokenizer.h"

namespace headroom::worker {

struct ModelTokens {
  HfTokenizer tokenizer;
  // tokenizer_config.json's eos_token, then generation_config.json's eos_token_id (one id or
  // a list), else config.json's; each once, in that order; never empty.
  std::vector<int64_t> stop_tokens;
  int64_t pad = 0;  // tokenizer_config.json's pad_token, else the first stop token
};

}  // namespace headroom::worker
