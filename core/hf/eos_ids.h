// The end-of-sequence ids a Hugging Face model directory declares: what transformers'
// generate() stops at.
//
// Contract: generation_config.json's eos_token_id when that file exists and sets it (an
// integer or a list of integers), else config.json's, taken from `config` (read with it by
// LoadHfConfig, so config.json is not opened again); empty when neither sets one (a
// missing file or a null field is "not set"). Ids keep the file's order, without
// repeats. A generation_config.json that is not a JSON object, or an eos_token_id that is
// not an integer or a list of them, throws HfConfigError naming the file and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/hf/hf_config.h"

namespace headroom::hf {

std::vector<int64_t> LoadEosTokenIds(const std::string& model_dir, const HfModelConfig& config);

}  // namespace headroom::hf
