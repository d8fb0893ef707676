// The character tokenizer shared by every task: one token per character.
//
// Vocabulary (kVocabSize = spec::kVocabSize, 32, the preset model's output width; ids
// never change, since checkpoints depend on them):
//   0 PAD   1 BOS   2 EOS   3..12 '0'..'9'   13 '+'   14 '='   15 '>'   16..31 unused
// A prompt is BOS followed by its characters; an answer is its characters then EOS.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/spec/model_presets.h"
#include "worker/tasks/response_format.h"

namespace headroom::worker {

class CharTokenizer {
 public:
  static constexpr int64_t kVocabSize = spec::kVocabSize;
  static constexpr int64_t kPad = 0;
  static constexpr int64_t kBos = 1;
  static constexpr int64_t kEos = 2;

  // The id of one character, or nullopt when the vocabulary lacks it.
  static std::optional<int64_t> TokenOf(char c);
  // Throws std::invalid_argument naming the first character it cannot encode.
  static std::vector<int64_t> Encode(const std::string& text);
  // BOS + Encode(text): the token form of a prompt.
  static std::vector<int64_t> EncodePrompt(const std::string& text);
  // The tokens a response may use: the digits and EOS. The policy samples only among
  // them (see ResponseLogitBias): every task's answer is digits, and a from-scratch model
  // that spends most of its probability on PAD, BOS or unused ids never sees a reward.
  static std::vector<int64_t> ResponseTokens();
  // How responses in this vocabulary stop (EOS), are padded (PAD) and which tokens they may
  // use (ResponseTokens): every generated task's response format.
  static ResponseFormat Format();
  // Characters of ids up to (not including) the first EOS; PAD/BOS/unused ids print as '?'.
  static std::string DecodeUntilEos(const int64_t* ids, int64_t n);
};

}  // namespace headroom::worker
