#include "worker/tasks/tokenizer.h"

#include <stdexcept>

namespace headroom::worker {

std::optional<int64_t> CharTokenizer::TokenOf(char c) {
  if (c >= '0' && c <= '9') return 3 + (c - '0');
  switch (c) {
    case '+': return 13;
    case '=': return 14;
    case '>': return 15;
    default: return std::nullopt;
  }
}

std::vector<int64_t> CharTokenizer::Encode(const std::string& text) {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    auto id = TokenOf(text[i]);
    if (!id) {
      throw std::invalid_argument("tokenizer: character '" + std::string(1, text[i]) + "' at offset " +
                                  std::to_string(i) + " of \"" + text + "\" is not in the vocabulary");
    }
    ids.push_back(*id);
  }
  return ids;
}

std::vector<int64_t> CharTokenizer::EncodePrompt(const std::string& text) {
  std::vector<int64_t> ids{kBos};
  auto body = Encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

std::vector<int64_t> CharTokenizer::ResponseTokens() {
  std::vector<int64_t> ids{kEos};
  for (int64_t d = 0; d < 10; ++d) ids.push_back(3 + d);
  return ids;
}

ResponseFormat CharTokenizer::Format() { return {{kEos}, kPad, ResponseTokens()}; }

std::string CharTokenizer::DecodeUntilEos(const int64_t* ids, int64_t n) {
  static const char kChars[] = "??"
                               "?0123456789+=>";
  std::string out;
  for (int64_t i = 0; i < n && ids[i] != kEos; ++i) {
    out.push_back(ids[i] >= 0 && ids[i] < 16 ? kChars[ids[i]] : '?');
  }
  return out;
}

}  // namespace headroom::worker
