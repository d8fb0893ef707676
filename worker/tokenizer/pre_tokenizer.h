// tokenizer.json's "pre_tokenizer": how normalised text is cut into words before BPE.
// Supported: Split (a regex or a string, every behaviour, invert), ByteLevel (GPT-2's regex
// optional, add_prefix_space) and a Sequence of them; null. Each step works on every piece
// the previous steps left, as `tokenizers` does; anything else is refused at load.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "worker/tokenizer/split_regex.h"

namespace headroom::worker {

class PreTokenizer {
 public:
  PreTokenizer() = default;  // none: the text is one word
  static PreTokenizer FromJson(const nlohmann::json& spec, const std::string& where);

  // The words of `text` (valid UTF-8), in order, empty ones dropped. After a ByteLevel step
  // the words are written in the byte-level alphabet.
  std::vector<std::string> Split(std::string_view text) const;

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    bool byte_level = false;
    bool add_prefix_space = false;  // ByteLevel
    bool invert = false;            // Split
    Behavior behavior = Behavior::kIsolated;
    std::vector<SplitRegex> regex;  // zero or one
  };
  static void AddSteps(const nlohmann::json& spec, const std::string& where, std::vector<Step>& steps);
  static void SplitPiece(const Step& step, std::string_view piece, std::vector<std::string>& out);

  std::vector<Step> steps_;
};

}  // namespace headroom::worker
